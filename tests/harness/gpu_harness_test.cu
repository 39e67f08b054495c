// The harness's GPU half: random fill, poison, read-back, the cuBLAS wrappers against the CPU
// reference, and timing sanity. Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "kc/common/blas.hpp"
#include "kc/common/check.hpp"
#include "kc/common/fill.hpp"
#include "kc/common/gemm.hpp"
#include "kc/stage1/sgemm.hpp"
#include "kc/stage1/register.hpp"
#include "support/gpu_test.hpp"

namespace kc {
namespace {

using testing::shared_context;

std::vector<double> random_values(DType t, std::size_t n, std::uint64_t seed, FillSpec spec = {}) {
  DeviceBuffer<std::byte> buffer(dtype_bytes(t, n));
  fill_random(buffer.data(), t, n, seed, spec, shared_context().stream());
  return to_host_double(buffer.data(), t, n, shared_context().stream());
}

TEST(DeviceFacts, AreFilledIn) {
  KC_SKIP_WITHOUT_GPU();
  const DeviceInfo& d = shared_context().device();
  EXPECT_FALSE(d.name.empty());
  EXPECT_GE(d.compute_capability(), 50);
  EXPECT_GT(d.sm_count, 0);
  EXPECT_GT(d.l2_bytes, 0);
  EXPECT_GT(d.max_sm_clock_khz, 0);
  EXPECT_GT(d.dram_peak_gbps(), 0);
  EXPECT_GT(d.runtime_version, 0);
  EXPECT_GT(d.cublas_version, 0);
  EXPECT_FALSE(d.slug().empty());
  std::printf("device: %s\n", d.summary().c_str());
}

TEST(RandomFill, IsSeededDeterministicAndNeverConstant) {
  KC_SKIP_WITHOUT_GPU();
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::f8e4m3, DType::i8, DType::i4}) {
    // integers draw from [a, b]: give them a range with more than three values in it
    const FillSpec spec = dtype_is_float(t) ? FillSpec::uniform(-1, 1) : FillSpec::uniform(-100, 100);
    const auto first = random_values(t, 4097, 11, spec);
    const auto again = random_values(t, 4097, 11, spec);
    const auto other = random_values(t, 4097, 12, spec);
    EXPECT_EQ(first, again) << dtype_name(t) << ": same seed, same values";
    EXPECT_NE(first, other) << dtype_name(t) << ": new seed, new values";
    const std::set<double> distinct(first.begin(), first.end());
    EXPECT_GT(distinct.size(), t == DType::i4 ? 10u : 100u) << dtype_name(t);  // i4 has 15 values
    const bool any_zero_run = std::all_of(first.begin(), first.end(), [](double v) { return v == 0; });
    EXPECT_FALSE(any_zero_run) << dtype_name(t);
  }
}

TEST(RandomFill, RespectsTheDistribution) {
  KC_SKIP_WITHOUT_GPU();
  const auto uniform = random_values(DType::f32, 1 << 20, 5, FillSpec::uniform(-2, 3));
  EXPECT_GE(*std::min_element(uniform.begin(), uniform.end()), -2.0);
  EXPECT_LT(*std::max_element(uniform.begin(), uniform.end()), 3.0);
  EXPECT_NEAR(std::accumulate(uniform.begin(), uniform.end(), 0.0) / uniform.size(), 0.5, 0.01);
  const auto normal = random_values(DType::f32, 1 << 20, 6, FillSpec::normal(1.0, 2.0));
  double mean = std::accumulate(normal.begin(), normal.end(), 0.0) / normal.size();
  double var = 0;
  for (double v : normal) var += (v - mean) * (v - mean);
  var /= normal.size();
  EXPECT_NEAR(mean, 1.0, 0.01);
  EXPECT_NEAR(std::sqrt(var), 2.0, 0.01);
  const auto ints = random_values(DType::i8, 1 << 16, 7, FillSpec::uniform(-5, 5));
  EXPECT_EQ(*std::min_element(ints.begin(), ints.end()), -5.0);
  EXPECT_EQ(*std::max_element(ints.begin(), ints.end()), 5.0);
}

