// flash_common.cuh — what every fused attention rung (02-04) shares: the checks before a launch,
// where a block's head lives in Q, K, V, O and LSE (grouped-query heads by index; in the packed
// variable-length form, a sequence's rows found from its offsets), which keys a query row sees
// (the bottom-right causal mask), the exp2 of the online softmax, and how a finished row is
// written (O = 0 and LSE = -inf for a row that sees no key).
#pragma once

#include <cuda_runtime.h>
#include <math_constants.h>

#include <cstddef>
#include <cstdint>
#include <limits>

#include "kc/stage3/attention_args.hpp"
#include "kc/common/error.hpp"
#include "kc/core/dtype_traits.hpp"
#include "kc/core/reduce.cuh"

namespace kc::stage3 {

// exp(x) = 2^(x . log2 e): the kernels fold log2 e into the softmax scale once, so every score
// costs one MUFU.EX2 and no multiply. The LSE is turned back into a natural log at the end.
inline constexpr float kLog2e = 1.4426950408889634f;
inline constexpr float kLn2 = 0.6931471805599453f;

// 2^x with subnormal results flushed to 0 (the ex2.approx.ftz instruction alone, without the
// fix-up code exp2f wraps around it); 2^-inf = 0, NaN stays NaN.
__device__ __forceinline__ float exp2_flush_to_zero(float x) {
  float result;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(result) : "f"(x));
  return result;
}

// 2^x on the FMA pipe instead of MUFU (attention rung 26): x = n + f with n = round(x) (the sum
// with 1.5 . 2^23 rounds it, and leaves n in the low mantissa bits), 2^f for f in [-1/2, 1/2] by a
// degree-4 polynomial (a minimax fit in relative error, at most 2.7e-6 evaluated in FP32: near
// MUFU.EX2's own 2^-22, far inside bf16's 2^-9), times 2^n built in the exponent field. Three
// FADD, four FFMA, one FMUL and an integer shift-add instead of one MUFU.EX2 — worth it only where
// MUFU, 16 results a clock an SM against the FMA pipe's 128, is what a kernel waits on (the
// softmax at D = 64). Like exp2_flush_to_zero, 0 for -inf and NaN stays NaN; 0 for every x below
// -126 (results between 2^-126.5 and 2^-126 come out subnormal, where MUFU flushes them); valid up
// to x < 128 (the softmax's arguments stay at or below kLazyRescaleLog2).
__device__ __forceinline__ float exp2_on_fma(float x) {
  constexpr float kRound = 12582912.f;  // 1.5 . 2^23: x + kRound has round(x) in its low bits
  const float shifted = x + kRound;
  const float f = x - (shifted - kRound);
  float p = 0.009570102f;
  p = fmaf(p, f, 0.055917863f);
  p = fmaf(p, f, 0.24024744f);
  p = fmaf(p, f, 0.69312179f);
  p = fmaf(p, f, 0.99999928f);
  // (bits of shifted) << 23 is n << 23 (1.5 . 2^23's own bits shift out); + 127 << 23: 2^n.
  const float two_to_n = __int_as_float((__float_as_int(shifted) << 23) + 0x3f800000);
  return x < -126.f ? 0.f : p * two_to_n;
}

// One sequence of the packed variable-length form (attention_args.hpp): where its rows start in
// the packed Q and O (q_start) and K and V (kv_start), and how many it has (Sq_b, Sk_b), from
// cu_seqlens_q/k[b] and [b + 1].
struct VarlenSequence {
  int q_start, q_len, kv_start, kv_len;
};

template <typename T>
__device__ __forceinline__ VarlenSequence varlen_sequence(const AttentionArgs<T>& args, int b) {
  const int q_start = args.cu_seqlens_q[b];
  const int kv_start = args.cu_seqlens_k[b];
  return {q_start, args.cu_seqlens_q[b + 1] - q_start, kv_start, args.cu_seqlens_k[b + 1] - kv_start};
}

// One (batch, query head) of the problem, as seen by the block that owns some of its query rows:
// blockIdx.z is the batch, blockIdx.y the query head (a persistent CTA names the pair itself); the
// kv head is h / (Hq / Hkv), read in place (no copy of K and V per query head).
template <typename T>
struct HeadView {
  const T* q;
  const T* k;
  const T* v;
  T* o;
  float* lse;

  __device__ explicit HeadView(const AttentionParams<T>& args)
      : HeadView(args, static_cast<int>(blockIdx.z), static_cast<int>(blockIdx.y)) {}

  // The packed variable-length form (AttentionArgs, offsets included, as the packed kernels take
  // it; the dense kernels take AttentionParams and get the constructor above): blockIdx.z is the
  // sequence, blockIdx.y the query head.
  __device__ explicit HeadView(const AttentionArgs<T>& args)
      : HeadView(args, varlen_sequence(args, static_cast<int>(blockIdx.z)), static_cast<int>(blockIdx.y)) {}

  // The (batch b, query head h) a persistent CTA is working on, whatever its block index.
  __device__ HeadView(const AttentionParams<T>& args, int b, int h) {
    const int kv_head = h / (args.q_heads / args.kv_heads);
    const std::int64_t q_offset = b * args.q_batch_stride + h * args.q_head_stride;
    const std::int64_t kv_offset = b * args.kv_batch_stride + kv_head * args.kv_head_stride;
    q = args.q + q_offset;
    o = args.o + q_offset;
    k = args.k + kv_offset;
    v = args.v + kv_offset;
    lse = args.lse + (static_cast<std::int64_t>(b) * args.q_heads + h) * args.q_len;
  }

