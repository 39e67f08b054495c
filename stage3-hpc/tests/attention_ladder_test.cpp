// The FlashAttention ladder's registration, on the CPU: every rung is filed under attention_fwd
// for bf16 and f16 in ladder order, the fused rungs refuse exactly the head dimensions they are
// not compiled for (with a reason that says so), and every refusal they list names a conformance
// problem, so the conformance suite holds them to it.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "kc/common/registry.hpp"
#include "kc/stage3/attention.hpp"
#include "kc/stage3/register.hpp"
#include "stage3_test_registry.hpp"
#include "src/register_attention.hpp"

namespace kc::stage3 {
namespace {

const std::vector<std::string> kRungs = {"01_naive_unfused", "02_tiled_online_softmax", "03_fa2_mma_sync",
                                         "04_fa2_cp_async", "05_fa2_two_tiles_per_warp", "06_tma_wgmma",
                                         "07_fa3_overlap",          "08_persistent",
                                         "09_three_consumers",      "10_wide_key_tiles",
                                         "11_sleeping_producer",    "12_added_descriptors",
                                         "13_scale_in_exponent",    "14_rowless_consumers_leave",
                                         "15_lazy_rescale",         "16_fa2_lean_softmax",
                                         "17_wide_key_tiles_d128",  "18_persistent_turns_run_on",
                                         "19_pair_tiles_together",  "20_causal_pair_groups",
                                         "21_fa2_two_tiles_d128",   "22_fa2_narrow_key_tiles",
                                         "23_fa2_fragments_ahead",  "24_fa2_whole_tile_copies",
                                         "25_dynamic_items",        "26_exponentials_on_fma",
                                         "27_wide_tiles_lean_softmax"};

TEST(AttentionLadder, EveryRungIsRegisteredInOrderForBothDtypes) {
  const Registry& r = stage3_test_registry();
  for (std::size_t i = 0; i < kRungs.size(); ++i) {
    const KernelEntry& k = r.kernel("stage3/attention_fwd/" + kRungs[i]);
    EXPECT_EQ(k.op, kAttentionFwdOp);
    EXPECT_EQ(k.rung, static_cast<int>(i) + 1) << k.id;
    EXPECT_TRUE(k.runs_dtype(DType::bf16)) << k.id;
    EXPECT_TRUE(k.runs_dtype(DType::f16)) << k.id;
    // Rungs 06-15, 17-20 and 25-27 are sm_90a machine code (TMA, WGMMA): compute capability 9.0
    // and nothing else; rungs 16 and 21-24 are mma.sync again (sm_80 and later).
    const bool hopper = i >= 5 && i != 15 && (i < 20 || i >= 24);
    EXPECT_EQ(k.min_compute_capability, hopper ? 90 : 80) << k.id;
    EXPECT_EQ(k.max_compute_capability, hopper ? 90 : 0) << k.id;
    EXPECT_FALSE(k.idea.empty()) << k.id;
    EXPECT_EQ(k.report_group(), "stage3-attention") << k.id;
  }
  EXPECT_EQ(r.select("^stage3/attention_fwd/").size(), kRungs.size());
}

TEST(AttentionLadder, FusedRungsRefuseHeadDimensionsTheyAreNotCompiledFor) {
  const Registry& r = stage3_test_registry();
  const OpSpec& op = r.op(kAttentionFwdOp);
  for (const char* name :
       {"02_tiled_online_softmax", "03_fa2_mma_sync", "04_fa2_cp_async", "05_fa2_two_tiles_per_warp",
        "06_tma_wgmma", "07_fa3_overlap", "08_persistent", "09_three_consumers", "10_wide_key_tiles",
        "11_sleeping_producer", "12_added_descriptors", "13_scale_in_exponent", "14_rowless_consumers_leave",
        "15_lazy_rescale", "16_fa2_lean_softmax", "17_wide_key_tiles_d128", "18_persistent_turns_run_on",
        "19_pair_tiles_together", "20_causal_pair_groups", "21_fa2_two_tiles_d128",
        "22_fa2_narrow_key_tiles", "23_fa2_fragments_ahead", "24_fa2_whole_tile_copies", "25_dynamic_items",
        "26_exponentials_on_fma", "27_wide_tiles_lean_softmax"}) {
    const KernelEntry& k = r.kernel(std::string("stage3/attention_fwd/") + name);
    for (const std::int64_t d : {64, 128})
      EXPECT_EQ(unsupported_reason(r, k, op.problem({2, 8, 2, 77, 1000, d}, DType::f16, {{"causal", 1.0}}), nullptr),
                "")
          << k.id << " D = " << d;
    for (const std::int64_t d : {32, 80, 96, 256}) {
      const std::string reason = unsupported_reason(r, k, op.problem({1, 2, 1, 33, 45, d}, DType::bf16), nullptr);
      EXPECT_NE(reason.find("D = " + std::to_string(d)), std::string::npos) << k.id << ": " << reason;
      EXPECT_NE(reason.find("64 and"), std::string::npos) << k.id << ": " << reason;
    }
  }
  // The unfused rung takes any head dimension.
  EXPECT_EQ(unsupported_reason(r, r.kernel("stage3/attention_fwd/01_naive_unfused"),
                               op.problem({1, 2, 1, 33, 45, 80}, DType::bf16), nullptr),
            "");
}

TEST(AttentionLadder, ListedRefusalsAreConformanceProblems) {
  const OpSpec& op = stage3_test_registry().op(kAttentionFwdOp);
  ASSERT_FALSE(flash_attention_refusals().empty());
  for (const std::string& label : flash_attention_refusals()) {
    const bool found = std::any_of(op.conformance_problems.begin(), op.conformance_problems.end(),
                                   [&](const Problem& p) { return p.label() == label; });
    EXPECT_TRUE(found) << label << " is not a conformance problem of attention_fwd";
  }
}

// The conformance problems cover what the ladder must handle: odd lengths (1, 17, 77, 1000, 4097),
// Sq != Sk both ways under the causal mask (and so rows that see no key), group sizes 1, 4 and 8,
// D = 64 and 128, both dtypes.
TEST(AttentionLadder, ConformanceProblemsCoverTheEdgeCases) {
  const OpSpec& op = stage3_test_registry().op(kAttentionFwdOp);
  bool lengths[5] = {}, sq_above_sk = false, sq_below_sk = false, groups[3] = {}, dims[2] = {}, dtypes[2] = {};
  const std::int64_t odd[5] = {1, 17, 77, 1000, 4097};
  for (const Problem& p : op.conformance_problems) {
    const AttentionShape s = attention_shape(p);
    for (int i = 0; i < 5; ++i) lengths[i] |= s.q_len == odd[i] || s.kv_len == odd[i];
    sq_above_sk |= attention_causal(p) && s.q_len > s.kv_len;
    sq_below_sk |= attention_causal(p) && s.q_len < s.kv_len;
    groups[0] |= s.group() == 1;
    groups[1] |= s.group() == 4;
    groups[2] |= s.group() == 8;
    dims[0] |= s.head_dim == 64;
    dims[1] |= s.head_dim == 128;
    dtypes[0] |= p.dtype == DType::bf16;
    dtypes[1] |= p.dtype == DType::f16;
  }
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(lengths[i]) << "no sequence length " << odd[i];
  EXPECT_TRUE(sq_above_sk && sq_below_sk);
  EXPECT_TRUE(groups[0] && groups[1] && groups[2]);
  EXPECT_TRUE(dims[0] && dims[1]);
  EXPECT_TRUE(dtypes[0] && dtypes[1]);
}

}  // namespace
}  // namespace kc::stage3
