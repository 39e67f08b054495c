// The engine's kc-bench ops on the CPU (kc::stage4::register_kernels): the sampler's op takes its
// temperature, top-k and top-p as named parameters, refuses parameters the sampler refuses with the
// sampler's reason, covers the greedy path and the cuts in its conformance problems, judges its
// token output itself (a choice, not a number), and has its kernel registered.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "kc/common/registry.hpp"
#include "kc/stage4/register.hpp"

namespace kc::stage4 {
namespace {

const Registry& stage4_registry() {
  static const Registry registry = [] {
    Registry r;
    register_kernels(r);
    return r;
  }();
  return registry;
}

TEST(SampleRowsOp, IsRegisteredWithItsParametersAndJudgesChoices) {
  const Registry& r = stage4_registry();
  const OpSpec& op = r.op("sample_rows");
  EXPECT_TRUE(op.has_param("temperature") && op.has_param("top_k") && op.has_param("top_p"));
  EXPECT_TRUE(static_cast<bool>(op.compare_choice)) << "a token id is judged as a choice";
  for (const char* id : {"stage4/sample_rows/01_radix_sort", "stage4/sample_rows/02_one_sort"}) {
    const KernelEntry& kernel = r.kernel(id);
    EXPECT_EQ(kernel.op, "sample_rows");
    EXPECT_EQ(kernel.report_group(), "stage4-kernels");
  }
  EXPECT_EQ(r.kernel("stage4/sample_rows/02_one_sort").rung, 2);
  EXPECT_EQ(op.supports(op.problem({4, 1000}, DType::bf16)), "");
  EXPECT_NE(op.supports(op.problem({4, 1000}, DType::bf16, {{"top_p", 0.0}})).find("top_p"), std::string::npos);
  EXPECT_NE(op.supports(op.problem({4, 1000}, DType::bf16, {{"temperature", -1.0}})).find("temperature"),
            std::string::npos);
  std::set<std::string> kinds;
  for (const Problem& p : op.conformance_problems) {
    EXPECT_EQ(op.supports(p), "") << p.label();
    if (p.param("temperature") == 0.0) kinds.insert("greedy");
    if (p.param("top_k") == 1.0) kinds.insert("top-k of one");
    if (p.param("top_k") > 1.0 && p.param("top_p") < 1.0) kinds.insert("both cuts");
    if (p.param("top_p") == 1.0 && p.param("temperature") > 0.0) kinds.insert("no cut");
  }
  EXPECT_EQ(kinds.size(), 4u);
  EXPECT_EQ(op.bench_problems.size(), 3u);
}

}  // namespace
}  // namespace kc::stage4
