// What stage 2 registers: ops defined for bf16, f16 and f32, well-formed ladders, shapes, byte
// counts, accuracy and baselines — everything kc-bench and the conformance tests rely on, checked
// without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "kc/common/registry.hpp"
#include "kc/stage2/register.hpp"
#include "stage2_registry.hpp"

namespace kc::stage2 {
namespace {

using testing::stage2_registry;

const std::vector<DType> kAllTypes = {DType::bf16, DType::f16, DType::f32};

Problem problem(const std::string& op, std::vector<std::int64_t> dims, DType dtype,
                const ParamValues& values = {}) {
  return stage2_registry().op(op).problem(std::move(dims), dtype, values);
}

TEST(Stage2Registry, EveryOpIsDefinedForEveryDtypeAndEveryRungRunsThemAll) {
  for (const char* name : {"rmsnorm", "residual_rmsnorm", "layernorm", "softmax", "row_sum", "row_max",
                           "row_mean", "row_sumsq", "vector_add", "scale", "relu", "silu", "gelu_tanh",
                           "gelu_erf", "bias_relu", "bias_silu", "bias_gelu_tanh", "bias_gelu_erf",
                           "swiglu", "rope_half", "rope_interleaved", "embedding"}) {
    ASSERT_TRUE(stage2_registry().has_op(name)) << name;
    EXPECT_EQ(stage2_registry().op(name).dtypes, kAllTypes) << name;
  }
  EXPECT_EQ(stage2_registry().ops().size(), 22u);
  for (const KernelEntry& k : stage2_registry().kernels()) EXPECT_EQ(k.dtypes, kAllTypes) << k.id;
}

TEST(Stage2Registry, LaddersHaveUniqueRungsFromOneAndMatchingDtypes) {
  std::map<std::string, std::set<int>> rungs;
  for (const KernelEntry& k : stage2_registry().kernels()) {
    EXPECT_EQ(k.stage(), "stage2") << k.id;
    EXPECT_GE(k.rung, 1) << k.id;
    EXPECT_TRUE(rungs[k.op].insert(k.rung).second) << k.id << ": rung " << k.rung << " twice";
    EXPECT_TRUE(k.constraints.empty()) << k.id << ": every stage-2 rung handles every shape";
  }
  for (const OpSpec& op : stage2_registry().ops()) {
    ASSERT_TRUE(rungs.count(op.name)) << op.name << " has no kernels";
    EXPECT_EQ(*rungs[op.name].begin(), 1) << op.name;
  }
  EXPECT_EQ(rungs["rmsnorm"].size(), 5u);
  EXPECT_EQ(rungs["softmax"].size(), 6u);
  EXPECT_EQ(rungs["layernorm"].size(), 5u);
  EXPECT_EQ(rungs["residual_rmsnorm"].size(), 3u);
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

TEST(Stage2Registry, BenchShapesAreTheTargetsInBf16AndOneShapePerOtherDtype) {
  const auto labels = [](const std::string& op) {
    std::vector<std::string> result;
    for (const Problem& p : stage2_registry().op(op).bench_problems) result.push_back(p.label());
    return result;
  };
  for (const char* op : {"rmsnorm", "layernorm", "softmax", "residual_rmsnorm"})
    EXPECT_EQ(labels(op), (std::vector<std::string>{"32768x4096 bf16", "32768x8192 bf16",
                                                     "16384x4096 f16", "16384x4096 f32"}))
        << op;
  EXPECT_EQ(labels("row_sum"), (std::vector<std::string>{"16384x4096 bf16", "16384x4096 f16", "16384x4096 f32"}));
  EXPECT_EQ(labels("gelu_tanh").front(), "33554432 bf16");
  EXPECT_EQ(labels("scale").front(), "33554432 bf16 alpha=-1.75");
  EXPECT_EQ(labels("bias_silu").back(), "8192x4096 f32");
  EXPECT_EQ(labels("rope_half").front(), "16384x32x8x128 bf16");
  EXPECT_EQ(labels("embedding").front(), "32768x128256x2048 bf16");
}

// kc-bench checks every kernel on a CPU reference before timing it, so the documented shapes set
// what `kc-bench --filter stage2` costs.
TEST(Stage2Registry, BenchRunsAFewShapesPerOp) {
  std::size_t items = 0;
  double checked_bytes = 0.0;  // operand bytes the CPU checks convert, compare and hold in double
  for (const OpSpec& op : stage2_registry().ops()) {
    EXPECT_LE(op.bench_problems.size(), 4u) << op.name;
    std::size_t kernels = 0;
    for (const KernelEntry& k : stage2_registry().kernels()) kernels += k.op == op.name ? 1 : 0;
    const std::size_t checked = kernels + (op.baseline_computes_op ? 1 : 0);  // a copy is not checked
    for (const Problem& p : op.bench_problems) {
      items += kernels + 1;  // each kernel and the baseline
      checked_bytes += static_cast<double>(checked) * op.work(p).bytes;
    }
  }
  EXPECT_LE(items, 280u) << "every item is ~0.3 s of timing, most also a CPU check";
  EXPECT_LE(checked_bytes, 90.0 * (1 << 30)) << "the CPU checks' share of kc-bench --filter stage2";
}

TEST(Stage2Registry, RowOpsAreCheckedOnOddRowLengths) {
  std::set<std::int64_t> cols, rows;
  for (const Problem& p : stage2_registry().op("softmax").conformance_problems) {
    rows.insert(p.dims[0]);
    cols.insert(p.dims[1]);
  }
  for (std::int64_t c : {1, 31, 1000, 4097, 4096, 8192, 1024, 512}) EXPECT_TRUE(cols.count(c)) << c;
  for (std::int64_t r : {1, 3, 257}) EXPECT_TRUE(rows.count(r)) << r;
}

TEST(Stage2Registry, BytesAreEachInputOnceAndEachOutputOnce) {
  const Registry& r = stage2_registry();
  const auto bytes = [&](const std::string& op, std::vector<std::int64_t> dims, DType dtype) {
    return r.op(op).work(problem(op, std::move(dims), dtype)).bytes;
  };
  // RMSNorm bf16: x read, y written (2 bytes each), weight read once.
  EXPECT_EQ(bytes("rmsnorm", {32768, 4096}, DType::bf16), 2.0 * (2.0 * 32768 * 4096 + 4096));
  // Residual + RMSNorm f32: x, residual read; sum, y written; weight read.
  EXPECT_EQ(bytes("residual_rmsnorm", {8, 16}, DType::f32), 4.0 * (4.0 * 8 * 16 + 16));
  // LayerNorm: weight and bias too.
  EXPECT_EQ(bytes("layernorm", {2, 10}, DType::f16), 2.0 * (2 * 20 + 20));
  // A row reduction writes one value per row.
  EXPECT_EQ(bytes("row_sum", {4, 100}, DType::bf16), 2.0 * (400 + 4));
  // SwiGLU reads 2 x hidden and writes hidden per row.
  EXPECT_EQ(bytes("swiglu", {3, 8}, DType::bf16), 2.0 * (3 * 16 + 3 * 8));
  // RoPE: Q and K read and written in place, positions, one table row per token.
  EXPECT_EQ(bytes("rope_half", {2, 4, 2, 8}, DType::bf16), 2.0 * 2 * (6 * 8) * 2 + 2 * 4 + 2 * 8 * 4);
  // Embedding: ids, one table row read and one output row written per token.
  EXPECT_EQ(bytes("embedding", {5, 1000, 16}, DType::f32), 5 * 4 + 2.0 * 5 * 16 * 4);
}

TEST(Stage2Registry, SupportsRefusesImpossibleShapesWithAReason) {
  const Registry& r = stage2_registry();
  EXPECT_NE(r.op("rope_half").supports(problem("rope_half", {4, 2, 1, 7}, DType::f32)).find("even head_dim"),
            std::string::npos);
  EXPECT_NE(r.op("rope_half")
                .supports(problem("rope_half", {4, 2, 1, 8}, DType::f32, {{"position_offset", 2.5}}))
                .find("whole number"),
            std::string::npos);
  EXPECT_FALSE(r.op("rmsnorm").supports(problem("rmsnorm", {0, 8}, DType::bf16)).empty());
  EXPECT_TRUE(r.op("rmsnorm").supports(problem("rmsnorm", {1, 1}, DType::bf16)).empty());
}

TEST(Stage2Registry, AccuracyIsOneRoundingOfTheOutputTypeWithTheRowAsTheSum) {
  const Registry& r = stage2_registry();
  Tensor y;
  y.name = "y";
  y.dtype = DType::bf16;
  const Accuracy norm = r.op("rmsnorm").accuracy(problem("rmsnorm", {3, 4096}, DType::bf16), y);
  EXPECT_EQ(norm.output, DType::bf16);
  EXPECT_EQ(norm.terms, 4096.0);
  EXPECT_EQ(norm.roundings, 1);
  Tensor out;
  out.name = "out";
  out.dtype = DType::f16;
  EXPECT_EQ(r.op("row_max").accuracy(problem("row_max", {3, 100}, DType::f16), out).terms, 1.0);
  EXPECT_EQ(r.op("vector_add").accuracy(problem("vector_add", {100}, DType::f16), out).terms, 1.0);
  // Rung 01 of bias + activation stores x + bias before the activation.
  EXPECT_EQ(r.op("bias_gelu_erf").accuracy(problem("bias_gelu_erf", {3, 100}, DType::f16), out).roundings, 2);
}

TEST(Stage2Registry, ParametersAreNamedAndRefusedWhenUnknown) {
  EXPECT_EQ(problem("scale", {10}, DType::bf16).param("alpha"), 1.0);
  EXPECT_EQ(problem("rope_half", {1, 1, 1, 2}, DType::bf16).param("position_offset"), 0.0);
  EXPECT_THROW(problem("rmsnorm", {3, 4}, DType::bf16, {{"alpha", 2.0}}), Error);
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
