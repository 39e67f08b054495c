// kc/stage2/references.hpp — CPU references in double for every stage-2 op.
//
// Written from the definitions, row-major, no shortcuts: the kernels are judged against these.
// IEEE rules decide NaN and Inf the way the formulas are written (a NaN or Inf in a norm row makes
// the sum of squares NaN or Inf; softmax subtracts the row max, so a +Inf entry gives
// exp(inf - inf) = NaN in the denominator and the whole row is NaN). Activations return their
// limits at +-Inf (see kc/core/elementwise.cuh). Rows are spread over the host's cores.
#pragma once

#include <cstdint>
#include <vector>
#include <functional>

#include "kc/stage2/kernels.hpp"

namespace kc::stage2 {

void rmsnorm_reference(const double* x, const double* weight, std::int64_t rows, std::int64_t cols,
                       double eps, double* y);

// sum = x + residual; y = rmsnorm(store(sum)) * weight, where store() is what storing the sum
// does to it (rounding to the dtype the kernels write the residual stream in; identity for an
// exact reference).
void residual_rmsnorm_reference(const double* x, const double* residual, const double* weight,
                                std::int64_t rows, std::int64_t cols, double eps,
                                const std::function<double(double)>& store, double* sum,
                                double* y);

void layernorm_reference(const double* x, const double* weight, const double* bias,
                         std::int64_t rows, std::int64_t cols, double eps, double* y);

// Safe softmax: exp(x - max) / sum(exp(x - max)).
void softmax_reference(const double* x, std::int64_t rows, std::int64_t cols, double* y);

void row_reduce_reference(RowReduction kind, const double* x, std::int64_t rows, std::int64_t cols,
                          double* out);

double activation_reference(Activation activation, double x);

// out[r][h] = silu(gate_up[r][h]) * gate_up[r][hidden + h]
void swiglu_reference(const double* gate_up, std::int64_t rows, std::int64_t hidden, double* out);

// Rotates `x` (tokens x heads x head_dim) in place; token t sits at positions[t].
void rope_reference(RopeLayout layout, double* x, std::int64_t tokens, std::int64_t heads,
                    std::int64_t head_dim, const double* positions, double base);

// The angle of pair i at `position`: position * base^(-2i / head_dim).
double rope_angle(double position, std::int64_t pair, std::int64_t head_dim, double base);

// The cos/sin table the RoPE kernels read ([positions, head_dim] floats: cos of pair i at [p][i],
// sin at [p][head_dim / 2 + i]) for positions 0 .. positions - 1, computed in double.
std::vector<float> rope_cos_sin_table(std::int64_t positions, std::int64_t head_dim, double base);

// out[t] = table[ids[t]]; throws kc::Error (bad_token_message) for an id outside [0, vocab).
void embedding_reference(const double* ids, const double* table, std::int64_t tokens,
                         std::int64_t vocab, std::int64_t hidden, double* out);

}  // namespace kc::stage2
