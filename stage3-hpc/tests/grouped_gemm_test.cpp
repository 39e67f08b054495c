// The grouped_gemm op's host side: the routing rule (rows per expert from tokens, skew and
// routing_seed), the prefix sums and the tile table rung 02 reads, argument refusals, the op's
// problems and the ladder's registration. The kernels' conformance runs on a GPU
// (tests/conformance: ctest --test-dir build/ci -R grouped_gemm).
//   ctest --test-dir build/ci -R GroupedGemm
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <numeric>
#include <string>
#include <tuple>
#include <vector>

#include "kc/common/error.hpp"
#include "kc/stage3/grouped_gemm.hpp"
#include "stage3_test_registry.hpp"

namespace kc::stage3 {
namespace {

using Counts = std::vector<std::int64_t>;

std::int64_t sum(const Counts& counts) { return std::accumulate(counts.begin(), counts.end(), std::int64_t{0}); }
std::int64_t empty_experts(const Counts& counts) { return std::count(counts.begin(), counts.end(), 0); }
// An empty expert with an expert that has rows after it: the row offsets repeat mid-table.
bool empty_expert_inside(const Counts& counts) {
  const auto first_empty = std::find(counts.begin(), counts.end(), 0);
  return std::any_of(first_empty, counts.end(), [](std::int64_t c) { return c > 0; });
}

Problem problem(Shape dims, ParamValues values) {
  static const OpSpec op = make_grouped_gemm_op();
  return op.problem(std::move(dims), DType::bf16, values);
}

TEST(GroupedGemmRouting, CountsSumToTheTokensForEveryMixOfExpertsSkewAndSeed) {
  for (const std::int64_t experts : {1, 2, 7, 8, 64, 256})
    for (const std::int64_t tokens : {0, 1, 3, 13, 256, 1000, 8192})
      for (const double skew : {0.0, 0.5, 1.0, 2.0, 4.0})
        for (const std::uint64_t seed : {0, 1, 12345}) {
          const Counts counts = expert_token_counts(experts, tokens, skew, seed);
          ASSERT_EQ(counts.size(), static_cast<std::size_t>(experts));
          EXPECT_EQ(sum(counts), tokens) << experts << " experts, " << tokens << " tokens, skew " << skew;
          for (const std::int64_t c : counts) EXPECT_GE(c, 0);
        }
}

TEST(GroupedGemmRouting, IsDeterministicPerSeedAndASeedOnlyMovesTheShares) {
  const Counts first = expert_token_counts(64, 1024, 1.0, 7);
  EXPECT_EQ(expert_token_counts(64, 1024, 1.0, 7), first);
  const Counts other = expert_token_counts(64, 1024, 1.0, 8);
  EXPECT_NE(other, first);
  Counts sorted_first = first, sorted_other = other, by_rank = expert_token_counts(64, 1024, 1.0, 0);
  std::sort(sorted_first.begin(), sorted_first.end());
  std::sort(sorted_other.begin(), sorted_other.end());
  std::sort(by_rank.begin(), by_rank.end());
  EXPECT_EQ(sorted_first, by_rank);
  EXPECT_EQ(sorted_other, by_rank);
}

TEST(GroupedGemmRouting, SkewZeroIsUniformWithTheRemainderOnTheFirstExperts) {
  EXPECT_EQ(expert_token_counts(4, 10, 0.0, 0), (Counts{3, 3, 2, 2}));
  EXPECT_EQ(expert_token_counts(8, 2048, 0.0, 0), Counts(8, 256));
  EXPECT_EQ(expert_token_counts(4, 3, 0.0, 0), (Counts{1, 1, 1, 0}));
}

TEST(GroupedGemmRouting, SkewOneIsZipfRoundedByLargestRemainder) {
  // 256 tokens over 8 experts, shares 1/r / H_8: 94.19, 47.10, 31.40, 23.55, 18.84, 15.70, 13.46,
  // 11.77. The floors sum to 252; the four largest fractions (.84, .77, .70, .55) get one more.
  EXPECT_EQ(expert_token_counts(8, 256, 1.0, 0), (Counts{94, 47, 31, 24, 19, 16, 13, 12}));
}

TEST(GroupedGemmRouting, SharesFallWithRankAndHighSkewLeavesExpertsEmpty) {
  const Counts zipf = expert_token_counts(64, 1024, 1.0, 0);
  EXPECT_TRUE(std::is_sorted(zipf.rbegin(), zipf.rend()));
  EXPECT_EQ(empty_experts(zipf), 0);
  const Counts steep = expert_token_counts(64, 1024, 2.0, 0);
  EXPECT_GT(empty_experts(steep), 10);
  EXPECT_EQ(steep.back(), 0);
  // With a seed, empty experts sit between experts that have rows.
  const Counts shuffled = expert_token_counts(64, 1024, 2.0, 3);
  EXPECT_EQ(empty_experts(shuffled), empty_experts(steep));
  EXPECT_FALSE(empty_expert_inside(steep));
  EXPECT_TRUE(empty_expert_inside(shuffled));
}

TEST(GroupedGemmRouting, OneExpertTakesEveryToken) {
  for (const double skew : {0.0, 3.0}) EXPECT_EQ(expert_token_counts(1, 777, skew, 9), Counts{777});
}

TEST(GroupedGemmRouting, RefusesImpossibleRoutingsWithAReason) {
  EXPECT_THROW(expert_token_counts(0, 10, 0.0, 0), Error);
  EXPECT_THROW(expert_token_counts(4, -1, 0.0, 0), Error);
  EXPECT_THROW(expert_token_counts(4, 10, -0.5, 0), Error);
  try {
    grouped_gemm_counts(problem({8, 64, 64}, {}));
    ADD_FAILURE() << "a problem without tokens was routed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tokens=2048"), std::string::npos) << e.what();
  }
}

