// The masked row softmax of attention's unfused path and of its FP64 reference (see
// attention_softmax.hpp). A block per row, three passes over the row (max, sum, write): S is
// materialized in global memory anyway, and a row of up to 16k keys stays in L2 between the
// passes. This is the step FlashAttention removes, not a rung of the ladder.
#include "attention_softmax.hpp"

#include <math_constants.h>

#include "kc/common/error.hpp"
#include "kc/core/reduce.cuh"

namespace kc::stage3 {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ std::int64_t visible_keys_of_row(const MaskedSoftmaxRows& rows, std::int64_t row) {
  if (!rows.causal) return rows.kv_len;
  const std::int64_t query = (rows.first_row + row) % rows.q_len;
  const std::int64_t last = query + rows.kv_len - rows.q_len;  // the last key it sees
  return last < 0 ? 0 : (last + 1 < rows.kv_len ? last + 1 : rows.kv_len);
}

template <typename TP>
__device__ __forceinline__ TP to_storage(float x);
template <>
__device__ __forceinline__ __nv_bfloat16 to_storage<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
template <>
__device__ __forceinline__ __half to_storage<__half>(float x) { return __float2half_rn(x); }

template <typename TP>
__global__ void __launch_bounds__(kThreads) masked_softmax_kernel(const float* s, TP* p, float* lse,
                                                                  MaskedSoftmaxRows rows) {
  __shared__ float partials[core::kWarpSize];
  const std::int64_t row = blockIdx.x;
  const std::int64_t visible = visible_keys_of_row(rows, row);
  const float* s_row = s + row * rows.kv_len;
  TP* p_row = p + row * rows.kv_len;

  float max = -CUDART_INF_F;
  for (std::int64_t j = threadIdx.x; j < visible; j += kThreads) max = core::max_propagate_nan(max, s_row[j]);
  max = core::block_reduce_max(max, partials);
  float sum = 0.f;
  if (visible > 0)
    for (std::int64_t j = threadIdx.x; j < visible; j += kThreads) sum += expf(s_row[j] - max);
  sum = core::block_reduce_sum(sum, partials);
  const float inverse = 1.f / sum;
  for (std::int64_t j = threadIdx.x; j < rows.kv_len; j += kThreads)
    p_row[j] = to_storage<TP>(j < visible ? expf(s_row[j] - max) * inverse : 0.f);
  if (threadIdx.x == 0) lse[row] = visible > 0 ? max + logf(sum) : -CUDART_INF_F;
}

struct DoubleMax {
  __device__ __forceinline__ double operator()(double a, double b) const {
    return (a != a || b != b) ? CUDART_NAN : (a > b ? a : b);
  }
  static __device__ __forceinline__ double identity() { return -CUDART_INF; }
};

struct DoubleSum {
  __device__ __forceinline__ double operator()(double a, double b) const { return a + b; }
  static __device__ __forceinline__ double identity() { return 0.0; }
};

__global__ void __launch_bounds__(kThreads) masked_softmax_f64_kernel(double* s, double* lse,
                                                                      MaskedSoftmaxRows rows) {
  __shared__ double partials[core::kWarpSize];
  const std::int64_t row = blockIdx.x;
  const std::int64_t visible = visible_keys_of_row(rows, row);
  double* s_row = s + row * rows.kv_len;

  double max = DoubleMax::identity();
  for (std::int64_t j = threadIdx.x; j < visible; j += kThreads) max = DoubleMax{}(max, s_row[j]);
  max = core::block_reduce(max, DoubleMax{}, partials);
  double sum = 0.0;
  if (visible > 0)
    for (std::int64_t j = threadIdx.x; j < visible; j += kThreads) sum += exp(s_row[j] - max);
  sum = core::block_reduce(sum, DoubleSum{}, partials);
  const double inverse = 1.0 / sum;
  for (std::int64_t j = threadIdx.x; j < rows.kv_len; j += kThreads)
    s_row[j] = j < visible ? exp(s_row[j] - max) * inverse : 0.0;
  if (threadIdx.x == 0) lse[row] = visible > 0 ? max + log(sum) : -CUDART_INF;
}

void require_rows(const MaskedSoftmaxRows& rows) {
  require(rows.rows >= 1 && rows.rows <= INT32_MAX && rows.kv_len >= 1 && rows.q_len >= 1,
          "attention softmax: {} rows of {} keys, queries {} (a block per row: 1 to 2^31-1 rows)",
          rows.rows, rows.kv_len, rows.q_len);
}

}  // namespace

template <typename TP>
void attention_masked_softmax(const float* s, TP* p, float* lse, MaskedSoftmaxRows rows,
                              cudaStream_t stream) {
  require_rows(rows);
  masked_softmax_kernel<TP><<<static_cast<unsigned>(rows.rows), kThreads, 0, stream>>>(s, p, lse, rows);
  KC_CUDA_CHECK(cudaGetLastError());
}

void attention_masked_softmax_f64(double* s, double* lse, MaskedSoftmaxRows rows, cudaStream_t stream) {
  require_rows(rows);
  masked_softmax_f64_kernel<<<static_cast<unsigned>(rows.rows), kThreads, 0, stream>>>(s, lse, rows);
  KC_CUDA_CHECK(cudaGetLastError());
}

template void attention_masked_softmax<__nv_bfloat16>(const float*, __nv_bfloat16*, float*,
                                                      MaskedSoftmaxRows, cudaStream_t);
template void attention_masked_softmax<__half>(const float*, __half*, float*, MaskedSoftmaxRows,
                                               cudaStream_t);

}  // namespace kc::stage3
