// The paged decode ladder on the GPU, beyond what the conformance suite checks (every rung on every
// conformance problem, with the split count rung 02 picks for this GPU, tests/conformance):
// rungs 02 and 03 with split counts forced from 1 to one split per 64 keys pass the same check on
// ragged batches (short sequences leave splits unused, rows chunked past 32, rung 03's one and two
// m16 tiles), whatever the SM count of the GPU; and a NaN in a key some rows see makes exactly
// those rows NaN, in every rung and through the combine (the mask selects keys, the merges do not
// drop a NaN); the public entry (PagedDecodeAttention) reserves from a shape without tensors, runs
// rung 05 by default and rungs 04, 03 and 02 when told, each passing the check with the engine's
// split floor; rungs 04 and 05 give rung 03's bits, launch after launch on the same counters;
// on the RoPE op, rung 07 gives rung 06's bits (O, LSE and the cache rows it writes) through the
// public entry, which runs rung 07 unless told. Skips without a GPU.
#include <gtest/gtest.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kc/stage3/decode_args.hpp"
#include "attention_test_support.hpp"
#include "kc/common/buffer.hpp"
#include "kc/common/check.hpp"
#include "kc/common/error.hpp"
#include "kc/stage3/attention_decode.hpp"
#include "kc/stage3/attention_ops.hpp"
#include "src/register_attention_decode.hpp"
#include "stage3_test_registry.hpp"
#include "support/gpu_test.hpp"