TEST(Poison, FloatsBecomeNaNAndIntegersTheSentinel) {
  KC_SKIP_WITHOUT_GPU();
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::f8e4m3, DType::f8e5m2, DType::f64}) {
    DeviceBuffer<std::byte> buffer(dtype_bytes(t, 33));
    poison(buffer.data(), t, 33, shared_context().stream());
    for (double v : to_host_double(buffer.data(), t, 33, shared_context().stream()))
      ASSERT_TRUE(std::isnan(v)) << dtype_name(t);
  }
  DeviceBuffer<std::byte> ints(33);
  poison(ints.data(), DType::i8, 33, shared_context().stream());
  for (double v : to_host_double(ints.data(), DType::i8, 33, shared_context().stream())) ASSERT_EQ(v, -128.0);
}

TEST(CublasWrappers, SgemmMatchesTheCpuReferenceInBothLayouts) {
  KC_SKIP_WITHOUT_GPU();
  Context& context = shared_context();
  const GemmShape s{100, 70, 50};
  for (BLayout layout : {BLayout::k_by_n, BLayout::n_by_k}) {
    DeviceBuffer<float> a(s.m * s.k), b(s.k * s.n), c(s.m * s.n);
    fill_random(a, 1);
    fill_random(b, 2);
    fill_random(c, 3);
    const auto ha = to_host_double(a.data(), DType::f32, a.size());
    const auto hb = to_host_double(b.data(), DType::f32, b.size());
    const auto hc = to_host_double(c.data(), DType::f32, c.size());
    cublas_sgemm(context.cublas(), context.stream(), s, 1.5f, a.data(), b.data(), layout, -0.5f, c.data());
    std::vector<double> expected(s.m * s.n);
    gemm_reference(s, 1.5, ha.data(), hb.data(), layout, -0.5, hc.data(), expected.data());
    const auto got = to_host_double(c.data(), DType::f32, c.size(), context.stream());
    const CompareResult r = compare(got.data(), expected.data(), got.size(), tolerance_for(DType::f32),
                                    std::sqrt(50.0));
    EXPECT_TRUE(r.passed) << b_layout_name(layout) << ": " << r.summary();
  }
}

TEST(CublasWrappers, HalfPrecisionGemmExAndLtMatchTheReference) {
  KC_SKIP_WITHOUT_GPU();
  Context& context = shared_context();
  const GemmShape s{128, 96, 64};
  for (DType t : {DType::bf16, DType::f16}) {
    DeviceBuffer<std::byte> a(dtype_bytes(t, s.m * s.k)), b(dtype_bytes(t, s.n * s.k)),
        c(dtype_bytes(t, s.m * s.n)), c_lt(dtype_bytes(t, s.m * s.n));
    fill_random(a.data(), t, s.m * s.k, 1);
    fill_random(b.data(), t, s.n * s.k, 2);
    const auto ha = to_host_double(a.data(), t, s.m * s.k);
    const auto hb = to_host_double(b.data(), t, s.n * s.k);
    std::vector<double> expected(s.m * s.n);
    gemm_reference(s, 1.0, ha.data(), hb.data(), BLayout::n_by_k, 0.0, nullptr, expected.data());
    cublas_gemm_ex(context.cublas(), context.stream(), s, t, t, 1.f, a.data(), b.data(),
                   BLayout::n_by_k, 0.f, c.data());
    CublasLtGemm lt(context.cublaslt(), s, t, t, BLayout::n_by_k);
    lt.run(1.f, a.data(), b.data(), 0.f, c_lt.data(), context.stream());
    for (const auto* out : {&c, &c_lt}) {
      const auto got = to_host_double(out->data(), t, s.m * s.n, context.stream());
      const CompareResult r = compare(got.data(), expected.data(), got.size(), tolerance_for(t), 8.0);
      EXPECT_TRUE(r.passed) << dtype_name(t) << (out == &c ? " GemmEx: " : " Lt: ") << r.summary();
    }
  }
}

