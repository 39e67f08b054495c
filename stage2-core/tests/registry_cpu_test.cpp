// What stage 2 registers: one op per dtype, well-formed ladders, shapes, byte counts and
// baselines — everything kc-bench and the conformance tests rely on, checked without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "kc/common/registry.hpp"
#include "kc/stage2/memory_op.hpp"
#include "kc/stage2/register.hpp"
#include "stage2_registry.hpp"

namespace kc::stage2 {
namespace {

using testing::stage2_registry;

TEST(Stage2Registry, EveryOpExistsForEveryDtype) {
  for (const char* base : {"rmsnorm", "residual_rmsnorm", "layernorm", "softmax", "row_sum", "row_max",
                           "row_mean", "row_sumsq", "vector_add", "scale", "relu", "silu", "gelu_tanh",
                           "gelu_erf", "bias_relu", "bias_silu", "bias_gelu_tanh", "bias_gelu_erf",
                           "swiglu", "rope_half", "rope_interleaved", "embedding"})
    for (DType dtype : {DType::bf16, DType::f16, DType::f32})
      EXPECT_TRUE(stage2_registry().has_op(op_name(base, dtype))) << op_name(base, dtype);
}

TEST(Stage2Registry, LaddersHaveUniqueRungsFromOneAndMatchingDtypes) {
  std::map<std::string, std::set<int>> rungs;
  for (const KernelEntry& k : stage2_registry().kernels()) {
    EXPECT_EQ(k.stage(), "stage2") << k.id;
    EXPECT_GE(k.rung, 1) << k.id;
    EXPECT_TRUE(rungs[k.op].insert(k.rung).second) << k.id << ": rung " << k.rung << " twice";
    const std::string suffix = "_" + std::string(dtype_name(k.dtype));
    EXPECT_EQ(k.op.substr(k.op.size() - suffix.size()), suffix) << k.id;
    EXPECT_TRUE(k.constraints.empty()) << k.id << ": every stage-2 rung handles every shape";
  }
  for (const OpSpec& op : stage2_registry().ops()) {
    ASSERT_TRUE(rungs.count(op.name)) << op.name << " has no kernels";
    EXPECT_EQ(*rungs[op.name].begin(), 1) << op.name;
  }
  EXPECT_EQ(rungs["rmsnorm_bf16"].size(), 5u);
  EXPECT_EQ(rungs["softmax_f32"].size(), 6u);
  EXPECT_EQ(rungs["layernorm_f16"].size(), 5u);
  EXPECT_EQ(rungs["residual_rmsnorm_bf16"].size(), 3u);
}

TEST(Stage2Registry, MemoryBoundOpsMeasureAgainstCopyOrCub) {
  for (const OpSpec& op : stage2_registry().ops()) {
    EXPECT_EQ(op.bound, Bound::memory) << op.name;
    EXPECT_TRUE(static_cast<bool>(op.baseline)) << op.name;
    if (op.name.rfind("row_", 0) == 0) {
      EXPECT_NE(op.baseline_name.find("CUB"), std::string::npos) << op.name;
      EXPECT_TRUE(op.baseline_computes_op) << op.name << ": CUB computes the op, so it is checked";
    } else {
      EXPECT_NE(op.baseline_name.find("cudaMemcpy"), std::string::npos) << op.name;
      EXPECT_FALSE(op.baseline_computes_op) << op.name;
    }
  }
}

TEST(Stage2Registry, BenchShapesAreTheIssueTargets) {
  const auto shapes = [](const std::string& op) {
    std::vector<std::string> result;
    for (const Problem& p : stage2_registry().op(op).bench_problems) result.push_back(p.shape());
    return result;
  };
  for (const char* op : {"rmsnorm_bf16", "layernorm_bf16", "softmax_bf16", "residual_rmsnorm_bf16"})
    EXPECT_EQ(shapes(op), (std::vector<std::string>{"32768x4096", "32768x8192"})) << op;
  EXPECT_EQ(shapes("rmsnorm_f32"), std::vector<std::string>{"16384x4096"});
  EXPECT_EQ(shapes("softmax_f16"), std::vector<std::string>{"16384x4096"});
  EXPECT_EQ(shapes("row_sum_bf16"), std::vector<std::string>{"16384x4096"});
  EXPECT_EQ(shapes("gelu_tanh_bf16"), std::vector<std::string>{"33554432"});
  EXPECT_EQ(shapes("bias_silu_f32"), std::vector<std::string>{"8192x4096"});
  EXPECT_EQ(shapes("rope_half_bf16"), std::vector<std::string>{"16384x32x8x128"});
  EXPECT_EQ(shapes("embedding_f16"), std::vector<std::string>{"32768x128256x2048"});
}

// kc-bench checks every kernel on a CPU reference before timing it, so the documented shapes set
// what `kc-bench --filter stage2` costs: one shape per op and dtype, two only for the issue's
// targets in bf16.
TEST(Stage2Registry, BenchRunsOneShapePerOpExceptTheTargetsInBf16) {
  const std::set<std::string> targets = {"rmsnorm_bf16", "layernorm_bf16", "softmax_bf16",
                                         "residual_rmsnorm_bf16"};
  std::size_t items = 0;
  double checked_bytes = 0.0;  // operand bytes the CPU checks convert, compare and hold in double
  for (const OpSpec& op : stage2_registry().ops()) {
    EXPECT_EQ(op.bench_problems.size(), targets.count(op.name) ? 2u : 1u) << op.name;
    std::size_t kernels = 0;
    for (const KernelEntry& k : stage2_registry().kernels()) kernels += k.op == op.name ? 1 : 0;
    const std::size_t checked = kernels + (op.baseline_computes_op ? 1 : 0);  // a copy is not checked
    for (const Problem& p : op.bench_problems) {
      items += kernels + 1;  // each kernel and the baseline
      checked_bytes += static_cast<double>(checked) * op.work(p).bytes;
    }
  }
  EXPECT_LE(items, 270u) << "every item is ~0.3 s of timing, most also a CPU check";
  EXPECT_LE(checked_bytes, 90.0 * (1 << 30)) << "the CPU checks' share of kc-bench --filter stage2";
}

TEST(Stage2Registry, RowOpsAreCheckedOnOddRowLengths) {
  std::set<std::int64_t> cols, rows;
  for (const Problem& p : stage2_registry().op("softmax_bf16").conformance_problems) {
    rows.insert(p.dims[0]);
    cols.insert(p.dims[1]);
  }
  for (std::int64_t c : {1, 31, 1000, 4097, 4096, 8192, 1024, 512}) EXPECT_TRUE(cols.count(c)) << c;
  for (std::int64_t r : {1, 3, 257}) EXPECT_TRUE(rows.count(r)) << r;
}

TEST(Stage2Registry, BytesAreEachInputOnceAndEachOutputOnce) {
  const Registry& r = stage2_registry();
  // RMSNorm bf16: x read, y written (2 bytes each), weight read once.
  EXPECT_EQ(r.op("rmsnorm_bf16").work(Problem{"rmsnorm_bf16", {32768, 4096}}).bytes,
            2.0 * (2.0 * 32768 * 4096 + 4096));
  // Residual + RMSNorm f32: x, residual read; sum, y written; weight read.
  EXPECT_EQ(r.op("residual_rmsnorm_f32").work(Problem{"residual_rmsnorm_f32", {8, 16}}).bytes,
            4.0 * (4.0 * 8 * 16 + 16));
  // LayerNorm: weight and bias too.
  EXPECT_EQ(r.op("layernorm_f16").work(Problem{"layernorm_f16", {2, 10}}).bytes, 2.0 * (2 * 20 + 20));
  // A row reduction writes one value per row.
  EXPECT_EQ(r.op("row_sum_bf16").work(Problem{"row_sum_bf16", {4, 100}}).bytes, 2.0 * (400 + 4));
  // SwiGLU reads 2 x hidden and writes hidden per row.
  EXPECT_EQ(r.op("swiglu_bf16").work(Problem{"swiglu_bf16", {3, 8}}).bytes, 2.0 * (3 * 16 + 3 * 8));
  // RoPE: Q and K read and written in place, positions, one table row per token.
  EXPECT_EQ(r.op("rope_half_bf16").work(Problem{"rope_half_bf16", {2, 4, 2, 8}}).bytes,
            2.0 * 2 * (6 * 8) * 2 + 2 * 4 + 2 * 8 * 4);
  // Embedding: ids, one table row read and one output row written per token.
  EXPECT_EQ(r.op("embedding_f32").work(Problem{"embedding_f32", {5, 1000, 16}}).bytes,
            5 * 4 + 2.0 * 5 * 16 * 4);
}

TEST(Stage2Registry, SupportsRefusesImpossibleShapesWithAReason) {
  const Registry& r = stage2_registry();
  EXPECT_NE(r.op("rope_half_f32").supports(Problem{"rope_half_f32", {4, 2, 1, 7}}).find("even head_dim"),
            std::string::npos);
  EXPECT_NE(r.op("rope_half_f32").supports(Problem{"rope_half_f32", {4, 2, 1, 8}, 1.0, 2.5}).find("whole number"),
            std::string::npos);
  EXPECT_FALSE(r.op("rmsnorm_bf16").supports(Problem{"rmsnorm_bf16", {0, 8}}).empty());
  EXPECT_TRUE(r.op("rmsnorm_bf16").supports(Problem{"rmsnorm_bf16", {1, 1}}).empty());
}

TEST(Stage2Registry, SoftmaxToleranceFollowsTheOutputsSize) {
  const OpSpec& softmax = stage2_registry().op("softmax_bf16");
  Tensor y;
  y.name = "y";
  y.dtype = DType::bf16;
  EXPECT_DOUBLE_EQ(softmax.accuracy(Problem{"softmax_bf16", {3, 4096}}, y).scale, 1.0 / 4096);
  EXPECT_DOUBLE_EQ(stage2_registry().op("rmsnorm_bf16").accuracy(Problem{"rmsnorm_bf16", {3, 4096}}, y).scale, 1.0);
}

TEST(Stage2Registry, RegisteringTwiceIsHarmless) {
  Registry r;
  register_kernels(r);
  const std::size_t kernels = r.kernels().size();
  register_kernels(r);
  EXPECT_EQ(r.kernels().size(), kernels);
}

}  // namespace
}  // namespace kc::stage2