namespace kc::stage3 {
namespace {

using testing_support::download;

const OpSpec& decode_op() { return stage3_test_registry().op(kAttentionDecodeOp); }

// The rungs that take a split plan: 02 (CUDA cores), 03 (mma.sync), 04 (03 merged in the launch)
// and 05 (04 with its first pages asked for before the wait).
enum class SplitRung { split_kv_02, mma_split_kv_03, fused_combine_04, early_pages_05 };

int rung_number(SplitRung rung) { return 2 + static_cast<int>(rung); }

// `rung` on `problem`'s operands with exactly the split count of decode_plan_with_splits(splits),
// its workspace in `workspace` (grown as needed; rung 04's arrival counters after the partials,
// zeroed before each launch here — the entry's test below leaves them to the kernel).
template <typename T>
void run_split_rung(SplitRung rung, const Problem& problem, Operands& operands, int splits,
                    DeviceBuffer<float>& workspace, cudaStream_t stream) {
  const DecodeArgs<T> args = decode_args<T>(problem, operands);
  const DecodeSplitPlan plan = decode_plan_with_splits(args.group_rows(), args.max_keys(), splits);
  const std::size_t floats = decode_split_workspace_floats(args.batch, args.q_heads, args.q_len, args.head_dim, plan);
  const std::size_t counters = decode_split_arrival_counters(args.batch, args.kv_heads, plan);
  if (workspace.size() < floats + counters) workspace = DeviceBuffer<float>(floats + counters);
  DecodeSplitWorkspace views =
      decode_split_workspace(workspace.data(), args.batch, args.q_heads, args.q_len, args.head_dim, plan);
  if (counters > 0) {
    views.arrivals = reinterpret_cast<unsigned*>(workspace.data() + floats);
    KC_CUDA_CHECK(cudaMemsetAsync(views.arrivals, 0, counters * sizeof(unsigned), stream));
  }
  if (rung == SplitRung::split_kv_02)
    attention_decode_02_split_kv(args, plan, views, stream);
  else if (rung == SplitRung::mma_split_kv_03)
    attention_decode_03_mma_split_kv(args, plan, views, stream);
  else if (rung == SplitRung::fused_combine_04)
    attention_decode_04_fused_combine(args, plan, views, stream);
  else
    attention_decode_05_early_pages(args, plan, views, stream);
  KC_CUDA_CHECK(cudaStreamSynchronize(stream));
}

RunFn split_rung_with(SplitRung rung, int splits, DeviceBuffer<float>& workspace) {
  return [rung, splits, &workspace](const Problem& problem, Operands& operands, Context& context) {
    if (problem.dtype == DType::bf16)
      run_split_rung<__nv_bfloat16>(rung, problem, operands, splits, workspace, context.stream());
    else
      run_split_rung<__half>(rung, problem, operands, splits, workspace, context.stream());
  };
}

TEST(AttentionDecodeLadderGpu, EverySplitCountPassesTheCheck) {
  KC_SKIP_WITHOUT_GPU();
  Context& context = testing::shared_context();
  const OpSpec& op = decode_op();
  const std::vector<Problem> problems = {
      // Llama-3-8B's heads, 4 new tokens, ragged (1, 15, 17, 0, 16 and hashed lengths), blocks of 16.
      op.problem({9, 32, 8, 4, 1000, 128}, DType::bf16, {{"lengths", 1.0}}),
      // 8 heads a group x 8 tokens = 64 rows: two row chunks a kv head; blocks of 64.
      op.problem({7, 16, 2, 8, 700, 64}, DType::f16, {{"lengths", 1.0}, {"block_size", 64.0}}),
      // One group of 1 row (MHA, one token): one warp a CTA in rung 02; blocks of 32.
      op.problem({3, 4, 4, 1, 333, 128}, DType::f16, {{"block_size", 32.0}}),
      // 8 heads x 3 tokens = 24 rows: rung 03's two m16 tiles, the second half padding.
      op.problem({5, 16, 2, 3, 1500, 128}, DType::bf16, {{"lengths", 1.0}}),
      // 5 heads x 8 tokens = 40 rows: a chunk of 32 rows and one of 8.
      op.problem({3, 10, 2, 8, 300, 64}, DType::bf16, {{"lengths", 1.0}, {"block_size", 32.0}})};
  DeviceBuffer<float> workspace;
  for (const SplitRung rung : {SplitRung::split_kv_02, SplitRung::mma_split_kv_03, SplitRung::fused_combine_04,
                               SplitRung::early_pages_05})
    for (const Problem& problem : problems) {
      const DecodeShape s = decode_shape(problem);
      const int max_keys = static_cast<int>(s.max_blocks() * s.block_size);
      const int most = (max_keys + kDecodeSplitKeyMultiple - 1) / kDecodeSplitKeyMultiple;
      for (const int splits : {1, 2, 3, 5, most}) {
        const CheckOutcome outcome = check_run(op, split_rung_with(rung, splits, workspace), problem, 11, context);
        EXPECT_TRUE(outcome.passed()) << "rung 0" << rung_number(rung) << " "
                                      << problem.label() << " with " << splits << " splits: " << outcome.detail;
      }
    }
}

// Sq = 4 new tokens of sequences of 100 keys (blocks of 16): token t sees keys j < 97 + t. K of
// key 98 of sequence 0, kv head 1, holds a NaN: tokens 2 and 3 of query heads 4-7 see it (8 rows),
// no other row does. Run by every rung as registered, and rungs 02 and 03 with two splits (keys
// 0-63 and 64-99: the NaN reaches the combine through one partial LSE).
TEST(AttentionDecodeLadderGpu, NanInAKeyReachesTheRowsThatSeeItOnly) {
  KC_SKIP_WITHOUT_GPU();
  Context& context = testing::shared_context();
  const Registry& r = stage3_test_registry();
  const OpSpec& op = decode_op();
  constexpr std::int64_t kD = 64, kSq = 4, kHq = 8, kNanKey = 98, kNanKvHead = 1;
  constexpr std::uint64_t kSeed = 23;
  DeviceBuffer<float> workspace;
  std::vector<std::pair<std::string, RunFn>> runs;
  for (const KernelEntry* kernel : r.select("^stage3/attention_decode_paged/"))
    runs.emplace_back(kernel->id, [kernel](const Problem& p, Operands& o, Context& c) {
      kernel->launch(p, o, c.stream());
      KC_CUDA_CHECK(cudaStreamSynchronize(c.stream()));
    });
  runs.emplace_back("rung 02 with 2 splits", split_rung_with(SplitRung::split_kv_02, 2, workspace));
  runs.emplace_back("rung 03 with 2 splits", split_rung_with(SplitRung::mma_split_kv_03, 2, workspace));
  runs.emplace_back("rung 04 with 2 splits", split_rung_with(SplitRung::fused_combine_04, 2, workspace));
  runs.emplace_back("rung 05 with 2 splits", split_rung_with(SplitRung::early_pages_05, 2, workspace));

  for (const auto& [name, run] : runs)
    for (const DType dtype : {DType::bf16, DType::f16}) {
      const Problem problem = op.problem({2, kHq, 2, kSq, 100, kD}, dtype);
      const DecodeShape s = decode_shape(problem);
      Operands operands = op.make_operands(problem, kSeed, context);
      const PagedKvLayout layout = decode_layout(problem, kSeed);
      const std::int64_t block = layout.block(0, kNanKey / s.block_size);
      const std::int64_t pool_row = (block * s.kv_heads + kNanKvHead) * s.block_size + kNanKey % s.block_size;
      testing_support::plant_nan(operands["K_cache"], static_cast<std::size_t>(pool_row * kD + 5), context.stream());

      const std::int64_t saved_limit = context.cpu_reference_limit;
      context.cpu_reference_limit = std::int64_t{1} << 40;  // the host reference
      const References references = op.reference(problem, operands, context);
      context.cpu_reference_limit = saved_limit;
      run(problem, operands, context);

      const std::vector<double> o = download(operands["O"], context.stream());
      const std::vector<double> lse = download(operands["LSE"], context.stream());
      const std::vector<double> o_ref = download(references.at("O"), context.stream());
      const std::vector<double> lse_ref = download(references.at("LSE"), context.stream());
      int wrong_rows = 0;
      for (std::int64_t row = 0; row < 2 * kHq * kSq; ++row) {
        const std::int64_t b = row / (kHq * kSq), head = row / kSq % kHq, token = row % kSq;
        const bool sees_nan = b == 0 && head / (kHq / 2) == kNanKvHead && token >= 2;
        EXPECT_EQ(std::isnan(lse_ref[row]), sees_nan) << "the reference disagrees on row " << row;
        bool row_ok = std::isnan(lse[row]) == sees_nan &&
                      (sees_nan || std::abs(lse[row] - lse_ref[row]) <= 1e-2 * std::max(1.0, std::abs(lse_ref[row])));
        for (std::int64_t c = 0; c < kD; ++c) {
          const double value = o[row * kD + c];
          row_ok = row_ok && std::isnan(value) == sees_nan && (sees_nan || std::abs(value - o_ref[row * kD + c]) <= 5e-2);
        }
        wrong_rows += row_ok ? 0 : 1;
      }
      EXPECT_EQ(wrong_rows, 0) << name << " " << dtype_name(dtype) << ": " << wrong_rows
                               << " rows differ from the definition (8 rows NaN, the rest finite)";
    }
}

// The public entry's problems: ragged batches with SmolLM2's heads (9 q / 3 kv, D = 64, one
// token, blocks of 16), Llama-3-8B's (8 sequences, blocks of 32) and two new tokens in f16.
std::vector<Problem> entry_problems() {
  const OpSpec& op = decode_op();
  return {op.problem({1, 9, 3, 1, 2000, 64}, DType::bf16, {{"lengths", 1.0}}),
          op.problem({8, 32, 8, 1, 3000, 128}, DType::bf16, {{"lengths", 1.0}, {"block_size", 32.0}}),
          op.problem({3, 16, 2, 2, 900, 128}, DType::f16, {{"lengths", 1.0}})};
}

// The engine's use of the public entry: a floor of 128 keys, reserve() from the shape alone (null
// pointers) at the table's width, then run(); rung 05 by default and rungs 04, 03 and 02 when set,
// each returning its id and passing the op's check (five seeds: rung 04's counters, left at zero
// by each launch, serve the next). Launched the ordinary way here: rung 05's early start is tested
// in dependent_launch_gpu_test.cu.
TEST(AttentionDecodeLadderGpu, ThePublicEntryRunsTheRungItNamesAndPassesTheCheck) {
  KC_SKIP_WITHOUT_GPU();
  Context& context = testing::shared_context();
  const OpSpec& op = decode_op();
  const std::vector<Problem> problems = entry_problems();
  for (const auto rung : {PagedDecodeAttention::Rung::early_pages, PagedDecodeAttention::Rung::fused_combine,
                          PagedDecodeAttention::Rung::mma_split_kv, PagedDecodeAttention::Rung::split_kv})
    for (const Problem& problem : problems) {
      PagedDecodeAttention decode;
      decode.set_min_keys_per_split(128);
      decode.set_rung(rung);
      std::string ran;
      const RunFn run = [&decode, &ran](const Problem& p, Operands& o, Context& c) {
        if (p.dtype == DType::bf16) {
          const DecodeArgs<__nv_bfloat16> args = decode_args<__nv_bfloat16>(p, o);
          DecodeArgs<__nv_bfloat16> shape = args;
          shape.q = shape.k_cache = shape.v_cache = shape.o = nullptr;
          decode.reserve(shape);
          ran = decode.run(args, c.stream());
        } else {
          const DecodeArgs<__half> args = decode_args<__half>(p, o);
          DecodeArgs<__half> shape = args;
          shape.q = shape.k_cache = shape.v_cache = shape.o = nullptr;
          decode.reserve(shape);
          ran = decode.run(args, c.stream());
        }
        KC_CUDA_CHECK(cudaStreamSynchronize(c.stream()));
      };
      const CheckOutcome outcome = check_run(op, run, problem, 5, context);
      const std::string expected = rung == PagedDecodeAttention::Rung::early_pages
                                       ? "stage3/attention_decode_paged/05_early_pages"
                                       : rung == PagedDecodeAttention::Rung::fused_combine
                                       ? "stage3/attention_decode_paged/04_fused_combine"
                                       : rung == PagedDecodeAttention::Rung::mma_split_kv
                                       ? "stage3/attention_decode_paged/03_mma_split_kv"
                                       : "stage3/attention_decode_paged/02_split_kv";
      EXPECT_EQ(ran, expected);
      EXPECT_TRUE(outcome.passed()) << expected << " " << problem.label() << ": " << outcome.detail;
    }
}

// Rung 04 merges in the same order and with the same arithmetic as rung 03's combine kernel, and
// writes a sequence that one split holds directly where rung 03 merges one partial (a weight of
// exactly 1): O and LSE are the same bits; rung 05 is rung 04 with a prefetch, the same bits again.
// Through the public entry, three launches in a row on the same workspace (the arrival counters
// must be back at zero after each), on ragged batches whose sequences use from none to every
// split, with SmolLM2's and Llama-3-8B's heads.
TEST(AttentionDecodeLadderGpu, Rungs04And05GiveRung03sBitsLaunchAfterLaunch) {
  KC_SKIP_WITHOUT_GPU();
  Context& context = testing::shared_context();
  const OpSpec& op = decode_op();
  std::vector<Problem> problems = entry_problems();
  problems.push_back(op.problem({3, 10, 2, 8, 300, 64}, DType::bf16, {{"lengths", 1.0}, {"block_size", 32.0}}));
  for (const Problem& problem : problems) {
    constexpr PagedDecodeAttention::Rung kRungs[] = {PagedDecodeAttention::Rung::mma_split_kv,
                                                     PagedDecodeAttention::Rung::fused_combine,
                                                     PagedDecodeAttention::Rung::early_pages};
    std::vector<double> outputs[3][2];  // [rung 03, 04, 05][O, LSE]
    for (const int which : {0, 1, 2}) {
      PagedDecodeAttention decode;
      decode.set_min_keys_per_split(128);
      decode.set_rung(kRungs[which]);
      Operands operands = op.make_operands(problem, 7, context);
      for (int launch = 0; launch < 3; ++launch) {
        if (problem.dtype == DType::bf16)
          decode.run(decode_args<__nv_bfloat16>(problem, operands), context.stream());
        else
          decode.run(decode_args<__half>(problem, operands), context.stream());
        const std::vector<double> o = download(operands["O"], context.stream());
        const std::vector<double> lse = download(operands["LSE"], context.stream());
        if (launch > 0) {
          EXPECT_TRUE(o == outputs[which][0] && lse == outputs[which][1])
              << problem.label() << ": launch " << launch << " of rung 0" << which + 3
              << " differs from its first";
        }
        outputs[which][0] = o;
        outputs[which][1] = lse;
      }
    }
    for (const int which : {1, 2}) {
      std::size_t differ = 0;
      for (int t = 0; t < 2; ++t)
        for (std::size_t i = 0; i < outputs[0][t].size(); ++i) {
          const double a = outputs[0][t][i], b = outputs[which][t][i];
          differ += (a == b || (std::isnan(a) && std::isnan(b))) ? 0 : 1;
        }
      EXPECT_EQ(differ, 0u) << problem.label() << ": rung 0" << which + 3 << "'s O and LSE differ from rung 03's in "
                            << differ << " values";
    }
  }
}

// Rung 07 copies its first tiles' cached rows before its wait and builds the new rows after it;
// rung 08 is rung 07 with its page addresses worked out once a CTA; rung 09 is rung 08 in a grid of
// groups x splits whose CTAs past their sequence's keys leave before the wait; rung 10 is rung 08
// with the merge's hand-over by a release/acquire count (splits of 128 keys and more here, so the
// long problems merge). The tiles, splits and merge order are rung 06's in
// all four, so O, LSE and the cache rows written are the same bits. Through the public entry (run_rope set to each rung), three launches in a row on the same operands, at the
// engine's shapes — SmolLM2's and Llama-3-8B's heads at short contexts (the whole split in the
// first tiles) and long ones (tiles streamed after them) — and ragged batches with 2, 4 and 8 new
// tokens (rows that straddle a tile, a split, and rows past the first tiles), in blocks of 16, 32
// and 64 keys.
// Rung 11 runs twice: without counters (it waits as rung 10) and with counters that say every kv
// head is written already (each byte 0xff, target 1: its acquire path, as kc-bench's entry runs it).
TEST(AttentionDecodeLadderGpu, Rungs07To11GiveRung06sBitsLaunchAfterLaunch) {
  KC_SKIP_WITHOUT_GPU();
  // Values that differ, a NaN equal to a NaN (the caches' poisoned rows past each length).
  const auto differences = [](const std::vector<double>& a, const std::vector<double>& b) {
    std::size_t differ = a.size() == b.size() ? 0 : 1;
    for (std::size_t i = 0; i < a.size() && i < b.size(); ++i)
      differ += (a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i]))) ? 0 : 1;
    return differ;
  };
  Context& context = testing::shared_context();
  const OpSpec& op = stage3_test_registry().op(kAttentionDecodeRopeOp);
  const std::vector<Problem> problems = {
      op.problem({1, 9, 3, 1, 140, 64}, DType::bf16, {}),
      op.problem({1, 32, 8, 1, 140, 128}, DType::bf16, {}),
      op.problem({1, 32, 8, 1, 2100, 128}, DType::bf16, {}),
      op.problem({3, 16, 2, 2, 900, 128}, DType::f16, {{"lengths", 1.0}}),
      op.problem({5, 8, 2, 4, 300, 64}, DType::bf16, {{"lengths", 1.0}, {"block_size", 32.0}}),
      op.problem({2, 4, 1, 8, 250, 128}, DType::f16, {{"lengths", 1.0}, {"block_size", 64.0}}),
      op.problem({2, 32, 8, 1, 1500, 64}, DType::f16, {{"lengths", 1.0}, {"block_size", 64.0}})};
  constexpr int kRungs = 7;  // [0] is the reference: rung 06
  const PagedDecodeAttention::RopeRung rungs[kRungs] = {
      PagedDecodeAttention::RopeRung::rope_in, PagedDecodeAttention::RopeRung::pages_before_wait,
      PagedDecodeAttention::RopeRung::page_walk, PagedDecodeAttention::RopeRung::workers_first,
      PagedDecodeAttention::RopeRung::release_acquire_merge, PagedDecodeAttention::RopeRung::heads_handed_over,
      PagedDecodeAttention::RopeRung::heads_handed_over};
  const bool with_counts[kRungs] = {false, false, false, false, false, false, true};
  DeviceBuffer<unsigned> all_written(8);  // the problems' kv heads: at most 8
  KC_CUDA_CHECK(cudaMemsetAsync(all_written.data(), 0xff, all_written.bytes(), context.stream()));
  for (const Problem& problem : problems) {
    std::vector<double> outputs[kRungs][4];  // [rung][O, LSE, K_cache, V_cache]
    for (int which = 0; which < kRungs; ++which) {
      PagedDecodeAttention decode;
      decode.set_min_keys_per_split(128);
      decode.set_rope_rung(rungs[which]);
      const std::string_view id = PagedDecodeAttention::rope_rung_id(rungs[which]);
      Operands operands = op.make_operands(problem, 11, context);
      for (int launch = 0; launch < 3; ++launch) {
        std::string_view ran;
        const auto counted = [&](auto rope) {
          if (with_counts[which]) {
            rope.heads_written = all_written.data();
            rope.heads_written_target = 1;
          }
          return rope;
        };
        if (problem.dtype == DType::bf16)
          ran = decode.run_rope(decode_args<__nv_bfloat16>(problem, operands),
                                counted(decode_rope_args<__nv_bfloat16>(problem, operands)), context.stream());
        else
          ran = decode.run_rope(decode_args<__half>(problem, operands),
                                counted(decode_rope_args<__half>(problem, operands)), context.stream());
        EXPECT_EQ(ran, id);
        std::vector<double> now[4];
        int t = 0;
        for (const char* name : {"O", "LSE", "K_cache", "V_cache"})
          now[t++] = download(operands[name], context.stream());
        if (launch > 0) {
          for (int k = 0; k < 4; ++k) {
            EXPECT_EQ(differences(now[k], outputs[which][k]), 0u)
                << problem.label() << ": launch " << launch << " of " << id << " differs from its first";
          }
        }
        for (int k = 0; k < 4; ++k) outputs[which][k] = now[k];
      }
    }
    for (int which = 1; which < kRungs; ++which) {
      const std::string_view id = PagedDecodeAttention::rope_rung_id(rungs[which]);
      std::size_t differ = 0, nan = 0;
      for (int t = 0; t < 4; ++t) differ += differences(outputs[which][t], outputs[0][t]);
      for (int t = 0; t < 2; ++t)  // O and LSE (the caches' rows past each length are poisoned)
        for (const double value : outputs[which][t]) nan += std::isnan(value) ? 1 : 0;
      EXPECT_EQ(differ, 0u) << problem.label() << ": " << id << "'s O, LSE and caches differ from rung 06's in "
                            << differ << " values";
      EXPECT_EQ(nan, 0u) << problem.label() << ": " << id << "'s O and LSE hold " << nan
                         << " NaN (a poisoned new row read)";
    }
  }
}

}  // namespace
}  // namespace kc::stage3
