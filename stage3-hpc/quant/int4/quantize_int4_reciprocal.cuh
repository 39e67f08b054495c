// The int4 quantize by a reciprocal: the kernel of rungs 02, 03 and 04 (quant/int4/quantize_0N_*.cu).
// Rungs 02 and 03 differ only in how many 16-byte chunks of its group a lane holds; rung 04 is
// rung 02 with each value's quotient corrected instead of tested for a tie. Their headers explain
// the arithmetic; this file is the code. A rung includes it and calls
// quantize_by_reciprocal<kChunks, kTiePath, kCorrected>() (kTiePath false: the negative control).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kc/common/error.hpp"
#include "kc/core/launch.hpp"
#include "kc/stage3/quantize_int4_args.hpp"

namespace kc::stage3 {
namespace {

constexpr int kThreads = 256;
constexpr float kRoundingMagic = 12582912.f;      // 1.5 x 2^23: adding it rounds to an integer
constexpr std::uint32_t kMagicBits = 0x4B400000;  // its bits; + q for an integer 0 <= q < 2^22
// Eight magic words folded by acc = acc x 16 + word: what the fold adds beyond the nibbles.
constexpr std::uint32_t kPackedMagic = kMagicBits * 0x11111111u;
constexpr float kNearTie = 0.5f - 0x1p-16f;  // |w r - rint(w r)| from here on: the exact path

struct Group {
  bool valid = false;  // finite values and a scale in half range
  std::uint16_t scale_bits = kInt4InvalidScaleBits;
  float scale = 0.f;
  float reciprocal = 0.f;  // 1 / scale (scale > 0)
  int zero = 0;
};

// The lane's min and max over its chunks, on bf16 pairs, NaN kept; lo and hi start at 0.
__device__ __forceinline__ void fold_chunk(const uint4& chunk, __nv_bfloat162& lo, __nv_bfloat162& hi) {
  const std::uint32_t words[4] = {chunk.x, chunk.y, chunk.z, chunk.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const __nv_bfloat162 pair = *reinterpret_cast<const __nv_bfloat162*>(&words[i]);
    lo = __hmin2_nan(lo, pair);
    hi = __hmax2_nan(hi, pair);
  }
}

// The group's scale and zero point from its folded range (lo <= 0 <= hi) and whether every value
// of it was finite.
__device__ __forceinline__ Group group_from_range(float lo, float hi, bool all_finite) {
  Group g;
  g.valid = all_finite && int4_group_scale(lo, hi, g.scale_bits, g.scale, g.zero);
  if (!g.valid) {  // what rung 01 and the reference store for such a group
    g.scale_bits = kInt4InvalidScaleBits;
    g.zero = 0;
  }
  if (g.valid && g.scale > 0.f) g.reciprocal = 1.f / g.scale;
  return g;
}

// The group's scale and zero point from the lanes' partial folds: kLanes lanes of a group sit
// side by side in the warp (kLanes a power of two dividing 32), and every lane of the warp calls.
template <int kLanes>
__device__ __forceinline__ Group group_of(__nv_bfloat162 lo2, __nv_bfloat162 hi2) {
  const float2 lo_f = __bfloat1622float2(lo2), hi_f = __bfloat1622float2(hi2);
  const bool finite = isfinite(lo_f.x) && isfinite(lo_f.y) && isfinite(hi_f.x) && isfinite(hi_f.y);
  float lo = fminf(lo_f.x, lo_f.y), hi = fmaxf(hi_f.x, hi_f.y);
#pragma unroll
  for (int mask = kLanes / 2; mask > 0; mask /= 2) {
    lo = fminf(lo, __shfl_xor_sync(0xffffffffu, lo, mask));
    hi = fmaxf(hi, __shfl_xor_sync(0xffffffffu, hi, mask));
  }
  const unsigned not_finite = __ballot_sync(0xffffffffu, !finite);
  const int first_lane = static_cast<int>(threadIdx.x % 32) & ~(kLanes - 1);
  const unsigned group_lanes = kLanes == 32 ? 0xffffffffu : ((1u << kLanes) - 1u) << first_lane;
  return group_from_range(lo, hi, (not_finite & group_lanes) == 0);
}

// Value e of a chunk (8 bf16 values) as a float: exact.
__device__ __forceinline__ float value_of(const uint4& chunk, int e) {
  const std::uint32_t words[4] = {chunk.x, chunk.y, chunk.z, chunk.w};
  const std::uint32_t word = words[e / 2];
  return __uint_as_float(e % 2 == 0 ? word << 16 : word & 0xFFFF0000u);
}

// One chunk's 8 values as a packed word (value e at bits 4e) by the reciprocal; `near_tie` set
// when a value's w r lies too close to a half-integer for the shortcut to be trusted. No branch:
// a group without a scale (reciprocal 0) packs garbage here that the caller replaces.
__device__ __forceinline__ std::uint32_t pack_fast(const uint4& chunk, const Group& g, bool& near_tie) {
  const float with_zero = kRoundingMagic + static_cast<float>(g.zero);
  std::uint32_t acc = 0;
#pragma unroll
  for (int e = 7; e >= 0; --e) {
    const float w = value_of(chunk, e);
    const float v = __fmaf_rn(w, g.reciprocal, with_zero);  // rint(w r) + zero + magic
    const float nearest = v - with_zero;                    // rint(w r), exact
    near_tie |= fabsf(__fmaf_rn(w, g.reciprocal, -nearest)) >= kNearTie;
    const float clamped = fminf(fmaxf(v, kRoundingMagic), kRoundingMagic + 15.f);
    acc = acc * 16u + __float_as_uint(clamped);
  }
  return acc - kPackedMagic;
}

// The rare path: the nibbles of the chunk's near-tie values replaced by the reference's (a
// division each); the other values' nibbles were right.
__device__ __noinline__ std::uint32_t fix_near_ties(uint4 chunk, Group g, std::uint32_t word) {
  for (int e = 0; e < 8; ++e) {
    const float w = value_of(chunk, e);
    const float nearest = rintf(w * g.reciprocal);
    if (fabsf(__fmaf_rn(w, g.reciprocal, -nearest)) >= kNearTie) {
      const auto q = static_cast<std::uint32_t>(int4_quantize_value(w, g.scale, g.zero));
      word = (word & ~(0xFu << (4 * e))) | (q << (4 * e));
    }
  }
  return word;
}

// Rung 04: one chunk's 8 values by int4_pack_corrected (kc/stage3/quantize_int4_args.hpp): the
// reference's rounded quotient from the reciprocal and one correction, so no tie test and no branch.
__device__ __forceinline__ std::uint32_t pack_corrected(const uint4& chunk, const Group& g) {
  float w[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) w[e] = value_of(chunk, e);
  return int4_pack_corrected(w, g.scale, g.reciprocal, g.zero);
}

// A chunk's word: rung 04's corrected quotients, or the fast packing with its near ties fixed
// (unless kTiePath is off: the negative control); then the constant word of a group without a
// scale (every nibble 8 for a group of zeros, 0 for an invalid group, as the reference writes them).
template <bool kTiePath, bool kCorrected>
__device__ __forceinline__ std::uint32_t pack(const uint4& chunk, const Group& g) {
  std::uint32_t word;
  if constexpr (kCorrected) {
    word = pack_corrected(chunk, g);
  } else {
    bool near_tie = false;
    word = pack_fast(chunk, g, near_tie);
    if (kTiePath && near_tie && g.reciprocal > 0.f) word = fix_near_ties(chunk, g, word);
  }
  if (!(g.reciprocal > 0.f)) word = g.valid ? 0x88888888u : 0u;
  return word;
}

// kLanes lanes a group; kHeld > 0: the group is kLanes x kHeld chunks, held in registers between
// the fold and the packing; kHeld == 0: `chunks` chunks a lane at run time, read twice.
template <int kLanes, int kHeld, bool kTiePath, bool kCorrected>
__global__ void __launch_bounds__(kThreads) quantize_int4_kernel(QuantizeInt4Args a, long long groups, int chunks) {
  constexpr bool kInRegisters = kHeld > 0;
  const int chunk_count = kInRegisters ? kHeld : chunks;
  const long long thread = static_cast<long long>(blockIdx.x) * kThreads + threadIdx.x;
  const long long group = thread / kLanes;
  const int lane = static_cast<int>(thread % kLanes);
  const bool active = group < groups;  // lanes past the last group take part in the shuffles only
  const long long base = group * a.group_size;
  const auto chunk_at = [&](int c) { return base + 8LL * (static_cast<long long>(c) * kLanes + lane); };
  const auto load = [&](int c) { return __ldg(reinterpret_cast<const uint4*>(a.x + chunk_at(c))); };

  uint4 held[kInRegisters ? kHeld : 1];
  __nv_bfloat162 lo = __float2bfloat162_rn(0.f), hi = lo;
  if (active) {
    if constexpr (kInRegisters) {
#pragma unroll
      for (int c = 0; c < kHeld; ++c) held[c] = load(c);
#pragma unroll
      for (int c = 0; c < kHeld; ++c) fold_chunk(held[c], lo, hi);
    } else {
      for (int c = 0; c < chunk_count; ++c) fold_chunk(load(c), lo, hi);
    }
  }
  const Group g = group_of<kLanes>(lo, hi);
  if (!active) return;
  if (lane == 0) {
    a.scales[group] = g.scale_bits;
    a.zeros[group] = static_cast<std::uint8_t>(g.zero);
  }

  const auto store = [&](int c, std::uint32_t word) {
    *reinterpret_cast<std::uint32_t*>(a.qweight + chunk_at(c) / 2) = word;
  };
  if constexpr (kInRegisters) {
    std::uint32_t packed[kHeld];
#pragma unroll
    for (int c = 0; c < kHeld; ++c) packed[c] = pack<kTiePath, kCorrected>(held[c], g);
    if constexpr (kLanes == 1) {
      // The lane's chunks are its whole group, contiguous: 16-byte stores.
#pragma unroll
      for (int c = 0; c < kHeld; c += 4)
        *reinterpret_cast<uint4*>(a.qweight + base / 2 + 4 * c) =
            make_uint4(packed[c], packed[c + 1], packed[c + 2], packed[c + 3]);
    } else {
#pragma unroll
      for (int c = 0; c < kHeld; ++c) store(c, packed[c]);
    }
  } else {
    for (int c = 0; c < chunk_count; ++c) {
      store(c, pack<kTiePath, kCorrected>(load(c), g));
    }
  }
}

template <int kLanes, int kHeld, bool kTiePath, bool kCorrected>
void launch(const QuantizeInt4Args& a, cudaStream_t stream) {
  const long long groups = a.rows * (a.k / a.group_size);
  const auto grid = static_cast<unsigned>(core::ceil_div(groups * kLanes, kThreads));
  const int chunks = a.group_size / (8 * kLanes);
  quantize_int4_kernel<kLanes, kHeld, kTiePath, kCorrected><<<grid, kThreads, 0, stream>>>(a, groups, chunks);
}

// kChunks chunks a lane (4 or 8): G / (8 kChunks) lanes a group up to G = 512 (one lane at G = 32
// holds its 4 chunks whatever kChunks is); larger groups take 16 lanes and two passes.
template <int kChunks, bool kTiePath, bool kCorrected = false>
void quantize_by_reciprocal(const QuantizeInt4Args& a, cudaStream_t stream) {
  static_assert(kChunks == 4 || kChunks == 8, "a lane holds 4 or 8 chunks");
  check_quantize_int4_args(a);
  switch (a.group_size) {
    case 32: launch<1, 4, kTiePath, kCorrected>(a, stream); break;
    case 64: launch<8 / kChunks, kChunks, kTiePath, kCorrected>(a, stream); break;
    case 128: launch<16 / kChunks, kChunks, kTiePath, kCorrected>(a, stream); break;
    case 256: launch<32 / kChunks, kChunks, kTiePath, kCorrected>(a, stream); break;
    case 512: launch<64 / kChunks, kChunks, kTiePath, kCorrected>(a, stream); break;
    default: launch<16, 0, kTiePath, kCorrected>(a, stream); break;  // a multiple of 128 past 512, or 384
  }
  KC_CUDA_CHECK(cudaGetLastError());
}

}  // namespace
}  // namespace kc::stage3
