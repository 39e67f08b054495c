// The CPU references on values computed by hand, including the NaN/Inf rules the kernels are
// held to, and the embedding range check.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kc/common/error.hpp"
#include "kc/core/gelu.hpp"
#include "kc/stage2/embedding.hpp"
#include "kc/stage2/references.hpp"

namespace kc::stage2 {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::nan("");

TEST(SoftmaxReference, ZeroAndLn2GiveOneThirdAndTwoThirds) {
  const std::vector<double> x = {0.0, std::log(2.0)};
  std::vector<double> y(2);
  softmax_reference(x.data(), 1, 2, y.data());
  EXPECT_NEAR(y[0], 1.0 / 3.0, 1e-15);
  EXPECT_NEAR(y[1], 2.0 / 3.0, 1e-15);
}

TEST(SoftmaxReference, LargeMagnitudesDoNotOverflow) {
  const std::vector<double> x = {1000.0, 1000.0 + std::log(3.0), -1000.0};
  std::vector<double> y(3);
  softmax_reference(x.data(), 1, 3, y.data());
  // 1000 + ln 3 is itself rounded to a double ulp of 1000 (1.1e-13).
  EXPECT_NEAR(y[0], 0.25, 1e-12);
  EXPECT_NEAR(y[1], 0.75, 1e-12);
  EXPECT_EQ(y[2], 0.0);
}

TEST(SoftmaxReference, NonFiniteInputsFollowTheMaxSubtractedFormula) {
  // Row 0: +inf -> exp(inf - inf) = NaN in the sum: the whole row is NaN.
  // Row 1: -inf next to finite values -> exactly 0 there, the rest a softmax of the rest.
  // Row 2: NaN -> the whole row NaN.   Row 3: all -inf -> max is -inf, NaN everywhere.
  const std::vector<double> x = {kInf, 1.0,  2.0,  -kInf, 0.0,  0.0,
                                 1.0,  kNaN, 3.0, -kInf, -kInf, -kInf};
  std::vector<double> y(12);
  softmax_reference(x.data(), 4, 3, y.data());
  for (int c = 0; c < 3; ++c) EXPECT_TRUE(std::isnan(y[c])) << c;
  EXPECT_EQ(y[3], 0.0);
  EXPECT_NEAR(y[4], 0.5, 1e-15);
  EXPECT_NEAR(y[5], 0.5, 1e-15);
  for (int c = 6; c < 12; ++c) EXPECT_TRUE(std::isnan(y[c])) << c;
}

TEST(RmsNormReference, ThreeFourByHand) {
  const std::vector<double> x = {3.0, 4.0}, weight = {1.0, 1.0};
  std::vector<double> y(2);
  rmsnorm_reference(x.data(), weight.data(), 1, 2, 0.0, y.data());
  EXPECT_NEAR(y[0], 3.0 / std::sqrt(12.5), 1e-15);
  EXPECT_NEAR(y[1], 4.0 / std::sqrt(12.5), 1e-15);
  const std::vector<double> w2 = {2.0, 0.5};
  rmsnorm_reference(x.data(), w2.data(), 1, 2, 0.5, y.data());  // mean square 12.5 + eps 0.5
  EXPECT_NEAR(y[0], 2.0 * 3.0 / std::sqrt(13.0), 1e-15);
  EXPECT_NEAR(y[1], 0.5 * 4.0 / std::sqrt(13.0), 1e-15);
}

TEST(RmsNormReference, NanPoisonsItsRowOnlyAndInfGivesZerosAndNan) {
  const std::vector<double> x = {1.0, kNaN, 2.0, 3.0, 4.0, kInf}, weight = {1.0, 1.0, 1.0};
  std::vector<double> y(6);
  rmsnorm_reference(x.data(), weight.data(), 2, 3, 1e-6, y.data());
  for (int c = 0; c < 3; ++c) EXPECT_TRUE(std::isnan(y[c]));
  // Row 1: sum of squares inf, 1/sqrt(inf) = 0: finite entries 0, the inf entry inf * 0 = NaN.
  EXPECT_EQ(y[3], 0.0);
  EXPECT_EQ(y[4], 0.0);
  EXPECT_TRUE(std::isnan(y[5]));
}

TEST(ResidualRmsNormReference, WritesTheSumAndNormalizesIt) {
  const std::vector<double> x = {1.0, 1.0}, residual = {2.0, 3.0}, weight = {1.0, 1.0};
  std::vector<double> sum(2), y(2);
  const auto exact = [](double s) { return s; };
  residual_rmsnorm_reference(x.data(), residual.data(), weight.data(), 1, 2, 0.0, exact, sum.data(), y.data());
  EXPECT_EQ(sum[0], 3.0);
  EXPECT_EQ(sum[1], 4.0);
  EXPECT_NEAR(y[0], 3.0 / std::sqrt(12.5), 1e-15);
  EXPECT_NEAR(y[1], 4.0 / std::sqrt(12.5), 1e-15);
}

TEST(ResidualRmsNormReference, NormalizesTheStoredSum) {
  // The kernels write the sum in the dtype and normalize what they wrote: the reference's y comes
  // from the stored (rounded) sum, its `sum` output is exact (the kernel rounds it once).
  const std::vector<double> x = {1.0, 1.0}, residual = {0.00390625, 3.0}, weight = {1.0, 1.0};
  std::vector<double> sum(2), y(2);
  const auto to_integer = [](double s) { return std::round(s); };
  residual_rmsnorm_reference(x.data(), residual.data(), weight.data(), 1, 2, 0.0, to_integer,
                             sum.data(), y.data());
  EXPECT_EQ(sum[0], 1.00390625);
  EXPECT_NEAR(y[0], 1.0 / std::sqrt(8.5), 1e-15);
  EXPECT_NEAR(y[1], 4.0 / std::sqrt(8.5), 1e-15);
}

TEST(LayerNormReference, OneThreeByHand) {
  const std::vector<double> x = {1.0, 3.0}, weight = {2.0, 1.0}, bias = {0.5, -0.5};
  std::vector<double> y(2);
  layernorm_reference(x.data(), weight.data(), bias.data(), 1, 2, 0.0, y.data());  // mean 2, var 1
  EXPECT_NEAR(y[0], -2.0 + 0.5, 1e-15);
  EXPECT_NEAR(y[1], 1.0 - 0.5, 1e-15);
}

TEST(LayerNormReference, TwoPassVarianceSurvivesALargeMean) {
  const std::vector<double> x = {1e8 + 1.0, 1e8 - 1.0}, weight = {1.0, 1.0}, bias = {0.0, 0.0};
  std::vector<double> y(2);
  layernorm_reference(x.data(), weight.data(), bias.data(), 1, 2, 0.0, y.data());
  EXPECT_NEAR(y[0], 1.0, 1e-12);
  EXPECT_NEAR(y[1], -1.0, 1e-12);
}

TEST(RowReduceReference, SumMaxMeanSumOfSquares) {
  const std::vector<double> x = {1.0, -2.0, 4.0, 0.5, 0.5, 0.5};
  std::vector<double> out(2);
  row_reduce_reference(RowReduction::sum, x.data(), 2, 3, out.data());
  EXPECT_EQ(out[0], 3.0);
  EXPECT_EQ(out[1], 1.5);
  row_reduce_reference(RowReduction::max, x.data(), 2, 3, out.data());
  EXPECT_EQ(out[0], 4.0);
  row_reduce_reference(RowReduction::mean, x.data(), 2, 3, out.data());
  EXPECT_EQ(out[0], 1.0);
  row_reduce_reference(RowReduction::sum_squares, x.data(), 2, 3, out.data());
  EXPECT_EQ(out[0], 21.0);
  EXPECT_EQ(out[1], 0.75);
  const std::vector<double> with_nan = {1.0, kNaN, 2.0};
  row_reduce_reference(RowReduction::max, with_nan.data(), 1, 3, out.data());
  EXPECT_TRUE(std::isnan(out[0])) << "max of a row holding NaN is NaN, whatever the order";
}

TEST(ActivationReference, ValuesAndLimits) {
  EXPECT_EQ(activation_reference(Activation::relu, -2.0), 0.0);
  EXPECT_EQ(activation_reference(Activation::relu, 2.5), 2.5);
  EXPECT_NEAR(activation_reference(Activation::silu, 1.0), 1.0 / (1.0 + std::exp(-1.0)), 1e-15);
  EXPECT_EQ(activation_reference(Activation::silu, 0.0), 0.0);
  EXPECT_NEAR(activation_reference(Activation::gelu_erf, 1.0), 0.8413447460685429, 1e-15);
  EXPECT_NEAR(activation_reference(Activation::gelu_tanh, 1.0), 0.8411919906082768, 1e-15);
  for (Activation a : {Activation::relu, Activation::silu, Activation::gelu_tanh, Activation::gelu_erf}) {
    EXPECT_EQ(activation_reference(a, kInf), kInf);
    EXPECT_EQ(activation_reference(a, -kInf), 0.0);
    EXPECT_TRUE(std::isnan(activation_reference(a, kNaN)));
  }
}

// The GELU formulas that the kernels and the references share (kc/core/gelu.hpp) are the textbook
// functions rewritten: equal to them where the textbook forms keep their digits (long double
// here), and still accurate in the negative tail, where those cancel.
TEST(GeluFormulas, AreTheTextbookFunctionsWithoutTheirCancellation) {
  for (double x = -4.0; x <= 8.0; x += 1.0 / 64) {
    const long double u = 0.7978845608028654L * (x + 0.044715L * x * x * x);
    const double tanh_form = static_cast<double>(0.5L * x * (1.0L + std::tanh(u)));
    EXPECT_NEAR(core::gelu_tanh<core::ReferenceMath>(x), tanh_form, 1e-12 * std::fabs(tanh_form)) << x;
    const double erf_form = static_cast<double>(0.5L * x * (1.0L + std::erf(x / std::sqrt(2.0L))));
    EXPECT_NEAR(core::gelu_erf<core::ReferenceMath>(x), erf_form, 1e-12 * std::fabs(erf_form)) << x;
  }
  // The tail, where 0.5 x (1 + tanh u) in double has no correct digit left: x sigmoid(2u) written
  // from the other side, x e^(2u) / (1 + e^(2u)), which cannot cancel either.
  for (double x : {-6.0, -8.0, -12.0, -20.0}) {
    const double e_two_u = std::exp(2.0 * 0.7978845608028654 * (x + 0.044715 * x * x * x));
    const double expected = x * e_two_u / (1.0 + e_two_u);
    EXPECT_NEAR(core::gelu_tanh<core::ReferenceMath>(x), expected, 1e-13 * std::fabs(expected)) << x;
  }
  // 0.5 x erfc(-x / sqrt 2) = x Phi(x); Phi(-5) = 2.866515718791939e-7.
  EXPECT_NEAR(core::gelu_erf<core::ReferenceMath>(-5.0), -5.0 * 2.866515718791939e-7, 1e-20);
}

TEST(SwigluReference, SiluOfGateTimesUp) {
  const std::vector<double> gate_up = {1.0, 0.0, 2.0, 5.0};  // one row, hidden 2
  std::vector<double> out(2);
  swiglu_reference(gate_up.data(), 1, 2, out.data());
  EXPECT_NEAR(out[0], 2.0 / (1.0 + std::exp(-1.0)), 1e-15);
  EXPECT_EQ(out[1], 0.0);
}

TEST(RopeReference, RotateHalfByHand) {
  // head_dim 4: pairs (0, 2) and (1, 3); at position 1 they turn by 1 and 10000^(-1/2) = 0.01.
  std::vector<double> x = {1.0, 2.0, 3.0, 4.0};
  const double position = 1.0;
  rope_reference(RopeLayout::rotate_half, x.data(), 1, 1, 4, &position, 10000.0);
  EXPECT_NEAR(x[0], 1.0 * std::cos(1.0) - 3.0 * std::sin(1.0), 1e-15);
  EXPECT_NEAR(x[2], 3.0 * std::cos(1.0) + 1.0 * std::sin(1.0), 1e-15);
  EXPECT_NEAR(x[1], 2.0 * std::cos(0.01) - 4.0 * std::sin(0.01), 1e-15);
  EXPECT_NEAR(x[3], 4.0 * std::cos(0.01) + 2.0 * std::sin(0.01), 1e-15);
}

TEST(RopeReference, InterleavedByHandAndPositionZeroIsTheIdentity) {
  std::vector<double> x = {1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0};  // two tokens, one head
  const double positions[2] = {0.0, 2.0};
  rope_reference(RopeLayout::interleaved, x.data(), 2, 1, 4, positions, 10000.0);
  EXPECT_EQ(x[0], 1.0);
  EXPECT_EQ(x[3], 4.0);
  EXPECT_NEAR(x[4], 5.0 * std::cos(2.0) - 6.0 * std::sin(2.0), 1e-15);
  EXPECT_NEAR(x[5], 6.0 * std::cos(2.0) + 5.0 * std::sin(2.0), 1e-15);
  EXPECT_NEAR(x[6], 7.0 * std::cos(0.02) - 8.0 * std::sin(0.02), 1e-15);
  EXPECT_NEAR(rope_angle(3.0, 1, 4, 10000.0), 0.03, 1e-15);
}

TEST(RopeReference, RotationPreservesEachPairsLength) {
  std::vector<double> x = {0.3, -1.2, 2.0, 0.7, -0.5, 1.1};
  const double position = 4093.0;
  rope_reference(RopeLayout::rotate_half, x.data(), 1, 1, 6, &position, 10000.0);
  EXPECT_NEAR(x[0] * x[0] + x[3] * x[3], 0.3 * 0.3 + 0.7 * 0.7, 1e-12);
  EXPECT_NEAR(x[2] * x[2] + x[5] * x[5], 2.0 * 2.0 + 1.1 * 1.1, 1e-12);
}

TEST(EmbeddingReference, GathersRows) {
  const std::vector<double> table = {0, 1, 10, 11, 20, 21};  // vocab 3, hidden 2
  const std::vector<double> ids = {2, 0, 2};
  std::vector<double> out(6);
  embedding_reference(ids.data(), table.data(), 3, 3, 2, out.data());
  EXPECT_EQ(out, (std::vector<double>{20, 21, 0, 1, 20, 21}));
}

TEST(EmbeddingReference, OutOfRangeIdsNameThePositionTheIdAndTheRange) {
  const std::vector<double> table(6, 1.0);
  std::vector<double> out(6);
  for (const double bad : {3.0, -1.0}) {
    const std::vector<double> ids = {0, bad, 5};
    try {
      embedding_reference(ids.data(), table.data(), 3, 3, 2, out.data());
      FAIL() << "id " << bad << " must be refused";
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(fmt::format("token id {} at position 1", static_cast<int>(bad))), std::string::npos)
          << message;
      EXPECT_NE(message.find("[0, 3)"), std::string::npos) << message;
    }
  }
}

TEST(EmbeddingMessage, SaysWhatHappenedAndWhatToCheck) {
  const std::string message = bad_token_message(17, 50000, 32000);
  EXPECT_NE(message.find("token id 50000 at position 17"), std::string::npos);
  EXPECT_NE(message.find("[0, 32000)"), std::string::npos);
  EXPECT_NE(message.find("nothing outside the table was read"), std::string::npos);
}

}  // namespace
}  // namespace kc::stage2
