// The device GELU of rung 10 and of its unfused baseline (epilogue.cuh: gelu_tanh, evaluated as
// x / (1 + exp(-2u))) against the double-precision tanh form, on a dense sweep of x. The bf16
// conformance tolerance (rtol 1.6e-2) cannot tell a float-accurate GELU from one that loses its
// digits in the negative tail, so the accuracy is checked here on FP32 values directly; a negative
// control, the cancelling 0.5 x (1 + tanh.approx(u)), must fail the same bound. Skips without a
// GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "epilogue.cuh"
#include "hgemm.hpp"
#include "kc/common/gemm.hpp"
#include "kc/stage3/register.hpp"
#include "kc/common/buffer.hpp"
#include "kc/common/error.hpp"
#include "support/gpu_test.hpp"

namespace kc::stage3 {
namespace {

constexpr int kThreads = 256;

__global__ void gelu_kernel(const float* x, float* y, int count) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) y[i] = gelu_tanh(x[i]);
}

// The form gelu_tanh avoids: for x << 0, 1 + tanh(u) cancels and tanh.approx's 2^-11 relative
// error becomes the whole result.
__global__ void gelu_tanh_approx_kernel(const float* x, float* y, int count) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= count) return;
  const float u = 0.7978845608028654f * (x[i] + 0.044715f * x[i] * x[i] * x[i]);
  float tanh_u;
  asm("tanh.approx.f32 %0, %1;" : "=f"(tanh_u) : "f"(u));
  y[i] = 0.5f * x[i] * (1.f + tanh_u);
}

using GeluKernel = void (*)(const float*, float*, int);

std::vector<float> run_on_gpu(GeluKernel kernel, const std::vector<float>& x) {
  DeviceBuffer<float> x_device(x.size()), y_device(x.size());
  x_device.copy_from_host(x);
  const int count = static_cast<int>(x.size());
  kernel<<<(count + kThreads - 1) / kThreads, kThreads>>>(x_device.data(), y_device.data(), count);
  KC_CHECK_LAUNCH();
  return y_device.to_host();
}

// x from `low` to `high` in steps of 1/256 (exact in float).
std::vector<float> sweep(float low, float high) {
  std::vector<float> x;
  for (float v = low; v <= high; v += 1.f / 256) x.push_back(v);
  return x;
}

// The largest |y - ref| / |ref| where |ref| >= 1e-36, and the largest |y - ref| where it is
// smaller (there the result is at the bottom of float's range, and zero is an acceptable answer).
struct Errors {
  double relative = 0, absolute_near_zero = 0;
};

Errors errors(const std::vector<float>& x, const std::vector<float>& y) {
  Errors worst;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double ref = gelu_tanh_reference(x[i]);
    const double error = std::fabs(static_cast<double>(y[i]) - ref);
    if (std::fabs(ref) < 1e-36)
      worst.absolute_near_zero = std::max(worst.absolute_near_zero, error);
    else
      worst.relative = std::max(worst.relative, error / std::fabs(ref));
  }
  return worst;
}

TEST(GeluDevice, MatchesTheTanhFormToFloatAccuracy) {
  KC_SKIP_WITHOUT_GPU();
  // Where the bulk of the activations lie, and the whole positive side.
  const std::vector<float> core = sweep(-2.f, 12.f);
  const Errors core_errors = errors(core, run_on_gpu(&gelu_kernel, core));
  EXPECT_LT(core_errors.relative, 2e-6);
  EXPECT_LE(core_errors.absolute_near_zero, 1e-36);
  // The negative tail down to where exp(-2u) overflows (x ~ -10) and beyond: the exponent's
  // rounding error grows with its size (~|exponent| x 2^-24), up to ~2e-5 at the overflow edge,
  // still a hundred times below bf16's resolution.
  const std::vector<float> tail = sweep(-12.f, -2.f);
  const Errors tail_errors = errors(tail, run_on_gpu(&gelu_kernel, tail));
  EXPECT_LT(tail_errors.relative, 3e-5);
  EXPECT_LE(tail_errors.absolute_near_zero, 1e-36);
}

TEST(GeluDevice, SpecialValuesFollowTheReference) {
  KC_SKIP_WITHOUT_GPU();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {0.f, -0.f, 1e-3f, -1e-3f, 1e3f, -1e3f, inf, -inf, std::nanf("")};
  const std::vector<float> y = run_on_gpu(&gelu_kernel, x);
  EXPECT_EQ(y[0], 0.f);
  EXPECT_EQ(y[1], 0.f);
  EXPECT_NEAR(y[2], gelu_tanh_reference(1e-3), 2e-6 * gelu_tanh_reference(1e-3));
  EXPECT_NEAR(y[3], gelu_tanh_reference(-1e-3), 2e-6 * -gelu_tanh_reference(-1e-3));
  EXPECT_FLOAT_EQ(y[4], 1e3f);
  EXPECT_EQ(y[5], 0.f);         // -1000 / inf = -0
  EXPECT_EQ(y[6], inf);         // inf / (1 + 0)
  EXPECT_TRUE(std::isnan(y[7]));  // -inf . 0, as in 0.5 x (1 + tanh u)
  EXPECT_TRUE(std::isnan(y[8]));
  EXPECT_TRUE(std::isnan(gelu_tanh_reference(-std::numeric_limits<double>::infinity())));
}

TEST(GeluDevice, NegativeControlTheCancellingTanhApproxFormFailsInTheTail) {
  KC_SKIP_WITHOUT_GPU();
  const std::vector<float> tail = sweep(-12.f, -2.f);
  EXPECT_GT(errors(tail, run_on_gpu(&gelu_tanh_approx_kernel, tail)).relative, 1e-2);
}

}  // namespace
}  // namespace kc::stage3
