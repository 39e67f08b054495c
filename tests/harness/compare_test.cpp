// Tolerance logic: the per-element bound, the Frobenius bound, NaN/Inf handling, and the one
// tolerance table derived from rounding (compare.hpp).
#include <gtest/gtest.h>

#include <cuda_bf16.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kc/common/compare.hpp"

namespace kc {
namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

CompareResult run(const std::vector<double>& out, const std::vector<double>& ref, Tolerance tol) {
  return compare(out.data(), ref.data(), out.size(), tol);
}

// The f32 table entry for a reference of rms 1.
Tolerance f32_tolerance() { return tolerance_for(Accuracy{DType::f32}, 1.0); }

TEST(Compare, IdenticalArraysPassWithZeroError) {
  const std::vector<double> ref{1.0, -2.5, 3.25, 0.0};
  const CompareResult r = run(ref, ref, f32_tolerance());
  EXPECT_TRUE(r.passed);
  EXPECT_EQ(r.mismatches, 0u);
  EXPECT_EQ(r.rel_frobenius, 0.0);
  EXPECT_EQ(r.count, 4u);
}

TEST(Compare, OneElementOutsideItsBoundFailsAndIsNamed) {
  const std::vector<double> ref{1.0, 2.0, 3.0, 4.0};
  std::vector<double> out = ref;
  out[2] = 3.001;  // error 1e-3, far above f32's ~1e-5 (1 + 3)
  const CompareResult r = run(out, ref, f32_tolerance());
  EXPECT_FALSE(r.passed);
  EXPECT_EQ(r.mismatches, 1u);
  EXPECT_EQ(r.first_bad_index, 2u);
  EXPECT_DOUBLE_EQ(r.first_bad_out, 3.001);
  EXPECT_DOUBLE_EQ(r.first_bad_ref, 3.0);
  EXPECT_NE(r.summary().find("first at index 2"), std::string::npos) << r.summary();
}

TEST(Compare, ElementBoundIsAtolPlusRtolTimesRef) {
  const Tolerance tol{0.2, 0.01, 1.0};
  // bound at ref = 10: 0.2 + 0.01 * 10 = 0.3
  EXPECT_TRUE(run({10.29}, {10.0}, tol).passed);
  EXPECT_FALSE(run({10.31}, {10.0}, tol).passed);
}

TEST(Compare, UnwrittenPoisonedElementFails) {
  const std::vector<double> ref{1.0, 2.0, 3.0};
  const std::vector<double> out{1.0, kNaN, 3.0};
  const CompareResult r = compare(out.data(), ref.data(), out.size(), Accuracy{DType::bf16});
  EXPECT_FALSE(r.passed);
  EXPECT_EQ(r.mismatches, 1u);
  EXPECT_EQ(r.nonfinite_mismatches, 1u);
  EXPECT_TRUE(std::isnan(r.rel_frobenius));
}

TEST(Compare, NaNAndInfMustMatchWhereTheReferenceHasThem) {
  const Tolerance tol = f32_tolerance();
  EXPECT_TRUE(run({kNaN, kInf, -kInf}, {kNaN, kInf, -kInf}, tol).passed);
  EXPECT_FALSE(run({1.0}, {kNaN}, tol).passed);   // NaN expected, finite produced
  EXPECT_FALSE(run({kInf}, {-kInf}, tol).passed); // wrong sign of infinity
  EXPECT_FALSE(run({1e30}, {kInf}, tol).passed);  // finite where infinity is expected
  EXPECT_FALSE(run({kInf}, {1.0}, tol).passed);   // overflow where a finite value is expected
}

TEST(Compare, SmallErrorEverywhereFailsTheFrobeniusBoundAlone) {
  // Every element within rtol = 1e-2, but a uniform 5e-3 relative error is far above
  // max_rel_frobenius = 1e-3: the signature of a kernel computing in too low a precision.
  const Tolerance tol{0.0, 1e-2, 1e-3};
  std::vector<double> ref, out;
  for (int i = 1; i <= 100; ++i) {
    ref.push_back(i);
    out.push_back(i * 1.005);
  }
  const CompareResult r = run(out, ref, tol);
  EXPECT_EQ(r.mismatches, 0u);
  EXPECT_NEAR(r.rel_frobenius, 5e-3, 1e-9);
  EXPECT_FALSE(r.passed);
}

TEST(Compare, AllZeroReferenceIsJudgedOnAbsoluteError) {
  const Tolerance tol{1e-3, 0.0, 1e-3};
  EXPECT_TRUE(run({0.0, 0.0}, {0.0, 0.0}, tol).passed);
  EXPECT_FALSE(run({0.0, 0.5}, {0.0, 0.0}, tol).passed);
}

TEST(Compare, EmptyInputPasses) {
  const CompareResult r = compare(nullptr, nullptr, 0, f32_tolerance());
  EXPECT_TRUE(r.passed);
}

TEST(Compare, ReferenceRmsIgnoresNonFiniteValues) {
  const std::vector<double> ref{3.0, -4.0, kNaN, kInf};
  EXPECT_DOUBLE_EQ(reference_rms(ref.data(), ref.size()), std::sqrt(12.5));
}

TEST(ToleranceTable, FollowsTheUnitRoundoffOfTheOutput) {
  const double u_bf16 = std::ldexp(1.0, -8);
  const Tolerance bf16 = tolerance_for(Accuracy{DType::bf16}, 10.0);
  EXPECT_NEAR(bf16.rtol, u_bf16, 1e-6);           // one rounding: half an ulp <= 2^-8 |ref|
  EXPECT_NEAR(bf16.atol, u_bf16 * 10.0, 1e-5);    // 2^-8 rms(ref)
  EXPECT_NEAR(bf16.max_rel_frobenius, u_bf16, 1e-6);
  EXPECT_LT(bf16.max_rel_frobenius, 4e-3);
  // fp16 is eight times tighter; a second rounding doubles the relative part only.
  EXPECT_NEAR(tolerance_for(Accuracy{DType::f16}, 10.0).rtol * 8.0, bf16.rtol, 1e-5);
  Accuracy twice{DType::bf16};
  twice.roundings = 2;
  EXPECT_NEAR(tolerance_for(twice, 10.0).rtol, 2.0 * u_bf16, 1e-6);
  EXPECT_NEAR(tolerance_for(twice, 10.0).atol, bf16.atol, 1e-9);
  // Long FP32 sums widen the bound like sqrt(terms): 40000 terms stay well inside bf16's rounding.
  Accuracy long_sum{DType::bf16};
  long_sum.terms = 40000;
  EXPECT_LT(tolerance_for(long_sum, 1.0).rtol, 1.05 * u_bf16);
  EXPECT_GT(tolerance_for(long_sum, 1.0).rtol, u_bf16);
}

TEST(ToleranceTable, Fp32AllowsFastIntrinsicsButNotFp16Inputs) {
  const Tolerance f32 = f32_tolerance();
  EXPECT_GE(f32.rtol, 1e-5);
  // fp16 rounding of inputs (relative error ~ 3e-4) must not pass as FP32.
  EXPECT_LT(f32.max_rel_frobenius, 3e-4 / 10);
  // A 40000-long FP32 sum (the naive row reduction): a random walk of 0.6 u sqrt(n) ~ 7e-6
  // relative must pass.
  Accuracy sum{DType::f32};
  sum.terms = 40000;
  EXPECT_GT(tolerance_for(sum, 1.0).max_rel_frobenius, 3.0 * 8.81e-6);
}

TEST(ToleranceTable, IntegersAreExactAndSubnormalsAreResolvable) {
  for (DType t : {DType::i8, DType::i4, DType::i32}) {
    const Tolerance tol = tolerance_for(Accuracy{t}, 100.0);
    EXPECT_EQ(tol.atol, 0.0);
    EXPECT_EQ(tol.rtol, 0.0);
    EXPECT_EQ(tol.max_rel_frobenius, 0.0);
  }
  // fp16 cannot resolve less than half its subnormal spacing, whatever the reference's size.
  EXPECT_GE(tolerance_for(Accuracy{DType::f16}, 1e-12).atol, std::ldexp(1.0, -25));
  EXPECT_LT(tolerance_for(Accuracy{DType::f16}, 1e-12).atol, std::ldexp(1.0, -25) * 1.001);
}

// In bf16's subnormal range (spacing 2^-133) a reference just past half a spacing, whose FP32 sum
// came out a little below it, rounds to 0 instead of one spacing: the half spacing of the rounding
// and the FP32 error add, and the check must take both (a kc FP8 GEMM and cuBLASLt's both did this
// on a scale that put C there). Two spacings off still fails.
TEST(ToleranceTable, ASubnormalOutputMayRoundToEitherNeighbourOfAnFp32SumThatIsALittleOff) {
  const double spacing = std::ldexp(1.0, -133);
  const double ref = 0.51 * spacing, rms = 10.0 * spacing;
  Accuracy gemm{DType::bf16};
  gemm.terms = 400;
  const Tolerance t = tolerance_for(gemm, rms);
  const auto passes = [&](double out) { return std::fabs(out - ref) <= t.atol + t.rtol * std::fabs(ref); };
  EXPECT_TRUE(passes(spacing));  // the reference's own rounding
  EXPECT_TRUE(passes(0.0));      // an FP32 sum 2 % low, rounded
  EXPECT_FALSE(passes(2.0 * spacing));
  EXPECT_FALSE(passes(-spacing));
}

// The bounds against realistic bf16 bugs, on the host with bf16 rounding: a GEMM of K = 4096
// uniform(-1, 1) products per output, rounded once to bf16, passes; the same GEMM missing one k
// column, or with two bf16 partial sums (split-K with 16-bit partials), fails. The GPU negative
// controls prove the same on the kernels at the benchmark shapes.
double to_bf16(double x) { return static_cast<double>(__bfloat162float(__double2bfloat16(x))); }

struct Products {
  std::vector<double> ref, correct, missing_k, split_bf16;
};

Products bf16_gemm_rows(int outputs, int k) {
  std::mt19937_64 random(7);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  Products p;
  for (int i = 0; i < outputs; ++i) {
    double sum = 0.0, first_half = 0.0, last = 0.0;
    for (int j = 0; j < k; ++j) {
      const double term = to_bf16(uniform(random)) * to_bf16(uniform(random));
      sum += term;
      if (j < k / 2) first_half += term;
      last = term;
    }
    p.ref.push_back(sum);
    p.correct.push_back(to_bf16(sum));
    p.missing_k.push_back(to_bf16(sum - last));
    p.split_bf16.push_back(to_bf16(to_bf16(first_half) + to_bf16(sum - first_half)));
  }
  return p;
}

TEST(ToleranceTable, Bf16BoundsCatchADroppedColumnAndSixteenBitPartialsButPassRounding) {
  const int k = 4096;
  const Products p = bf16_gemm_rows(20000, k);
  Accuracy accuracy{DType::bf16};
  accuracy.terms = k;
  const auto judge = [&](const std::vector<double>& out) {
    return compare(out.data(), p.ref.data(), out.size(), accuracy);
  };
  const CompareResult correct = judge(p.correct);
  EXPECT_TRUE(correct.passed) << correct.summary();
  EXPECT_FALSE(judge(p.missing_k).passed);
  const CompareResult split = judge(p.split_bf16);
  EXPECT_FALSE(split.passed) << split.summary();
  EXPECT_GT(split.mismatches, 10u) << split.summary();
}

}  // namespace
}  // namespace kc