TEST(GroupedGemmRouting, TheProblemsCountsAreItsParameters) {
  const Problem p = problem({8, 77, 64}, {{"tokens", 13}, {"skew", 2}, {"routing_seed", 5}});
  EXPECT_EQ(grouped_gemm_counts(p), expert_token_counts(8, 13, 2.0, 5));
  // The shuffle is splitmix64's, the same with every standard library: these counts are fixed.
  EXPECT_EQ(grouped_gemm_counts(p), (Counts{9, 1, 0, 1, 0, 0, 0, 2}));
  EXPECT_EQ(grouped_gemm_counts(problem({6, 2049, 264}, {{"tokens", 150}, {"skew", 3}, {"routing_seed", 2}})),
            (Counts{5, 1, 126, 2, 0, 16}));
  const GroupedRouting routing(p);
  EXPECT_EQ(routing.counts, grouped_gemm_counts(p));
  EXPECT_EQ(routing.row_starts, group_row_starts(routing.counts));
}

TEST(GroupedGemmTiles, RowStartsArePrefixSums) {
  EXPECT_EQ(group_row_starts({3, 0, 2}), (std::vector<int>{0, 3, 3, 5}));
  EXPECT_EQ(group_row_starts({7}), (std::vector<int>{0, 7}));
}

TEST(GroupedGemmTiles, TileStartsCountEachExpertsTilesAndNoneForAnEmptyOne) {
  // N = 257: two tile columns of 256. Rows 300, 0, 1, 128: 3, 0, 1, 1 tile rows.
  EXPECT_EQ(group_tile_starts({300, 0, 1, 128}, 257, 128, 256), (std::vector<int>{0, 6, 6, 8, 10}));
  EXPECT_EQ(group_tile_starts({0, 0}, 64, 128, 256), (std::vector<int>{0, 0, 0}));
}

