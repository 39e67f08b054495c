// GGUF quantize rung 02 — bf16 rows to llama.cpp's q8_0, q4_0 or q4_1 blocks, the same bytes as
// rung 01, one thread per block of 32 and a fast path for the blocks that need none of ggml's
// special cases (sm_80 and newer).
//
// Idea: rung 01 was not short of bytes in flight, it was short of issue slots. Profiled with
// Nsight Compute on the H200 (q8_0, 14336 x 4096), its warps issued about 33 instructions per
// value, the SMs' schedulers were busy three cycles in four and DRAM ran at a third of its
// bandwidth: the op has a byte budget of ~3 bytes a value, and at 4.3 TB/s an H200 can issue only
// about 15 instructions per value in that time. So this rung spends fewer instructions per value:
//   - one thread per block: the max/min is the reference's own sequential loop, with no shuffles,
//     and the two IEEE divisions (scale, reciprocal) run once per block instead of on four lanes;
//   - a fast path: ggml's rules (NaN restarting q8_0's max, C's conversion of NaN, Inf and values
//     past int32 to int8, the sign of a zero min) cost a compare or a select per value when written
//     out, but they can change the bytes only for rare blocks that a cheap test per block finds:
//       q8_0  the max of |x| with NaN kept (one max.NaN a value) — no NaN in the block means every
//             |x| <= max, so every x / d rounds within +-127 and a plain conversion is exact; a
//             block holding a NaN takes the exact path (ggml's MAX, range-checked conversion);
//       q4_0  ggml's loop already ignores NaN; every |x| <= max, so x / d + 8.5 stays in [0, 16.5];
//       q4_1  min and max by fminf/fmaxf (one instruction each; they ignore NaN as ggml's strict
//             comparisons do) unless either is a zero, where only ggml's order decides its sign;
//     and in every type a scale so small that 1 / d overflows makes every quant 0 in ggml (int8
//     of +-Inf or NaN): the reciprocal is replaced by a NaN, and the hardware conversion of a NaN
//     is 0 — the same bytes with no test per value. Out-of-range products cannot occur otherwise,
//     so the fast path converts with one F2I.TRUNC (NaN -> 0) and no range check.
// What changed from rung 01: the lane layout (a thread per block, four 16-byte loads of its own 64
// bytes — neighbouring threads' loads touch each 32-byte sector twice, the L1 serves the second
// touch), the fast path, and the staging of 256 blocks a CTA (still 2-byte stores into shared
// memory, still copied out with 16-byte stores: 256 blocks of 18, 20 or 34 bytes are multiples of
// 16 bytes).
//
// What to look for: four LDG.E.128 a thread, FMNMX (q8_0: with .NAN; q4_1: the min and max), the
// FMUL then FADD per quant never fused into an FFMA, F2I.TRUNC.NTZ once per value, PRMT (bytes into
// words), STS.U16, BAR.SYNC, LDS.128 + STG.E.128; no SHFL, no local memory.
// Expected limiter: DRAM bandwidth (2 bytes read a value, 0.56 to 1.06 written), with roughly a
// third of rung 01's instructions per value.
//
// Run just this rung:  kc-bench --filter stage3/quantize_gguf/02
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>

#include "kc/common/error.hpp"
#include "kc/core/launch.hpp"
#include "kc/core/vector_io.hpp"
#include "kc/stage3/quantize_gguf_args.hpp"

