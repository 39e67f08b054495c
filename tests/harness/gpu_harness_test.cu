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
#include "kc/stage3/register.hpp"
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
    Accuracy accuracy{DType::f32};
    accuracy.terms = 50;
    const CompareResult r = compare(got.data(), expected.data(), got.size(), accuracy);
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
      Accuracy accuracy{t};
      accuracy.terms = static_cast<double>(s.k);
      const CompareResult r = compare(got.data(), expected.data(), got.size(), accuracy);
      EXPECT_TRUE(r.passed) << dtype_name(t) << (out == &c ? " GemmEx: " : " Lt: ") << r.summary();
    }
  }
}

// The CPU double reference and cuBLAS FP64 on the GPU agree, for B stored K x N (sgemm) and
// N x K ("TN", stage 3's hgemm), with alpha and beta.
TEST(GemmReference, GpuFp64PathAgreesWithTheCpuPathInBothLayoutsOfB) {
  KC_SKIP_WITHOUT_GPU();
  Context& context = shared_context();
  for (const OpSpec& op : {stage1::make_sgemm_op(), stage3::make_hgemm_op()}) {
    const Problem problem = op.problem({67, 45, 123}, op.dtypes.front(), {{"alpha", 0.75}, {"beta", 0.5}});
    const Operands operands = op.make_operands(problem, 9, context);
    const std::int64_t saved = context.cpu_reference_limit;
    context.cpu_reference_limit = 1ll << 40;
    const std::vector<double> cpu = op.reference(problem, operands, context).at("C").to_host(context.stream());
    context.cpu_reference_limit = 0;
    const std::vector<double> gpu = op.reference(problem, operands, context).at("C").to_host(context.stream());
    context.cpu_reference_limit = saved;
    Accuracy fp64{DType::f64};
    fp64.terms = 123;
    const CompareResult r = compare(gpu.data(), cpu.data(), cpu.size(), fp64);
    EXPECT_TRUE(r.passed) << op.name << ": " << r.summary();
    EXPECT_LT(r.rel_frobenius, 1e-13) << op.name;
  }
}

// compare_on_device reduces on the GPU what compare() computes on the host: the same verdict,
// counts, first bad element and errors, in every floating output type, with planted errors.
TEST(CompareOnDevice, AgreesWithTheHostCompare) {
  KC_SKIP_WITHOUT_GPU();
  Context& context = shared_context();
  const std::size_t count = 300007;
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::f8e4m3}) {
    DeviceBuffer<std::byte> out(dtype_bytes(t, count));
    fill_random(out.data(), t, count, 5, FillSpec::normal(0.0, 2.0), context.stream());
    std::vector<double> ref = to_host_double(out.data(), t, count, context.stream());
    for (const auto& [planted, correct] : std::vector<std::pair<bool, bool>>{{false, true}, {true, false}}) {
      (void)correct;
      std::vector<double> reference = ref;
      if (planted) {
        reference[1234] += 0.5;
        reference[99999] = std::nan("");
        reference[count - 1] *= 1.5;
      }
      DeviceBuffer<double> device_ref(count);
      device_ref.copy_from_host(reference, context.stream());
      Accuracy accuracy{t};
      accuracy.terms = 17;
      const CompareResult host = compare(ref.data(), reference.data(), count, accuracy);
      const CompareResult device = compare_on_device(out.data(), t, device_ref.data(), count, accuracy,
                                                     context.stream());
      EXPECT_EQ(device.passed, host.passed) << dtype_name(t);
      EXPECT_EQ(device.passed, !planted) << dtype_name(t) << ": " << device.summary();
      EXPECT_EQ(device.mismatches, host.mismatches) << dtype_name(t);
      EXPECT_EQ(device.nonfinite_mismatches, host.nonfinite_mismatches) << dtype_name(t);
      EXPECT_EQ(device.first_bad_index, host.first_bad_index) << dtype_name(t);
      EXPECT_EQ(device.first_bad_out, host.first_bad_out) << dtype_name(t);
      EXPECT_NEAR(device.max_abs_error, host.max_abs_error, 1e-12) << dtype_name(t);
      EXPECT_NEAR(device.tolerance.atol, host.tolerance.atol, 1e-9 * host.tolerance.atol + 1e-300)
          << dtype_name(t);
      if (!planted) EXPECT_EQ(device.rel_frobenius, 0.0) << dtype_name(t);
    }
  }
}

// A write one element past an output's end lands in its guard bytes and fails the check.
__global__ void write_past_the_end_kernel(float* c, int count) { c[count] = 1.0f; }

TEST(Guards, AWritePastAnOutputFailsTheCheck) {
  KC_SKIP_WITHOUT_GPU();
  const OpSpec op = stage1::make_sgemm_op();
  const Problem problem = gemm_problem("sgemm", {31, 33, 35}, DType::f32);
  const CheckOutcome correct_then_overflow = check_run(
      op,
      [&](const Problem& p, Operands& o, Context& c) {
        op.baseline(p, o, c);
        write_past_the_end_kernel<<<1, 1, 0, c.stream()>>>(o["C"].data<float>(), 31 * 33);
      },
      problem, 3, shared_context());
  EXPECT_EQ(correct_then_overflow.status, CheckOutcome::Status::failed);
  EXPECT_NE(correct_then_overflow.detail.find("guard bytes around 'C'"), std::string::npos)
      << correct_then_overflow.detail;
  const CheckOutcome correct = check_run(op, op.baseline, problem, 3, shared_context());
  EXPECT_TRUE(correct.passed()) << correct.detail;
}

// reset_operands gives operands back the values make_operands gave them: what lets kc-bench
// check the output of its last timed launch.
TEST(Operands, ResetRestoresInputsAndPoisonsOutputs) {
  KC_SKIP_WITHOUT_GPU();
  Context& context = shared_context();
  const OpSpec op = stage1::make_sgemm_op();
  const Problem problem = gemm_problem("sgemm", {20, 30, 40}, DType::f32, 1.0, 0.5);
  Operands fresh = op.make_operands(problem, 4, context);
  Operands used = op.make_operands(problem, 4, context);
  op.baseline(problem, used, context);
  fill_random(used["A"].raw(), DType::f32, used["A"].count(), 99, FillSpec{}, context.stream());
  op.reset_operands(problem, used, 4, context);
  for (const char* name : {"A", "B", "C"}) {
    const auto a = to_host_double(fresh[name].raw(), DType::f32, fresh[name].count(), context.stream());
    const auto b = to_host_double(used[name].raw(), DType::f32, used[name].count(), context.stream());
    EXPECT_EQ(a, b) << name;
  }
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
