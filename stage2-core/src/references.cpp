#include "kc/stage2/references.hpp"

#include <functional>
#include <vector>

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "kc/common/error.hpp"
#include "kc/core/gelu.hpp"
#include "kc/stage2/embedding.hpp"
#include "kc/common/parallel.hpp"

namespace kc::stage2 {
namespace {

// Calls row_body(row) for every row, rows spread over the host's cores.
template <typename RowBody>
void for_each_row(std::int64_t rows, std::int64_t cols, const RowBody& row_body) {
  parallel_for(rows, cols, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) row_body(r);
  });
}

// The maximum, NaN if any element is NaN (std::max would depend on the order).
double max_with_nan(const double* x, std::int64_t count) {
  double m = -std::numeric_limits<double>::infinity();
  for (std::int64_t i = 0; i < count; ++i) {
    if (std::isnan(x[i])) return x[i];
    m = x[i] > m ? x[i] : m;
  }
  return m;
}

double inverse_rms(const double* x, std::int64_t cols, double eps) {
  double sum_squares = 0.0;
  for (std::int64_t c = 0; c < cols; ++c) sum_squares += x[c] * x[c];
  return 1.0 / std::sqrt(sum_squares / static_cast<double>(cols) + eps);
}

double silu(double x) { return x / (1.0 + std::exp(-x)); }

}  // namespace

void rmsnorm_reference(const double* x, const double* weight, std::int64_t rows, std::int64_t cols,
                       double eps, double* y) {
  for_each_row(rows, cols, [&](std::int64_t r) {
    const double* row = x + r * cols;
    const double scale = inverse_rms(row, cols, eps);
    for (std::int64_t c = 0; c < cols; ++c) y[r * cols + c] = row[c] * scale * weight[c];
  });
}

void residual_rmsnorm_reference(const double* x, const double* residual, const double* weight,
                                std::int64_t rows, std::int64_t cols, double eps,
                                const std::function<double(double)>& store, double* sum,
                                double* y) {
  for_each_row(rows, cols, [&](std::int64_t r) {
    double* s = sum + r * cols;
    std::vector<double> stored(static_cast<std::size_t>(cols));
    for (std::int64_t c = 0; c < cols; ++c) {
      s[c] = x[r * cols + c] + residual[r * cols + c];
      stored[static_cast<std::size_t>(c)] = store(s[c]);
    }
    const double scale = inverse_rms(stored.data(), cols, eps);
    for (std::int64_t c = 0; c < cols; ++c) y[r * cols + c] = stored[static_cast<std::size_t>(c)] * scale * weight[c];
  });
}

void layernorm_reference(const double* x, const double* weight, const double* bias,
                         std::int64_t rows, std::int64_t cols, double eps, double* y) {
  for_each_row(rows, cols, [&](std::int64_t r) {
    const double* row = x + r * cols;
    double mean = 0.0;
    for (std::int64_t c = 0; c < cols; ++c) mean += row[c];
    mean /= static_cast<double>(cols);
    double variance = 0.0;  // two passes: no cancellation between E[x^2] and mean^2
    for (std::int64_t c = 0; c < cols; ++c) variance += (row[c] - mean) * (row[c] - mean);
    variance /= static_cast<double>(cols);
    const double inverse_std = 1.0 / std::sqrt(variance + eps);
    for (std::int64_t c = 0; c < cols; ++c)
      y[r * cols + c] = (row[c] - mean) * inverse_std * weight[c] + bias[c];
  });
}

void softmax_reference(const double* x, std::int64_t rows, std::int64_t cols, double* y) {
  for_each_row(rows, cols, [&](std::int64_t r) {
    const double* row = x + r * cols;
    double* out = y + r * cols;
    const double m = max_with_nan(row, cols);
    double sum = 0.0;
    for (std::int64_t c = 0; c < cols; ++c) {
      out[c] = std::exp(row[c] - m);
      sum += out[c];
    }
    for (std::int64_t c = 0; c < cols; ++c) out[c] /= sum;
  });
}

