// GGUF quantize rung 01 — bf16 rows to llama.cpp's q8_0, q4_0 or q4_1 blocks, byte for byte what
// ggml's reference quantizers write, four lanes per block of 32 (sm_80 and newer).
//
// Idea: an inference engine that loads a bf16 checkpoint and runs it in 4 or 8 bits quantizes each
// weight once into the blocks the GGUF GEMV reads (kc/stage3/gemv_gguf_args.hpp). The values must
// be ggml's own (kc/stage3/quantize_gguf_args.hpp: the order of the max/min, ggml's MAX macro and
// its NaN, float arithmetic with no fused multiply-add, roundf, the x86 conversion to int8), so a
// file written from our blocks is the file llama.cpp would write. It reads 2 bytes a value and
// writes 34, 18 or 20 bytes per 32: memory-bound, judged against a copy of the same bytes.
//
// First rung, so what changed is everything: a block of 32 bf16 is 64 bytes, four 16-byte loads,
// so four neighbouring lanes take a block, eight values each (kc::core::load_vector). Each lane
// folds its eight values in ggml's order, then two shuffles (xor 1, xor 2) combine the four partial
// results, always the earlier lanes' on the left: ggml's first-of-equals and NaN rules depend on
// the order, and a butterfly keeps it when each lane knows which side its partner is on. The scale
// and its reciprocal are IEEE divisions (__fdiv_rn), the products and sums __fmul_rn/__fadd_rn (no
// FFMA contraction). A q4 byte holds element j (low nibble) and element j + 16 (high): lanes 2 and
// 3 hand their quants to lanes 0 and 1 with one shuffle pair. Each thread loads two blocks (slots)
// before it computes either, so a CTA of 256 threads has 128 blocks = 8 KiB of x in flight.
// Blocks are 18, 20 or 34 bytes, so no block starts on a 16-byte boundary: the CTA writes its
// blocks into shared memory at their final byte offsets (2-byte stores), then copies the whole
// run of 128 blocks out with 16-byte stores, consecutive threads on consecutive 16 bytes (128 x 18,
// 20 and 34 are multiples of 16, so every CTA's run starts aligned; the last CTA's odd tail goes
// out 2 bytes at a time). The block index is flat: rows of K / 32 blocks follow each other in both
// x and the output, so rows need no handling of their own.
//
// What to look for: LDG.E.128 (x), SHFL.BFLY (the ordered max/min and the nibble hand-over), FMUL
// then FADD per quant, never fused (the IEEE division's own sequence keeps its FFMAs), STS.U16
// (staging), BAR.SYNC, LDS.128 + STG.E.128 (the coalesced copy-out); no local memory.
// Expected limiter: DRAM bandwidth (2 bytes read a value, 0.56 to 1.06 written).
//
// Run just this rung:  kc-bench --filter stage3/quantize_gguf/01
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

constexpr int kThreads = 256;
constexpr int kLanesPerBlock = 4;
constexpr int kValuesPerLane = kGgufBlockWeights / kLanesPerBlock;  // 8 bf16: one 16-byte load
constexpr int kSlots = 2;                                            // blocks a lane loads before any math
constexpr int kQuadsPerCta = kThreads / kLanesPerBlock;
constexpr int kBlocksPerCta = kQuadsPerCta * kSlots;
constexpr unsigned kFullWarp = 0xffffffffu;
static_assert(kBlocksPerCta * 18 % 16 == 0 && kBlocksPerCta * 20 % 16 == 0 && kBlocksPerCta * 34 % 16 == 0,
              "every CTA's run of blocks must start 16-byte aligned");

// Writes `bits` at an even offset of shared memory.
__device__ __forceinline__ void put_u16(std::uint8_t* at, std::uint32_t bits) {
  *reinterpret_cast<std::uint16_t*>(at) = static_cast<std::uint16_t>(bits);
}

// Writes 8 bytes (two words, little-endian) at an even offset of shared memory.
__device__ __forceinline__ void put_8_bytes(std::uint8_t* at, std::uint32_t low, std::uint32_t high) {
  put_u16(at, low);
  put_u16(at + 2, low >> 16);
  put_u16(at + 4, high);
  put_u16(at + 6, high >> 16);
}

// The quants of one lane (each 0..255 as ggml's uint8/int8 holds it) packed little-endian.
__device__ __forceinline__ void pack_bytes(const int (&q)[kValuesPerLane], std::uint32_t& low, std::uint32_t& high) {
  low = 0;
  high = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    low |= (static_cast<std::uint32_t>(q[i]) & 0xffu) << (8 * i);
    high |= (static_cast<std::uint32_t>(q[i + 4]) & 0xffu) << (8 * i);
  }
}