TEST(GemmReference, GpuFp64PathAgreesWithTheCpuPath) {
  KC_SKIP_WITHOUT_GPU();
  Context& context = shared_context();
  const OpSpec op = stage1::make_sgemm_op();
  const Problem problem{"sgemm", {67, 45, 123}, 0.75, 0.5};
  const Operands operands = op.make_operands(problem, 9, context);
  const std::int64_t saved = context.cpu_reference_limit;
  context.cpu_reference_limit = 1ll << 40;
  const auto cpu = op.reference(problem, operands, context).at("C");
  context.cpu_reference_limit = 0;
  const auto gpu = op.reference(problem, operands, context).at("C");
  context.cpu_reference_limit = saved;
  const CompareResult r = compare(gpu.data(), cpu.data(), cpu.size(), tolerance_for(DType::f64));
  EXPECT_TRUE(r.passed) << r.summary();
}

TEST(Baseline, CublasSgemmPassesTheSgemmCheck) {
  KC_SKIP_WITHOUT_GPU();
  const OpSpec op = stage1::make_sgemm_op();
  for (const Problem& p : op.conformance_problems) {
    const CheckOutcome outcome = check_baseline(op, p, 1, shared_context());
    EXPECT_TRUE(outcome.passed()) << p.label() << ": " << outcome.detail;
  }
}

__global__ void spin_kernel(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

TEST(Timing, MeasuresAKernelOfKnownLength) {
  KC_SKIP_WITHOUT_GPU();
  Context& context = shared_context();
  // ~200 microseconds at the peak clock; slower clocks only make it longer.
  const long long cycles = static_cast<long long>(context.device().max_sm_clock_khz) / 5;
  TimingConfig config;
  config.min_samples = 10;
  config.max_samples = 10;
  const TimingStats stats = time_launches(
      [&](cudaStream_t s) { spin_kernel<<<1, 1, 0, s>>>(cycles); }, context.stream(),
      &context.scrubber(), config, "tests/spin");
  EXPECT_EQ(stats.samples_ms.size(), 10u);
  EXPECT_GT(stats.median_ms, 0.19);
  EXPECT_LT(stats.median_ms, 2.0);
  EXPECT_LE(stats.min_ms, stats.median_ms);
  EXPECT_GE(stats.max_ms, stats.median_ms);
}

TEST(Timing, PairedTimingAlternatesAndTimesEachSideOnItsOwn) {
  KC_SKIP_WITHOUT_GPU();
  Context& context = shared_context();
  const long long short_cycles = static_cast<long long>(context.device().max_sm_clock_khz) / 5;  // ~0.2 ms
  TimingConfig config;
  config.min_samples = 6;
  config.max_samples = 6;
  std::vector<char> order;  // which side each launch (warm-ups included) was
  const PairedTimingStats both = time_launches_paired(
      [&](cudaStream_t s) { order.push_back('A'); spin_kernel<<<1, 1, 0, s>>>(short_cycles); }, "tests/short",
      [&](cudaStream_t s) { order.push_back('B'); spin_kernel<<<1, 1, 0, s>>>(3 * short_cycles); }, "tests/long",
      context.stream(), &context.scrubber(), config);
  ASSERT_EQ(both.first.samples_ms.size(), 6u);
  ASSERT_EQ(both.second.samples_ms.size(), 6u);
  // Warm-ups (2 + 2), then A B B A A B B A ...
  const std::string timed(order.begin() + 4, order.end());
  EXPECT_EQ(timed, "ABBAABBAABBA");
  // Each side's samples are its own: the long spin takes about three times the short one.
  EXPECT_GT(both.second.median_ms, 2.0 * both.first.median_ms);
  EXPECT_LT(both.second.median_ms, 4.5 * both.first.median_ms);
}

TEST(Timing, CopyBandwidthIsPlausible) {
  KC_SKIP_WITHOUT_GPU();
  Context& context = shared_context();
  const double gbps = context.copy_bandwidth_gbps();
  EXPECT_GT(gbps, 100.0);
  EXPECT_LT(gbps, context.device().dram_peak_gbps() * 1.02);
  std::printf("copy bandwidth: %.0f GB/s (DRAM peak %.0f GB/s)\n", gbps, context.device().dram_peak_gbps());
}

}  // namespace
}  // namespace kc
