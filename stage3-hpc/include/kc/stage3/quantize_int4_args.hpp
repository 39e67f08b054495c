// kc/stage3/quantize_int4_args.hpp — bf16 weights to the stored form of 4-bit groups with scales
// and zero points (kc/stage3/gemv_int4_args.hpp): the arguments of the quantize_int4 op, one
// launch per rung, and the per-group arithmetic the rungs and the host reference share.
//
// Per row and group of G consecutive values along K (GPTQ's min-max rule, round to nearest, no
// error feedback), in float:
//   lo = min(0, min w), hi = max(0, max w)
//   s  = half(rn((hi - lo) / 15)), read back as a float        (scales: its half bits)
//   z  = clamp(rint(-lo / s), 0, 15)                            (zeros: one byte)
//   q  = clamp(rint(w / s) + z, 0, 15)                          (qweight: the low nibble of byte
//                                                                 k / 2 for even k, high for odd)
// rint rounds half to even. A group whose range is zero, or rounds to a zero half, gets s = 0,
// z = 8 and every q = 8 (it dequantizes to zeros). A group the format cannot hold — a NaN or an
// infinity among its values, or a range past the largest half scale (|hi - lo| / 15 > 65504) —
// is marked instead of guessed: s = NaN (half bits 0x7E00), z = 0, every q = 0, so that every
// weight of the group dequantizes to NaN and the damage shows downstream. (The host quantizer of
// kc/stage3/gemv_int4.hpp refuses such a group with a kc::Error naming it.)
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kc/stage3/gemv_int4_args.hpp"

