// kc/stage3/quantize_gguf_args.hpp — the arguments of the quantize op that turns bf16 rows into
// llama.cpp's GGUF blocks (q4_0, q4_1, q8_0), the two scalar conversions whose results ggml's C
// leaves to the machine, and one launch per rung. An argument header: the rung files include it
// and nothing of the harness (kc/stage3/quantize_gguf.hpp defines the op and the public entry).
//
// x [rows, K] bf16, row-major, K a multiple of 32; out: the blocks of each row in order, rows one
// after another with no padding (row r's blocks start at byte r x K/32 x block bytes): the tensor
// data of a GGUF file, the `w` that gemv_gguf and quantized_gemv read. The block layouts are those
// of kc/stage3/gemv_gguf_args.hpp (q4_0 18 bytes: half d, 16 bytes of nibbles; q4_1 20 bytes: half
// d, half m, 16 bytes of nibbles; q8_0 34 bytes: half d, 32 int8), weight j < 16 in the low nibble
// of qs[j], weight j + 16 in its high nibble.
//
// The values are those of ggml's reference quantizers (quantize_row_q4_0_ref, _q4_1_ref,
// _q8_0_ref in ggml-quants.c), computed in float from x converted exactly to float, every
// operation rounded on its own (no fused multiply-add), in ggml's order:
//
//   q8_0  amax = running MAX(amax, |x_j|) from 0 (ggml's MAX macro, a > b ? a : b: a NaN makes it
//         NaN and the next value starts it over, so a NaN last in the block makes amax NaN);
//         d = amax / 127; id = d != 0 ? 1 / d : 0; q_j = int8(roundf(x_j id)).
//   q4_0  max = the first x_j of largest |x_j| (strictly larger replaces; NaN never does; 0 when
//         none is), d = max / -8; id as above; q_j = min(15, int8(x_j id + 8.5)).
//   q4_1  min, max from FLT_MAX, -FLT_MAX by strict comparisons (NaN never replaces; the first of
//         equal values stays, so a block of zeros keeps its first zero's sign); d = (max - min) /
//         15; id as above; m = min; q_j = min(15, int8((x_j - min) id + 0.5)).
//   d and m are stored as half by ggml_fp16_bits below.
//
// What that gives for the inputs one might worry about:
//   all zeros  q8_0 and q4_1: every byte 0 (q4_1 writes m = -0, 0x8000, when the first zero is
//              -0); q4_0: d = 0 / -8 = -0 (bytes 00 80) and every nibble 8 (x 0 + 8.5).
//   NaN        q4_0 and q4_1 ignore it in their max/min; its own quant is int8(NaN) = 0 (nibble
//              0). q8_0 ignores it unless it is the block's last value; then d is NaN (stored
//              0x7E00) and every quant 0.
//   +-Inf      enters the max/min: the scale is infinite (q4_1: m = -Inf when one is -Inf), id =
//              +-0, finite values quantize to 0 (q8_0), 8 (q4_0) or 0 (q4_1), the Inf itself to
//              int8(Inf x 0 = NaN) = 0. A block of +Inf only keeps q4_1's min at FLT_MAX.
//   subnormal  no flush to zero anywhere. When d is so small that 1 / d overflows (d < 2^-128: a
//              block whose max |x| is below about 2^-121 for q8_0, 2^-125 for q4_0, whose range is
//              below about 2^-124 for q4_1 — bf16 subnormals and their neighbours), id = Inf, the
//              products are +-Inf or NaN and every quant is int8(...) = 0, as ggml computes it on
//              x86-64. A d below half's range is stored as 0 (or a half subnormal), as in ggml.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kc/stage3/gemv_gguf_args.hpp"

namespace kc::stage3 {

struct QuantizeGgufArgs {
  long long rows = 0;  // >= 1
  int k = 0;           // a positive multiple of 32
  GgufBlockType type = GgufBlockType::q4_0;
  const __nv_bfloat16* x = nullptr;  // [rows, k], 16-byte aligned
  std::uint8_t* out = nullptr;       // rows x k / 32 blocks of `type`, 16-byte aligned
};

// int8(v): ggml converts a float to int8_t with a C cast, which C leaves undefined for NaN, Inf
// and values outside int8's range; kc defines it as x86-64 computes it (cvttss2si truncates to a
// 32-bit integer, 0x80000000 for NaN, Inf and values beyond 2^31, and the low byte is kept): the
// machine most GGUF files are made on. The reference and the kernels both call this.
__host__ __device__ inline std::int8_t ggml_float_to_int8(float v) {
  if (!(fabsf(v) < 2147483648.f)) return 0;  // NaN, +-Inf, |v| >= 2^31: 0x80000000, low byte 0
  return static_cast<std::int8_t>(static_cast<std::uint8_t>(static_cast<std::uint32_t>(static_cast<int>(v)) & 0xffu));
}

// The bits of a scale as ggml stores it (GGML_FP32_TO_FP16): IEEE half, round to nearest even,
// overflow to Inf, subnormals kept; a NaN becomes 0x7E00 with its sign (ggml's own conversion;
// the CUDA intrinsic alone would give 0x7FFF).
__host__ __device__ inline std::uint16_t ggml_fp16_bits(float v) {
  if (v != v) {
    std::uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    return static_cast<std::uint16_t>(0x7E00u | ((bits >> 16) & 0x8000u));
  }
  const __half h = __float2half_rn(v);
  std::uint16_t bits;
  std::memcpy(&bits, &h, sizeof bits);
  return bits;
}

// ggml's `id = d ? 1.0f/d : 0.0f`: the reciprocal of a block's scale, one correctly rounded
// division, 0 for a zero scale (a NaN scale counts as true, as in C). Shared by the reference and
// the kernels.
__host__ __device__ inline float ggml_inverse_scale(float d) {
#ifdef __CUDA_ARCH__
  return d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
#else
  return d != 0.0f ? 1.0f / d : 0.0f;
#endif
}

// A q4 quant as ggml stores it: MIN(15, (int8_t)(v)), with int8(v) as ggml_float_to_int8 defines it
// (the reference calls it; rung 01 writes the same two lines out).
__host__ __device__ inline int ggml_nibble(float v) {
  const int q = ggml_float_to_int8(v);
  return q < 15 ? q : 15;
}

// Rung 01: four lanes per block of 32 (one 16-byte load of x each), the block's max or min by two
// ordered shuffles, the quants packed in registers and the CTA's blocks staged in shared memory,
// then written out with 16-byte coalesced stores (sm_80 and newer).
void quantize_gguf_01_quad_per_block(const QuantizeGgufArgs& args, cudaStream_t stream);

// Rung 02: one thread per block (the reference's sequential max/min, one division pair a block),
// and a fast path with no per-value range checks for every block that ggml's special cases
// (NaN in q8_0's max, a zero min or max in q4_1, an overflowing reciprocal) cannot change; those
// take the exact path. Blocks staged in shared memory and written with 16-byte stores (sm_80 and
// newer). The fold is four independent chains of fmaxf/fminf (or max.NaN for q8_0).
void quantize_gguf_02_thread_per_block(const QuantizeGgufArgs& args, cudaStream_t stream);

// For the negative control only: rung 01 with the nibble order of q4 blocks swapped (element j + 16
// in the low nibble of qs[j], j in the high one). The check must fail it on q4_0 and q4_1.
void quantize_gguf_01_swapped_nibbles(const QuantizeGgufArgs& args, cudaStream_t stream);

}  // namespace kc::stage3
