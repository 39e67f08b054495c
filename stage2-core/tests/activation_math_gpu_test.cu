// The kernels' own transcendental arithmetic against double, element by element on dense grids:
// KernelMath::normal_cdf (kc/core/gelu.hpp: erfc(z)/2 as a fitted polynomial in t = 1/(1 + z/2)
// times 2^(-z^2 log2 e), rcp and ex2 on the MUFU unit), GELU-erf built on it, and the Silu functor (ex2 and the
// approximate division). The op-level checks judge these inside whole kernels against the output
// type's tolerance; here the bounds are the functions' own, far tighter than bf16 or f16 needs, so
// a wrong coefficient or a lost sign branch fails even where a 16-bit output would hide it.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kc/common/buffer.hpp"
#include "kc/common/error.hpp"
#include "kc/core/elementwise.cuh"
#include "kc/core/gelu.hpp"
#include "support/gpu_test.hpp"

namespace kc::stage2 {
namespace {

enum class Function { normal_cdf, gelu_erf, silu };

__global__ void evaluate_kernel(Function function, const float* x, float* y, int count) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= count) return;
  switch (function) {
    case Function::normal_cdf: y[i] = core::KernelMath::normal_cdf(x[i]); break;
    case Function::gelu_erf: y[i] = core::GeluErf{}(x[i]); break;
    case Function::silu: y[i] = core::Silu{}(x[i]); break;
  }
}

std::vector<float> evaluate(Function function, const std::vector<float>& x) {
  DeviceBuffer<float> input(x.size()), output(x.size());
  input.copy_from_host(x, nullptr);
  const int count = static_cast<int>(x.size());
  evaluate_kernel<<<(count + 255) / 256, 256>>>(function, input.data(), output.data(), count);
  KC_CHECK_LAUNCH();
  KC_CUDA_CHECK(cudaDeviceSynchronize());
  return output.to_host();
}

std::vector<float> grid(float low, float high, int points) {
  std::vector<float> x(static_cast<std::size_t>(points));
  for (int i = 0; i < points; ++i)
    x[static_cast<std::size_t>(i)] = low + (high - low) * static_cast<float>(i) / static_cast<float>(points - 1);
  return x;
}

TEST(KernelMath, NormalCdfMatchesDoubleWithinItsStatedBounds) {
  KC_SKIP_WITHOUT_GPU();
  // The bounds of gelu.hpp on erfc(z)/2 (z = |x| / sqrt 2), with a margin for rcp/ex2's own
  // rounding: relative 1e-5 for z <= 4, 4e-5 up to z = 9 (beyond 9.2 the tail is below float's
  // normal range and flushes to 0). For x < 0 that is
  // Phi(x) itself; for x > 0, Phi(x) = 1 - erfc(z)/2 and the same absolute error.
  const std::vector<float> x = grid(-12.7f, 12.7f, 400001);
  const std::vector<float> y = evaluate(Function::normal_cdf, x);
  double worst[2] = {0, 0};
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    const double half_erfc = 0.5 * std::erfc(std::abs(v) / std::sqrt(2.0));  // the tail, either side
    const double got_tail = v < 0 ? y[i] : 1.0 - static_cast<double>(y[i]);
    const double z = std::abs(v) / std::sqrt(2.0);
    double& slot = worst[z <= 4 ? 0 : 1];
    if (v < 0) {
      slot = std::max(slot, std::abs(got_tail - half_erfc) / half_erfc);
    } else {  // 1 - tail in float: one rounding of a value near 1 on top
      slot = std::max(slot, (std::abs(got_tail - half_erfc) - 6e-8) / half_erfc);
    }
  }
  EXPECT_LT(worst[0], 1e-5);
  EXPECT_LT(worst[1], 4e-5);
}

TEST(KernelMath, NormalCdfLimitsAndNan) {
  KC_SKIP_WITHOUT_GPU();
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const std::vector<float> y = evaluate(Function::normal_cdf, {0.f, -15.f, -80.f, -kInf, 15.f, kInf, std::nanf("")});
  EXPECT_NEAR(y[0], 0.5f, 1e-5f);  // the fit's 7.6e-6 relative error of erfc(0)/2
  EXPECT_EQ(y[1], 0.f);  // Phi(-15) = 4e-51: below float's normal range, flushed
  EXPECT_EQ(y[2], 0.f);
  EXPECT_EQ(y[3], 0.f);
  EXPECT_EQ(y[4], 1.f);
  EXPECT_EQ(y[5], 1.f);
  EXPECT_TRUE(std::isnan(y[6]));
}

TEST(KernelMath, GeluErfAndSiluMatchDouble) {
  KC_SKIP_WITHOUT_GPU();
  // Bound: relative 1e-5 (GELU-erf) or 3e-6 (SiLU) of the value plus 1e-7 of |x| (absolute, for
  // the tails where the value is far below its input) — an f32 output's tolerance floor is 1e-5.
  const std::vector<float> x = grid(-20.f, 20.f, 200001);
  const std::vector<float> gelu = evaluate(Function::gelu_erf, x);
  const std::vector<float> silu = evaluate(Function::silu, x);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    const double gelu_exact = 0.5 * v * std::erfc(-v / std::sqrt(2.0));
    const double silu_exact = v / (1.0 + std::exp(-v));
    ASSERT_NEAR(gelu[i], gelu_exact, 1e-5 * std::abs(gelu_exact) + 1e-7 * std::abs(v)) << "gelu_erf at x = " << v;
    ASSERT_NEAR(silu[i], silu_exact, 3e-6 * std::abs(silu_exact) + 1e-7 * std::abs(v)) << "silu at x = " << v;
  }
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const std::vector<float> limits = {kInf, -kInf, -100.f, std::nanf("")};
  const std::vector<float> g = evaluate(Function::gelu_erf, limits);
  const std::vector<float> s = evaluate(Function::silu, limits);
  EXPECT_EQ(g[0], kInf);
  EXPECT_EQ(g[1], 0.f);
  EXPECT_EQ(g[2], 0.f);
  EXPECT_TRUE(std::isnan(g[3]));
  EXPECT_EQ(s[0], kInf);
  EXPECT_EQ(s[1], 0.f);
  EXPECT_EQ(s[2], 0.f);
  EXPECT_TRUE(std::isnan(s[3]));
}

}  // namespace
}  // namespace kc::stage2