// Every tile of the grid lands on exactly one (expert, tile row, tile column) of an expert that has
// rows, inside that expert's tiles, tile rows fastest — for routings with empty experts first, in
// the middle and last.
TEST(GroupedGemmTiles, EveryTileOfTheGridIsOneTileOfOneExpert) {
  const int tile_rows = kGroupedTileRows, tile_cols = kGroupedTileCols;
  for (const Counts& counts : {Counts{0, 300, 0, 0, 1, 128, 0}, Counts{129}, Counts{1, 1, 1, 0},
                               expert_token_counts(64, 8192, 1.5, 11), expert_token_counts(8, 256, 3.0, 0)})
    for (const std::int64_t n : {1, 255, 256, 257, 14336}) {
      const std::vector<int> rows = group_row_starts(counts);
      const std::vector<int> tiles = group_tile_starts(counts, n, tile_rows, tile_cols);
      const int groups = static_cast<int>(counts.size());
      const int tiles_n = static_cast<int>((n + tile_cols - 1) / tile_cols);
      std::map<std::tuple<int, int, int>, int> seen;
      for (int t = 0; t < tiles.back(); ++t) {
        const GroupedTile tile = grouped_tile_at(t, tiles.data(), rows.data(), groups, tile_rows);
        ASSERT_GE(tile.group, 0);
        ASSERT_LT(tile.group, groups);
        const std::int64_t expert_rows = counts[static_cast<std::size_t>(tile.group)];
        ASSERT_GT(expert_rows, 0) << "tile " << t << " landed on an empty expert";
        const int tiles_m = static_cast<int>((expert_rows + tile_rows - 1) / tile_rows);
        EXPECT_GE(t, tiles[tile.group]);
        EXPECT_LT(t, tiles[tile.group + 1]);
        EXPECT_LT(tile.m, tiles_m);
        EXPECT_LT(tile.n, tiles_n);
        EXPECT_EQ(t - tiles[tile.group], tile.n * tiles_m + tile.m) << "tile rows fastest";
        ++seen[{tile.group, tile.m, tile.n}];
      }
      std::int64_t expected = 0;
      for (const std::int64_t c : counts) expected += (c + tile_rows - 1) / tile_rows * tiles_n;
      EXPECT_EQ(static_cast<std::int64_t>(seen.size()), expected);
      for (const auto& [where, times] : seen) EXPECT_EQ(times, 1);
    }
}

TEST(GroupedGemmOp, RefusesProblemsItDoesNotDefineWithAnActionableSentence) {
  EXPECT_EQ(grouped_gemm_shape_error(problem({8, 14336, 4096}, {{"tokens", 256}})), "");
  EXPECT_NE(grouped_gemm_shape_error(problem({8, 64, 64}, {})).find("--param tokens="), std::string::npos);
  EXPECT_NE(grouped_gemm_shape_error(problem({8, 64, 64}, {{"tokens", 2.5}})).find("whole number"), std::string::npos);
  EXPECT_NE(grouped_gemm_shape_error(problem({8, 64, 64}, {{"tokens", 8}, {"skew", -1}})).find("skew"),
            std::string::npos);
  EXPECT_NE(grouped_gemm_shape_error(problem({8, 64, 64}, {{"tokens", 8}, {"routing_seed", 0.5}})).find("routing_seed"),
            std::string::npos);
  EXPECT_NE(grouped_gemm_shape_error(problem({2, 65536, 65536}, {{"tokens", 8}})).find("2^31 - 1"), std::string::npos);
  // Rung 02 copies rows in 16-byte pieces.
  EXPECT_EQ(grouped_gemm_tiles_shape_error(problem({2, 33, 1032}, {{"tokens", 129}})), "");
  const std::string odd_k = grouped_gemm_tiles_shape_error(problem({2, 33, 1031}, {{"tokens", 129}}));
  EXPECT_NE(odd_k.find("multiple of 8"), std::string::npos) << odd_k;
  EXPECT_NE(odd_k.find("1031"), std::string::npos) << odd_k;
}

