// The stage-1 entries as kc-bench and the conformance suite see them: ids, rungs, which shapes
// each rung accepts or refuses (with a reason a learner can act on), and the host-side checks of
// the launch functions, which throw before anything reaches a GPU.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kc/common/registry.hpp"
#include "kc/common/gemm.hpp"
#include "kc/stage1/sgemm.hpp"
#include "kc/stage1/register.hpp"

namespace kc::stage1 {
namespace {

Registry stage1_registry() {
  Registry registry;
  register_kernels(registry);
  return registry;
}

Problem sgemm(std::int64_t m, std::int64_t n, std::int64_t k) { return gemm_problem("sgemm", {m, n, k}, DType::f32); }

std::string reason(const Registry& registry, const std::string& name, const Problem& problem) {
  return unsupported_reason(registry, registry.kernel("stage1/sgemm/" + name), problem, nullptr);
}

TEST(Stage1Registry, RegistersTheLadderInOrder) {
  const Registry registry = stage1_registry();
  const std::vector<std::string> names = {"01_naive",        "02_coalesced",          "03_smem_tiling",
                                          "04_blocktile_1d", "05_blocktile_2d",       "06_vectorized",
                                          "07_bank_conflict_free", "08_warptile",     "09_cp_async",
                                          "10_autotuned",    "11_stream_k"};
  ASSERT_EQ(registry.kernels().size(), names.size());
  for (std::size_t i = 0; i < names.size(); ++i) {
    const KernelEntry& entry = registry.kernels()[i];
    EXPECT_EQ(entry.id, "stage1/sgemm/" + names[i]);
    EXPECT_EQ(entry.rung, static_cast<int>(i) + 1);
    EXPECT_FALSE(entry.idea.empty()) << entry.id;
    EXPECT_EQ(entry.op, "sgemm");
  }
}

TEST(Stage1Registry, Float4RungsRefuseKOrNNotMultipleOf4AndSayWhy) {
  const Registry registry = stage1_registry();
  for (const std::string name : {"06_vectorized", "07_bank_conflict_free"}) {
    EXPECT_FALSE(registry.kernel("stage1/sgemm/" + name).constraints.empty()) << name;
    EXPECT_EQ(reason(registry, name, sgemm(4096, 4096, 4096)), "") << name;
    EXPECT_EQ(reason(registry, name, sgemm(4093, 4, 8)), "") << name << ": M is free";
    EXPECT_EQ(reason(registry, name, sgemm(1000, 1000, 100)), "") << name;
    for (const Problem& refused : {sgemm(4093, 2049, 1031), sgemm(128, 128, 1031), sgemm(128, 2049, 128),
                                   sgemm(1, 1, 1)}) {
      const std::string why = reason(registry, name, refused);
      EXPECT_NE(why.find("multiples of 4"), std::string::npos) << name << " on " << refused.shape() << ": " << why;
      EXPECT_NE(why.find(refused.shape()), std::string::npos) << "the reason names the shape: " << why;
    }
  }
}

TEST(Stage1Registry, EveryOtherRungAcceptsEveryShape) {
  const Registry registry = stage1_registry();
  const std::vector<Problem> shapes = {sgemm(1, 1, 1),        sgemm(1, 17, 127),   sgemm(4093, 17, 127),
                                       sgemm(4093, 2049, 1031), sgemm(128, 8192, 8192), sgemm(8192, 512, 4096),
                                       sgemm(1000, 4093, 1),  sgemm(4194304, 1, 1)};
  for (const KernelEntry& entry : registry.kernels()) {
    if (entry.id.find("06_") != std::string::npos || entry.id.find("07_") != std::string::npos) continue;
    if (entry.id.find("01_") != std::string::npos) continue;  // grid.y limit, tested below
    EXPECT_TRUE(entry.constraints.empty()) << entry.id;
    for (const Problem& problem : shapes)
      EXPECT_EQ(unsupported_reason(registry, entry, problem, nullptr), "") << entry.id << " on " << problem.shape();
  }
}

TEST(Stage1Registry, NaiveRungRefusesMoreColumnsThanItsGridHolds) {
  const Registry registry = stage1_registry();
  const KernelEntry& naive = registry.kernel("stage1/sgemm/01_naive");
  EXPECT_EQ(unsupported_reason(registry, naive, sgemm(1, 65535 * 32, 1), nullptr), "");
  const std::string reason = unsupported_reason(registry, naive, sgemm(1, 65535 * 32 + 1, 1), nullptr);
  EXPECT_NE(reason.find("grid.y"), std::string::npos) << reason;
}

TEST(Stage1Registry, EveryRungHasConformanceProblemsItAccepts) {
  const Registry registry = stage1_registry();
  const OpSpec& op = registry.op("sgemm");
  for (const KernelEntry& entry : registry.kernels()) {
    int accepted = 0;
    for (const Problem& problem : op.conformance_problems)
      if (unsupported_reason(registry, entry, problem, nullptr).empty()) ++accepted;
    EXPECT_GE(accepted, 4) << entry.id << " would be conformance-tested on too few shapes";
  }
}

TEST(Stage1Launch, Float4RungsRefuseUnalignedRowsBeforeLaunching) {
  SgemmArgs args;
  args.m = 8;
  args.n = 6;  // rows of B and C are 24 bytes: not 16-byte aligned
  args.k = 8;
  args.lda = 8;
  args.ldb = 6;
  args.ldc = 6;
  for (const auto launch : {&sgemm_06_vectorized, &sgemm_07_bank_conflict_free}) {
    try {
      launch(args, nullptr);
      ADD_FAILURE() << "the launch should have thrown";
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find("multiples of 4"), std::string::npos) << error.what();
    }
  }
}

TEST(Stage1Launch, SearchSpaceLaunchRejectsUnknownConfigurationsAndSplits) {
  SgemmArgs args;
  args.m = args.n = args.k = args.lda = args.ldb = args.ldc = 8;
  EXPECT_THROW(sgemm_search_space_launch(-1, 1, args, nullptr), Error);
  EXPECT_THROW(sgemm_search_space_launch(1000, 1, args, nullptr), Error);
  EXPECT_THROW(sgemm_search_space_launch(0, 0, args, nullptr), Error);
}

}  // namespace
}  // namespace kc::stage1