void row_reduce_reference(RowReduction kind, const double* x, std::int64_t rows, std::int64_t cols,
                          double* out) {
  for_each_row(rows, cols, [&](std::int64_t r) {
    const double* row = x + r * cols;
    double result = 0.0;
    switch (kind) {
      case RowReduction::max: result = max_with_nan(row, cols); break;
      case RowReduction::sum:
      case RowReduction::mean:
        for (std::int64_t c = 0; c < cols; ++c) result += row[c];
        if (kind == RowReduction::mean) result /= static_cast<double>(cols);
        break;
      case RowReduction::sum_squares:
        for (std::int64_t c = 0; c < cols; ++c) result += row[c] * row[c];
        break;
    }
    out[r] = result;
  });
}

double activation_reference(Activation activation, double x) {
  if (std::isnan(x)) return x;
  if (std::isinf(x)) return x > 0 ? x : 0.0;  // the limits: +inf -> +inf, -inf -> 0
  switch (activation) {
    case Activation::relu: return x < 0.0 ? 0.0 : x;
    case Activation::silu: return silu(x);
    // The formulas the kernels evaluate (kc/core/gelu.hpp), in double.
    case Activation::gelu_tanh: return core::gelu_tanh<core::ReferenceMath>(x);
    case Activation::gelu_erf: return core::gelu_erf<core::ReferenceMath>(x);
  }
  return x;
}

void swiglu_reference(const double* gate_up, std::int64_t rows, std::int64_t hidden, double* out) {
  for_each_row(rows, hidden, [&](std::int64_t r) {
    const double* gate = gate_up + r * 2 * hidden;
    const double* up = gate + hidden;
    for (std::int64_t h = 0; h < hidden; ++h)
      out[r * hidden + h] = activation_reference(Activation::silu, gate[h]) * up[h];
  });
}

std::vector<float> rope_cos_sin_table(std::int64_t positions, std::int64_t head_dim, double base) {
  const std::int64_t half = head_dim / 2;
  std::vector<float> table(static_cast<std::size_t>(positions * head_dim));
  for (std::int64_t p = 0; p < positions; ++p)
    for (std::int64_t i = 0; i < half; ++i) {
      const double angle = rope_angle(static_cast<double>(p), i, head_dim, base);
      table[static_cast<std::size_t>(p * head_dim + i)] = static_cast<float>(std::cos(angle));
      table[static_cast<std::size_t>(p * head_dim + half + i)] = static_cast<float>(std::sin(angle));
    }
  return table;
}

double rope_angle(double position, std::int64_t pair, std::int64_t head_dim, double base) {
  return position * std::pow(base, -2.0 * static_cast<double>(pair) / static_cast<double>(head_dim));
}

void rope_reference(RopeLayout layout, double* x, std::int64_t tokens, std::int64_t heads,
                    std::int64_t head_dim, const double* positions, double base) {
  const std::int64_t half = head_dim / 2;
  for_each_row(tokens, heads * head_dim, [&](std::int64_t t) {
    for (std::int64_t h = 0; h < heads; ++h) {
      double* head = x + (t * heads + h) * head_dim;
      for (std::int64_t i = 0; i < half; ++i) {
        const double angle = rope_angle(positions[t], i, head_dim, base);
        const double c = std::cos(angle), s = std::sin(angle);
        double& a = layout == RopeLayout::rotate_half ? head[i] : head[2 * i];
        double& b = layout == RopeLayout::rotate_half ? head[i + half] : head[2 * i + 1];
        const double rotated_a = a * c - b * s;
        const double rotated_b = b * c + a * s;
        a = rotated_a;
        b = rotated_b;
      }
    }
  });
}

std::string bad_token_message(std::int64_t position, std::int64_t id, std::int64_t vocab) {
  return fmt::format(
      "embedding: token id {} at position {} is outside the vocabulary [0, {}); its output row was "
      "zero-filled and nothing outside the table was read (check the tokenizer's vocabulary size "
      "against the embedding table's rows)",
      id, position, vocab);
}

void embedding_reference(const double* ids, const double* table, std::int64_t tokens,
                         std::int64_t vocab, std::int64_t hidden, double* out) {
  for (std::int64_t t = 0; t < tokens; ++t)
    if (!(ids[t] >= 0 && ids[t] < static_cast<double>(vocab)))
      throw Error(bad_token_message(t, static_cast<std::int64_t>(ids[t]), vocab));
  for_each_row(tokens, hidden, [&](std::int64_t t) {
    const double* row = table + static_cast<std::int64_t>(ids[t]) * hidden;
    for (std::int64_t h = 0; h < hidden; ++h) out[t * hidden + h] = row[h];
  });
}

}  // namespace kc::stage2
