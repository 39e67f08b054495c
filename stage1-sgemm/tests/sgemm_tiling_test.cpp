// The index arithmetic of the SGEMM ladder, checked on the CPU: every mapping the kernels use is
// a bijection where it must be, every search-space entry is valid, and the shared-memory accesses
// are free of bank conflicts exactly where the rungs claim so.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "kc/stage1/sgemm_autotune.hpp"
#include "kc/stage1/sgemm_tiling.hpp"

namespace kc::stage1 {
namespace {

constexpr int kBanks = 32;

std::string describe(const WarpTileConfig& c) { return config_name(c); }

TEST(CeilDiv, RoundsUpWithoutOverflow) {
  EXPECT_EQ(ceil_div(1, 128), 1);
  EXPECT_EQ(ceil_div(128, 128), 1);
  EXPECT_EQ(ceil_div(129, 128), 2);
  EXPECT_EQ(ceil_div(4093, 128), 32);
  EXPECT_EQ(ceil_div(INT_MAX, 128), INT_MAX / 128 + 1);  // (a + b - 1) / b would overflow here
  EXPECT_EQ(ceil_div(INT_MAX, 1), INT_MAX);
}

TEST(GroupedTile, VisitsEveryTileExactlyOnce) {
  for (const auto& [tiles_m, tiles_n] : std::vector<std::pair<int, int>>{
           {1, 1}, {1, 9}, {9, 1}, {5, 7}, {8, 8}, {33, 17}, {3, 100}, {100, 3}, {64, 64}}) {
    for (const int group : {1, 2, 8, 16}) {
      std::vector<int> hits(static_cast<std::size_t>(tiles_m * tiles_n), 0);
      for (int linear = 0; linear < tiles_m * tiles_n; ++linear) {
        const TileElement t = grouped_tile(linear, tiles_m, tiles_n, group);
        ASSERT_TRUE(t.row >= 0 && t.row < tiles_m && t.col >= 0 && t.col < tiles_n)
            << "block " << linear << " of " << tiles_m << "x" << tiles_n << " group " << group
            << " maps outside: (" << t.row << ", " << t.col << ")";
        ++hits[static_cast<std::size_t>(t.row * tiles_n + t.col)];
      }
      for (std::size_t i = 0; i < hits.size(); ++i)
        ASSERT_EQ(hits[i], 1) << "tile " << i << " of " << tiles_m << "x" << tiles_n << ", group " << group;
    }
  }
}

TEST(GroupedTile, GroupOneIsRowMajorAndLargerGroupsWalkDownFirst) {
  for (int linear = 0; linear < 35; ++linear) {
    const TileElement t = grouped_tile(linear, 5, 7, 1);
    EXPECT_EQ(t.row, linear / 7);
    EXPECT_EQ(t.col, linear % 7);
  }
  // Group 8 over 32 x 32 tiles: blocks 0..7 are column 0, rows 0..7; block 8 moves one column.
  for (int linear = 0; linear < 8; ++linear) {
    const TileElement t = grouped_tile(linear, 32, 32, 8);
    EXPECT_EQ(t.row, linear);
    EXPECT_EQ(t.col, 0);
  }
  const TileElement next = grouped_tile(8, 32, 32, 8);
  EXPECT_EQ(next.row, 0);
  EXPECT_EQ(next.col, 1);
  // The last, partial group (rows 8..9 of 10) still walks down first.
  EXPECT_EQ(grouped_tile(8 * 3, 10, 3, 8).row, 8);
  EXPECT_EQ(grouped_tile(8 * 3 + 1, 10, 3, 8).row, 9);
  EXPECT_EQ(grouped_tile(8 * 3 + 1, 10, 3, 8).col, 0);
}

// Every element of a rows x cols tile is covered exactly once by `slots` slots of `width`
// consecutive elements placed by `slot_of`.
template <typename SlotOf>
void expect_tile_covered_once(int rows, int cols, int slots, int width, SlotOf slot_of, const std::string& what) {
  std::vector<int> hits(static_cast<std::size_t>(rows * cols), 0);
  for (int slot = 0; slot < slots; ++slot) {
    const TileElement e = slot_of(slot);
    ASSERT_TRUE(e.row >= 0 && e.row < rows && e.col >= 0 && e.col + width <= cols)
        << what << ": slot " << slot << " lands outside at (" << e.row << ", " << e.col << ")";
    for (int j = 0; j < width; ++j) ++hits[static_cast<std::size_t>(e.row * cols + e.col + j)];
  }
  for (std::size_t i = 0; i < hits.size(); ++i) ASSERT_EQ(hits[i], 1) << what << ": element " << i;
}

TEST(LoadSlots, Vec4AndScatterSlotsCoverEveryTileOnce) {
  for (const WarpTileConfig& c : kSearchSpace) {
    const std::string name = describe(c);
    expect_tile_covered_once(c.bm, c.bk, c.bm * c.bk, 1, [&](int s) { return a_scatter_slot(s, c.bm); },
                             name + " A scatter");
    expect_tile_covered_once(c.bk, c.bn, c.bk * c.bn / 4, 4, [&](int s) { return vec4_slot(s, c.bn); },
                             name + " B float4");
  }
  // Rungs 06-08 load the 128 x 8 A tile as float4 along rows.
  expect_tile_covered_once(128, 8, 128 * 8 / 4, 4, [](int s) { return vec4_slot(s, 8); }, "A float4");
}

// The pipelined kernel never calls the slot functions per copy: it adds compile-time pass offsets
// to the thread's first slot. Those must land exactly where the slot functions say.
TEST(LoadSlots, PassOffsetsReproduceTheSlotFunctions) {
  for (const WarpTileConfig& c : kSearchSpace) {
    const int threads = c.threads();
    for (int t = 0; t < threads; ++t) {
      const TileElement a_first = a_scatter_slot(t, c.bm);
      for (int pass = 0; pass < c.bm * c.bk / threads; ++pass) {
        const TileElement expected = a_scatter_slot(t + pass * threads, c.bm);
        const TileElement offset = a_scatter_slot_of_pass(TileElement{0, 0}, pass, c.bm, threads);
        ASSERT_EQ(a_first.row + offset.row, expected.row) << describe(c) << " thread " << t << " pass " << pass;
        ASSERT_EQ(a_first.col + offset.col, expected.col) << describe(c) << " thread " << t << " pass " << pass;
        ASSERT_LT(a_first.col, 8) << "the first pass stays in the first sector column";
      }
      const TileElement b_first = vec4_slot(t, c.bn);
      for (int pass = 0; pass < c.bk * c.bn / 4 / threads; ++pass) {
        const TileElement expected = vec4_slot(t + pass * threads, c.bn);
        const TileElement got = vec4_slot_of_pass(b_first, pass, c.bn, threads);
        ASSERT_EQ(got.row, expected.row) << describe(c) << " thread " << t << " pass " << pass;
        ASSERT_EQ(got.col, expected.col) << describe(c) << " thread " << t << " pass " << pass;
      }
    }
  }
}

TEST(LoadSlots, EightConsecutiveScatterSlotsReadOneSectorOfARow) {
  for (const int rows : {64, 128, 256}) {
    for (int first = 0; first < rows * 16; first += 8) {
      const TileElement head = a_scatter_slot(first, rows);
      EXPECT_EQ(head.col % 8, 0);
      for (int j = 1; j < 8; ++j) {
        const TileElement e = a_scatter_slot(first + j, rows);
        EXPECT_EQ(e.row, head.row);
        EXPECT_EQ(e.col, head.col + j);
      }
    }
  }
}

// Every output of the bm x bn tile is owned by exactly one thread.
void expect_outputs_owned_once(int bm, int bn, int threads, int tm, int tn,
                               FragmentPlacement (*place_of)(const WarpTileConfig&, int),
                               const WarpTileConfig& c, const std::string& what) {
  std::vector<int> hits(static_cast<std::size_t>(bm * bn), 0);
  for (int t = 0; t < threads; ++t) {
    const FragmentPlacement p = place_of(c, t);
    for (int sm = 0; sm < tm / 4; ++sm)
      for (int i = 0; i < 4; ++i)
        for (int sn = 0; sn < tn / 4; ++sn)
          for (int j = 0; j < 4; ++j) {
            const int row = p.row0 + sm * p.row_step + i;
            const int col = p.col0 + sn * p.col_step + j;
            ASSERT_TRUE(row >= 0 && row < bm && col >= 0 && col < bn)
                << what << ": thread " << t << " owns (" << row << ", " << col << ")";
            ++hits[static_cast<std::size_t>(row * bn + col)];
          }
  }
  for (std::size_t i = 0; i < hits.size(); ++i) ASSERT_EQ(hits[i], 1) << what << ": output " << i;
}

FragmentPlacement warptile(const WarpTileConfig& c, int t) { return warptile_placement(c, t); }
FragmentPlacement contiguous(const WarpTileConfig&, int t) { return contiguous_placement(t); }
FragmentPlacement spread(const WarpTileConfig&, int t) { return spread_placement(t); }

TEST(Placement, EveryOutputHasExactlyOneOwner) {
  for (const WarpTileConfig& c : kSearchSpace)
    expect_outputs_owned_once(c.bm, c.bn, c.threads(), c.tm, c.tn, &warptile, c, describe(c));
  const WarpTileConfig none{};
  expect_outputs_owned_once(128, 128, 256, 8, 8, &contiguous, none, "rung 06");
  expect_outputs_owned_once(128, 128, 256, 8, 8, &spread, none, "rung 07");
}

// Passes one request of a warp needs from shared memory, for 16-byte accesses: served a quarter
// warp (8 lanes) at a time; within a quarter, lanes reading the same 16 bytes share them, and
// distinct 16-byte pieces conflict when they fall in the same 4-bank group.
// `word_of_lane` gives each lane's first 4-byte word.
template <typename WordOfLane>
int ways_of_vec4_request(WordOfLane word_of_lane) {
  int worst = 1;
  for (int quarter = 0; quarter < 4; ++quarter) {
    std::set<int> pieces;
    for (int lane = 8 * quarter; lane < 8 * quarter + 8; ++lane) pieces.insert(word_of_lane(lane) / 4);
    std::vector<int> per_group(kBanks / 4, 0);
    for (const int piece : pieces) worst = std::max(worst, ++per_group[static_cast<std::size_t>(piece % (kBanks / 4))]);
  }
  return worst;
}

// The same for a 4-byte store of all 32 lanes (no two lanes write the same word here).
template <typename WordOfLane>
int ways_of_scalar_request(WordOfLane word_of_lane) {
  std::vector<int> per_bank(kBanks, 0);
  int worst = 1;
  for (int lane = 0; lane < 32; ++lane)
    worst = std::max(worst, ++per_bank[static_cast<std::size_t>(word_of_lane(lane) % kBanks)]);
  return worst;
}

// Worst conflict over every warp, k and sub-tile of the fragment reads of A and B.
int worst_fragment_read(int threads, int tm, int tn, int a_stride, int b_stride, int bk,
                        FragmentPlacement (*place_of)(const WarpTileConfig&, int), const WarpTileConfig& c) {
  int worst = 1;
  for (int warp = 0; warp < threads / 32; ++warp)
    for (int k = 0; k < bk; ++k) {
      for (int s = 0; s < tm / 4; ++s)
        worst = std::max(worst, ways_of_vec4_request([&](int lane) {
                           const FragmentPlacement p = place_of(c, 32 * warp + lane);
                           return k * a_stride + p.row0 + s * p.row_step;
                         }));
      for (int s = 0; s < tn / 4; ++s)
        worst = std::max(worst, ways_of_vec4_request([&](int lane) {
                           const FragmentPlacement p = place_of(c, 32 * warp + lane);
                           return k * b_stride + p.col0 + s * p.col_step;
                         }));
    }
  return worst;
}

// Worst conflict of the transposed stores of the float4-loaded A tile (rungs 06-08): lane l of a
// warp writes element j of its float4 to word (k + j) * a_stride + m.
int worst_transposed_vec4_store(int rows, int bk, int a_stride) {
  int worst = 1;
  for (int first = 0; first < rows * bk / 4; first += 32)
    for (int j = 0; j < 4; ++j)
      worst = std::max(worst, ways_of_scalar_request([&](int lane) {
                         const TileElement e = vec4_slot(first + lane, bk);
                         return (e.col + j) * a_stride + e.row;
                       }));
  return worst;
}

TEST(BankConflicts, Rung06HasTwoWayConflictsThatRung07Removes) {
  const WarpTileConfig none{};
  // Rung 06: B read at a 32-byte stride, and unpadded transposed A stores: both 2-way.
  EXPECT_EQ(worst_fragment_read(256, 8, 8, 128, 128, 8, &contiguous, none), 2);
  EXPECT_EQ(worst_transposed_vec4_store(128, 8, 128), 2);
  // Rung 07: spread sub-tiles and rows padded to 132 floats: conflict-free.
  EXPECT_EQ(worst_fragment_read(256, 8, 8, 132, 128, 8, &spread, none), 1);
  EXPECT_EQ(worst_transposed_vec4_store(128, 8, 132), 1);
}

TEST(BankConflicts, WarptiledConfigurationsAreConflictFree) {
  for (const WarpTileConfig& c : kSearchSpace) {
    const std::string name = describe(c);
    EXPECT_EQ(worst_fragment_read(c.threads(), c.tm, c.tn, c.a_stride(), c.bn, c.bk, &warptile, c), 1) << name;
    // cp.async scatter of A into the padded transposed tile (rungs 09, 10).
    for (int first = 0; first < c.bm * c.bk; first += 32)
      EXPECT_EQ(ways_of_scalar_request([&](int lane) {
                  const TileElement e = a_scatter_slot(first + lane, c.bm);
                  return e.col * c.a_stride() + e.row;
                }),
                1)
          << name << ", slots " << first << "..";
  }
  // Rung 08 (bk 8, single buffer) uses the float4 transposed stores of rung 07.
  EXPECT_EQ(worst_transposed_vec4_store(128, 8, WarpTileConfig{128, 128, 8, 32, 64, 8, 8, 1}.a_stride()), 1);
}

TEST(SearchSpace, EveryEntryIsValidDistinctAndAffordable) {
  EXPECT_LE(kSearchSpaceSize, 16) << "CI compiles every entry for two architectures";
  std::set<std::string> names;
  for (const WarpTileConfig& c : kSearchSpace) {
    const char* error = config_error(c);
    EXPECT_EQ(error, nullptr) << describe(c) << ": " << (error ? error : "");
    EXPECT_GE(c.stages, 2) << describe(c) << ": the cp.async pipeline needs two stages";
    EXPECT_LE(c.smem_bytes(), kMaxSmemBytesPerBlock) << describe(c);
    EXPECT_LE(c.threads() * 128 * c.min_blocks_per_sm(), 65536) << describe(c) << ": register budget";
    EXPECT_TRUE(names.insert(describe(c)).second) << describe(c) << " is listed twice";
  }
  const WarpTileConfig rung09 = kSearchSpace[kRung09Config];
  EXPECT_EQ(describe(rung09), "128x128x8_w32x64_t8x8_s3");
  EXPECT_EQ(rung09.threads(), 256);
  EXPECT_EQ(rung09.min_blocks_per_sm(), 2);
  EXPECT_EQ(rung09.smem_bytes(), 3 * (8 * 132 + 8 * 128) * 4);
}

TEST(SearchSpace, ConfigErrorNamesTheBrokenRule) {
  const WarpTileConfig good{128, 128, 8, 32, 64, 8, 8, 3};
  ASSERT_EQ(config_error(good), nullptr);
  const auto error_of = [](WarpTileConfig c) { return std::string(config_error(c) ? config_error(c) : ""); };
  WarpTileConfig c = good;
  c.tm = 6;
  c.wm = 24;
  c.bm = 96;
  EXPECT_NE(error_of(c).find("multiples of 4"), std::string::npos) << error_of(c);
  c = good;
  c.tn = 16;
  c.wn = 128;
  c.bn = 128;
  EXPECT_NE(error_of(c).find("at most 64"), std::string::npos) << error_of(c);
  c = good;
  c.wm = 64;  // lanes 8 x 8 = 64
  EXPECT_NE(error_of(c).find("32"), std::string::npos) << error_of(c);
  c = good;
  c.bm = 100;
  EXPECT_NE(error_of(c).find("multiple of wm"), std::string::npos) << error_of(c);
  c = good;
  c.bk = 4;
  EXPECT_NE(error_of(c).find("multiple of 8"), std::string::npos) << error_of(c);
  c = {256, 256, 8, 32, 64, 8, 8, 3};  // 32 warps
  EXPECT_NE(error_of(c).find("512 threads"), std::string::npos) << error_of(c);
  c = {256, 128, 8, 64, 32, 8, 8, 3};  // 8 x 128 / 4 = 256 float4 of B for 512 threads
  EXPECT_NE(error_of(c).find("B float4"), std::string::npos) << error_of(c);
  c = {128, 192, 24, 32, 64, 8, 8, 2};  // 384 threads: a pass of A copies would straddle sectors
  EXPECT_NE(error_of(c).find("8 * bm"), std::string::npos) << error_of(c);
  c = {24, 256, 24, 8, 256, 8, 8, 2};  // 96 threads do not cover whole rows of 64 float4
  EXPECT_NE(error_of(c).find("bn / 4"), std::string::npos) << error_of(c);
  c = {256, 128, 16, 64, 32, 8, 8, 8};
  EXPECT_NE(error_of(c).find("163 KiB"), std::string::npos) << error_of(c);
  c = good;
  c.stages = 0;
  EXPECT_NE(error_of(c).find("stages"), std::string::npos) << error_of(c);
}

TEST(SplitK, PlansCoverKWithNoEmptySplit) {
  for (const int k : {1, 2, 7, 8, 9, 31, 100, 1031, 4096, 8192}) {
    for (const int k_tile : {8, 16}) {
      for (const int requested : {0, 1, 2, 3, 4, 8, 1000}) {
        const SplitK plan = plan_split_k(k, k_tile, requested);
        SCOPED_TRACE("K " + std::to_string(k) + ", k tile " + std::to_string(k_tile) + ", requested " +
                     std::to_string(requested));
        EXPECT_GE(plan.splits, 1);
        EXPECT_LE(plan.splits, std::max(1, requested));
        EXPECT_EQ(plan.k_per_split % k_tile, 0);
        EXPECT_LT((plan.splits - 1) * plan.k_per_split, k) << "the last split would be empty";
        EXPECT_GE(plan.splits * plan.k_per_split, k) << "part of K would be left out";
      }
    }
  }
  EXPECT_EQ(plan_split_k(8192, 8, 4).splits, 4);
  EXPECT_EQ(plan_split_k(8192, 8, 4).k_per_split, 2048);
  EXPECT_EQ(plan_split_k(4096, 8, 1).k_per_split, 4096);
  EXPECT_EQ(plan_split_k(1, 8, 4).splits, 1);
}

TEST(ShapeClasses, BenchShapesFallInTheExpectedClass) {
  EXPECT_EQ(classify_shape(1, 1, 1), ShapeClass::small);
  EXPECT_EQ(classify_shape(256, 256, 256), ShapeClass::small);
  EXPECT_EQ(classify_shape(1024, 1024, 1024), ShapeClass::small);
  EXPECT_EQ(classify_shape(2048, 2048, 2048), ShapeClass::large);
  EXPECT_EQ(classify_shape(4096, 4096, 4096), ShapeClass::large);
  EXPECT_EQ(classify_shape(8192, 8192, 8192), ShapeClass::large);
  EXPECT_EQ(classify_shape(4093, 2049, 1031), ShapeClass::large);
  EXPECT_EQ(classify_shape(8192, 512, 4096), ShapeClass::skinny);
  EXPECT_EQ(classify_shape(512, 8192, 4096), ShapeClass::skinny);
  EXPECT_EQ(classify_shape(128, 8192, 8192), ShapeClass::long_k);
  EXPECT_EQ(classify_shape(8192, 128, 8192), ShapeClass::long_k);
  // Products that overflow 32 bits are computed in 64.
  EXPECT_EQ(classify_shape(46341, 46341, 1), ShapeClass::large);  // M*N > 2^31 in 32 bits would wrap negative: "small"
  EXPECT_EQ(classify_shape(65536, 32768, 1024), ShapeClass::large);
}

TEST(ShapeClasses, TheChoiceTableCoversEveryClassOnceWithValidEntries) {
  std::set<ShapeClass> seen;
  for (const ShapeClassChoice& choice : kShapeClassChoices) {
    EXPECT_TRUE(seen.insert(choice.shape_class).second) << shape_class_name(choice.shape_class) << " twice";
    EXPECT_GE(choice.config, 0);
    EXPECT_LT(choice.config, kSearchSpaceSize);
    EXPECT_GE(choice.splits, 1);
  }
  EXPECT_EQ(static_cast<int>(seen.size()), kShapeClassCount);
  for (const auto& shape : std::vector<std::vector<int>>{{128, 8192, 8192}, {4096, 4096, 4096}, {8192, 512, 4096}, {256, 256, 256}}) {
    const ShapeClassChoice choice = choose_config(shape[0], shape[1], shape[2]);
    EXPECT_EQ(choice.shape_class, classify_shape(shape[0], shape[1], shape[2]));
  }
}

}  // namespace
}  // namespace kc::stage1