// Quantizes the eight values `v` (elements 8 part ... 8 part + 7) of the block that starts at
// `block` in shared memory. Every lane of the warp calls it (the shuffles need all 32).
template <GgufBlockType kType, bool kSwapNibbles>
__device__ __forceinline__ void quantize_part(const float (&v)[kValuesPerLane], int part, std::uint8_t* block) {
  int q[kValuesPerLane];
  if constexpr (kType == GgufBlockType::q8_0) {
    // amax = MAX(amax, |x|) from 0, ggml's macro: a NaN makes it NaN, the next value restarts it.
    // A lane keeps its fold from 0 and whether it saw a NaN; a right-hand side that saw one
    // decides alone (its fold restarted after its last NaN), otherwise the two fold on.
    float amax = 0.f;
    bool saw_nan = false;
#pragma unroll
    for (int i = 0; i < kValuesPerLane; ++i) {
      const float a = fabsf(v[i]);
      saw_nan = saw_nan || a != a;
      amax = amax > a ? amax : a;
    }
#pragma unroll
    for (int offset = 1; offset < kLanesPerBlock; offset *= 2) {
      const float other = __shfl_xor_sync(kFullWarp, amax, offset);
      const bool other_nan = __shfl_xor_sync(kFullWarp, static_cast<int>(saw_nan), offset) != 0;
      const bool left = (part & offset) == 0;
      const float l = left ? amax : other, r = left ? other : amax;
      const bool r_nan = left ? other_nan : saw_nan;
      amax = r_nan ? r : (l > r ? l : r);
      saw_nan = saw_nan || other_nan;
    }
    const float d = __fdiv_rn(amax, 127.f);
    const float id = ggml_inverse_scale(d);
#pragma unroll
    for (int i = 0; i < kValuesPerLane; ++i) q[i] = ggml_float_to_int8(roundf(__fmul_rn(v[i], id)));
    std::uint32_t low, high;
    pack_bytes(q, low, high);
    put_8_bytes(block + 2 + kValuesPerLane * part, low, high);
    if (part == 0) put_u16(block, ggml_fp16_bits(d));
  } else {
    float d = 0.f, min = 0.f;
    if constexpr (kType == GgufBlockType::q4_0) {
      // The first value of largest magnitude, with its sign: a strictly larger one replaces it.
      float amax = 0.f, max = 0.f;
#pragma unroll
      for (int i = 0; i < kValuesPerLane; ++i)
        if (amax < fabsf(v[i])) {
          amax = fabsf(v[i]);
          max = v[i];
        }
#pragma unroll
      for (int offset = 1; offset < kLanesPerBlock; offset *= 2) {
        const float other_amax = __shfl_xor_sync(kFullWarp, amax, offset);
        const float other_max = __shfl_xor_sync(kFullWarp, max, offset);
        const bool left = (part & offset) == 0;
        const bool take_right = left ? amax < other_amax : other_amax < amax;
        if (take_right == left) {  // the partner's pair wins
          amax = other_amax;
          max = other_max;
        }
      }
      d = __fdiv_rn(max, -8.f);
    } else {
      // min and max from FLT_MAX and -FLT_MAX by strict comparisons: NaN never enters, the first of
      // equal values stays (the sign of a zero).
      float max = -FLT_MAX;
      min = FLT_MAX;
#pragma unroll
      for (int i = 0; i < kValuesPerLane; ++i) {
        if (v[i] < min) min = v[i];
        if (v[i] > max) max = v[i];
      }
#pragma unroll
      for (int offset = 1; offset < kLanesPerBlock; offset *= 2) {
        const float other_min = __shfl_xor_sync(kFullWarp, min, offset);
        const float other_max = __shfl_xor_sync(kFullWarp, max, offset);
        const bool left = (part & offset) == 0;
        const float l_min = left ? min : other_min, r_min = left ? other_min : min;
        const float l_max = left ? max : other_max, r_max = left ? other_max : max;
        min = r_min < l_min ? r_min : l_min;
        max = r_max > l_max ? r_max : l_max;
      }
      d = __fdiv_rn(__fsub_rn(max, min), 15.f);
    }
    const float id = ggml_inverse_scale(d);
#pragma unroll
    for (int i = 0; i < kValuesPerLane; ++i) {
      const float scaled = kType == GgufBlockType::q4_0 ? __fadd_rn(__fmul_rn(v[i], id), 8.5f)
                                                        : __fadd_rn(__fmul_rn(__fsub_rn(v[i], min), id), 0.5f);
      // ggml_nibble's rule (quantize_gguf_args.hpp) written out: calling it gives the same
      // instructions in another register allocation, and this is the measured code.
      const int quant = ggml_float_to_int8(scaled);
      q[i] = quant < 15 ? quant : 15;
    }
    // Lanes 2 and 3 hold elements 16..31: their quants go to the high nibbles of lanes 0 and 1.
    std::uint32_t low, high;
    pack_bytes(q, low, high);
    const std::uint32_t upper_low = __shfl_xor_sync(kFullWarp, low, 2);
    const std::uint32_t upper_high = __shfl_xor_sync(kFullWarp, high, 2);
    constexpr int kHeader = kType == GgufBlockType::q4_1 ? 4 : 2;
    if (part < 2) {
      // Quants are 0..15 (see quantize_gguf_args.hpp), so a shift by 4 stays inside each byte.
      if (kSwapNibbles)
        put_8_bytes(block + kHeader + kValuesPerLane * part, upper_low | (low << 4), upper_high | (high << 4));
      else
        put_8_bytes(block + kHeader + kValuesPerLane * part, low | (upper_low << 4), high | (upper_high << 4));
    }
    if (part == 0) {
      put_u16(block, ggml_fp16_bits(d));
      if constexpr (kType == GgufBlockType::q4_1) put_u16(block + 2, ggml_fp16_bits(min));
    }
  }
}

