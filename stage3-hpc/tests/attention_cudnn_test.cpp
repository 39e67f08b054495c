// The cuDNN baseline of attention_fwd, on the CPU: which baseline the op declares in this build,
// and the limits kc knows cuDNN SDPA has (checked before any graph is built).
#include <gtest/gtest.h>

#include <string>

#include "kc/common/registry.hpp"
#include "kc/stage3/attention.hpp"
#include "kc/stage3/attention_cudnn.hpp"
#include "attention_test_support.hpp"

namespace kc::stage3 {
namespace {

using testing_support::registered_attention_op;

TEST(AttentionCudnn, TheOpNamesTheBaselineThisBuildHas) {
  const OpSpec& op = registered_attention_op();
  ASSERT_TRUE(static_cast<bool>(op.baseline));
  EXPECT_TRUE(op.baseline_computes_op);
  if (cudnn_attention_built()) {
    EXPECT_NE(op.baseline_name.find("cuDNN SDPA"), std::string::npos) << op.baseline_name;
    EXPECT_NE(op.baseline_name.find("cudnn-frontend"), std::string::npos) << op.baseline_name;
    EXPECT_TRUE(static_cast<bool>(op.baseline_supports));
  } else {
    EXPECT_NE(op.baseline_name.find("cuDNN not available: baseline is the unfused cuBLAS path"),
              std::string::npos)
        << op.baseline_name;
    EXPECT_FALSE(static_cast<bool>(op.baseline_supports));
  }
}

TEST(AttentionCudnn, KnownLimitsRefuseWhatCudnnDoesNotRun) {
  const OpSpec& op = registered_attention_op();
  const auto limits = [&](std::vector<std::int64_t> dims, DType dtype, const ParamValues& params = {}) {
    return CudnnAttention::known_limits(op.problem(std::move(dims), dtype, params));
  };
  // Runs: square, Sq < Sk causal (bottom-right), Sq > Sk without the mask, grouped heads.
  EXPECT_EQ(limits({4, 32, 8, 4096, 4096, 128}, DType::bf16, {{"causal", 1.0}}), "");
  EXPECT_EQ(limits({2, 4, 1, 77, 1000, 64}, DType::f16, {{"causal", 1.0}}), "");
  EXPECT_EQ(limits({1, 2, 2, 4097, 1, 128}, DType::bf16), "");
  EXPECT_EQ(limits({1, 2, 2, 64, 64, 256}, DType::bf16), "");
  // Refused: rows with no visible key, D not a multiple of 8, D above 256.
  const std::string empty_rows = limits({1, 8, 1, 1000, 77, 64}, DType::bf16, {{"causal", 1.0}});
  EXPECT_NE(empty_rows.find("Sq > Sk"), std::string::npos) << empty_rows;
  EXPECT_NE(limits({1, 2, 2, 64, 64, 36}, DType::bf16).find("multiple of 8"), std::string::npos);
  EXPECT_NE(limits({1, 2, 2, 64, 64, 264}, DType::f16).find("at most 256"), std::string::npos);
}

}  // namespace
}  // namespace kc::stage3