  // Query head h of one sequence of the packed variable-length form: its rows start at packed row
  // q_start of Q and O and kv_start of K and V (no batch stride), and its LSE is row h of the
  // sequence's [Hq, Sq_b] block at element q_start . Hq.
  __device__ HeadView(const AttentionParams<T>& args, const VarlenSequence& sequence, int h) {
    const int kv_head = h / (args.q_heads / args.kv_heads);
    const std::int64_t q_offset = sequence.q_start * args.q_row_stride + h * args.q_head_stride;
    const std::int64_t kv_offset = sequence.kv_start * args.kv_row_stride + kv_head * args.kv_head_stride;
    q = args.q + q_offset;
    o = args.o + q_offset;
    k = args.k + kv_offset;
    v = args.v + kv_offset;
    lse = args.lse + static_cast<std::int64_t>(sequence.q_start) * args.q_heads +
          static_cast<std::int64_t>(h) * sequence.q_len;
  }
};

// How many keys query row `query` sees: Sk, or with the causal mask clamp(query + Sk - Sq + 1,
// 0, Sk) (attention.hpp's visible_keys). Keys j < this are visible, the others are not.
template <typename T>
__device__ __forceinline__ int visible_key_end(const AttentionParams<T>& args, int query) {
  if (!args.causal) return args.kv_len;
  const std::int64_t end = std::int64_t{query} + args.kv_len - args.q_len + 1;
  return end < 0 ? 0 : (end < args.kv_len ? static_cast<int>(end) : args.kv_len);
}

// The keys a block of query rows [first_row, first_row + rows) needs at all: those its last row
// (inside Sq) sees. Keys at or past this end are never read: loads there are zero-filled, so not
// even a NaN stored behind the mask reaches the arithmetic.
template <typename T>
__device__ __forceinline__ int block_key_end(const AttentionParams<T>& args, int first_row, int rows) {
  const int last_row = (first_row + rows < args.q_len ? first_row + rows : args.q_len) - 1;
  return visible_key_end(args, last_row);
}

// The running softmax state of one query row, in log2 units (scores already multiplied by
// scale . log2 e): the maximum so far and the sum of 2^(s - max), the latter per thread where the
// row is spread over several threads (summed once at the end).
struct RowState {
  float max = -std::numeric_limits<float>::infinity();
  float sum = 0.f;
};

// The exponent base of a row whose maximum is `max`: the maximum itself, or 0 while every score
// so far is -inf (masked). 2^(-inf - -inf) would be NaN; 2^(-inf - 0) = 0 is what a masked key
// contributes. A NaN maximum stays NaN and makes the whole row NaN, as the definition does.
__device__ __forceinline__ float exponent_base(float max) { return max == -CUDART_INF_F ? 0.f : max; }

// The O row scale 1/l and the LSE of a finished row, from its maximum and its (whole) sum:
//   no visible key                  O = 0, LSE = -inf (by position: `visible` == 0)
//   every visible score is -inf     O = NaN, LSE = NaN (exp(-inf - -inf), as the definition)
//   otherwise                       1/l, LSE = ln 2 . (max + log2 l)
struct RowResult {
  float o_scale;
  float lse;
};
__device__ __forceinline__ RowResult finish_row(float max, float sum, int visible) {
  if (visible == 0) return {0.f, -CUDART_INF_F};
  if (max == -CUDART_INF_F) return {CUDART_NAN_F, CUDART_NAN_F};
  return {1.f / sum, kLn2 * (max + log2f(sum))};
}

// Two adjacent 16-bit elements in one 32-bit register: how the kernels read pairs of K and V,
// hand P to mma.sync and store O. The lower address (the first element) is the low half.
template <typename T>
struct PackedPair;
template <>
struct PackedPair<__nv_bfloat16> {
  using Type = __nv_bfloat162;
  static __device__ __forceinline__ float2 to_float2(Type pair) { return __bfloat1622float2(pair); }
  static __device__ __forceinline__ Type from_floats(float first, float second) {
    return __floats2bfloat162_rn(first, second);
  }
};
template <>
struct PackedPair<__half> {
  using Type = __half2;
  static __device__ __forceinline__ float2 to_float2(Type pair) { return __half22float2(pair); }
  static __device__ __forceinline__ Type from_floats(float first, float second) {
    return __floats2half2_rn(first, second);
  }
};

// The pair (first, second) rounded to T, as the 32-bit register mma.sync takes.
template <typename T>
__device__ __forceinline__ std::uint32_t pack_pair(float first, float second) {
  const typename PackedPair<T>::Type pair = PackedPair<T>::from_floats(first, second);
  return *reinterpret_cast<const std::uint32_t*>(&pair);
}

// The grid of a fused rung: query tiles in x, heads in y, batches in z.
template <typename T>
dim3 flash_grid(const AttentionArgs<T>& args, int rows_per_block) {
  return dim3(static_cast<unsigned>((args.q_len + rows_per_block - 1) / rows_per_block),
              static_cast<unsigned>(args.q_heads), static_cast<unsigned>(args.batch));
}

// Allows `kernel` the dynamic shared memory it needs above the default 48 KiB, once per kernel;
// kc::Error when the GPU has less.
template <class Kernel>
void allow_dynamic_smem(Kernel kernel, int bytes) {
  int device = 0, optin_bytes = 0;
  KC_CUDA_CHECK(cudaGetDevice(&device));
  KC_CUDA_CHECK(cudaDeviceGetAttribute(&optin_bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  require(bytes <= optin_bytes,
          "this attention kernel needs {} bytes of shared memory per block and this GPU offers {}", bytes,
          optin_bytes);
  KC_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
}

}  // namespace kc::stage3
