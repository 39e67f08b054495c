// Every configuration of rung 10's search space, with and without split-K, against the sgemm
// reference. The conformance suite runs rung 10 only through the configurations its shape classes
// pick; this test runs all of them, so a configuration is known to be correct before the tuner
// (or a new kShapeClassChoices entry) selects it. Skips without a GPU.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kc/common/check.hpp"
#include "kc/common/context.hpp"
#include "kc/common/device.hpp"
#include "kc/common/gemm.hpp"
#include "kc/stage1/sgemm.hpp"
#include "kc/stage1/register.hpp"
#include "kc/stage1/sgemm_autotune.hpp"
#include "support/gpu_test.hpp"

namespace kc::stage1 {
namespace {

Context& context() { return ::kc::testing::shared_context(); }

class SearchSpace : public ::testing::TestWithParam<int> {};

TEST_P(SearchSpace, EveryConfigurationMatchesTheReferenceSplitOrNot) {
  KC_SKIP_WITHOUT_GPU();
  const int config = GetParam();
  const OpSpec op = make_sgemm_op();
  const std::vector<Problem> problems = {
      gemm_problem("sgemm", {1, 1, 1}, DType::f32, 1.0, 0.0),          // one element, one k: every copy but one zero-filled
      gemm_problem("sgemm", {4093, 17, 127}, DType::f32, 1.0, 0.0),    // N odd: 4-byte copies of B, scalar stores of C
      gemm_problem("sgemm", {131, 257, 1031}, DType::f32, -0.5, 0.25), // unaligned rows, C read
      gemm_problem("sgemm", {200, 384, 520}, DType::f32, 1.5, 0.0),    // aligned rows, partial tiles
      gemm_problem("sgemm", {256, 256, 4096}, DType::f32, 1.0, 1.0),   // full tiles, long K (split-K ranges of many tiles)
  };
  for (const int splits : {1, 3, 8}) {
    for (const Problem& problem : problems) {
      const CheckOutcome outcome = check_run(
          op,
          [&](const Problem& p, Operands& o, Context& c) {
            sgemm_search_space_launch(config, splits, gemm_args<float>(p, o, BLayout::k_by_n), c.stream());
          },
          problem, 17, context());
      EXPECT_TRUE(outcome.passed()) << config_name(kSearchSpace[config]) << ", splits " << splits << ", "
                                    << problem.label() << ": " << outcome.detail;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Configs, SearchSpace, ::testing::Range(0, kSearchSpaceSize),
                         [](const ::testing::TestParamInfo<int>& param_info) {
                           return "config" + std::to_string(param_info.param) + "_" + config_name(kSearchSpace[param_info.param]);
                         });

}  // namespace
}  // namespace kc::stage1
