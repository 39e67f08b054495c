// Tolerance logic: the per-element bound, the Frobenius bound, NaN/Inf handling.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kc/common/compare.hpp"

namespace kc {
namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

CompareResult run(const std::vector<double>& out, const std::vector<double>& ref, Tolerance tol,
                  double scale = 1.0) {
  return compare(out.data(), ref.data(), out.size(), tol, scale);
}

TEST(Compare, IdenticalArraysPassWithZeroError) {
  const std::vector<double> ref{1.0, -2.5, 3.25, 0.0};
  const CompareResult r = run(ref, ref, tolerance_for(DType::f32));
  EXPECT_TRUE(r.passed);
  EXPECT_EQ(r.mismatches, 0u);
  EXPECT_EQ(r.rel_frobenius, 0.0);
  EXPECT_EQ(r.count, 4u);
}

TEST(Compare, OneElementOutsideItsBoundFailsAndIsNamed) {
  const std::vector<double> ref{1.0, 2.0, 3.0, 4.0};
  std::vector<double> out = ref;
  out[2] = 3.001;  // error 1e-3 > 1e-5 + 1e-5 * 3
  const CompareResult r = run(out, ref, tolerance_for(DType::f32));
  EXPECT_FALSE(r.passed);
  EXPECT_EQ(r.mismatches, 1u);
  EXPECT_EQ(r.first_bad_index, 2u);
  EXPECT_DOUBLE_EQ(r.first_bad_out, 3.001);
  EXPECT_DOUBLE_EQ(r.first_bad_ref, 3.0);
  EXPECT_NE(r.summary().find("first at index 2"), std::string::npos) << r.summary();
}

TEST(Compare, ElementBoundIsAtolTimesScalePlusRtolTimesRef) {
  const Tolerance tol{0.1, 0.01, 1.0};
  // bound at ref = 10 with scale 2: 0.1 * 2 + 0.01 * 10 = 0.3
  EXPECT_TRUE(run({10.29}, {10.0}, tol, 2.0).passed);
  EXPECT_FALSE(run({10.31}, {10.0}, tol, 2.0).passed);
  // the scale multiplies atol only
  EXPECT_FALSE(run({10.29}, {10.0}, tol, 1.0).passed);
}

TEST(Compare, UnwrittenPoisonedElementFails) {
  const std::vector<double> ref{1.0, 2.0, 3.0};
  const std::vector<double> out{1.0, kNaN, 3.0};
  const CompareResult r = run(out, ref, tolerance_for(DType::bf16));
  EXPECT_FALSE(r.passed);
  EXPECT_EQ(r.mismatches, 1u);
  EXPECT_EQ(r.nonfinite_mismatches, 1u);
  EXPECT_TRUE(std::isnan(r.rel_frobenius));
}

TEST(Compare, NaNAndInfMustMatchWhereTheReferenceHasThem) {
  const Tolerance tol = tolerance_for(DType::f32);
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
  const CompareResult r = compare(nullptr, nullptr, 0, tolerance_for(DType::f32));
  EXPECT_TRUE(r.passed);
}

TEST(ToleranceTable, TightensWithPrecisionAndIntegersAreExact) {
  EXPECT_LT(tolerance_for(DType::f32).max_rel_frobenius, tolerance_for(DType::tf32).max_rel_frobenius);
  EXPECT_LE(tolerance_for(DType::tf32).max_rel_frobenius, tolerance_for(DType::bf16).max_rel_frobenius);
  EXPECT_LT(tolerance_for(DType::f16).rtol, tolerance_for(DType::bf16).rtol);
  EXPECT_LT(tolerance_for(DType::bf16).rtol, tolerance_for(DType::f8e4m3).rtol);
  for (DType t : {DType::i8, DType::i4, DType::i32}) {
    EXPECT_EQ(tolerance_for(t).atol, 0.0);
    EXPECT_EQ(tolerance_for(t).rtol, 0.0);
  }
  // fp16 rounding of inputs (relative error ~ 3e-4) must not pass as FP32.
  EXPECT_LT(tolerance_for(DType::f32).max_rel_frobenius, 3e-4 / 10);
}

}  // namespace
}  // namespace kc
