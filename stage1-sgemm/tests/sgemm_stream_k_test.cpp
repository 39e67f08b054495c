// Rung 11's partition of the work (kc/stage1/stream_k.hpp), checked without a GPU: the
// data-parallel tiles are whole waves, the stream-K ranges cover the tail's (tile, k tile)
// iterations exactly once, contiguously and evenly, the two segments a kernel block runs are
// exactly its range, and the cases with nothing to gain are left to rung 10.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "kc/common/error.hpp"
#include "kc/common/gemm.hpp"
#include "kc/stage1/sgemm.hpp"
#include "kc/stage1/sgemm_autotune.hpp"
#include "kc/stage1/stream_k.hpp"

namespace kc::stage1 {
namespace {

std::string describe(int tiles, int resident_blocks, int k_tiles) {
  return "T = " + std::to_string(tiles) + ", S = " + std::to_string(resident_blocks) +
         ", k tiles = " + std::to_string(k_tiles);
}

// What plan_stream_k promises, written out independently of how it computes it.
bool should_stream(int tiles, int resident_blocks, int k_tiles) {
  if (tiles <= resident_blocks || tiles % resident_blocks == 0) return false;
  const std::int64_t tail = tiles % resident_blocks;
  const std::int64_t iterations = tail * k_tiles;
  return iterations <= INT32_MAX && iterations / kMinIterationsPerStreamKBlock > tail;
}

// The iterations a stream-K block runs, segment by segment, as the kernel does: the first
// segment, then the second when the range spans two tiles. Each segment must lie in one tile.
std::vector<std::int64_t> iterations_run_by(const StreamKPlan& plan, int block) {
  const IterationRange range = stream_k_range(plan, block);
  std::vector<StreamKSegment> segments = {first_segment(plan, range)};
  if (spans_two_tiles(plan, range)) segments.push_back(second_segment(plan, range));
  std::vector<std::int64_t> iterations;
  for (const StreamKSegment& s : segments) {
    EXPECT_GE(s.tail_tile, 0);
    EXPECT_LT(s.tail_tile, plan.tail_tiles);
    EXPECT_GE(s.k_tile_begin, 0);
    EXPECT_LT(s.k_tile_begin, s.k_tile_end) << "an empty segment";
    EXPECT_LE(s.k_tile_end, plan.k_tiles);
    for (int k = s.k_tile_begin; k < s.k_tile_end; ++k)
      iterations.push_back(static_cast<std::int64_t>(s.tail_tile) * plan.k_tiles + k);
  }
  if (segments.size() == 2) {
    EXPECT_EQ(segments[1].tail_tile, segments[0].tail_tile + 1);
    EXPECT_EQ(segments[0].k_tile_end, plan.k_tiles) << "the first segment must run to its tile's end";
    EXPECT_EQ(segments[1].k_tile_begin, 0);
  }
  return iterations;
}

TEST(StreamKPlan, TailIterationsAreCoveredOnceByContiguousEvenRanges) {
  int planned = 0;
  int spanning_two_tiles = 0;
  for (const int resident_blocks : {1, 2, 3, 5, 7, 16, 132, 264}) {
    for (const int tiles : {1, 2, 3, 4, 6, 7, 8, 15, 17, 64, 100, 263, 264, 265, 527, 529, 1024, 4096}) {
      for (const int k_tiles : {1, 2, 7, 8, 9, 16, 17, 49, 65, 256, 512, 1000}) {
        const StreamKPlan plan = plan_stream_k(tiles, resident_blocks, k_tiles, 1);
        const std::string what = describe(tiles, resident_blocks, k_tiles);
        ASSERT_EQ(plan.uses_stream_k(), should_stream(tiles, resident_blocks, k_tiles)) << what;
        EXPECT_EQ(plan.data_parallel_tiles + plan.tail_tiles, tiles) << what;
        if (!plan.uses_stream_k()) {
          EXPECT_EQ(plan.data_parallel_tiles, tiles) << what;
          EXPECT_EQ(plan.stream_k_blocks, 0) << what;
          continue;
        }
        ++planned;
        // Whole waves of data-parallel tiles, at least one, and the tail behind them.
        EXPECT_EQ(plan.tail_tiles, tiles % resident_blocks) << what;
        EXPECT_EQ(plan.data_parallel_tiles % resident_blocks, 0) << what;
        EXPECT_GE(plan.data_parallel_tiles, resident_blocks) << what;
        // One wave of stream-K blocks, more of them than tail tiles, none with less than the minimum.
        EXPECT_LE(plan.stream_k_blocks, resident_blocks) << what;
        EXPECT_GT(plan.stream_k_blocks, plan.tail_tiles) << what;
        EXPECT_GE(plan.iterations_per_block, kMinIterationsPerStreamKBlock) << what;
        EXPECT_LE(plan.longest_range(), plan.k_tiles) << what << ": a range would span three tiles";

        std::vector<int> runs(static_cast<std::size_t>(plan.tail_iterations()), 0);
        int previous_end = 0;
        int shortest = INT32_MAX;
        int longest = 0;
        for (int block = 0; block < plan.stream_k_blocks; ++block) {
          const IterationRange range = stream_k_range(plan, block);
          EXPECT_EQ(range.begin, previous_end) << what << ", block " << block << ": ranges must be contiguous";
          previous_end = range.end;
          shortest = std::min(shortest, range.end - range.begin);
          longest = std::max(longest, range.end - range.begin);
          if (spans_two_tiles(plan, range)) ++spanning_two_tiles;
          const std::vector<std::int64_t> iterations = iterations_run_by(plan, block);
          ASSERT_EQ(static_cast<int>(iterations.size()), range.end - range.begin) << what << ", block " << block;
          for (std::size_t i = 0; i < iterations.size(); ++i) {
            EXPECT_EQ(iterations[i], range.begin + static_cast<std::int64_t>(i)) << what << ", block " << block;
            ++runs[static_cast<std::size_t>(iterations[i])];
          }
        }
        EXPECT_EQ(previous_end, plan.tail_iterations()) << what << ": the last range must end the tail";
        EXPECT_LE(longest - shortest, 1) << what << ": ranges must be as even as possible";
        EXPECT_EQ(longest, plan.longest_range()) << what;
        for (std::size_t i = 0; i < runs.size(); ++i)
          ASSERT_EQ(runs[i], 1) << what << ": tail tile " << i / static_cast<std::size_t>(k_tiles) << ", k tile "
                                << i % static_cast<std::size_t>(k_tiles) << " is run " << runs[i] << " times";
      }
    }
  }
  // The grid above must reach the interesting cases, or this test proves little.
  EXPECT_GT(planned, 100);
  EXPECT_GT(spanning_two_tiles, 100);
}

TEST(StreamKPlan, CasesWithNothingToGainAreLeftToRung10) {
  EXPECT_FALSE(plan_stream_k(1025, 264, 256, 2).uses_stream_k()) << "split-K already reshapes the work";
  EXPECT_FALSE(plan_stream_k(264, 264, 256, 1).uses_stream_k()) << "T <= S: one wave";
  EXPECT_FALSE(plan_stream_k(100, 264, 256, 1).uses_stream_k()) << "T <= S: one partial wave";
  EXPECT_FALSE(plan_stream_k(528, 264, 256, 1).uses_stream_k()) << "T % S == 0: full waves";
  // 4096 x 4096 x 64 in 128 x 128 x 16 tiles: 4 k tiles per tile; cutting 232 tail tiles into
  // blocks of at least kMinIterationsPerStreamKBlock would give each block more than a tile.
  EXPECT_FALSE(plan_stream_k(1024, 264, 4, 1).uses_stream_k()) << "too few k tiles to cut";
  EXPECT_FALSE(plan_stream_k(1024, 264, 10'000'000, 1).uses_stream_k()) << "iterations beyond 32 bits";
  EXPECT_FALSE(plan_stream_k(1024, 0, 256, 1).uses_stream_k()) << "no resident blocks";
  EXPECT_TRUE(plan_stream_k(1024, 264, 256, 1).uses_stream_k());
  EXPECT_TRUE(plan_stream_k(265, 264, 16, 1).uses_stream_k()) << "one tail tile, split over two blocks";
  EXPECT_EQ(plan_stream_k(265, 264, 16, 1).stream_k_blocks, 2);
}

// The wave arithmetic in the header comment of kernels/11_stream_k.cu, for the `large` class
// configuration on an H200 (132 SMs x 2 resident blocks).
TEST(StreamKPlan, H200WaveArithmeticOfTheRungComment) {
  const WarpTileConfig large = kSearchSpace[class_choice(ShapeClass::large).config];
  ASSERT_EQ(large.bm, 128);
  ASSERT_EQ(large.bn, 128);
  ASSERT_EQ(large.bk, 16);
  struct Expected {
    int size, tiles, data_parallel_tiles, tail_tiles, tail_iterations, iterations_per_block, longest_range;
  };
  for (const Expected& e : {Expected{4096, 1024, 792, 232, 59392, 224, 225},
                            Expected{8192, 4096, 3960, 136, 69632, 263, 264}}) {
    const StreamKPlan plan = plan_stream_k_for(large, e.size, e.size, e.size, 264, 1);
    const std::string what = std::to_string(e.size) + "^3";
    EXPECT_EQ(plan.tiles, e.tiles) << what;
    EXPECT_EQ(plan.data_parallel_tiles, e.data_parallel_tiles) << what;
    EXPECT_EQ(plan.tail_tiles, e.tail_tiles) << what;
    EXPECT_EQ(plan.tail_iterations(), e.tail_iterations) << what;
    EXPECT_EQ(plan.stream_k_blocks, 264) << what;
    EXPECT_EQ(plan.iterations_per_block, e.iterations_per_block) << what;
    EXPECT_EQ(plan.longest_range(), e.longest_range) << what;
  }
  EXPECT_FALSE(plan_stream_k_for(large, 2048, 2048, 2048, 264, 1).uses_stream_k()) << "256 tiles: one wave";
}

TEST(StreamKLaunch, OnlyTheManyWaveClassesHaveAStreamKKernel) {
  EXPECT_TRUE(has_stream_k_kernel(class_choice(ShapeClass::large).config));
  EXPECT_TRUE(has_stream_k_kernel(class_choice(ShapeClass::skinny).config));
  EXPECT_FALSE(has_stream_k_kernel(-1));
  EXPECT_FALSE(has_stream_k_kernel(kSearchSpaceSize));
}

TEST(StreamKLaunch, RefusesBadArgumentsBeforeTouchingTheGpu) {
  const SgemmArgs args;  // never reaches a kernel: the checks throw first
  int without_kernel = -1;
  for (int config = 0; config < kSearchSpaceSize; ++config)
    if (!has_stream_k_kernel(config)) without_kernel = config;
  ASSERT_GE(without_kernel, 0) << "every configuration has a stream-K kernel: CI compile time doubles";
  EXPECT_THROW(sgemm_stream_k_launch(without_kernel, 3, args, nullptr), Error);
  EXPECT_THROW(sgemm_stream_k_launch(class_choice(ShapeClass::large).config, -1, args, nullptr), Error);
}

}  // namespace
}  // namespace kc::stage1
