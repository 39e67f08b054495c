// The public low-precision entries (kc/stage3/low_precision_ops.hpp) on the GPU, each through the
// harness's check on the op's own operands and reference (outputs poisoned first): the FP8 GEMM with
// one scale a tensor and with block scales, the INT8 GEMM with its s32 and its dequantized output,
// and the FP8 quantize, on odd shapes; each must return the rung the header names for this GPU (the
// rungs themselves are checked on every conformance problem by tests/conformance). Skips without a
// GPU.
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "kc/common/check.hpp"
#include "kc/common/device.hpp"
#include "kc/common/registry.hpp"
#include "kc/stage3/fp8_gemm.hpp"
#include "kc/stage3/gemm.hpp"
#include "kc/stage3/int8_gemm.hpp"
#include "kc/stage3/low_precision_ops.hpp"
#include "stage3_test_registry.hpp"
#include "support/gpu_test.hpp"

namespace kc::stage3 {
namespace {

bool hopper_here() {
  int device = 0;
  KC_CUDA_CHECK(cudaGetDevice(&device));
  return runs_hopper_rungs(device);
}

TEST(LowPrecisionEntriesGpu, Fp8GemmMatchesTheReferenceWithBothScalings) {
  KC_SKIP_WITHOUT_GPU();
  if (!hopper_here()) GTEST_SKIP() << "the FP8 GEMM needs an sm_90 GPU and sm_90a code";
  Context& context = testing::shared_context();
  const OpSpec& op = stage3_test_registry().op(kFp8GemmOp);
  LowPrecisionGemm entry;
  for (const double scaling : {0.0, 1.0})
    for (const std::vector<std::int64_t>& dims : {std::vector<std::int64_t>{300, 520, 1040}, {128, 384, 512},
                                                  {1, 96, 4096}}) {
      const Problem problem = op.problem(dims, DType::f8e4m3, {{"scaling", scaling}});
      std::string_view rung;
      const CheckOutcome outcome = check_run(
          op, [&](const Problem& p, Operands& o, Context& c) { rung = entry.fp8_gemm(fp8_gemm_args(p, o), c.stream()); },
          problem, 7, context);
      EXPECT_TRUE(outcome.passed()) << problem.label() << ": " << outcome.detail;
      EXPECT_EQ(rung, kFp8GemmEntryRung);
    }
}

TEST(LowPrecisionEntriesGpu, Int8GemmMatchesTheReferenceOnBothOutputs) {
  KC_SKIP_WITHOUT_GPU();
  Context& context = testing::shared_context();
  LowPrecisionGemm entry;
  const bool hopper = hopper_here();
  for (const char* name : {kInt8GemmOp, kInt8GemmDequantOp}) {
    const OpSpec& op = stage3_test_registry().op(name);
    const bool dequant = std::string(name) == kInt8GemmDequantOp;
    for (const std::vector<std::int64_t>& dims : {std::vector<std::int64_t>{300, 520, 1040}, {1, 96, 4096}}) {
      const Problem problem = op.problem(dims, DType::i8);
      std::string_view rung;
      const CheckOutcome outcome = check_run(
          op, [&](const Problem& p, Operands& o, Context& c) { rung = entry.int8_gemm(int8_gemm_args(p, o), c.stream()); },
          problem, 7, context);
      EXPECT_TRUE(outcome.passed()) << problem.label() << ": " << outcome.detail;
      EXPECT_EQ(rung, hopper ? (dequant ? kInt8GemmDequantHopperRung : kInt8GemmHopperRung)
                             : (dequant ? kInt8GemmDequantAmpereRung : kInt8GemmAmpereRung));
    }
  }
}

TEST(LowPrecisionEntriesGpu, Fp8QuantizeMatchesTheReference) {
  KC_SKIP_WITHOUT_GPU();
  Context& context = testing::shared_context();
  const OpSpec& op = stage3_test_registry().op(kFp8QuantizeOp);
  for (const std::vector<std::int64_t>& dims : {std::vector<std::int64_t>{300, 1040}, {1, 16}}) {
    const Problem problem = op.problem(dims, DType::bf16);
    std::string_view rung;
    const CheckOutcome outcome = check_run(
        op, [&](const Problem& p, Operands& o, Context& c) { rung = fp8_quantize(fp8_quantize_args(p, o), c.stream()); },
        problem, 7, context);
    EXPECT_TRUE(outcome.passed()) << problem.label() << ": " << outcome.detail;
    EXPECT_EQ(rung, kFp8QuantizeEntryRung);
  }
}

}  // namespace
}  // namespace kc::stage3