namespace kc::stage3 {

inline constexpr std::uint16_t kInt4InvalidScaleBits = 0x7E00;  // a quiet NaN half

// The scale and zero point of a group from its lo <= 0 <= hi (finite), or false when the range
// passes a half scale. `scale` is the half as a float.
__host__ __device__ inline bool int4_group_scale(float lo, float hi, std::uint16_t& scale_bits, float& scale,
                                                 int& zero) {
  const __half h = __float2half_rn((hi - lo) / 15.f);
  scale = __half2float(h);
  if (!(scale <= 65504.f)) return false;  // rounded to infinity
  const __half_raw raw = h;
  scale_bits = scale > 0.f ? raw.x : 0;
  zero = scale > 0.f ? static_cast<int>(fminf(15.f, fmaxf(0.f, rintf(-lo / scale)))) : 8;
  return true;
}

// The 4-bit value of one weight of a group whose scale and zero point are `scale` and `zero`.
__host__ __device__ inline int int4_quantize_value(float w, float scale, int zero) {
  if (!(scale > 0.f)) return 8;
  return static_cast<int>(fminf(15.f, fmaxf(0.f, rintf(w / scale) + static_cast<float>(zero))));
}

// w / scale without a division: q0 = w r, then one correction step (Markstein's), q0 + (w - q0
// scale) r, where r is 1 / scale correctly rounded and w - q0 scale is exact in a fused
// multiply-add. For a bf16 w and a positive finite half scale this is w / scale as IEEE division
// rounds it, bit for bit, wherever |w / scale| >= 2^-60 (below, where the remainder underflows,
// both are far under 1/2), so rintf of it is int4_quantize_value's rintf(w / scale) for every
// such pair with |w / scale| <= 64 (a valid group's stay under 23);
// GemvInt4.CorrectedQuotientIsTheDivisionForEveryScaleAndWeight checks all of them on the host.
// Quantize rung 04 computes each value's nibble from it.
__host__ __device__ inline float int4_corrected_quotient(float w, float scale, float reciprocal) {
#ifdef __CUDA_ARCH__
  const float q0 = __fmul_rn(w, reciprocal);  // never contracted into the fma below
#else
  const float q0 = w * reciprocal;
#endif
  return fmaf(fmaf(-q0, scale, w), reciprocal, q0);
}

// Eight values of a group with a scale (> 0) as their packed word, value e in bits 4e: the nibbles
// int4_quantize_value gives, by int4_corrected_quotient, one addition and a clamp a value.
// q + 1.5 x 2^23 rounds q to an integer (floats in [2^23, 2^24) are spaced 1 apart; ties to even,
// as rintf), so that float's bits are 0x4B400000 + rint(q); clamped to [2^23 x 1.5 - zero, + 15],
// they are (0x4B400000 - zero) + the nibble. Eight of them folded by acc x 16 + bits carry that
// constant times 0x11111111 (mod 2^32), taken off once. (The zero point is added through the
// clamp's bounds, not to q: q + zero + 1.5 x 2^23 would break a tie by the parity of q + zero.)
// Quantize rung 04's arithmetic; the host test runs it against int4_quantize_value.
__host__ __device__ inline std::uint32_t int4_pack_corrected(const float (&w)[8], float scale, float reciprocal,
                                                            int zero) {
  constexpr float kBias = 12582912.f;  // 1.5 x 2^23
  const float low = kBias - static_cast<float>(zero);
  const float high = low + 15.f;
  std::uint32_t acc = 0;
#pragma unroll
  for (int e = 7; e >= 0; --e) {
    const float biased = fminf(fmaxf(int4_corrected_quotient(w[e], scale, reciprocal) + kBias, low), high);
#ifdef __CUDA_ARCH__
    const std::uint32_t bits = __float_as_uint(biased);
#else
    std::uint32_t bits;
    std::memcpy(&bits, &biased, sizeof bits);
#endif
    acc = acc * 16u + bits;
  }
  return acc - (0x4B400000u - static_cast<std::uint32_t>(zero)) * 0x11111111u;
}

// x [rows, K] bf16 to the stored form: qweight [rows, K / 2], scales [rows, K / G] (half bits),
// zeros [rows, K / G]. K a multiple of G and of 8; G 32, 64 or a multiple of 128.
struct QuantizeInt4Args {
  long long rows = 0;
  int k = 0;
  int group_size = 128;
  const __nv_bfloat16* x = nullptr;  // 16-byte aligned
  std::uint8_t* qweight = nullptr;   // 4-byte aligned (16-byte at G = 32)
  std::uint16_t* scales = nullptr;
  std::uint8_t* zeros = nullptr;
};

// Whether a group of `group_size` values is held by the lanes of a warp (G = 32 to 512, the
// sizes rungs 02-05 keep in registers); the others (384 and multiples of 128 past 512) are the
// long groups that rung 06 gives a CTA each.
constexpr bool int4_group_held_by_lanes(int group_size) {
  return group_size == 32 || group_size == 64 || group_size == 128 || group_size == 256 || group_size == 512;
}

// Throws kc::Error unless `args` describe a call the rung can run: rows >= 1; K >= 1; a group
// size of 32, 64 or a multiple of 128 that divides K; x, qweight, scales and zeros non-null; x
// 16-byte aligned and qweight 4-byte aligned (16-byte at G = 32, where a group's 16 bytes are
// stored at once). No CUDA call. The public entry and the rung call it.
void check_quantize_int4_args(const QuantizeInt4Args& args);

// Rung 01 (quant/int4/quantize_01_lanes_per_group.cu): each lane takes 8 values with one 16-byte
// load; the G / 8 lanes of a group (G <= 256) fold its min and max by shuffles and every lane
// writes its 8 nibbles as one 4-byte store; from G = 512 a warp owns a group and walks it.
void quantize_int4_01_lanes_per_group(const QuantizeInt4Args& args, cudaStream_t stream);

// Rung 02 (quant/int4/quantize_02_reciprocal.cu): rung 01's bytes with one division a lane: each
// value is w x (1 / scale) rounded by a fused add, exact except near a half-integer, where the lane
// takes the division; G / 32 lanes a group (one at G = 32), four 16-byte chunks a lane.
void quantize_int4_02_reciprocal(const QuantizeInt4Args& args, cudaStream_t stream);
// Rung 02 without its slow path near ties: a negative control (the tie groups of the conformance
// data must fail it).
void quantize_int4_02_without_tie_path(const QuantizeInt4Args& args, cudaStream_t stream);

// Rung 03 (quant/int4/quantize_03_eight_chunks.cu): rung 02 with eight chunks a lane (G / 64
// lanes a group), the per-group work spread over twice the values.
void quantize_int4_03_eight_chunks(const QuantizeInt4Args& args, cudaStream_t stream);

// Rung 04 (quant/int4/quantize_04_corrected_quotient.cu): rung 02's layout with each value's
// quotient from int4_corrected_quotient (exact, no near-tie path, no branch).
void quantize_int4_04_corrected_quotient(const QuantizeInt4Args& args, cudaStream_t stream);

// Rung 05 (quant/int4/quantize_05_next_group_in_flight.cu): rung 04's arithmetic on a grid the
// device holds at once, each lane loading its next group's chunks while it packs the current one
// (groups past 512 values: rung 04's launch).
void quantize_int4_05_next_group_in_flight(const QuantizeInt4Args& args, cudaStream_t stream);

// Rung 06 (quant/int4/quantize_06_cta_per_long_group.cu): rung 05, with a CTA of 128 threads for
// each group of more than 512 values (and 384), its chunks held in registers up to 8192 values
// and read once, the CTA's range folded through shared memory.
void quantize_int4_06_cta_per_long_group(const QuantizeInt4Args& args, cudaStream_t stream);

}  // namespace kc::stage3