TEST(GroupedGemmOp, CountsTheFlopsOfEveryTokenAndTheWeightsOfExpertsWithTokens) {
  const OpSpec op = make_grouped_gemm_op();
  EXPECT_EQ(op.dim_names, (std::vector<std::string>{"G", "N", "K"}));
  EXPECT_EQ(op.math, MathUnit::fp16_tensor);
  const Problem uniform = problem({8, 14336, 4096}, {{"tokens", 2048}});
  EXPECT_DOUBLE_EQ(op.work(uniform).flops, 2.0 * 2048 * 14336 * 4096);
  EXPECT_DOUBLE_EQ(op.work(uniform).bytes, 2.0 * (2048.0 * 4096 + 8.0 * 14336 * 4096 + 2048.0 * 14336));
  // 1, 1, 1, 0 rows: three experts' weights are read.
  const Problem sparse = problem({4, 129, 136}, {{"tokens", 3}});
  EXPECT_DOUBLE_EQ(op.work(sparse).bytes, 2.0 * (3.0 * 136 + 3.0 * 129 * 136 + 3.0 * 129));
}

TEST(GroupedGemmOp, BenchProblemsAreTheDocumentedMixtralAndDeepSeekLayers) {
  const OpSpec op = make_grouped_gemm_op();
  std::vector<std::string> labels;
  for (const Problem& p : op.bench_problems) {
    labels.push_back(p.label());
    EXPECT_EQ(grouped_gemm_tiles_shape_error(p), "") << p.label();
  }
  for (const char* expected :
       {"8x14336x4096 bf16 tokens=256", "8x14336x4096 bf16 tokens=2048", "8x14336x4096 bf16 tokens=8192",
        "8x14336x4096 bf16 tokens=256 skew=1", "8x14336x4096 bf16 tokens=2048 skew=1",
        "8x14336x4096 bf16 tokens=8192 skew=1", "64x1408x2048 bf16 tokens=1024", "64x1408x2048 bf16 tokens=8192",
        "64x1408x2048 bf16 tokens=1024 skew=1", "64x1408x2048 bf16 tokens=8192 skew=1"})
    EXPECT_NE(std::find(labels.begin(), labels.end(), expected), labels.end()) << expected;
  EXPECT_EQ(labels.size(), 10u);
}

TEST(GroupedGemmOp, ConformanceHasTheEdgesAndRung02RefusesExactlyKNotAMultipleOf8) {
  const OpSpec op = make_grouped_gemm_op();
  int one_expert = 0, with_empty = 0, empty_inside = 0, with_single_row = 0, odd_n = 0, n_one = 0, partial_k = 0;
  int straddling_half = 0, empty_half = 0, split_after_whole_waves = 0, split_only = 0;
  std::vector<std::string> refused;
  for (const Problem& p : op.conformance_problems) {
    ASSERT_EQ(grouped_gemm_shape_error(p), "") << p.label();
    if (!grouped_gemm_tiles_shape_error(p).empty()) refused.push_back(p.label());
    const Counts counts = grouped_gemm_counts(p);
    one_expert += counts.size() == 1;
    with_empty += empty_experts(counts) > 0;
    empty_inside += empty_expert_inside(counts);
    with_single_row += std::count(counts.begin(), counts.end(), 1) > 0;
    odd_n += p.dims[1] % 2;
    n_one += p.dims[1] == 1;
    partial_k += p.dims[2] % 64 != 0;
    // Rungs 04-06: a 64-row half that straddles an expert's end (not the last expert's), one that
    // is empty; rung 06 on 132 SMs: a split last wave after whole waves.
    for (std::size_t g = 0; g + 1 < counts.size(); ++g) straddling_half += counts[g] % 64 != 0 && counts[g] > 0;
    for (const std::int64_t c : counts) empty_half += c > 0 && (c + 127) / 128 * 128 - c >= 64;
    const std::vector<int> tile_starts = group_tile_starts(counts, p.dims[1], kGroupedTileRows, kGroupedTileCols);
    const GroupedSplitPlan plan = plan_grouped_split_last_wave(tile_starts.back(), 132, static_cast<int>((p.dims[2] + 63) / 64));
    split_after_whole_waves += plan.splits > 1 && plan.whole_tiles > 0;
    split_only += plan.splits > 1 && plan.whole_tiles == 0;
  }
  EXPECT_GE(straddling_half, 3);
  EXPECT_GE(empty_half, 3);
  EXPECT_GE(split_after_whole_waves, 1);
  EXPECT_GE(split_only, 2);
  EXPECT_GE(one_expert, 2);
  EXPECT_GE(with_empty, 3);
  EXPECT_GE(empty_inside, 1);
  EXPECT_GE(with_single_row, 2);
  EXPECT_GE(odd_n, 3);
  EXPECT_GE(n_one, 1);
  EXPECT_GE(partial_k, 3);
  EXPECT_EQ(refused, grouped_gemm_tiles_refusals());
}

