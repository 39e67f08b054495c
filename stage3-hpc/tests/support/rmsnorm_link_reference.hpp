// The check of a decode-chain link with the RMSNorm inside and beta = 1, shared by the GGUF
// (rungs 07 and 08) and int4 (rung 04) link tests: one weight's y against the double reference
// sum_k w x_k g_k / rms + y_old on the bf16 inputs and the weight as dequantized, within
// 2^-8 (sum_k |w x_k g_k| / rms + |y_old|) + 1e-6 (x . g rounded once to bf16, the output once).
// The same reference without the 1 / RMS is counted too: a test holds it to failing most outputs,
// so that a link that skipped the norm's factor could not pass.
#pragma once

#include <cuda_bf16.h>

#include <cmath>
#include <cstddef>
#include <vector>

namespace kc::stage3::link_test {

struct RmsNormLinkCount {
  int failures = 0;          // outputs outside the bound of the reference
  int control_failures = 0;  // outputs outside the bound of the reference without 1 / RMS
  int outputs = 0;
  RmsNormLinkCount& operator+=(const RmsNormLinkCount& other) {
    failures += other.failures;
    control_failures += other.control_failures;
    outputs += other.outputs;
    return *this;
  }
};

// `dequantized` [n, k], `got` and `y_old` [m, n], `rows` [m, k] (x as the link read it),
// `norm` [k].
inline RmsNormLinkCount count_rmsnorm_link(int m, int n, int k, float eps, const std::vector<double>& dequantized,
                                           const std::vector<float>& got, const std::vector<float>& y_old,
                                           const std::vector<__nv_bfloat16>& rows,
                                           const std::vector<__nv_bfloat16>& norm) {
  RmsNormLinkCount count;
  for (int r = 0; r < m; ++r) {
    double squares = 0.0;
    for (int i = 0; i < k; ++i) {
      const double v = __bfloat162float(rows[static_cast<std::size_t>(r) * k + i]);
      squares += v * v;
    }
    const double inv_rms = 1.0 / std::sqrt(squares / k + eps);
    for (int c = 0; c < n; ++c) {
      double sum = 0.0, magnitude = 0.0;
      for (int i = 0; i < k; ++i) {
        const double term = dequantized[static_cast<std::size_t>(c) * k + i] *
                            __bfloat162float(rows[static_cast<std::size_t>(r) * k + i]) * __bfloat162float(norm[i]);
        sum += term;
        magnitude += std::fabs(term);
      }
      const std::size_t at = static_cast<std::size_t>(r) * n + c;
      const double old = y_old[at];
      const double bound = std::ldexp(magnitude * inv_rms + std::fabs(old), -8) + 1e-6;
      count.failures += !(std::fabs(got[at] - (sum * inv_rms + old)) <= bound);
      count.control_failures += !(std::fabs(got[at] - (sum + old)) <= bound);
      ++count.outputs;
    }
  }
  return count;
}

}  // namespace kc::stage3::link_test
