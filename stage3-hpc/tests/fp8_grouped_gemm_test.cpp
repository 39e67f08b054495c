// The fp8_grouped_gemm op's host side: the padded routing (row_align), s_A's row stride, the
// operands' shapes and the accounting, problem refusals, the rungs' argument checks, the problems
// (the baseline's static rules on the benchmark problems, the edges of the conformance set, the
// refusals) and the registration. The kernel's conformance, the baseline on the GPU and the
// negative control run on an H100/H200 (tests/conformance, stage3-hpc/tests/fp8_grouped_gemm_gpu_test.cpp,
// tests/harness: ctest -R fp8_grouped_gemm).
//   ctest --test-dir build/ci -R Fp8GroupedGemm
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <utility>
#include <string>
#include <vector>

#include "arch/sm90/tma_descriptor.hpp"
#include "kc/common/error.hpp"
#include "kc/stage3/fp8_grouped_gemm.hpp"
#include "kc/stage3/grouped_gemm.hpp"
#include "stage3_test_registry.hpp"
#include "support/refusals.hpp"

namespace kc::stage3 {
namespace {

using Counts = std::vector<std::int64_t>;
using kc::testing::error_of;
using kc::testing::expect_refused;

Problem problem(Shape dims, ParamValues values) {
  static const OpSpec op = make_fp8_grouped_gemm_op();
  return op.problem(std::move(dims), DType::f8e4m3, values);
}

std::int64_t sum(const Counts& counts) { return std::accumulate(counts.begin(), counts.end(), std::int64_t{0}); }
// An empty expert with an expert that has rows after it.
bool empty_expert_inside(const Counts& counts) {
  const auto first_empty = std::find(counts.begin(), counts.end(), 0);
  return std::any_of(first_empty, counts.end(), [](std::int64_t c) { return c > 0; });
}

TEST(Fp8GroupedGemmOp, IsRegisteredWithTheGroupedGemmsDimsAndParamsAndRowAlign) {
  const Registry& registry = stage3_test_registry();
  ASSERT_TRUE(registry.has_op(kFp8GroupedGemmOp));
  const OpSpec& op = registry.op(kFp8GroupedGemmOp);
  EXPECT_EQ(op.dim_names, (std::vector<std::string>{"G", "N", "K"}));
  EXPECT_EQ(op.dtypes, std::vector<DType>{DType::f8e4m3});
  EXPECT_EQ(op.math, MathUnit::fp8_tensor);
  std::vector<std::string> names;
  for (const ParamSpec& param : op.params) names.push_back(param.name);
  EXPECT_EQ(names, (std::vector<std::string>{"tokens", "skew", "routing_seed", "row_align"}));
  EXPECT_EQ(op.params.back().default_value, 1.0) << "row_align defaults to no padding";
  EXPECT_EQ(problem({8, 14336, 4096}, {{"tokens", 512}, {"row_align", 4}}).label(),
            "8x14336x4096 f8e4m3 tokens=512 row_align=4");
}

TEST(Fp8GroupedGemmRouting, RowAlignPadsEveryExpertThatHasRowsAndLeavesEmptyOnesEmpty) {
  EXPECT_EQ(padded_expert_counts({0, 1, 4, 5, 127, 128, 129}, 4), (Counts{0, 4, 4, 8, 128, 128, 132}));
  EXPECT_EQ(padded_expert_counts({0, 1, 4, 5, 127, 128, 129}, 128), (Counts{0, 128, 128, 128, 128, 128, 256}));
  EXPECT_EQ(padded_expert_counts({0, 1, 5, 129}, 1), (Counts{0, 1, 5, 129}));
  EXPECT_EQ(padded_expert_counts({}, 4), Counts{});
  EXPECT_THROW(padded_expert_counts({1, 2}, 0), Error);
  EXPECT_THROW(padded_expert_counts({1, -2}, 4), Error);
}

TEST(Fp8GroupedGemmRouting, TheProblemsCountsAreTheGroupedRoutingPadded) {
  // The grouped GEMM's 5, 1, 126, 2, 0, 16 rows (an empty expert between two with rows), padded to 4.
  const Problem padded = problem({6, 264, 272}, {{"tokens", 150}, {"skew", 3}, {"routing_seed", 2}, {"row_align", 4}});
  EXPECT_EQ(fp8_grouped_gemm_counts(padded), (Counts{8, 4, 128, 4, 0, 16}));
  EXPECT_EQ(fp8_grouped_gemm_rows(padded), 160);
  // row_align = 1: exactly the grouped GEMM's routing, rows = tokens.
  for (const double seed : {0.0, 3.0}) {
    const Problem plain = problem({8, 64, 64}, {{"tokens", 1000}, {"skew", 1.5}, {"routing_seed", seed}});
    EXPECT_EQ(fp8_grouped_gemm_counts(plain), expert_token_counts(8, 1000, 1.5, static_cast<std::uint64_t>(seed)));
    EXPECT_EQ(fp8_grouped_gemm_rows(plain), 1000);
  }
  // Every row_align: multiples of it, never fewer rows, the same experts empty, at most row_align - 1 rows added each.
  for (const double align : {1.0, 4.0, 64.0, 128.0}) {
    const Problem p = problem({64, 64, 64}, {{"tokens", 1024}, {"skew", 2}, {"routing_seed", 3}, {"row_align", align}});
    const Counts routed = expert_token_counts(64, 1024, 2.0, 3);
    const Counts counts = fp8_grouped_gemm_counts(p);
    ASSERT_EQ(counts.size(), routed.size());
    for (std::size_t g = 0; g < counts.size(); ++g) {
      EXPECT_EQ(counts[g] % static_cast<std::int64_t>(align), 0) << g;
      EXPECT_EQ(counts[g] == 0, routed[g] == 0) << "expert " << g << " at row_align " << align;
      EXPECT_GE(counts[g], routed[g]);
      EXPECT_LT(counts[g] - routed[g], static_cast<std::int64_t>(align));
    }
    EXPECT_TRUE(empty_expert_inside(counts)) << "skew 2 with a seed leaves empty experts in the middle";
    EXPECT_EQ(fp8_grouped_gemm_rows(p), sum(counts));
  }
}

// s_A [ceil(K/128), rows rounded up to 4]: each K block's row of scales starts 16-byte aligned.
// (The operands' shapes themselves are checked where they are allocated, on the GPU:
// fp8_grouped_gemm_gpu_test.cpp.)
TEST(Fp8GroupedGemmOp, ScaleARowsAreTheRowsRoundedUpToFour) {
  EXPECT_EQ(fp8_grouped_scale_a_stride(0), 0);
  EXPECT_EQ(fp8_grouped_scale_a_stride(1), 4);
  EXPECT_EQ(fp8_grouped_scale_a_stride(4), 4);
  EXPECT_EQ(fp8_grouped_scale_a_stride(5), 8);
  EXPECT_EQ(fp8_grouped_scale_a_stride(2049), 2052);
  static_assert(fp8_grouped_scale_a_stride(13) == 16);
}

TEST(Fp8GroupedGemmOp, CountsThePaddedRowsFlopsAndTheBytesOfExpertsWithRows) {
  const OpSpec op = make_fp8_grouped_gemm_op();
  // 9, 1, 0, 1, 0, 0, 0, 2 rows: 13 in all; K = 1040: 9 K blocks; N = 255: 2 N blocks. The bytes:
  // A, the weights and weight scales of the four experts with rows, C, and s_A's 13 columns a K
  // block (not its padding), each once.
  const Problem sparse = problem({8, 255, 1040}, {{"tokens", 13}, {"skew", 2}, {"routing_seed", 5}});
  const double a = 13.0 * 1040, b = 4.0 * 255 * 1040, c = 2.0 * 13 * 255;
  const double scale_a = 4.0 * 9 * 13, scale_b = 4.0 * 4 * 2 * 9;
  EXPECT_DOUBLE_EQ(op.work(sparse).bytes, a + b + c + scale_a + scale_b);
  EXPECT_DOUBLE_EQ(op.work(sparse).flops, 2.0 * 13 * 255 * 1040);
  // Padding rows are rows the kernels compute: 8, 4, 128, 4, 0, 16 = 160 rows.
  const Problem padded = problem({6, 264, 272}, {{"tokens", 150}, {"skew", 3}, {"routing_seed", 2}, {"row_align", 4}});
  EXPECT_DOUBLE_EQ(op.work(padded).flops, 2.0 * 160 * 264 * 272);
  EXPECT_DOUBLE_EQ(op.work(padded).bytes, 160.0 * 272 + 5.0 * 264 * 272 + 2.0 * 160 * 264 + 4.0 * 3 * 160 +
                                              4.0 * 5 * 3 * 3);
  // The Mixtral-like layer: every expert's weights.
  const Problem mixtral = problem({8, 14336, 4096}, {{"tokens", 2048}, {"row_align", 4}});
  EXPECT_DOUBLE_EQ(op.work(mixtral).flops, 2.0 * 2048 * 14336 * 4096);
  EXPECT_DOUBLE_EQ(op.work(mixtral).bytes, 2048.0 * 4096 + 8.0 * 14336 * 4096 + 2.0 * 2048 * 14336 +
                                               4.0 * 32 * 2048 + 4.0 * 8 * 112 * 32);
  // A problem the op does not define counts nothing (and does not throw).
  EXPECT_DOUBLE_EQ(op.work(problem({8, 64, 64}, {})).bytes, 0.0);
}

TEST(Fp8GroupedGemmOp, RefusesProblemsItDoesNotDefineWithAnActionableSentence) {
  EXPECT_EQ(fp8_grouped_gemm_problem_error(problem({8, 14336, 4096}, {{"tokens", 512}, {"row_align", 4}})), "");
  const std::string no_tokens = fp8_grouped_gemm_problem_error(problem({8, 64, 64}, {}));
  EXPECT_NE(no_tokens.find("--param tokens="), std::string::npos) << no_tokens;
  EXPECT_NE(fp8_grouped_gemm_problem_error(problem({8, 64, 64}, {{"tokens", 2.5}})).find("whole number"),
            std::string::npos);
  EXPECT_NE(fp8_grouped_gemm_problem_error(problem({8, 64, 64}, {{"tokens", 8}, {"skew", -1}})).find("skew"),
            std::string::npos);
  EXPECT_NE(fp8_grouped_gemm_problem_error(problem({8, 64, 64}, {{"tokens", 8}, {"routing_seed", 0.5}}))
                .find("routing_seed"),
            std::string::npos);
  for (const double align : {0.0, -4.0, 2.5, 1e10}) {
    const std::string error =
        fp8_grouped_gemm_problem_error(problem({8, 64, 64}, {{"tokens", 8}, {"row_align", align}}));
    EXPECT_NE(error.find("row_align must be a whole number from 1"), std::string::npos) << align << ": " << error;
    EXPECT_NE(error.find("--param row_align=4"), std::string::npos) << error;
  }
  EXPECT_THROW(fp8_grouped_gemm_counts(problem({8, 64, 64}, {{"tokens", 8}, {"row_align", 0}})), Error);
  // 32-bit indexing: A, C and one expert's weights; all experts' weights; the padded rows.
  EXPECT_NE(fp8_grouped_gemm_problem_error(problem({2, 65536, 65536}, {{"tokens", 8}})).find("2^31 - 1"),
            std::string::npos);
  const std::string weights = fp8_grouped_gemm_problem_error(problem({64, 8192, 8192}, {{"tokens", 64}}));
  EXPECT_NE(weights.find("B [G, N, K]"), std::string::npos) << weights;
  const std::string padded = fp8_grouped_gemm_problem_error(
      problem({8, 16, 16}, {{"tokens", 8}, {"row_align", 1073741824.0}}));  // 8 experts of 2^30 rows
  EXPECT_NE(padded.find("more than 2^31 - 1"), std::string::npos) << padded;
  EXPECT_NE(padded.find("row_align"), std::string::npos) << padded;
  // The rungs move rows of A and B by TMA in 16-byte pieces.
  EXPECT_EQ(fp8_grouped_gemm_rung_shape_error(problem({2, 33, 1040}, {{"tokens", 129}, {"row_align", 4}})), "");
  const std::string odd_k = fp8_grouped_gemm_rung_shape_error(problem({2, 33, 1032}, {{"tokens", 129}}));
  EXPECT_NE(odd_k.find("multiple of 16"), std::string::npos) << odd_k;
  EXPECT_NE(odd_k.find("1032"), std::string::npos) << odd_k;
}

// The baseline's static rules: cuBLASLt's 16-byte rows (K % 16), its block scales' 16-byte columns
// of s_A per expert (every expert's rows a multiple of 4: row_align=4), N whole blocks of 128 and K
// of 512 (K/128 a multiple of 4: where its results were checked; 2x256x256 disagreed on an H100).
TEST(Fp8GroupedGemmBaseline, RefusesWhatCublasLtCannotRunSayingWhy) {
  EXPECT_EQ(fp8_grouped_gemm_baseline_shape_error(
                problem({6, 384, 512}, {{"tokens", 150}, {"skew", 3}, {"routing_seed", 2}, {"row_align", 4}})),
            "");
  const std::string rows = fp8_grouped_gemm_baseline_shape_error(
      problem({6, 384, 512}, {{"tokens", 150}, {"skew", 3}, {"routing_seed", 2}}));  // 5, 1, 126, 2, 0, 16
  EXPECT_NE(rows.find("multiple of 4 (expert 0 has 5)"), std::string::npos) << rows;
  EXPECT_NE(rows.find("row_align=4"), std::string::npos) << rows;
  const std::string odd_n = fp8_grouped_gemm_baseline_shape_error(problem({2, 130, 272}, {{"tokens", 8}}));
  EXPECT_NE(odd_n.find("got N = 130, K = 272"), std::string::npos) << odd_n;
  const std::string partial = fp8_grouped_gemm_baseline_shape_error(
      problem({6, 264, 272}, {{"tokens", 150}, {"skew", 3}, {"routing_seed", 2}, {"row_align", 4}}));
  EXPECT_NE(partial.find("N is a multiple of 128 and K of 512"), std::string::npos) << partial;
  const std::string three_blocks = fp8_grouped_gemm_baseline_shape_error(problem({2, 128, 384}, {{"tokens", 8}}));
  EXPECT_NE(three_blocks.find("K of 512"), std::string::npos) << three_blocks;
  const std::string two_blocks = fp8_grouped_gemm_baseline_shape_error(problem({2, 256, 256}, {{"tokens", 512}}));
  EXPECT_NE(two_blocks.find("got N = 256, K = 256"), std::string::npos) << two_blocks;
  const std::string odd_k = fp8_grouped_gemm_baseline_shape_error(problem({2, 128, 40}, {{"tokens", 8}}));
  EXPECT_NE(odd_k.find("K % 16 == 0"), std::string::npos) << odd_k;
  const OpSpec op = make_fp8_grouped_gemm_op();
  EXPECT_NE(op.baseline_name.find("cuBLASLt FP8 matmul per expert"), std::string::npos) << op.baseline_name;
  EXPECT_NE(op.baseline_name.find("gathered"), std::string::npos)
      << "the gather is timed with it: " << op.baseline_name;
  EXPECT_TRUE(op.baseline_computes_op);
  EXPECT_TRUE(static_cast<bool>(op.baseline_supports));
}

TEST(Fp8GroupedGemmOp, BenchProblemsAreMixtralBothWaysAndDeepSeekAllRunByTheBaseline) {
  const OpSpec op = make_fp8_grouped_gemm_op();
  std::vector<std::string> labels;
  for (const Problem& p : op.bench_problems) {
    labels.push_back(p.label());
    EXPECT_EQ(p.param("row_align"), 4.0) << p.label();
    EXPECT_EQ(fp8_grouped_gemm_rung_shape_error(p), "") << p.label();
    EXPECT_EQ(fp8_grouped_gemm_baseline_shape_error(p), "") << p.label();
    for (const std::int64_t c : fp8_grouped_gemm_counts(p)) EXPECT_EQ(c % 4, 0) << p.label();
  }
  for (const char* expected :
       {"8x14336x4096 f8e4m3 tokens=512 row_align=4", "8x14336x4096 f8e4m3 tokens=2048 row_align=4",
        "8x14336x4096 f8e4m3 tokens=8192 row_align=4", "8x14336x4096 f8e4m3 tokens=512 skew=1 row_align=4",
        "8x14336x4096 f8e4m3 tokens=2048 skew=1 row_align=4", "8x14336x4096 f8e4m3 tokens=8192 skew=1 row_align=4",
        "8x4096x14336 f8e4m3 tokens=512 row_align=4", "8x4096x14336 f8e4m3 tokens=2048 row_align=4",
        "8x4096x14336 f8e4m3 tokens=8192 row_align=4", "8x4096x14336 f8e4m3 tokens=512 skew=1 row_align=4",
        "8x4096x14336 f8e4m3 tokens=2048 skew=1 row_align=4", "8x4096x14336 f8e4m3 tokens=8192 skew=1 row_align=4",
        "64x1408x2048 f8e4m3 tokens=1024 row_align=4", "64x1408x2048 f8e4m3 tokens=8192 row_align=4",
        "64x1408x2048 f8e4m3 tokens=1024 skew=1 row_align=4", "64x1408x2048 f8e4m3 tokens=8192 skew=1 row_align=4"})
    EXPECT_NE(std::find(labels.begin(), labels.end(), expected), labels.end()) << expected;
  EXPECT_EQ(labels.size(), 16u);
}

TEST(Fp8GroupedGemmOp, ConformanceHasTheEdgesAndTheRungsRefuseKTailsOf8AndRowsNotMultiplesOf4) {
  const OpSpec op = make_fp8_grouped_gemm_op();
  int one_expert = 0, many_experts = 0, one_token = 0, empty_inside = 0, odd_n = 0, narrow_n = 0, k_tail = 0;
  int long_k = 0, k_16 = 0, short_last_tile = 0, long_last_tile = 0, baseline_runs = 0;
  std::vector<double> aligns;
  std::vector<std::string> refused;
  for (const Problem& p : op.conformance_problems) {
    ASSERT_EQ(fp8_grouped_gemm_problem_error(p), "") << p.label();
    if (!fp8_grouped_gemm_rung_shape_error(p).empty()) {
      refused.push_back(p.label());
      continue;
    }
    const Counts counts = fp8_grouped_gemm_counts(p);
    one_expert += counts.size() == 1;
    many_experts += counts.size() >= 8;
    one_token += p.param("tokens") == 1.0;
    empty_inside += empty_expert_inside(counts);
    odd_n += p.dims[1] % 2;
    narrow_n += p.dims[1] < 128;
    k_tail += p.dims[2] % 128 != 0;
    long_k += p.dims[2] >= 4096;
    k_16 += p.dims[2] == 16;
    // A last tile of 1-63 or 65-127 rows in an expert that is not the last with rows (its rows end
    // inside a tile that the next expert's rows do not enter).
    for (std::size_t g = 0; g + 1 < counts.size(); ++g) {
      short_last_tile += counts[g] % 128 >= 1 && counts[g] % 128 <= 63;
      long_last_tile += counts[g] % 128 >= 65;
    }
    if (std::find(aligns.begin(), aligns.end(), p.param("row_align")) == aligns.end())
      aligns.push_back(p.param("row_align"));
    baseline_runs += fp8_grouped_gemm_baseline_shape_error(p).empty();
  }
  EXPECT_GE(one_expert, 2);
  EXPECT_GE(many_experts, 3);
  EXPECT_GE(one_token, 1);
  EXPECT_GE(empty_inside, 3);
  EXPECT_GE(odd_n, 4);
  EXPECT_GE(narrow_n, 3);
  EXPECT_GE(k_tail, 6);
  EXPECT_GE(long_k, 2);
  EXPECT_GE(k_16, 1);
  EXPECT_GE(short_last_tile, 3);
  EXPECT_GE(long_last_tile, 2);
  EXPECT_GE(baseline_runs, 3) << "the baseline is checked on the GPU where it runs (16x384x512, 8x512x1024, "
                                 "2x128x8192)";
  std::sort(aligns.begin(), aligns.end());
  EXPECT_EQ(aligns, (std::vector<double>{1.0, 4.0, 128.0}));
  EXPECT_EQ(refused, fp8_grouped_gemm_rung_refusals());
  EXPECT_EQ(refused.size(), 3u);
}

// The rungs read a tile's scales of A by TMA from its first token's: every expert's rows must be a
// multiple of 4, and the refusal says which expert and how to pad.
TEST(Fp8GroupedGemmOp, TheRungsRefuseRowsThatAreNotMultiplesOf4AndSayHowToPad) {
  const std::string error = fp8_grouped_gemm_rung_shape_error(problem({3, 129, 144}, {{"tokens", 230}}));
  EXPECT_NE(error.find("multiple of 4 (expert 0 has 77)"), std::string::npos) << error;
  EXPECT_NE(error.find("--param row_align=4"), std::string::npos) << error;
  EXPECT_EQ(fp8_grouped_gemm_rung_shape_error(problem({3, 129, 144}, {{"tokens", 230}, {"row_align", 4}})), "");
  EXPECT_EQ(fp8_grouped_gemm_rung_shape_error(problem({2, 256, 256}, {{"tokens", 512}})), "")
      << "counts that are multiples of 4 need no padding";
}

TEST(Fp8GroupedGemmTiles, TheRungsTileTableHas128By128TilesAndNoneForAnEmptyExpert) {
  const Counts counts = fp8_grouped_gemm_counts(
      problem({6, 264, 272}, {{"tokens", 150}, {"skew", 3}, {"routing_seed", 2}, {"row_align", 4}}));
  // 8, 4, 128, 4, 0, 16 rows and N = 264: one tile row and three tile columns each, none for the empty one.
  EXPECT_EQ(group_tile_starts(counts, 264, kFp8GroupedTileRows, kFp8GroupedTileCols),
            (std::vector<int>{0, 3, 6, 9, 12, 12, 15}));
  EXPECT_EQ(group_row_starts(counts), (std::vector<int>{0, 8, 12, 140, 144, 144, 160}));
}

// Every rung's launch checks its arguments first (check_fp8_grouped_gemm_args): a bad argument is a
// kc::Error naming the rule, before any CUDA call. No GPU needed: the pointers are never read.
TEST(Fp8GroupedGemmArgs, LaunchChecksNameTheRuleTheArgumentsBreak) {
  alignas(16) static fp8e4m3 a[512], b[512];
  alignas(16) static bf16 c[64];
  alignas(16) static float scales[16];
  alignas(16) static int starts[12];
  Fp8GroupedGemmArgs good;
  good.groups = 2;
  good.n = 4;
  good.k = 64;
  good.a = a;
  good.b = b;
  good.c = c;
  good.scale_a = good.scale_b = scales;
  good.row_starts = starts;
  good.tile_starts = starts + 3;
  good.wide_tile_starts = starts + 6;
  good.tiles = 2;
  good.wide_tiles = 2;
  good.tokens = 5;
  EXPECT_NO_THROW(check_fp8_grouped_gemm_args(good));
  const auto refused = [](const Fp8GroupedGemmArgs& args, const std::string& rule) {
    expect_refused([&] { check_fp8_grouped_gemm_args(args); }, {"FP8 grouped GEMM", rule});
  };
  Fp8GroupedGemmArgs bad = good;
  bad.groups = 0;
  refused(bad, "G must be >= 1");
  bad = good;
  bad.n = 0;
  refused(bad, "N and K must be >= 1");
  bad = good;
  bad.k = 0;
  refused(bad, "N and K must be >= 1");
  bad = good;
  bad.k = 40;
  refused(bad, "K must be a multiple of 16 (got 40)");
  bad = good;
  bad.tokens = -1;
  refused(bad, "tokens and tiles must be >= 0");
  bad = good;
  bad.tiles = -1;
  refused(bad, "tokens and tiles must be >= 0");
  bad = good;
  bad.wide_tiles = -1;
  refused(bad, "tokens and tiles must be >= 0");
  for (const auto clear : {+[](Fp8GroupedGemmArgs& x) { x.a = nullptr; }, +[](Fp8GroupedGemmArgs& x) { x.b = nullptr; },
                           +[](Fp8GroupedGemmArgs& x) { x.c = nullptr; }}) {
    bad = good;
    clear(bad);
    refused(bad, "A, B and C must not be null");
  }
  bad = good;
  bad.scale_a = nullptr;
  refused(bad, "both scales are needed");
  bad = good;
  bad.scale_b = nullptr;
  refused(bad, "both scales are needed");
  bad = good;
  bad.row_starts = nullptr;
  refused(bad, "prefix sums (row_starts, tile_starts, wide_tile_starts) must not be null");
  bad = good;
  bad.tile_starts = nullptr;
  refused(bad, "prefix sums (row_starts, tile_starts, wide_tile_starts) must not be null");
  bad = good;
  bad.wide_tile_starts = nullptr;
  refused(bad, "prefix sums (row_starts, tile_starts, wide_tile_starts) must not be null");
  bad = good;
  bad.a = a + 8;
  refused(bad, "A and B must start 16-byte aligned");
  bad = good;
  bad.b = b + 1;
  refused(bad, "A and B must start 16-byte aligned");
  bad = good;
  bad.c = c + 1;
  refused(bad, "C must start 16-byte aligned");
  bad = good;
  bad.scale_a = scales + 1;
  refused(bad, "s_A must start 16-byte aligned");
  bad = good;
  bad.scale_b = scales + 1;  // read a value at a time: 4-byte aligned is enough
  EXPECT_NO_THROW(check_fp8_grouped_gemm_args(bad));
  bad = good;
  bad.tokens = 1 << 26;
  bad.k = 64;  // A: 2^32 values
  refused(bad, "A [tokens, K] holds");
  bad = good;
  bad.tokens = 1 << 26;
  bad.k = 16;
  bad.n = 64;  // C: 2^32 values
  refused(bad, "C [tokens, N] holds");
  bad = good;
  bad.groups = 1 << 12;
  bad.n = 1 << 12;
  bad.k = 1 << 8;  // B: 2^32 values
  refused(bad, "B [G, N, K] holds");
  // The rungs run the check before anything else (no GPU here: a later check would be a CUDA error).
  HopperLaunchCache cache;
  bad = good;
  bad.a = a + 8;
  const std::string message = error_of([&] { check_fp8_grouped_gemm_args(bad); });
  for (const auto launch : {fp8_grouped_gemm_01_scales_in_stage, fp8_grouped_gemm_02_wide_tiles,
                            fp8_grouped_gemm_03_width_per_layer, fp8_grouped_gemm_01_neighbours_weight_scales})
    EXPECT_EQ(error_of([&] { launch(bad, nullptr, cache); }), message) << "the launch checks the same, first";
}

TEST(Fp8GroupedGemmLadder, RegistersRungs01To03ForComputeCapability90OnlyInItsOwnReport) {
  const Registry& registry = stage3_test_registry();
  for (const auto& [id, number] : {std::pair<std::string, int>{"stage3/fp8_grouped_gemm/01_scales_in_stage", 1},
                                   std::pair<std::string, int>{"stage3/fp8_grouped_gemm/02_wide_tiles", 2},
                                   std::pair<std::string, int>{"stage3/fp8_grouped_gemm/03_width_per_layer", 3}}) {
    SCOPED_TRACE(id);
    const KernelEntry& rung = registry.kernel(id);
    EXPECT_EQ(rung.op, kFp8GroupedGemmOp);
    EXPECT_EQ(rung.rung, number);
    EXPECT_EQ(rung.report_group(), kFp8GroupedGemmReport);
    EXPECT_EQ(std::string(kFp8GroupedGemmReport), "stage3-fp8-grouped-gemm");
    EXPECT_EQ(rung.dtypes, std::vector<DType>{DType::f8e4m3});
    EXPECT_EQ(rung.min_compute_capability, 90);
    EXPECT_EQ(rung.max_compute_capability, 90);
    EXPECT_EQ(rung.constraints, "K % 16 == 0, each expert's rows % 4 == 0 (row_align=4)");
    EXPECT_EQ(rung.refuses, fp8_grouped_gemm_rung_refusals());
    const Problem odd_k = problem({2, 33, 1032}, {{"tokens", 129}});
    EXPECT_NE(unsupported_reason(registry, rung, odd_k, nullptr).find("multiple of 16"), std::string::npos);
    EXPECT_EQ(unsupported_reason(registry, rung, problem({2, 33, 1040}, {{"tokens", 129}, {"row_align", 4}}), nullptr),
              "");
  }
}

// Rung 03's estimate on the benchmark layers, with both kernels' 132 resident CTAs (one a Hopper SM):
// the narrow tiles where they take as many waves as the wide ones or nearly (eight experts of 64
// rows with N = 4096: 256 narrow tiles or 176 wide, two waves each; the skewed DeepSeek-like layer
// at 8192 tokens: 9 waves against 7), the wide ones everywhere else.
TEST(Fp8GroupedGemmLadder, Rung03ChoosesTheWidthByTheWavesOfEachTileTable) {
  const OpSpec op = make_fp8_grouped_gemm_op();
  std::vector<std::string> narrow;
  for (const Problem& p : op.bench_problems) {
    const Counts counts = fp8_grouped_gemm_counts(p);
    const int tiles = group_tile_starts(counts, p.dims[1], kFp8GroupedTileRows, kFp8GroupedTileCols).back();
    const int wide = group_tile_starts(counts, p.dims[1], kFp8GroupedTileRows, kFp8GroupedWideTileCols).back();
    if (fp8_grouped_narrow_tiles_win(tiles, wide, 132, 132)) narrow.push_back(p.label());
  }
  EXPECT_EQ(narrow, (std::vector<std::string>{"8x4096x14336 f8e4m3 tokens=512 row_align=4",
                                              "64x1408x2048 f8e4m3 tokens=8192 skew=1 row_align=4"}));
  const Problem small_experts = problem({8, 4096, 14336}, {{"tokens", 512}, {"row_align", 4}});
  EXPECT_EQ(group_tile_starts(fp8_grouped_gemm_counts(small_experts), 4096, 128, 128).back(), 256);
  EXPECT_EQ(group_tile_starts(fp8_grouped_gemm_counts(small_experts), 4096, 128, 192).back(), 176);
  EXPECT_FALSE(fp8_grouped_narrow_tiles_win(0, 0, 132, 132)) << "no tiles: either kernel, neither launched";
  EXPECT_THROW(fp8_grouped_narrow_tiles_win(1, 1, 0, 132), Error);
}

}  // namespace
}  // namespace kc::stage3