template <GgufBlockType kType, bool kSwapNibbles>
__global__ void __launch_bounds__(kThreads) quantize_gguf_kernel(QuantizeGgufArgs args) {
  constexpr int kBlockBytes = gguf_block_bytes(kType);
  __shared__ alignas(16) std::uint8_t staged[kBlocksPerCta * kBlockBytes];
  const long long total_blocks = args.rows * (args.k / kGgufBlockWeights);
  const long long first_block = static_cast<long long>(blockIdx.x) * kBlocksPerCta;
  const int quad = static_cast<int>(threadIdx.x) / kLanesPerBlock;
  const int part = static_cast<int>(threadIdx.x) % kLanesPerBlock;

  // Both slots' loads first. A lane past the last block works on zeros and stores nothing: every
  // lane must reach the shuffles.
  core::Vector<__nv_bfloat16, kValuesPerLane> raw[kSlots];
#pragma unroll
  for (int slot = 0; slot < kSlots; ++slot) {
    const long long block = first_block + slot * kQuadsPerCta + quad;
    if (block < total_blocks)
      raw[slot] = core::load_vector<__nv_bfloat16, kValuesPerLane>(args.x + block * kGgufBlockWeights +
                                                                   part * kValuesPerLane);
    else
      raw[slot] = core::Vector<__nv_bfloat16, kValuesPerLane>{};
  }
#pragma unroll
  for (int slot = 0; slot < kSlots; ++slot) {
    float v[kValuesPerLane];
    core::widen_to_floats(raw[slot], v);
    quantize_part<kType, kSwapNibbles>(v, part, staged + (slot * kQuadsPerCta + quad) * kBlockBytes);
  }
  __syncthreads();

  // The CTA's run of blocks, contiguous in the output: 16-byte stores, then a 2-byte tail.
  const long long blocks_left = total_blocks - first_block;
  const int blocks_here = blocks_left < kBlocksPerCta ? static_cast<int>(blocks_left) : kBlocksPerCta;
  const int bytes_here = blocks_here * kBlockBytes;
  std::uint8_t* out = args.out + first_block * kBlockBytes;
  for (int piece = static_cast<int>(threadIdx.x); piece < bytes_here / 16; piece += kThreads)
    core::store_vector(out + 16 * piece, core::load_vector<std::uint8_t, 16>(staged + 16 * piece));
  for (int at = bytes_here / 16 * 16 + 2 * static_cast<int>(threadIdx.x); at < bytes_here; at += 2 * kThreads)
    core::store_vector(out + at, core::load_vector<std::uint8_t, 2>(staged + at));
}

template <bool kSwapNibbles>
void launch(const QuantizeGgufArgs& args, cudaStream_t stream) {
  require(args.k > 0 && args.k % kGgufBlockWeights == 0,
          "GGUF quantize: K must be a positive multiple of {} (got {}): whole blocks", kGgufBlockWeights, args.k);
  const long long total_blocks = args.rows * (args.k / kGgufBlockWeights);
  const auto grid = static_cast<unsigned>(core::ceil_div(total_blocks, kBlocksPerCta));
  switch (args.type) {
    case GgufBlockType::q4_0:
      quantize_gguf_kernel<GgufBlockType::q4_0, kSwapNibbles><<<grid, kThreads, 0, stream>>>(args);
      break;
    case GgufBlockType::q4_1:
      quantize_gguf_kernel<GgufBlockType::q4_1, kSwapNibbles><<<grid, kThreads, 0, stream>>>(args);
      break;
    case GgufBlockType::q8_0:
      quantize_gguf_kernel<GgufBlockType::q8_0, kSwapNibbles><<<grid, kThreads, 0, stream>>>(args);
      break;
  }
  KC_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void quantize_gguf_01_quad_per_block(const QuantizeGgufArgs& args, cudaStream_t stream) {
  launch<false>(args, stream);
}

void quantize_gguf_01_swapped_nibbles(const QuantizeGgufArgs& args, cudaStream_t stream) {
  launch<true>(args, stream);
}

}  // namespace kc::stage3
