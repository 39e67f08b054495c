// quantize_gguf_block.cuh — one GGUF block of 32 bf16 values quantized by one thread, ggml's bytes
// with a fast path (GGUF quantize rung 02; the idea and the proofs are in its header,
// quant/quantize_gguf_02_thread_per_block.cu).
//
// load_gguf_block() issues the four 16-byte loads of a block; quantize_gguf_block<type>() widens
// them, quantizes in ggml's arithmetic and writes the block's bytes at an even offset of shared
// memory (2-byte stores: blocks of 18, 20 and 34 bytes start on no wider boundary);
// write_staged_run() copies a CTA's staged blocks out with 16-byte stores.
#pragma once

#include <cuda_bf16.h>

#include <cfloat>
#include <cstdint>
#include <cstring>

#include "kc/core/vector_io.hpp"
#include "kc/stage3/quantize_gguf_args.hpp"

namespace kc::stage3::gguf_block {

constexpr int kLoads = kGgufBlockWeights * 2 / core::kVectorBytes;  // four 16-byte loads a block
constexpr int kValuesPerLoad = kGgufBlockWeights / kLoads;
constexpr int kChains = 4;  // independent partial maxima/minima a fold keeps (instruction-level parallelism)

// A block's bf16 values as loaded: four 16-byte vectors.
struct RawBlock {
  core::Vector<__nv_bfloat16, kValuesPerLoad> part[kLoads];
};

// The four loads of block `block` of x (rows of K / 32 blocks follow each other).
__device__ __forceinline__ RawBlock load_gguf_block(const __nv_bfloat16* x, long long block) {
  RawBlock raw;
#pragma unroll
  for (int l = 0; l < kLoads; ++l)
    raw.part[l] = core::load_vector<__nv_bfloat16, kValuesPerLoad>(x + block * kGgufBlockWeights + l * kValuesPerLoad);
  return raw;
}

// The block's 16 bf16 pairs as stored (element 2i low, 2i + 1 high), for folds done two values an
// instruction (HMNMX2): a max or min of bf16 values is the max or min of their exact floats.
__device__ __forceinline__ void block_pairs(const RawBlock& raw, __nv_bfloat162 (&pairs)[kGgufBlockWeights / 2]) {
  static_assert(sizeof(raw) == sizeof(pairs), "a block is 16 pairs");
  memcpy(pairs, &raw, sizeof(pairs));
}

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
  // Four independent chains (the order of a max with NaN kept does not matter), so the 32 steps
  // are not one dependent chain of 32 latencies.
  float part[kChains] = {};
#pragma unroll
  for (int i = 0; i < kGgufBlockWeights; ++i) part[i % kChains] = max_keeping_nan(part[i % kChains], fabsf(v[i]));
  float amax = max_keeping_nan(max_keeping_nan(part[0], part[1]), max_keeping_nan(part[2], part[3]));
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
// [0.5, 16.5] up to rounding (or is NaN), and the conversion needs no range check. The max stays
// ggml's own sequential loop: a fold of the largest and smallest value in any order, with ggml's
// loop only for a tie of magnitudes, measured slower on the H200 — the compiler predicates the tie
// loop instead of branching around it.
__device__ __forceinline__ void quantize_q4_0(const float (&v)[kGgufBlockWeights], std::uint8_t* block) {
  // ggml keeps amax = |max| beside max; comparing with |max| itself is the same test in one
  // instruction fewer (a compare and a select a value).
  float max = 0.f;
#pragma unroll
  for (int i = 0; i < kGgufBlockWeights; ++i)
    if (fabsf(max) < fabsf(v[i])) max = v[i];
  const float d = __fdiv_rn(max, -8.f);
  const float id = reciprocal_for_fast_path(d);
  int q[kGgufBlockWeights];
#pragma unroll
  for (int i = 0; i < kGgufBlockWeights; ++i) q[i] = at_most_15(truncate_in_range(__fadd_rn(__fmul_rn(v[i], id), 8.5f)));
  put_u16(block, ggml_fp16_bits(d));
  put_nibbles(block + 2, q);
}

// q4_1: d = (max - min) / 15, m = min, nibbles MIN(15, int8((x - min) / d + 0.5)). On the fast
// path the MIN is dropped, proved unneeded: x - min <= max - min = R as rounded (rounding is
// monotone), and R x id = R / (R / 15) with three roundings of at most 2^-21 each relative (the
// scale is at least 2^-128 when id is finite, so its rounding is that fine even as a subnormal),
// so (x - min) x id + 0.5 < 15.51 and truncates to at most 15 (or is NaN, which gives 0).
__device__ __forceinline__ void quantize_q4_1(const RawBlock& raw, const float (&v)[kGgufBlockWeights],
                                              std::uint8_t* block) {
  // Min and max two values an instruction (HMNMX2 on bf16 pairs; like fminf/fmaxf they skip NaN),
  // in four chains, from +-Inf (bf16 has no FLT_MAX); then ggml's starting values FLT_MAX and
  // -FLT_MAX as bounds: a block with no value below FLT_MAX (only +Inf and NaN) keeps min = FLT_MAX
  // in ggml, and fminf(FLT_MAX, +Inf) says the same.
  __nv_bfloat162 pairs[kGgufBlockWeights / 2];
  block_pairs(raw, pairs);
  __nv_bfloat162 low[kChains], high[kChains];
#pragma unroll
  for (int c = 0; c < kChains; ++c) {
    low[c] = __float2bfloat162_rn(INFINITY);
    high[c] = __float2bfloat162_rn(-INFINITY);
  }
#pragma unroll
  for (int w = 0; w < kGgufBlockWeights / 2; ++w) {
    low[w % kChains] = __hmin2(low[w % kChains], pairs[w]);
    high[w % kChains] = __hmax2(high[w % kChains], pairs[w]);
  }
  const __nv_bfloat162 lows = __hmin2(__hmin2(low[0], low[1]), __hmin2(low[2], low[3]));
  const __nv_bfloat162 highs = __hmax2(__hmax2(high[0], high[1]), __hmax2(high[2], high[3]));
  float min = fminf(FLT_MAX, fminf(__low2float(lows), __high2float(lows)));
  float max = fmaxf(-FLT_MAX, fmaxf(__low2float(highs), __high2float(highs)));
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
    q[i] = truncate_in_range(__fadd_rn(__fmul_rn(__fsub_rn(v[i], min), id), 0.5f));
  put_u16(block, ggml_fp16_bits(d));
  put_u16(block + 2, ggml_fp16_bits(min));
  put_nibbles(block + 4, q);
}

// Block `raw` to its bytes at `out` (shared memory, an even offset).
template <GgufBlockType kType>
__device__ __forceinline__ void quantize_gguf_block(const RawBlock& raw, std::uint8_t* out) {
  float v[kGgufBlockWeights];
#pragma unroll
  for (int l = 0; l < kLoads; ++l) {
    float part[kValuesPerLoad];
    core::widen_to_floats(raw.part[l], part);
#pragma unroll
    for (int i = 0; i < kValuesPerLoad; ++i) v[l * kValuesPerLoad + i] = part[i];
  }
  if constexpr (kType == GgufBlockType::q8_0)
    quantize_q8_0(v, out);
  else if constexpr (kType == GgufBlockType::q4_0)
    quantize_q4_0(v, out);
  else
    quantize_q4_1(raw, v, out);
}

// Copies a CTA's run of `bytes` staged bytes from shared memory to `out` (16-byte aligned, as a
// run of a multiple of 16 bytes' worth of blocks starts): 16-byte pieces, consecutive threads on
// consecutive pieces, then the odd tail of the last run 2 bytes at a time.
template <int kThreads>
__device__ __forceinline__ void write_staged_run(const std::uint8_t* staged, std::uint8_t* out, int bytes) {
  for (int piece = static_cast<int>(threadIdx.x); piece < bytes / 16; piece += kThreads)
    core::store_vector(out + 16 * piece, core::load_vector<std::uint8_t, 16>(staged + 16 * piece));
  for (int at = bytes / 16 * 16 + 2 * static_cast<int>(threadIdx.x); at < bytes; at += 2 * kThreads)
    core::store_vector(out + at, core::load_vector<std::uint8_t, 2>(staged + at));
}

}  // namespace kc::stage3::gguf_block