// The baseline is the faster cuBLAS path per problem (the target's "grouped call or a loop of
// GEMMs, whichever is faster"); both paths are timed beside it as peers.
TEST(GroupedGemmOp, IsTimedAgainstTheFasterCublasPathWithBothPathsBesideIt) {
  const OpSpec op = make_grouped_gemm_op();
  EXPECT_NE(op.baseline_name.find("the faster per problem of GemmGroupedBatchedEx and GemmEx per expert"),
            std::string::npos)
      << op.baseline_name;
  EXPECT_TRUE(op.baseline_computes_op);
  ASSERT_EQ(op.peers.size(), 2u);
  EXPECT_NE(op.peers[0].name.find("GemmGroupedBatchedEx"), std::string::npos) << op.peers[0].name;
  EXPECT_NE(op.peers[1].name.find("GemmEx per expert"), std::string::npos) << op.peers[1].name;
}

TEST(GroupedGemmLadder, RegistersTwoRungsInItsOwnReport) {
  const Registry& registry = stage3_test_registry();
  const KernelEntry& loop = registry.kernel("stage3/grouped_gemm/01_loop_of_gemms");
  const KernelEntry& one_launch = registry.kernel("stage3/grouped_gemm/02_one_launch");
  EXPECT_EQ(loop.rung, 1);
  EXPECT_EQ(one_launch.rung, 2);
  for (const KernelEntry* k : {&loop, &one_launch}) {
    EXPECT_EQ(k->report_group(), kGroupedGemmReport) << k->id;
    EXPECT_EQ(k->dtypes, std::vector<DType>{DType::bf16}) << k->id;
    EXPECT_EQ(k->min_compute_capability, 80) << k->id;
  }
  // Rung 01 goes through the GEMM entry, which takes any K (cuBLAS where no kc kernel can).
  const Problem odd_k = problem({2, 33, 1031}, {{"tokens", 129}});
  EXPECT_EQ(unsupported_reason(registry, loop, odd_k, nullptr), "");
  EXPECT_TRUE(loop.refuses.empty());
  EXPECT_NE(unsupported_reason(registry, one_launch, odd_k, nullptr).find("multiple of 8"), std::string::npos);
  EXPECT_EQ(one_launch.refuses, grouped_gemm_tiles_refusals());
  EXPECT_EQ(one_launch.constraints, "K % 8 == 0");
}

TEST(GroupedGemmLadder, RegistersTheHopperRungsForComputeCapability90Only) {
  const Registry& registry = stage3_test_registry();
  int rung = 3;
  for (const char* id : {"stage3/grouped_gemm/03_warp_specialized", "stage3/grouped_gemm/04_tma_store",
                         "stage3/grouped_gemm/05_skip_empty_halves", "stage3/grouped_gemm/06_split_last_wave",
                         "stage3/grouped_gemm/07_half_a_tiles"}) {
    const KernelEntry& k = registry.kernel(id);
    EXPECT_EQ(k.rung, rung++) << id;
    EXPECT_EQ(k.report_group(), kGroupedGemmReport) << id;
    EXPECT_EQ(k.min_compute_capability, 90) << id;
    EXPECT_EQ(k.max_compute_capability, 90) << id;
    EXPECT_EQ(k.constraints, "K % 8 == 0") << id;
    EXPECT_EQ(k.refuses, grouped_gemm_tiles_refusals()) << id;
  }
}

