// The CPU GEMM reference against values worked out by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kc/common/gemm.hpp"

namespace kc {
namespace {

TEST(GemmReference, TwoByTwoByHand) {
  // [1 2] [5 6]   [19 22]
  // [3 4] [7 8] = [43 50]
  const std::vector<double> a{1, 2, 3, 4}, b{5, 6, 7, 8};
  std::vector<double> c(4);
  gemm_reference({2, 2, 2}, 1.0, a.data(), b.data(), BLayout::k_by_n, 0.0, nullptr, c.data());
  EXPECT_EQ(c, (std::vector<double>{19, 22, 43, 50}));
}

TEST(GemmReference, NonSquareWithAlphaAndBeta) {
  // A 2x3, B 3x1: A.B = [1*1+2*2+3*3, 4*1+5*2+6*3] = [14, 32]; 2*A.B + (-1)*C with C = [1, 2]
  const std::vector<double> a{1, 2, 3, 4, 5, 6}, b{1, 2, 3}, c_in{1, 2};
  std::vector<double> c(2);
  gemm_reference({2, 1, 3}, 2.0, a.data(), b.data(), BLayout::k_by_n, -1.0, c_in.data(), c.data());
  EXPECT_EQ(c, (std::vector<double>{27, 62}));
}

TEST(GemmReference, NByKLayoutIsTheTransposedB) {
  const std::vector<double> a{1, 2, 3, 4, 5, 6};          // 2 x 3
  const std::vector<double> b_kn{1, 2, 3, 4, 5, 6};       // 3 x 2
  const std::vector<double> b_nk{1, 3, 5, 2, 4, 6};       // the same B stored 2 x 3
  std::vector<double> c1(4), c2(4);
  gemm_reference({2, 2, 3}, 1.0, a.data(), b_kn.data(), BLayout::k_by_n, 0.0, nullptr, c1.data());
  gemm_reference({2, 2, 3}, 1.0, a.data(), b_nk.data(), BLayout::n_by_k, 0.0, nullptr, c2.data());
  EXPECT_EQ(c1, c2);
  EXPECT_EQ(c1, (std::vector<double>{22, 28, 49, 64}));
}

TEST(GemmReference, BetaZeroNeverReadsC) {
  const std::vector<double> a{1}, b{2};
  const std::vector<double> poisoned{std::numeric_limits<double>::quiet_NaN()};
  std::vector<double> c(1);
  gemm_reference({1, 1, 1}, 1.0, a.data(), b.data(), BLayout::k_by_n, 0.0, poisoned.data(), c.data());
  EXPECT_EQ(c[0], 2.0);
}

TEST(GemmProblems, ConformanceCoversEveryOddSizeInEveryDimension) {
  GemmOpConfig config;
  config.name = "sgemm";
  const auto problems = make_gemm_op(config).conformance_problems;
  for (std::int64_t size : {1, 17, 127, 1000, 4093}) {
    for (int dim = 0; dim < 3; ++dim) {
      bool found = false;
      for (const Problem& p : problems) found |= p.dims[dim] == size;
      EXPECT_TRUE(found) << "size " << size << " never appears as dimension " << dim;
    }
  }
  bool beta_nonzero = false, alpha_not_one = false;
  for (const Problem& p : problems) {
    beta_nonzero |= p.param("beta") != 0.0;
    alpha_not_one |= p.param("alpha") != 1.0;
  }
  EXPECT_TRUE(beta_nonzero);
  EXPECT_TRUE(alpha_not_one);
}

TEST(GemmOp, CountsFlopsAndMinimumBytes) {
  GemmOpConfig config;
  config.name = "sgemm";
  const OpSpec op = make_gemm_op(config);
  const Work w = op.work(gemm_problem("sgemm", {4096, 2048, 1024}, DType::f32));
  EXPECT_DOUBLE_EQ(w.flops, 2.0 * 4096 * 2048 * 1024);
  EXPECT_DOUBLE_EQ(w.bytes, 4.0 * (4096.0 * 1024 + 1024.0 * 2048 + 4096.0 * 2048));
  const Work with_beta = op.work(gemm_problem("sgemm", {4096, 2048, 1024}, DType::f32, 1.0, 0.5));
  EXPECT_DOUBLE_EQ(with_beta.bytes - w.bytes, 4.0 * 4096 * 2048);  // C read as well
  Tensor c;
  c.dtype = DType::f32;
  const Accuracy accuracy = op.accuracy(gemm_problem("sgemm", {8, 8, 4096}, DType::f32), c);
  EXPECT_EQ(accuracy.output, DType::f32);
  EXPECT_DOUBLE_EQ(accuracy.terms, 4096.0);  // K products summed into each output
  EXPECT_EQ(accuracy.roundings, 1);
}

}  // namespace
}  // namespace kc