namespace kc::stage3 {
namespace {

constexpr int kThreads = 256;  // one block of 32 values a thread: a CTA quantizes 256 blocks
constexpr int kLoads = kGgufBlockWeights * 2 / core::kVectorBytes;  // four 16-byte loads a block
constexpr int kValuesPerLoad = kGgufBlockWeights / kLoads;
static_assert(kThreads * 18 % 16 == 0 && kThreads * 20 % 16 == 0 && kThreads * 34 % 16 == 0,
              "every CTA's run of blocks must start 16-byte aligned");

// max(a, b) with a NaN in either giving NaN (PTX max.NaN, sm_80 and newer): folded over a block's
// |x|, the result is its largest magnitude when it holds no NaN, and NaN when it holds one.
__device__ __forceinline__ float max_keeping_nan(float a, float b) {
  float result;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(result) : "f"(a), "f"(b));
  return result;
}

// ggml's reciprocal of the scale, with an infinite one (a scale below about 2^-128) replaced by a
// NaN: ggml's quants are then all 0 (int8 of +-Inf or of NaN), and so is the hardware's conversion
// of NaN times anything — while its conversion of +Inf would saturate to 0x7fffffff.
__device__ __forceinline__ float reciprocal_for_fast_path(float d) {
  const float id = ggml_inverse_scale(d);
  return fabsf(id) == INFINITY ? __int_as_float(0x7fc00000) : id;
}

// C's float -> int for a value that is NaN or whose truncation fits in an int: the truncation (NaN
// gives 0, as ggml_float_to_int8 does). One F2I.TRUNC; used only where the value is known in range.
__device__ __forceinline__ int truncate_in_range(float v) { return __float2int_rz(v); }

// ggml's MIN(15, q) of a q4 quant.
__device__ __forceinline__ int at_most_15(int q) { return q < 15 ? q : 15; }

// The low bytes of four quants as one little-endian word.
__device__ __forceinline__ std::uint32_t pack_bytes(int q0, int q1, int q2, int q3) {
  const std::uint32_t low = __byte_perm(static_cast<std::uint32_t>(q0), static_cast<std::uint32_t>(q1), 0x0040);
  const std::uint32_t high = __byte_perm(static_cast<std::uint32_t>(q2), static_cast<std::uint32_t>(q3), 0x0040);
  return __byte_perm(low, high, 0x5410);
}

// Writes `bits` (16 of them) at an even offset of shared memory.
__device__ __forceinline__ void put_u16(std::uint8_t* at, std::uint32_t bits) {
  *reinterpret_cast<std::uint16_t*>(at) = static_cast<std::uint16_t>(bits);
}

// Writes `words` (little-endian bytes) at an even offset of shared memory.
template <int kWords>
__device__ __forceinline__ void put_words(std::uint8_t* at, const std::uint32_t (&words)[kWords]) {
#pragma unroll
  for (int w = 0; w < kWords; ++w) {
    put_u16(at + 4 * w, words[w]);
    put_u16(at + 4 * w + 2, words[w] >> 16);
  }
}

// q8_0: d = amax / 127, quants round(x / d) as int8.
__device__ __forceinline__ void quantize_q8_0(const float (&v)[kGgufBlockWeights], std::uint8_t* block) {
  float amax = 0.f;
#pragma unroll
  for (int i = 0; i < kGgufBlockWeights; ++i) amax = max_keeping_nan(amax, fabsf(v[i]));
  const bool holds_nan = amax != amax;
  if (holds_nan) {  // ggml's MAX restarts after a NaN: fold again in its order
    amax = 0.f;
#pragma unroll
    for (int i = 0; i < kGgufBlockWeights; ++i) {
      const float a = fabsf(v[i]);
      amax = amax > a ? amax : a;
    }
  }
  const float d = __fdiv_rn(amax, 127.f);
  const float id = reciprocal_for_fast_path(d);
  int q[kGgufBlockWeights];
  if (!holds_nan) {  // every |x| <= amax: |x / d| <= 127 and the plain conversion is exact
#pragma unroll
    for (int i = 0; i < kGgufBlockWeights; ++i) q[i] = truncate_in_range(roundf(__fmul_rn(v[i], id)));
  } else {  // a value before the NaN may exceed amax by any amount: C's conversion, range checked
#pragma unroll
    for (int i = 0; i < kGgufBlockWeights; ++i) q[i] = ggml_float_to_int8(roundf(__fmul_rn(v[i], id)));
  }
  std::uint32_t words[kGgufBlockWeights / 4];
#pragma unroll
  for (int w = 0; w < kGgufBlockWeights / 4; ++w) words[w] = pack_bytes(q[4 * w], q[4 * w + 1], q[4 * w + 2], q[4 * w + 3]);
  put_u16(block, ggml_fp16_bits(d));
  put_words(block + 2, words);
}

// q4: element j (< 16) in the low nibble of byte j, element j + 16 in its high nibble. Quants are
// 0..15, so the high word shifted by 4 stays inside each byte.
__device__ __forceinline__ void put_nibbles(std::uint8_t* at, const int (&q)[kGgufBlockWeights]) {
  constexpr int kHalf = kGgufBlockWeights / 2;
  std::uint32_t words[kHalf / 4];
#pragma unroll
  for (int w = 0; w < kHalf / 4; ++w) {
    const std::uint32_t low = pack_bytes(q[4 * w], q[4 * w + 1], q[4 * w + 2], q[4 * w + 3]);
    const std::uint32_t high =
        pack_bytes(q[kHalf + 4 * w], q[kHalf + 4 * w + 1], q[kHalf + 4 * w + 2], q[kHalf + 4 * w + 3]);
    words[w] = low | (high << 4);
  }
  put_words(at, words);
}

// q4_0: d = max / -8 (max: the first value of largest magnitude, with its sign), nibbles
// MIN(15, int8(x / d + 8.5)). ggml's loop ignores NaN, so every |x| <= |max|: x / d + 8.5 lies in
// [0.5, 16.5] up to rounding (or is NaN), and the conversion needs no range check.
__device__ __forceinline__ void quantize_q4_0(const float (&v)[kGgufBlockWeights], std::uint8_t* block) {
  float amax = 0.f, max = 0.f;
#pragma unroll
  for (int i = 0; i < kGgufBlockWeights; ++i)
    if (amax < fabsf(v[i])) {
      amax = fabsf(v[i]);
      max = v[i];
    }
  const float d = __fdiv_rn(max, -8.f);
  const float id = reciprocal_for_fast_path(d);
  int q[kGgufBlockWeights];
#pragma unroll
  for (int i = 0; i < kGgufBlockWeights; ++i) q[i] = at_most_15(truncate_in_range(__fadd_rn(__fmul_rn(v[i], id), 8.5f)));
  put_u16(block, ggml_fp16_bits(d));
  put_nibbles(block + 2, q);
}

// q4_1: d = (max - min) / 15, m = min, nibbles MIN(15, int8((x - min) / d + 0.5)): within
// [0.5, 15.5] up to rounding (or NaN).
__device__ __forceinline__ void quantize_q4_1(const float (&v)[kGgufBlockWeights], std::uint8_t* block) {
  float min = FLT_MAX, max = -FLT_MAX;
#pragma unroll
  for (int i = 0; i < kGgufBlockWeights; ++i) {
    min = fminf(min, v[i]);
    max = fmaxf(max, v[i]);
  }
  if (min == 0.f || max == 0.f) {  // +0 or -0: ggml keeps the first of equal values, so its sign
    min = FLT_MAX;
    max = -FLT_MAX;
#pragma unroll
    for (int i = 0; i < kGgufBlockWeights; ++i) {
      if (v[i] < min) min = v[i];
      if (v[i] > max) max = v[i];
    }
  }
  const float d = __fdiv_rn(__fsub_rn(max, min), 15.f);
  const float id = reciprocal_for_fast_path(d);
  int q[kGgufBlockWeights];
#pragma unroll
  for (int i = 0; i < kGgufBlockWeights; ++i)
    q[i] = at_most_15(truncate_in_range(__fadd_rn(__fmul_rn(__fsub_rn(v[i], min), id), 0.5f)));
  put_u16(block, ggml_fp16_bits(d));
  put_u16(block + 2, ggml_fp16_bits(min));
  put_nibbles(block + 4, q);
}

template <GgufBlockType kType>
__global__ void __launch_bounds__(kThreads) quantize_gguf_kernel(QuantizeGgufArgs args) {
  constexpr int kBlockBytes = gguf_block_bytes(kType);
  __shared__ alignas(16) std::uint8_t staged[kThreads * kBlockBytes];
  const long long total_blocks = args.rows * (args.k / kGgufBlockWeights);
  const long long first_block = static_cast<long long>(blockIdx.x) * kThreads;
  const long long block = first_block + threadIdx.x;

  if (block < total_blocks) {
    core::Vector<__nv_bfloat16, kValuesPerLoad> raw[kLoads];
#pragma unroll
    for (int l = 0; l < kLoads; ++l)
      raw[l] = core::load_vector<__nv_bfloat16, kValuesPerLoad>(args.x + block * kGgufBlockWeights + l * kValuesPerLoad);
    float v[kGgufBlockWeights];
#pragma unroll
    for (int l = 0; l < kLoads; ++l) {
      float part[kValuesPerLoad];
      core::widen_to_floats(raw[l], part);
#pragma unroll
      for (int i = 0; i < kValuesPerLoad; ++i) v[l * kValuesPerLoad + i] = part[i];
    }
    std::uint8_t* out = staged + threadIdx.x * kBlockBytes;
    if constexpr (kType == GgufBlockType::q8_0)
      quantize_q8_0(v, out);
    else if constexpr (kType == GgufBlockType::q4_0)
      quantize_q4_0(v, out);
    else
      quantize_q4_1(v, out);
  }
  __syncthreads();

  // The CTA's run of blocks, contiguous in the output: 16-byte stores, then a 2-byte tail.
  const long long blocks_left = total_blocks - first_block;
  const int blocks_here = blocks_left < kThreads ? static_cast<int>(blocks_left) : kThreads;
  const int bytes_here = blocks_here * kBlockBytes;
  std::uint8_t* out = args.out + first_block * kBlockBytes;
  for (int piece = static_cast<int>(threadIdx.x); piece < bytes_here / 16; piece += kThreads)
    core::store_vector(out + 16 * piece, core::load_vector<std::uint8_t, 16>(staged + 16 * piece));
  for (int at = bytes_here / 16 * 16 + 2 * static_cast<int>(threadIdx.x); at < bytes_here; at += 2 * kThreads)
    core::store_vector(out + at, core::load_vector<std::uint8_t, 2>(staged + at));
}

}  // namespace

void quantize_gguf_02_thread_per_block(const QuantizeGgufArgs& args, cudaStream_t stream) {
  require(args.k > 0 && args.k % kGgufBlockWeights == 0,
          "GGUF quantize: K must be a positive multiple of {} (got {}): whole blocks", kGgufBlockWeights, args.k);
  const long long total_blocks = args.rows * (args.k / kGgufBlockWeights);
  const auto grid = static_cast<unsigned>(core::ceil_div(total_blocks, kThreads));
  switch (args.type) {
    case GgufBlockType::q4_0:
      quantize_gguf_kernel<GgufBlockType::q4_0><<<grid, kThreads, 0, stream>>>(args);
      break;
    case GgufBlockType::q4_1:
      quantize_gguf_kernel<GgufBlockType::q4_1><<<grid, kThreads, 0, stream>>>(args);
      break;
    case GgufBlockType::q8_0:
      quantize_gguf_kernel<GgufBlockType::q8_0><<<grid, kThreads, 0, stream>>>(args);
      break;
  }
  KC_CUDA_CHECK(cudaGetLastError());
}

}  // namespace kc::stage3
