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

// x [rows, K] bf16 to the stored form: qweight [rows, K / 2], scales [rows, K / G] (half bits),
// zeros [rows, K / G]. K a multiple of G and of 8; G 32, 64 or a multiple of 128.
struct QuantizeInt4Args {
  long long rows = 0;
  int k = 0;
  int group_size = 128;
  const __nv_bfloat16* x = nullptr;  // 16-byte aligned
  std::uint8_t* qweight = nullptr;   // 4-byte aligned
  std::uint16_t* scales = nullptr;
  std::uint8_t* zeros = nullptr;
};

// Throws kc::Error unless `args` describe a call the rung can run: rows >= 1; K >= 1; a group
// size of 32, 64 or a multiple of 128 that divides K; x, qweight, scales and zeros non-null; x
// 16-byte aligned and qweight 4-byte aligned. No CUDA call. The public entry and the rung call it.
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

}  // namespace kc::stage3
