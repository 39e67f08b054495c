// attention_softmax.hpp — the masked row softmax of attention's unfused path (the baseline) and of
// its FP64 reference: the step between S = scale.Q.K^T and O = P.V when S is materialized.
//
// Rows are those of S for a chunk of (batch, kv head) groups, each group's Hq/Hkv heads after one
// another: row r holds query (first_row + r) % Sq, so the causal mask needs only Sq and Sk (kc/stage3/attention.hpp
// defines the mask). The LSE of row r is the LSE element r of the chunk (the same order).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace kc::stage3 {

struct MaskedSoftmaxRows {
  std::int64_t rows = 0;    // rows of S in this chunk
  std::int64_t kv_len = 0;  // Sk: the length of a row
  std::int64_t q_len = 0;   // Sq: row r is query (first_row + r) % Sq
  std::int64_t first_row = 0;  // where the chunk starts within its group's rows (a group cut in blocks)
  bool causal = false;
};

// p[r][j] = exp(s[r][j] - m) / l over the visible keys of row r, 0 at the others, rounded to TP;
// lse[r] = m + log(l), -inf for a row with no visible key (whose p is all 0). FP32 arithmetic,
// accurate expf/logf. TP: __nv_bfloat16 or __half.
template <typename TP>
void attention_masked_softmax(const float* s, TP* p, float* lse, MaskedSoftmaxRows rows,
                              cudaStream_t stream);

// The same in double, in place (s becomes P): the reference's softmax.
void attention_masked_softmax_f64(double* s, double* lse, MaskedSoftmaxRows rows, cudaStream_t stream);

}  // namespace kc::stage3
