// The paged decode ladder on the CPU: every rung is filed under attention_decode_paged for bf16
// and f16 in ladder order, refuses exactly the head dimensions it is not compiled for (with a
// reason that says so) and lists those refusals as conformance problems; the conformance problems
// reach every case the kernels branch on (ragged and empty sequences, blocks of 16/32/64, Sq 1 and
// more, groups 1/4/8, D 64/128, one split and several, groups over 32 rows); rung 02's split rule
// fills the GPU for a short batch and cuts every context into whole pages, and rung 03's fills
// whole waves of resident CTAs under the same rules; the public entry (PagedDecodeAttention) runs
// rung 05 unless told otherwise and refuses a head dimension no rung compiles before touching a GPU.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <string>
#include <vector>

#include "kc/stage3/decode_args.hpp"
#include "kc/common/registry.hpp"
#include "kc/stage3/attention_decode.hpp"
#include "kc/stage3/attention_ops.hpp"
#include "kc/common/error.hpp"
#include "src/register_attention_decode.hpp"
#include "stage3_test_registry.hpp"
#include "support/refusals.hpp"

namespace kc::stage3 {
namespace {

const std::vector<std::string> kRungs = {"01_naive", "02_split_kv", "03_mma_split_kv", "04_fused_combine", "05_early_pages"};
constexpr int kH200Sms = 132;
constexpr int kA100Sms = 108;

const OpSpec& decode_op() { return stage3_test_registry().op(kAttentionDecodeOp); }

DecodeSplitPlan plan_for(const Problem& p, int sm_count) {
  const DecodeShape s = decode_shape(p);
  return plan_decode_splits(static_cast<int>(s.batch), static_cast<int>(s.kv_heads),
                            static_cast<int>(s.group() * s.q_len), static_cast<int>(s.max_blocks() * s.block_size),
                            sm_count);
}

TEST(AttentionDecodeLadder, EveryRungIsRegisteredInOrderForBothDtypes) {
  const Registry& r = stage3_test_registry();
  for (std::size_t i = 0; i < kRungs.size(); ++i) {
    const KernelEntry& k = r.kernel("stage3/attention_decode_paged/" + kRungs[i]);
    EXPECT_EQ(k.op, kAttentionDecodeOp);
    EXPECT_EQ(k.rung, static_cast<int>(i) + 1) << k.id;
    EXPECT_TRUE(k.runs_dtype(DType::bf16)) << k.id;
    EXPECT_TRUE(k.runs_dtype(DType::f16)) << k.id;
    EXPECT_FALSE(k.runs_dtype(DType::f32)) << k.id;
    EXPECT_EQ(k.min_compute_capability, 80) << k.id;
    EXPECT_EQ(k.max_compute_capability, 0) << k.id;
    EXPECT_FALSE(k.idea.empty()) << k.id;
    EXPECT_EQ(k.report_group(), "stage3-attention") << k.id;
  }
  EXPECT_EQ(r.select("^stage3/attention_decode_paged/").size(), kRungs.size());
}

TEST(AttentionDecodeLadder, RungsRefuseHeadDimensionsTheyAreNotCompiledFor) {
  const Registry& r = stage3_test_registry();
  const OpSpec& op = decode_op();
  for (const std::string& name : kRungs) {
    const KernelEntry& k = r.kernel("stage3/attention_decode_paged/" + name);
    for (const std::int64_t d : {64, 128})
      for (const double block_size : {16.0, 32.0, 64.0})
        EXPECT_EQ(unsupported_reason(r, k,
                                     op.problem({7, 32, 8, 4, 1000, d}, DType::f16,
                                                {{"block_size", block_size}, {"lengths", 1.0}}),
                                     nullptr),
                  "")
            << k.id << " D = " << d << " block_size " << block_size;
    for (const std::int64_t d : {32, 80, 96, 256}) {
      const std::string reason = unsupported_reason(r, k, op.problem({2, 8, 2, 1, 45, d}, DType::bf16), nullptr);
      EXPECT_NE(reason.find("D = " + std::to_string(d)), std::string::npos) << k.id << ": " << reason;
      EXPECT_NE(reason.find("64 and"), std::string::npos) << k.id << ": " << reason;
    }
    EXPECT_EQ(k.refuses, decode_rung_refusals()) << k.id;
  }
}

TEST(AttentionDecodeLadder, ListedRefusalsAreConformanceProblemsTheRungsRefuse) {
  const OpSpec& op = decode_op();
  ASSERT_FALSE(decode_rung_refusals().empty());
  for (const std::string& label : decode_rung_refusals()) {
    const auto found = std::find_if(op.conformance_problems.begin(), op.conformance_problems.end(),
                                    [&](const Problem& p) { return p.label() == label; });
    ASSERT_NE(found, op.conformance_problems.end()) << label << " is not a conformance problem of the decode op";
    EXPECT_EQ(op.supports(*found), "") << label << ": the op defines it, only the rungs refuse it";
    EXPECT_NE(decode_rung_shape_error(*found), "") << label;
  }
  // Every other conformance problem runs on every rung.
  for (const Problem& p : op.conformance_problems) {
    const bool listed = std::find(decode_rung_refusals().begin(), decode_rung_refusals().end(), p.label()) !=
                        decode_rung_refusals().end();
    if (!listed) {
      EXPECT_EQ(decode_rung_shape_error(p), "") << p.label();
    }
  }
}

// What the kernels branch on, each reached by some conformance problem the rungs run.
TEST(AttentionDecodeLadder, ConformanceProblemsCoverTheEdgeCases) {
  const OpSpec& op = decode_op();
  bool empty = false, shorter_than_sq = false, ragged[3] = {}, blocks[3] = {}, sq_one = false, sq_many = false;
  bool groups[3] = {}, dims[2] = {}, dtypes[2] = {}, over_32_rows = false, explicit_scale = false;
  bool one_split[2] = {}, several_splits[2] = {}, ragged_and_split = false;
  for (const Problem& p : op.conformance_problems) {
    if (decode_rung_shape_error(p) != "") continue;
    const DecodeShape s = decode_shape(p);
    const std::vector<std::int32_t> lengths = decode_seq_lens(s);
    const int block_index = s.block_size == 16 ? 0 : (s.block_size == 32 ? 1 : 2);
    blocks[block_index] = true;
    if (s.lengths == DecodeLengths::ragged) ragged[block_index] = true;
    empty |= std::find(lengths.begin(), lengths.end(), 0) != lengths.end();
    shorter_than_sq |= std::any_of(lengths.begin(), lengths.end(),
                                   [&](std::int32_t n) { return n > 0 && n < s.q_len; });
    sq_one |= s.q_len == 1;
    sq_many |= s.q_len > 1;
    groups[0] |= s.group() == 1;
    groups[1] |= s.group() == 4;
    groups[2] |= s.group() == 8;
    dims[0] |= s.head_dim == 64;
    dims[1] |= s.head_dim == 128;
    dtypes[0] |= p.dtype == DType::bf16;
    dtypes[1] |= p.dtype == DType::f16;
    over_32_rows |= s.group() * s.q_len > kDecodeMaxRowsPerCta;
    explicit_scale |= p.param("scale") != 0.0;
    for (const int sms : {kH200Sms, kA100Sms}) {
      const DecodeSplitPlan plan = plan_for(p, sms);
      one_split[sms == kA100Sms] |= !plan.combines();
      several_splits[sms == kA100Sms] |= plan.combines();
      ragged_and_split |= plan.combines() && s.lengths == DecodeLengths::ragged;
    }
  }
  EXPECT_TRUE(empty) << "no empty sequence";
  EXPECT_TRUE(shorter_than_sq) << "no sequence shorter than its new tokens (rows that see no key)";
  EXPECT_TRUE(ragged[0] && ragged[1] && ragged[2]) << "ragged lengths at every block size";
  EXPECT_TRUE(blocks[0] && blocks[1] && blocks[2]);
  EXPECT_TRUE(sq_one && sq_many);
  EXPECT_TRUE(groups[0] && groups[1] && groups[2]);
  EXPECT_TRUE(dims[0] && dims[1]);
  EXPECT_TRUE(dtypes[0] && dtypes[1]);
  EXPECT_TRUE(over_32_rows) << "no group of more than " << kDecodeMaxRowsPerCta << " rows (rung 02's row chunks)";
  EXPECT_TRUE(explicit_scale);
  EXPECT_TRUE(one_split[0] && one_split[1]) << "rung 02 never runs without a combine (H200, A100)";
  EXPECT_TRUE(several_splits[0] && several_splits[1]) << "rung 02 never combines splits (H200, A100)";
  EXPECT_TRUE(ragged_and_split) << "no ragged batch whose short sequences leave splits unused";
}

// Rung 03's plans (plan_decode_splits_in_waves) at the CTAs an SM holds for it (1 on an A100 at
// D = 128, 2 on an H200, 3 at D = 64): the conformance problems still reach one split and several.
TEST(AttentionDecodeLadder, ConformanceProblemsReachOneAndSeveralSplitsOfRung03) {
  const OpSpec& op = decode_op();
  for (const int sms : {kH200Sms, kA100Sms})
    for (const int ctas_per_sm : {1, 2, 3}) {
      bool one_split = false, several_splits = false;
      for (const Problem& p : op.conformance_problems) {
        if (decode_rung_shape_error(p) != "") continue;
        const DecodeShape s = decode_shape(p);
        const DecodeSplitPlan plan = plan_decode_splits_in_waves(
            static_cast<int>(s.batch), static_cast<int>(s.kv_heads), static_cast<int>(s.group() * s.q_len),
            static_cast<int>(s.max_blocks() * s.block_size), ctas_per_sm * sms);
        one_split |= !plan.combines();
        several_splits |= plan.combines();
      }
      EXPECT_TRUE(one_split && several_splits) << sms << " SMs x " << ctas_per_sm << " CTAs";
    }
}

TEST(AttentionDecodeSplitPlan, FillsTheGpuForOneLongSequence) {
  // Llama-3-8B: 32 query heads over 8 kv heads, one new token, 32k keys, on 132 SMs.
  const DecodeSplitPlan plan = plan_decode_splits(1, 8, 4, 32768, kH200Sms);
  EXPECT_EQ(plan.row_chunks, 1);
  EXPECT_EQ(plan.keys_per_split, 512);
  EXPECT_EQ(plan.splits, 64);
  EXPECT_GE(plan.splits * 8, kDecodeCtasPerSmTarget * kH200Sms * 9 / 10);  // about the target
  EXPECT_GE(plan.splits * 8, kH200Sms);                                    // every SM gets work
  EXPECT_TRUE(plan.combines());
}

TEST(AttentionDecodeSplitPlan, LargeBatchesAndShortContextsSplitLittleOrNot) {
  EXPECT_EQ(plan_decode_splits(256, 8, 4, 32768, kH200Sms).splits, 1);  // 2048 CTAs already
  EXPECT_FALSE(plan_decode_splits(256, 8, 4, 32768, kH200Sms).combines());
  EXPECT_EQ(plan_decode_splits(64, 8, 4, 8192, kH200Sms).splits, 2);    // 512 CTAs, 528 wanted
  EXPECT_EQ(plan_decode_splits(1, 8, 4, 1024, kH200Sms).splits, 4);     // 1024 / 256 at most
  EXPECT_EQ(plan_decode_splits(1, 8, 4, 255, kH200Sms).splits, 1);      // shorter than one split
  EXPECT_EQ(plan_decode_splits(1, 1, 1, 1, kH200Sms).splits, 1);
  // 64 rows a group (8 heads x 8 tokens): two row chunks, each a CTA.
  EXPECT_EQ(plan_decode_splits(2, 2, 64, 192, kH200Sms).row_chunks, 2);
  EXPECT_EQ(plan_decode_splits(2, 2, 33, 192, kH200Sms).row_chunks, 2);
  EXPECT_EQ(plan_decode_splits(2, 2, 32, 192, kH200Sms).row_chunks, 1);
}

// A lower floor (PagedDecodeAttention::set_min_keys_per_split): a short context at batch 1 gets
// more, shorter splits; a long one or a large batch is unchanged (the target, not the floor, sets
// its split count).
TEST(AttentionDecodeSplitPlan, ALowerFloorSplitsShortContextsFiner) {
  EXPECT_EQ(plan_decode_splits(1, 8, 4, 128, kH200Sms, 64).splits, 2);    // 128 keys: two of 64
  EXPECT_EQ(plan_decode_splits(1, 8, 4, 2048, kH200Sms, 64).splits, 32);  // 8 with the default floor
  EXPECT_EQ(plan_decode_splits(1, 8, 4, 2048, kH200Sms).splits, 8);
  EXPECT_EQ(plan_decode_splits(1, 8, 4, 2048, kH200Sms, 64).keys_per_split, 64);
  EXPECT_EQ(plan_decode_splits(1, 8, 4, 32768, kH200Sms, 64).splits, plan_decode_splits(1, 8, 4, 32768, kH200Sms).splits);
  EXPECT_EQ(plan_decode_splits(256, 8, 4, 2048, kH200Sms, 64).splits, 1);
}

// Both rules (rung 02's CTAs an SM, rung 03's waves of resident CTAs; `slots` is the SM count for
// the first, the resident CTAs for the second).
TEST(AttentionDecodeSplitPlan, SplitsAreWholePagesAndCoverTheContextWithoutAnEmptyOne) {
  for (const bool in_waves : {false, true})
    for (const int slots : {1, kA100Sms, kH200Sms, 3 * kH200Sms})
      for (const int batch : {1, 3, 16, 48, 64})
        for (const int kv_heads : {1, 2, 8})
          for (const int rows : {1, 4, 24, 64})
            for (const int keys : {1, 16, 63, 64, 65, 256, 257, 1000, 4095, 8192, 32768, 131072}) {
              const DecodeSplitPlan plan = in_waves ? plan_decode_splits_in_waves(batch, kv_heads, rows, keys, slots)
                                                    : plan_decode_splits(batch, kv_heads, rows, keys, slots);
              ASSERT_GE(plan.splits, 1);
              EXPECT_EQ(plan.keys_per_split % kDecodeSplitKeyMultiple, 0);
              EXPECT_GE(static_cast<long long>(plan.splits) * plan.keys_per_split, keys);     // covers
              EXPECT_LT(static_cast<long long>(plan.splits - 1) * plan.keys_per_split, keys);  // none empty
              if (plan.splits > 1) {
                EXPECT_GE(plan.keys_per_split, kDecodeMinKeysPerSplit);
              }
              EXPECT_EQ(plan.row_chunks, (rows + kDecodeMaxRowsPerCta - 1) / kDecodeMaxRowsPerCta);
            }
}

// Rung 03's rule on the H200 (132 SMs, two CTAs an SM at D = 128: 264 slots), Llama-3-8B's heads.
TEST(AttentionDecodeSplitPlanInWaves, FillsWholeWavesOfResidentCtas) {
  constexpr int kSlots = 2 * kH200Sms;
  const DecodeSplitPlan batch1 = plan_decode_splits_in_waves(1, 8, 4, 32768, kSlots);
  EXPECT_EQ(batch1.keys_per_split, 1024);  // 33 splits wanted: 993 keys, rounded to whole tiles
  EXPECT_EQ(batch1.splits, 32);            // 256 CTAs, one wave
  EXPECT_EQ(plan_decode_splits_in_waves(8, 8, 4, 32768, kSlots).splits, 4);   // 256 CTAs
  EXPECT_EQ(plan_decode_splits_in_waves(8, 8, 4, 8192, kSlots).splits, 4);
  EXPECT_EQ(plan_decode_splits_in_waves(48, 8, 4, 8192, kSlots).splits, 2);   // 768 CTAs: 3 waves at 97%
  EXPECT_EQ(plan_decode_splits_in_waves(64, 8, 4, 8192, kSlots).splits, 1);   // 512 CTAs: 2 waves at 97%
  EXPECT_EQ(plan_decode_splits_in_waves(256, 8, 4, 32768, kSlots).splits, 1);
  EXPECT_FALSE(plan_decode_splits_in_waves(256, 8, 4, 32768, kSlots).combines());
  // A short context: no split under the floor (256 keys by default, 64 on request).
  EXPECT_EQ(plan_decode_splits_in_waves(1, 8, 4, 1024, kSlots).splits, 4);
  EXPECT_EQ(plan_decode_splits_in_waves(1, 8, 4, 1024, kSlots, 64).splits, 16);
  EXPECT_EQ(plan_decode_splits_in_waves(1, 8, 4, 255, kSlots).splits, 1);
  EXPECT_EQ(plan_decode_splits_in_waves(1, 1, 1, 1, kSlots).splits, 1);
  EXPECT_EQ(plan_decode_splits_in_waves(1, 8, 4, 32768, 0).splits, 1);  // no slot count: one split
  EXPECT_EQ(plan_decode_splits_in_waves(2, 2, 64, 192, kSlots).row_chunks, 2);
}

TEST(AttentionDecodeSplitPlan, ForcedSplitCountsAndTheWorkspace) {
  for (const int splits : {1, 2, 3, 4, 8, 16}) {
    const DecodeSplitPlan plan = decode_plan_with_splits(4, 1000, splits);
    EXPECT_EQ(plan.splits, splits) << splits;  // 1000 keys hold 16 splits of 64
    EXPECT_EQ(decode_split_workspace_floats(3, 8, 2, 128, plan), splits == 1 ? 0u : 3u * 8 * 2 * splits * 129);
  }
  EXPECT_EQ(decode_plan_with_splits(4, 1000, 100).splits, 16);  // no split under 64 keys
  EXPECT_EQ(decode_plan_with_splits(4, 1000, 7).splits, 6);     // 143 keys rounded up to 192
  EXPECT_EQ(decode_plan_with_splits(4, 1000, 0).splits, 1);

  const DecodeSplitPlan plan = decode_plan_with_splits(4, 1000, 5);  // 256 keys each: 4 splits
  ASSERT_EQ(plan.splits, 4);
  std::vector<float> floats(decode_split_workspace_floats(3, 8, 2, 64, plan));
  const DecodeSplitWorkspace workspace = decode_split_workspace(floats.data(), 3, 8, 2, 64, plan);
  EXPECT_EQ(workspace.partial_o, floats.data());
  EXPECT_EQ(workspace.partial_lse, floats.data() + 3 * 8 * 2 * 4 * 64);
  EXPECT_EQ(workspace.partial_lse + 3 * 8 * 2 * 4, floats.data() + floats.size());
  EXPECT_EQ(decode_split_workspace(nullptr, 3, 8, 2, 64, decode_plan_with_splits(4, 1000, 1)).partial_o, nullptr);
}

// The engine's floor (128 keys) in rung 03's rule: a short context at batch 1 is cut into more,
// shorter splits than the default floor allows; every split still holds at least the floor.
TEST(AttentionDecodeSplitPlanInWaves, ALowerFloorSplitsShortContextsFiner) {
  constexpr int kSlots = 2 * kH200Sms;
  const DecodeSplitPlan fine = plan_decode_splits_in_waves(1, 8, 4, 2048, kSlots, 128);
  const DecodeSplitPlan coarse = plan_decode_splits_in_waves(1, 8, 4, 2048, kSlots);
  EXPECT_EQ(fine.splits, 16);   // 2048 / 128: the floor, not the wave, bounds it
  EXPECT_EQ(coarse.splits, 8);  // 2048 / 256
  EXPECT_GE(fine.keys_per_split, 128);
  EXPECT_EQ(plan_decode_splits_in_waves(1, 3, 3, 128, kSlots, 128).splits, 1);  // SmolLM2 at 128 keys
}

TEST(PagedDecodeAttention, RunsRung05UnlessToldAndRefusesAnUncompiledHeadDimensionBeforeAnyGpuCall) {
  PagedDecodeAttention decode;
  EXPECT_EQ(decode.rung(), PagedDecodeAttention::Rung::early_pages);
  decode.set_rung(PagedDecodeAttention::Rung::split_kv);
  EXPECT_EQ(decode.rung(), PagedDecodeAttention::Rung::split_kv);
  DecodeArgs<__nv_bfloat16> shape;  // a shape without tensors, as the engine reserves with
  shape.batch = 1;
  shape.q_heads = 9;
  shape.kv_heads = 3;
  shape.q_len = 1;
  shape.head_dim = 96;
  shape.block_size = 16;
  shape.max_blocks = 8;
  for (const auto rung : {PagedDecodeAttention::Rung::split_kv, PagedDecodeAttention::Rung::mma_split_kv,
                          PagedDecodeAttention::Rung::fused_combine, PagedDecodeAttention::Rung::early_pages}) {
    decode.set_rung(rung);
    try {
      decode.reserve(shape);
      ADD_FAILURE() << "D = 96 was reserved";
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find("D = 96"), std::string::npos) << error.what();
    }
  }
  shape.head_dim = 64;
  shape.kv_heads = 2;  // 9 query heads do not share 2 kv heads
  EXPECT_THROW(decode.reserve(shape), Error);
  EXPECT_THROW(decode.set_min_keys_per_split(100), Error);
}

// run() and run_rope() check what they are handed on the host before any CUDA call — on a fresh
// object, whose first call would otherwise ask the GPU for its SM count first: each refusal is a
// kc::Error naming the entry and the rule (a check that came after the GPU's answer would surface
// here, without a GPU, as the CUDA error instead).
TEST(PagedDecodeAttention, RunAndRunRopeCheckTheirArgumentsBeforeAnyGpuCall) {
  using bf16 = __nv_bfloat16;
  const auto at = [](std::uintptr_t slot, std::uintptr_t offset = 0) {
    return kc::testing::fake_pointer<bf16>(slot, offset);
  };
  DecodeArgs<bf16> good;
  good.q = at(1);
  good.k_cache = at(2);
  good.v_cache = at(3);
  good.o = at(4);
  good.block_table = kc::testing::fake_pointer<const std::int32_t>(5);
  good.seq_lens = kc::testing::fake_pointer<const std::int32_t>(6);
  good.lse = kc::testing::fake_pointer<float>(7);
  good.batch = 2;
  good.q_heads = 32;
  good.kv_heads = 8;
  good.q_len = 1;
  good.head_dim = 128;
  good.block_size = 16;
  good.max_blocks = 64;
  good.scale = 0.088f;
  DecodeRopeArgs<bf16> rope;
  rope.k_new = at(8);
  rope.v_new = at(9);
  rope.cos_sin = kc::testing::fake_pointer<const float>(10);
  rope.positions = 1024;
  rope.k_cache = at(2);
  rope.v_cache = at(3);
  const auto run_refuses = [&](const DecodeArgs<bf16>& args, const std::string& rule) {
    PagedDecodeAttention decode;
    kc::testing::expect_refused([&] { decode.run(args, nullptr); }, {"PagedDecodeAttention::run", rule});
  };
  const auto rope_refuses = [&](const DecodeArgs<bf16>& args, const DecodeRopeArgs<bf16>& r, const std::string& rule) {
    PagedDecodeAttention decode;
    kc::testing::expect_refused([&] { decode.run_rope(args, r, nullptr); }, {"PagedDecodeAttention::run_rope", rule});
  };
  DecodeArgs<bf16> a = good;
  a.head_dim = 96;
  run_refuses(a, "D = 96");
  rope_refuses(a, rope, "D = 96");
  a = good;
  a.block_size = 48;
  run_refuses(a, "block_size = 48");
  a = good;
  a.kv_heads = 5;
  run_refuses(a, "not a multiple of Hkv");
  a = good;
  a.k_cache = at(2, 2);
  run_refuses(a, "16-byte aligned");
  a = good;
  a.block_table = nullptr;
  run_refuses(a, "must not be null");
  a = good;
  a.lse = nullptr;
  rope_refuses(a, rope, "must not be null");
  DecodeRopeArgs<bf16> r = rope;
  r.cos_sin = nullptr;
  rope_refuses(good, r, "k_new, v_new and cos_sin must not be null");
  r = rope;
  r.v_new = at(9, 2);
  rope_refuses(good, r, "16-byte aligned");
  r = rope;
  r.positions = 0;
  rope_refuses(good, r, "positions");
  r = rope;
  r.v_cache = at(11);
  rope_refuses(good, r, "pass the same pools");
}

// The RoPE op's rungs: 06 to 11 registered under attention_decode_paged_rope, rung 10 what the
// public entry's run_rope() launches unless told, and each rung's id the registry's.
TEST(PagedDecodeAttention, RunsRopeRung10UnlessToldAndNamesEachRopeRungAsTheRegistryDoes) {
  const Registry& r = stage3_test_registry();
  PagedDecodeAttention decode;
  EXPECT_EQ(decode.rope_rung(), PagedDecodeAttention::RopeRung::release_acquire_merge);
  decode.set_rope_rung(PagedDecodeAttention::RopeRung::rope_in);
  EXPECT_EQ(decode.rope_rung(), PagedDecodeAttention::RopeRung::rope_in);
  const PagedDecodeAttention::RopeRung ladder[] = {
      PagedDecodeAttention::RopeRung::rope_in, PagedDecodeAttention::RopeRung::pages_before_wait,
      PagedDecodeAttention::RopeRung::page_walk, PagedDecodeAttention::RopeRung::workers_first,
      PagedDecodeAttention::RopeRung::release_acquire_merge, PagedDecodeAttention::RopeRung::heads_handed_over};
  ASSERT_EQ(std::size(PagedDecodeAttention::kRopeRungs), std::size(ladder));
  int number = 6;
  for (std::size_t i = 0; i < std::size(ladder); ++i) {
    const PagedDecodeAttention::RopeRung rung = ladder[i];
    EXPECT_EQ(PagedDecodeAttention::kRopeRungs[i], rung) << "kRopeRungs out of the ladder's order at " << i;
    EXPECT_EQ(PagedDecodeAttention::rope_rung_number(rung), number);
    const KernelEntry& k = r.kernel(std::string(PagedDecodeAttention::rope_rung_id(rung)));
    EXPECT_EQ(k.op, kAttentionDecodeRopeOp);
    EXPECT_EQ(k.rung, number) << k.id;
    EXPECT_EQ(k.id.substr(k.id.rfind('/') + 1, 3), fmt::format("{:02d}_", number)) << k.id;
    EXPECT_TRUE(k.runs_dtype(DType::bf16) && k.runs_dtype(DType::f16)) << k.id;
    ++number;
  }
  EXPECT_EQ(r.select("^stage3/attention_decode_paged_rope/(0|1[01])").size(), 6u);
}

}  // namespace
}  // namespace kc::stage3