// Rung 06's plan: the last wave is split only when it leaves half the grid or more idle, into as
// many pieces as the grid holds (at most kGroupedMaxSplits, each at least kGroupedMinKTilesPerSplit
// K steps); the whole tiles before it are whole waves.
TEST(GroupedSplitPlan, SplitsTheLastWaveWhenItLeavesHalfTheGridIdle) {
  // Mixtral-like at 8192 uniform tokens on 132 SMs: 3584 tiles = 27 waves + 20; K = 4096 (64 steps).
  GroupedSplitPlan plan = plan_grouped_split_last_wave(3584, 132, 64);
  EXPECT_EQ(plan.whole_tiles, 27 * 132);
  EXPECT_EQ(plan.splits, 4);  // 132 / 20 = 6 pieces would fit; 64 K steps make 4 of 16
  plan = plan_grouped_split_last_wave(3584, 132, 128);
  EXPECT_EQ(plan.splits, 6);  // K = 8192: the grid is the limit
  // 256 tokens: 448 tiles = 3 waves + 52: two pieces each.
  plan = plan_grouped_split_last_wave(448, 132, 64);
  EXPECT_EQ(plan.whole_tiles, 3 * 132);
  EXPECT_EQ(plan.splits, 2);
  // Fewer tiles than the grid: all of them split (no whole wave).
  plan = plan_grouped_split_last_wave(36, 132, 65);
  EXPECT_EQ(plan.whole_tiles, 0);
  EXPECT_EQ(plan.splits, 3);  // min(132 / 36, 65 / 16)
  plan = plan_grouped_split_last_wave(2, 132, 1000);
  EXPECT_EQ(plan.splits, kGroupedMaxSplits);
}

TEST(GroupedSplitPlan, LeavesFullLastWavesAndShortKAlone) {
  for (const auto& [tiles, grid, k_tiles] : std::vector<std::tuple<int, int, int>>{
           {384, 132, 32},   // DeepSeek-like at 1024 tokens: a last wave of 120 fills the grid's half
           {264, 132, 64},   // two whole waves
           {0, 132, 64},     // nothing to do
           {20, 132, 31},    // 31 K steps: no two pieces of 16
           {67, 132, 64}}) { // 67 of 132: more than half busy
    const GroupedSplitPlan plan = plan_grouped_split_last_wave(tiles, grid, k_tiles);
    EXPECT_EQ(plan.splits, 1) << tiles << " tiles, grid " << grid << ", " << k_tiles << " K steps";
    EXPECT_EQ(plan.whole_tiles, tiles) << tiles;
  }
}

TEST(GroupedSplitPlan, PiecesNeverOutnumberTheGridAndFitTheWorkspace) {
  for (const int grid : {1, 2, 7, 66, 132, 144}) {
    for (int tiles = 0; tiles <= 3 * grid + 5; ++tiles) {
      for (const int k_tiles : {1, 4, 8, 9, 33, 64, 1000}) {
        const GroupedSplitPlan plan = plan_grouped_split_last_wave(tiles, grid, k_tiles);
        ASSERT_GE(plan.splits, 1);
        ASSERT_LE(plan.splits, kGroupedMaxSplits);
        ASSERT_EQ(plan.whole_tiles % grid == 0 || plan.splits == 1, true) << tiles << " " << grid;
        ASSERT_LE(plan.whole_tiles, tiles);
        if (plan.splits == 1) {
          ASSERT_EQ(plan.whole_tiles, tiles);
          continue;
        }
        const int split_tiles = tiles - plan.whole_tiles;
        ASSERT_GT(split_tiles, 0);
        ASSERT_LE(split_tiles * plan.splits, grid) << tiles << " tiles on " << grid;
        ASSERT_GE(k_tiles / plan.splits, kGroupedMinKTilesPerSplit) << k_tiles;
        // Each consumer half of each piece has its slot, each split tile's halves their counters.
        ASSERT_LE(static_cast<std::size_t>(split_tiles) * 2 * plan.splits * 128 * 32,
                  grouped_split_workspace_vectors(grid));
        ASSERT_LE(static_cast<std::size_t>(split_tiles) * 2, grouped_split_workspace_counters(grid));
      }
    }
  }
  EXPECT_THROW(plan_grouped_split_last_wave(10, 0, 64), Error);
  EXPECT_THROW(plan_grouped_split_last_wave(-1, 132, 64), Error);
}

}  // namespace
}  // namespace kc::stage3
