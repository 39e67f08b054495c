// The index arithmetic of the tensor-core GEMM ladder, checked on the CPU: the 128-byte swizzle
// (conflict-free shared-memory access, the TMA/WGMMA pattern), the address arithmetic and tile
// rules of the mma.sync rungs, the tile raster order of the persistent rungs, and the TMA box
// rules.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "arch/sm90/tma_descriptor.hpp"
#include "arch/util.hpp"
#include "gemm_layout.hpp"
#include "kc/common/error.hpp"

namespace kc::stage3 {
namespace {

constexpr int kBanks = 32;
constexpr int kBankBytes = 4;

int bank_of(int byte_offset) { return (byte_offset / kBankBytes) % kBanks; }

// The banks a 16-byte access at `byte_offset` touches.
std::set<int> banks_of_chunk(int byte_offset) {
  std::set<int> banks;
  for (int word = 0; word < 4; ++word) banks.insert(bank_of(byte_offset + word * kBankBytes));
  return banks;
}

TEST(Swizzle128B, IsAPermutationOfTheChunksOfEveryRow) {
  for (int row = 0; row < 64; ++row) {
    std::set<int> chunks;
    for (int chunk = 0; chunk < 8; ++chunk) {
      const int offset = swizzle_128b_offset(row, chunk);
      EXPECT_GE(offset, row * 128);
      EXPECT_LT(offset, row * 128 + 128);
      chunks.insert(offset);
    }
    EXPECT_EQ(chunks.size(), 8u) << "row " << row;
  }
}

TEST(Swizzle128B, EqualsTheHardwarePatternXorOfAddressBits7to9Into4to6) {
  for (int row = 0; row < 256; ++row)
    for (int col = 0; col < 64; ++col) {
      const int plain = row * 128 + col * 2;
      const int hardware = plain ^ (((plain >> 7) & 7) << 4);
      EXPECT_EQ(swizzle_128b_element_offset(row, col), hardware) << row << "," << col;
    }
}

// ldmatrix reads 8 rows x 16 bytes per phase, all at the same logical chunk: without the swizzle
// all eight would sit in the same 4 banks (8-way conflict); with it they cover all 32.
TEST(Swizzle128B, EightRowsOfOneLogicalChunkHitAll32Banks) {
  for (int first_row = 0; first_row < 128; first_row += 8)
    for (int chunk = 0; chunk < 8; ++chunk) {
      std::set<int> banks;
      for (int row = first_row; row < first_row + 8; ++row) {
        const std::set<int> touched = banks_of_chunk(swizzle_128b_offset(row, chunk));
        banks.insert(touched.begin(), touched.end());
      }
      EXPECT_EQ(banks.size(), static_cast<std::size_t>(kBanks)) << "rows " << first_row << "+, chunk " << chunk;
    }
}

TEST(Swizzle128B, WithoutItTheSameAccessIsAnEightWayConflict) {  // the control: the test can fail
  std::set<int> banks;
  for (int row = 0; row < 8; ++row) {
    const std::set<int> touched = banks_of_chunk(row * 128 + 3 * 16);
    banks.insert(touched.begin(), touched.end());
  }
  EXPECT_EQ(banks.size(), 4u);
}

// The epilogue of rungs 09/10: lane l of a warp writes 4 bytes at row l/4, columns 8j + 2(l%4).
TEST(Swizzle128B, EpilogueFragmentWritesOfAWarpAreConflictFree) {
  for (int warp = 0; warp < 4; ++warp)
    for (int half = 0; half < 2; ++half)
      for (int j = 0; j < 32; ++j) {
        std::set<int> banks;
        for (int lane = 0; lane < 32; ++lane) {
          const int row = 16 * warp + lane / 4 + 8 * half;
          const int col = (8 * j + 2 * (lane % 4)) % 64;
          banks.insert(bank_of(swizzle_128b_element_offset(row, col)));
        }
        EXPECT_EQ(banks.size(), static_cast<std::size_t>(kBanks)) << "warp " << warp << " j " << j;
      }
}

// ---- tile raster order ----------------------------------------------------------------------------

TEST(GroupedRaster, VisitsEveryTileExactlyOnce) {
  for (int tiles_m : {1, 2, 3, 7, 8, 9, 32, 33, 64})
    for (int tiles_n : {1, 2, 5, 16, 56})
      for (int band : {1, 2, 4, 8, 16, 1000}) {
        std::set<std::pair<int, int>> seen;
        for (int linear = 0; linear < tiles_m * tiles_n; ++linear) {
          const TileCoord t = grouped_tile(linear, tiles_m, tiles_n, band);
          ASSERT_GE(t.m, 0);
          ASSERT_LT(t.m, tiles_m);
          ASSERT_GE(t.n, 0);
          ASSERT_LT(t.n, tiles_n);
          seen.insert({t.m, t.n});
        }
        EXPECT_EQ(seen.size(), static_cast<std::size_t>(tiles_m * tiles_n))
            << tiles_m << "x" << tiles_n << " band " << band;
      }
}

TEST(GroupedRaster, ABandAtLeastAsTallAsTheMatrixIsPlainColumnMajorOrder) {
  const int tiles_m = 5, tiles_n = 3;
  for (int linear = 0; linear < tiles_m * tiles_n; ++linear) {
    const TileCoord t = grouped_tile(linear, tiles_m, tiles_n, tiles_m);
    EXPECT_EQ(t.m, linear % tiles_m);
    EXPECT_EQ(t.n, linear / tiles_m);
  }
}

TEST(GroupedRaster, WalksDownABandBeforeMovingRight) {
  const TileCoord first = grouped_tile(0, 64, 56, 8);
  const TileCoord eighth = grouped_tile(7, 64, 56, 8);
  const TileCoord ninth = grouped_tile(8, 64, 56, 8);
  EXPECT_EQ(first.m, 0);
  EXPECT_EQ(eighth.m, 7);
  EXPECT_EQ(eighth.n, 0);
  EXPECT_EQ(ninth.m, 0);
  EXPECT_EQ(ninth.n, 1);
}

// What the order is for: the tiles one wave of 132 persistent blocks works on (8192 x 14336 output
// in 128 x 256 tiles = 64 x 56) read few A row-panels and few B column-panels.
TEST(GroupedRaster, OneWaveTouchesFewPanels) {
  const int tiles_m = 64, tiles_n = 56, wave = 132;
  std::set<int> rows, cols, plain_rows, plain_cols;
  for (int linear = 0; linear < wave; ++linear) {
    const TileCoord t = grouped_tile(linear, tiles_m, tiles_n, 8);
    rows.insert(t.m);
    cols.insert(t.n);
    const TileCoord p = grouped_tile(linear, tiles_m, tiles_n, tiles_m);
    plain_rows.insert(p.m);
    plain_cols.insert(p.n);
  }
  EXPECT_EQ(rows.size(), 8u);
  EXPECT_EQ(cols.size(), 17u);  // ceil(132 / 8)
  // Panels read per wave: 8 + 17 = 25 grouped, against 64 + 3 = 67 in plain order.
  EXPECT_LT(rows.size() + cols.size(), plain_rows.size() + plain_cols.size());
}

TEST(GroupedRaster, ShortLastBandStaysInsideTheMatrix) {
  // 10 tile rows in bands of 4: the last band has 2 rows.
  std::set<int> last_band_rows;
  for (int linear = 8 * 3; linear < 10 * 3; ++linear) last_band_rows.insert(grouped_tile(linear, 10, 3, 4).m);
  EXPECT_EQ(last_band_rows, (std::set<int>{8, 9}));
}

TEST(CeilDiv, RoundsUp) {
  EXPECT_EQ(ceil_div(1, 128), 1);
  EXPECT_EQ(ceil_div(128, 128), 1);
  EXPECT_EQ(ceil_div(129, 128), 2);
  EXPECT_EQ(ceil_div(4093, 64), 64);
}

// ---- the mma.sync rungs (02, 03) ----------------------------------------------------------------

// load_warp_fragments addresses slice s (chunks 2s, 2s + 1) by XOR-ing 32 s into the slice-0
// address; that is only right if the swizzle commutes with it, for every row a warp can read.
TEST(MmaSyncFragments, SliceSOfAChunkPairIsTheSlice0OffsetXor32S) {
  for (int row = 0; row < 256; ++row)
    for (int chunk = 0; chunk < 2; ++chunk)
      for (int slice = 0; slice < kMmaSyncBlockK / 16; ++slice)
        EXPECT_EQ(swizzle_128b_offset(row, chunk + 2 * slice), swizzle_128b_offset(row, chunk) ^ (32 * slice))
            << "row " << row << ", chunk " << chunk << ", slice " << slice;
}

// ... and fragment i, 16 i rows further, is 2048 i bytes further whatever the slice.
TEST(MmaSyncFragments, SixteenRowsFurtherIs2048BytesFurtherInEverySlice) {
  for (int row = 0; row < 64; ++row)
    for (int chunk = 0; chunk < 8; ++chunk)
      for (int i = 1; i < 4; ++i)
        EXPECT_EQ(swizzle_128b_offset(row + 16 * i, chunk), swizzle_128b_offset(row, chunk) + 2048 * i);
}

// The copy passes of a thread are threads / 8 rows apart (a multiple of 8), so each lands at the
// first pass's swizzled offset plus a constant: the kernels add compile-time offsets.
TEST(MmaSyncCopies, PassesOfAThreadAreAConstantNumberOfBytesApart) {
  for (const int threads : {64, 128, 256}) {
    const int rows_per_pass = threads / 8;
    for (int thread = 0; thread < threads; ++thread)
      for (int pass = 1; pass < 256 / rows_per_pass; ++pass) {
        const int row = thread / 8, column = thread % 8;
        EXPECT_EQ(swizzle_128b_offset(row + pass * rows_per_pass, column),
                  swizzle_128b_offset(row, column) + pass * rows_per_pass * kSwizzleRowBytes);
      }
  }
}

std::string mma_sync_rule(const MmaSyncShape& shape) {
  const char* error = mma_sync_config_error(shape);
  return error == nullptr ? "" : error;
}

TEST(MmaSyncConfig, TheCandidateShapesAreValid) {
  for (const MmaSyncShape& shape : {MmaSyncShape{128, 128, 2, 2, 3}, MmaSyncShape{128, 256, 2, 4, 3},
                                    MmaSyncShape{256, 128, 4, 2, 3}, MmaSyncShape{128, 256, 2, 4, 4},
                                    MmaSyncShape{256, 128, 4, 2, 4}, MmaSyncShape{128, 256, 2, 4, 2},
                                    MmaSyncShape{128, 128, 4, 2, 3}, MmaSyncShape{128, 128, 2, 4, 3}})
    EXPECT_EQ(mma_sync_rule(shape), "") << shape.block_m << "x" << shape.block_n << " s" << shape.stages;
}

TEST(MmaSyncConfig, CountsTheResourcesOfATile) {
  const MmaSyncShape shape{128, 256, 2, 4, 3};
  EXPECT_EQ(shape.threads(), 256);
  EXPECT_EQ(shape.warp_tile_m(), 64);
  EXPECT_EQ(shape.warp_tile_n(), 64);
  EXPECT_EQ(shape.accumulators(), 128);
  EXPECT_EQ(shape.stage_bytes(), 48 * 1024);
  EXPECT_EQ(shape.smem_bytes(), 3 * 48 * 1024 + 1024);
  EXPECT_EQ(shape.min_blocks_per_sm(), 1);
  EXPECT_EQ((MmaSyncShape{128, 128, 2, 2, 3}).min_blocks_per_sm(), 2);
  // 32 x 64 warp tiles: 64 accumulators fit 128 registers, so two 256-thread blocks per SM
  const MmaSyncShape narrow{128, 128, 4, 2, 3};
  EXPECT_EQ(narrow.accumulators(), 64);
  EXPECT_EQ(narrow.planned_threads_per_sm(), 512);
  EXPECT_EQ(narrow.min_blocks_per_sm(), 2);
  EXPECT_EQ(mma_sync_rule(narrow), "");
}

TEST(MmaSyncConfig, RefusesShapesThatCannotWork) {
  // a 128 x 64 warp tile: 256 accumulators per thread
  EXPECT_NE(mma_sync_rule({256, 128, 2, 2, 3}).find("64 x 64"), std::string::npos);
  // 16 warps: 512 threads cannot each have 255 registers
  EXPECT_NE(mma_sync_rule({256, 256, 4, 4, 2}).find("threads"), std::string::npos);
  // warp tile of 64 x 24: not a whole number of ldmatrix.x4 B pairs
  EXPECT_NE(mma_sync_rule({128, 48, 2, 2, 3}).find("multiples of 16"), std::string::npos);
  EXPECT_NE(mma_sync_rule({128, 128, 2, 2, 1}).find("two stages"), std::string::npos);
  // 5 stages of 48 KiB: more than 227 KiB
  EXPECT_NE(mma_sync_rule({128, 256, 2, 4, 5}).find("227 KiB"), std::string::npos);
  // 4 stages of 32 KiB twice per SM (2 blocks of 128 threads): 260 KiB
  EXPECT_NE(mma_sync_rule({128, 128, 2, 2, 4}).find("228 KiB"), std::string::npos);
  // the same with 32 x 64 warp tiles (2 blocks of 256 threads)
  EXPECT_NE(mma_sync_rule({128, 128, 4, 2, 4}).find("228 KiB"), std::string::npos);
  EXPECT_NE(mma_sync_rule({128, 128, 3, 2, 3}).find("multiple of warps_m"), std::string::npos);
}

TEST(MmaSyncConfig, TheStagedEpilogueNeeds64ColumnWarpTiles) {
  // every candidate of kc-mma-sync-tune, staged
  for (const MmaSyncShape& shape : {MmaSyncShape{128, 256, 2, 4, 3, true}, MmaSyncShape{128, 128, 2, 2, 3, true},
                                    MmaSyncShape{256, 128, 4, 2, 3, true}, MmaSyncShape{128, 256, 2, 4, 4, true},
                                    MmaSyncShape{128, 128, 4, 2, 3, true}}) {
    EXPECT_EQ(mma_sync_rule(shape), "") << shape.block_m << "x" << shape.block_n << " w" << shape.warps_m << "x"
                                        << shape.warps_n << " s" << shape.stages;
    // the buffer is carved from the stages: no extra shared memory
    EXPECT_EQ(shape.smem_bytes(), (MmaSyncShape{shape.block_m, shape.block_n, shape.warps_m, shape.warps_n,
                                                shape.stages, false})
                                      .smem_bytes());
    EXPECT_LE(shape.staged_epilogue_bytes(), shape.stages * shape.stage_bytes());
  }
  // 64 x 32 warp tiles: 64-byte rows, not the 128-byte swizzled rows the epilogue is laid out in
  EXPECT_EQ(mma_sync_rule({128, 128, 2, 4, 3, false}), "");
  EXPECT_NE(mma_sync_rule({128, 128, 2, 4, 3, true}).find("64-column warp tiles"), std::string::npos);
}

// ---- rung 11: small M, split K ---------------------------------------------------------------------

TEST(SmallMSplitK, FillsAbout132SmsWithOneCtaEachAtTheDecodeShapes) {
  for (const int m : {1, 16, 64}) {
    const SmallMSplitKPlan plan = plan_small_m_split_k(m, 4096, 4096, 132);
    EXPECT_EQ(plan.m_tiles, (m + 15) / 16);
    EXPECT_EQ(plan.n_blocks, 32);
    EXPECT_EQ(plan.k_tiles, 64);
    EXPECT_EQ(plan.splits, 4);  // 128 CTAs: one wave
    EXPECT_LE(plan.n_blocks * plan.splits, 132);
  }
  const SmallMSplitKPlan down = plan_small_m_split_k(64, 4096, 14336, 132);
  EXPECT_EQ(down.k_tiles, 224);
  EXPECT_EQ(down.splits, 4);
  EXPECT_EQ(small_m_split_k_workspace_floats(down, 64, 4096), 4LL * 64 * 4096);
}

TEST(SmallMSplitK, SplitsOnlyWhatIsLongEnoughAndNeverGoesBelowOne) {
  // N wide enough for every SM: no split, no workspace
  const SmallMSplitKPlan wide = plan_small_m_split_k(16, 32768, 4096, 132);
  EXPECT_EQ(wide.splits, 1);
  EXPECT_FALSE(wide.needs_workspace());
  EXPECT_EQ(small_m_split_k_workspace_floats(wide, 16, 32768), 0);
  // short K: at least kSmallMMinKTilesPerSplit tiles per split
  EXPECT_EQ(plan_small_m_split_k(1, 257, 8, 132).splits, 1);
  EXPECT_EQ(plan_small_m_split_k(3, 17, 512, 132).splits, 2);
  // one column block, long K: many splits, each still at least 4 tiles
  const SmallMSplitKPlan narrow = plan_small_m_split_k(33, 77, 16392, 132);
  EXPECT_EQ(narrow.k_tiles, 257);
  EXPECT_EQ(narrow.splits, 64);
}

TEST(SmallMSplitK, SplitsCoverEveryKTileOnceAndDifferByAtMostOne) {
  for (const auto& [k, sm_count] : std::vector<std::pair<int, int>>{{4096, 132}, {16392, 132}, {14336, 132}, {520, 7}}) {
    const SmallMSplitKPlan plan = plan_small_m_split_k(5, 77, k, sm_count);
    EXPECT_EQ(plan.k_tile_begin(0), 0);
    EXPECT_EQ(plan.k_tile_begin(plan.splits), plan.k_tiles);
    int shortest = plan.k_tiles, longest = 0;
    for (int split = 0; split < plan.splits; ++split) {
      const int tiles = plan.k_tile_begin(split + 1) - plan.k_tile_begin(split);
      shortest = std::min(shortest, tiles);
      longest = std::max(longest, tiles);
    }
    EXPECT_LE(longest - shortest, 1) << "K = " << k;
    EXPECT_GE(shortest, plan.splits > 1 ? kSmallMMinKTilesPerSplit : 1) << "K = " << k;
  }
}

// The permuted k order: MMA (s, h) takes from lane t's chunk small_m_lane_chunk(t, s) word 2h as its
// "k = 2t, 2t + 1" register and word 2h + 1 as "k = 2t + 8, 2t + 9". Over the 4 lanes of a row, the
// 4 MMAs and the 4 bf16 of each lane and MMA, that must name every k of the 64-deep tile once.
TEST(SmallMSplitK, TheFourMmasOfATileCoverEveryKOnce) {
  std::set<int> seen;
  for (int s = 0; s < 2; ++s)
    for (int h = 0; h < 2; ++h) {
      std::set<int> this_mma;
      for (int t = 0; t < 4; ++t)
        for (int word = 2 * h; word < 2 * h + 2; ++word)
          for (int half = 0; half < 2; ++half) {
            const int k = 8 * small_m_lane_chunk(t, s) + 2 * word + half;
            EXPECT_TRUE(this_mma.insert(k).second);
            EXPECT_TRUE(seen.insert(k).second) << "k " << k << " twice";
          }
      EXPECT_EQ(this_mma.size(), 16u);  // one MMA is 16 deep
    }
  EXPECT_EQ(seen.size(), 64u);
  EXPECT_EQ(*seen.begin(), 0);
  EXPECT_EQ(*seen.rbegin(), 63);
}

TEST(SmallMSplitK, EachLds128PhaseOfTheFragmentReadsHitsAll32Banks) {
  for (int first_row = 0; first_row < 128; first_row += 8)  // any tile row a warp starts at
    for (int s = 0; s < 2; ++s)
      for (int phase = 0; phase < 4; ++phase) {  // lanes 8 phase .. 8 phase + 7: rows g = 2 phase, +1
        std::set<int> banks;
        for (int lane = 8 * phase; lane < 8 * phase + 8; ++lane) {
          const std::set<int> touched =
              banks_of_chunk(swizzle_128b_offset(first_row + lane / 4, small_m_lane_chunk(lane % 4, s)));
          banks.insert(touched.begin(), touched.end());
        }
        EXPECT_EQ(banks.size(), static_cast<std::size_t>(kBanks)) << "row " << first_row << " step " << s;
      }
}

TEST(SmallMSplitK, StepOneIsStepZeroXor16AndEightRowsDownIs1024Bytes) {
  for (int row = 0; row < 8; ++row)
    for (int t = 0; t < 4; ++t) {
      const int step0 = swizzle_128b_offset(row, small_m_lane_chunk(t, 0));
      EXPECT_EQ(swizzle_128b_offset(row, small_m_lane_chunk(t, 1)), step0 ^ 16);
      for (int down = 8; down < 128; down += 8)
        for (int s = 0; s < 2; ++s)
          EXPECT_EQ(swizzle_128b_offset(row + down, small_m_lane_chunk(t, s)),
                    swizzle_128b_offset(row, small_m_lane_chunk(t, s)) + down * kSwizzleRowBytes);
    }
}

// ---- rung 14: small M, the weights as mma.sync's A ---------------------------------------------------

// Rung 11's split rule for one CTA an SM up to M = 16 (two token tiles), for two CTAs an SM from
// M = 17 (three token tiles) where each split keeps at least 16 K tiles.
TEST(SmallMWeightsAsA, CountsTokenTilesOf8AndSplitsKAsRung11) {
  for (const auto& [m, tiles] : std::vector<std::pair<int, int>>{{1, 1}, {8, 1}, {9, 2}, {16, 2}, {17, 3}, {33, 5}, {64, 8}}) {
    for (const auto& [n, k] : std::vector<std::pair<int, int>>{{4096, 4096}, {4096, 14336}, {77, 16392}, {28672, 4096}, {1, 8}}) {
      const SmallMWeightsAsAPlan plan = plan_small_m_weights_as_a(m, n, k, 132);
      const SmallMSplitKPlan two = plan_small_m_split_k(m, n, k, 2 * 132);
      const bool two_ctas = tiles >= 3 && two.k_tiles / two.splits >= kSmallMTwoCtasMinKTilesPerSplit;
      const SmallMSplitKPlan rung11 = two_ctas ? two : plan_small_m_split_k(m, n, k, 132);
      EXPECT_EQ(plan.token_tiles, tiles) << "M = " << m;
      EXPECT_EQ(plan.n_blocks, rung11.n_blocks);
      EXPECT_EQ(plan.k_tiles, rung11.k_tiles);
      EXPECT_EQ(plan.splits, rung11.splits);
      EXPECT_EQ(plan.needs_workspace(), plan.splits > 1);
      for (int split = 0; split <= plan.splits; ++split) EXPECT_EQ(plan.k_tile_begin(split), rung11.k_tile_begin(split));
    }
  }
  EXPECT_EQ(kSmallMMaxTokenTiles, 8);
}

// Rung 15 (WGMMA) keeps one CTA an SM at every M: rung 11's split of the same grid, rung 14's
// token tiles, and so rung 14's workspace formulas.
TEST(SmallMTmaWgmma, OneCtaAnSmAtEveryMWithRung14sTokenTiles) {
  for (const int m : {1, 8, 9, 17, 33, 64}) {
    for (const auto& [n, k] : std::vector<std::pair<int, int>>{{4096, 4096}, {4096, 14336}, {1024, 4096}, {28672, 4096}, {1, 8}}) {
      const SmallMWeightsAsAPlan plan = plan_small_m_tma_wgmma(m, n, k, 132);
      const SmallMSplitKPlan rung11 = plan_small_m_split_k(m, n, k, 132);
      EXPECT_EQ(plan.token_tiles, plan_small_m_weights_as_a(m, n, k, 132).token_tiles) << m;
      EXPECT_EQ(plan.n_blocks, rung11.n_blocks);
      EXPECT_EQ(plan.k_tiles, rung11.k_tiles);
      EXPECT_EQ(plan.splits, rung11.splits);
      EXPECT_LE(plan.n_blocks * plan.splits, std::max(132, plan.n_blocks)) << m << "x" << n << "x" << k;
    }
  }
  // 64 x 4096 x 14336: rung 14 takes two CTAs an SM (8 splits), rung 15 one (4 splits of 56 K tiles)
  EXPECT_EQ(plan_small_m_weights_as_a(64, 4096, 14336, 132).splits, 8);
  EXPECT_EQ(plan_small_m_tma_wgmma(64, 4096, 14336, 132).splits, 4);
}

// Rung 16 (the splits as one cluster) takes rung 15's plan with at most 8 splits, the cluster size
// every sm_90 GPU runs.
TEST(SmallMClusterSplit, Rung15sPlanWithAtMostEightSplits) {
  for (const int m : {1, 17, 64}) {
    for (const auto& [n, k] : std::vector<std::pair<int, int>>{{4096, 4096}, {2048, 2048}, {1024, 4096}, {28672, 4096}, {1, 8}}) {
      const SmallMWeightsAsAPlan plan = plan_small_m_cluster_split(m, n, k, 132);
      const SmallMWeightsAsAPlan rung15 = plan_small_m_tma_wgmma(m, n, k, 132);
      EXPECT_EQ(plan.token_tiles, rung15.token_tiles);
      EXPECT_EQ(plan.n_blocks, rung15.n_blocks);
      EXPECT_EQ(plan.k_tiles, rung15.k_tiles);
      EXPECT_EQ(plan.splits, std::min(rung15.splits, kSmallMMaxClusterSplits)) << m << "x" << n << "x" << k;
    }
  }
  // N = 1024: 8 column blocks; rung 15 splits K 16 ways, rung 16 8 (a cluster of 8)
  EXPECT_EQ(plan_small_m_tma_wgmma(64, 1024, 4096, 132).splits, 16);
  EXPECT_EQ(plan_small_m_cluster_split(64, 1024, 4096, 132).splits, 8);
  EXPECT_EQ(plan_small_m_cluster_split(64, 4096, 4096, 132).splits, 4);
}

TEST(SmallMWeightsAsA, TheWorkspaceIsOneTilePerCtaAndOneCounterPerColumnBlock) {
  // 64 x 4096 x 4096 on 132 SMs: 32 column blocks x 4 splits of 16 K tiles (two CTAs an SM would
  // leave 8 a split), each CTA 128 columns x 64 tokens
  const SmallMWeightsAsAPlan decode = plan_small_m_weights_as_a(64, 4096, 4096, 132);
  EXPECT_EQ(decode.splits, 4);
  EXPECT_EQ(decode.partial_tile_floats(), 128 * 64);
  EXPECT_EQ(small_m_weights_as_a_partial_floats(decode), 32LL * 4 * 128 * 64);
  // 64 x 4096 x 14336: two CTAs an SM, 8 splits of 28 K tiles
  EXPECT_EQ(plan_small_m_weights_as_a(64, 4096, 14336, 132).splits, 8);
  EXPECT_EQ(small_m_weights_as_a_counters(decode), 32);
  // M = 1: one token tile, 8 tokens a CTA (7 of them zero rows, never stored)
  EXPECT_EQ(plan_small_m_weights_as_a(1, 4096, 4096, 132).partial_tile_floats(), 128 * 8);
  // one split (224 column blocks for 132 SMs, or a short K): no workspace at all
  for (const SmallMWeightsAsAPlan& single :
       {plan_small_m_weights_as_a(1, 28672, 4096, 132), plan_small_m_weights_as_a(64, 257, 200, 132)}) {
    EXPECT_EQ(single.splits, 1);
    EXPECT_EQ(small_m_weights_as_a_partial_floats(single), 0);
    EXPECT_EQ(small_m_weights_as_a_counters(single), 0);
  }
}

// ldmatrix.x4 as the hardware runs it: lane l supplies the address of row l % 8 of matrix l / 8,
// and every lane receives in register i its part (row lane / 4, elements 2 (lane % 4), + 1) of
// matrix i. Decoded back from a swizzled byte offset: the tile row and the 16-byte chunk (8 k).
struct RowChunk {
  int row, chunk;
  bool operator==(const RowChunk& other) const { return row == other.row && chunk == other.chunk; }
};
RowChunk unswizzle(int offset) {
  const int row = offset / kSwizzleRowBytes;
  return {row, ((offset % kSwizzleRowBytes) / kSwizzleChunkBytes) ^ (row % kSwizzleRowsPerPattern)};
}

// The weights are mma.sync m16n8k16's A (row-major 16 x 16): register 0 holds row g, k 2t, 2t+1;
// register 1 row g + 8, the same k; register 2 row g, k 2t + 8, +9; register 3 row g + 8, k 2t + 8.
// So matrix i must be rows 8 (i % 2) .. + 7 of the m16 tile and chunk 2 s + i / 2 of k16 slice s.
// The kernel addresses slice s as the slice-0 offset XOR 32 s and m16 tile mt 2048 mt bytes on.
TEST(SmallMWeightsAsA, WeightLanesAddressTheAFragmentOfEverySliceAndTile) {
  for (int mt = 0; mt < 2; ++mt)
    for (int s = 0; s < 4; ++s)
      for (int lane = 0; lane < 32; ++lane) {
        const int matrix = lane / 8, row_in_matrix = lane % 8;
        const int offset = (small_m_weight_lane_offset(lane) + mt * 16 * kSwizzleRowBytes) ^ (32 * s);
        const RowChunk expected{16 * mt + 8 * (matrix % 2) + row_in_matrix, 2 * s + matrix / 2};
        EXPECT_TRUE(unswizzle(offset) == expected) << "tile " << mt << " slice " << s << " lane " << lane;
      }
}

// The tokens are mma.sync's B ("col", K-contiguous as A is stored): register 0 holds k 2t, 2t+1 of
// column (token) g, register 1 k 2t + 8, +9. One x4 covers two k16 slices: matrix j must be the
// token tile's 8 rows at chunk 4 p + j (j = 0, 1: b0, b1 of slice 2p; j = 2, 3: of slice 2p + 1).
// The kernel addresses pair p as the pair-0 offset XOR 64 p and token tile nt 1024 nt bytes on.
TEST(SmallMWeightsAsA, TokenLanesAddressTheBFragmentsOfTwoSlicesPerLoad) {
  for (int nt = 0; nt < kSmallMMaxTokenTiles; ++nt)
    for (int p = 0; p < 2; ++p)
      for (int lane = 0; lane < 32; ++lane) {
        const int matrix = lane / 8, row_in_matrix = lane % 8;
        const int offset = (small_m_token_lane_offset(lane) + nt * 8 * kSwizzleRowBytes) ^ (64 * p);
        const RowChunk expected{8 * nt + row_in_matrix, 4 * p + matrix};
        EXPECT_TRUE(unswizzle(offset) == expected) << "tile " << nt << " pair " << p << " lane " << lane;
      }
}

// And with those registers, the products pair up: in every k16 slice the weight matrices of a0
// (k 2t..) and a2 (k 2t + 8..) and the token matrices of b0 and b1 are the same two chunks, so
// each lane's A and B registers name the same k.
TEST(SmallMWeightsAsA, WeightAndTokenRegistersNameTheSameKOfASlice) {
  for (int s = 0; s < 4; ++s) {
    const int p = s / 2, h = s % 2;
    // Matrix i of an x4 is addressed by lanes 8i .. 8i + 7; its chunk is that of any of them.
    const auto weight_chunk = [&](int i) { return unswizzle(small_m_weight_lane_offset(8 * i) ^ (32 * s)).chunk; };
    const auto token_chunk = [&](int i) { return unswizzle(small_m_token_lane_offset(8 * i) ^ (64 * p)).chunk; };
    EXPECT_EQ(weight_chunk(0), token_chunk(2 * h)) << "slice " << s << ": a0 and b0";
    EXPECT_EQ(weight_chunk(2), token_chunk(2 * h + 1)) << "slice " << s << ": a2 and b1";
    EXPECT_EQ(8 * weight_chunk(0), 16 * s);      // lane (g, t) gets k 16 s + 2t, + 1
    EXPECT_EQ(8 * weight_chunk(2), 16 * s + 8);  // and k 16 s + 8 + 2t, + 1
  }
}

// Each 8-lane phase of an ldmatrix reads 8 rows of one logical chunk: swizzled, 8 different
// chunk columns, all 32 banks once.
TEST(SmallMWeightsAsA, EveryLdmatrixPhaseHitsAll32Banks) {
  for (int phase = 0; phase < 4; ++phase) {
    for (int s = 0; s < 4; ++s) {
      std::set<int> banks;
      for (int lane = 8 * phase; lane < 8 * phase + 8; ++lane) {
        const std::set<int> touched = banks_of_chunk(small_m_weight_lane_offset(lane) ^ (32 * s));
        banks.insert(touched.begin(), touched.end());
      }
      EXPECT_EQ(banks.size(), static_cast<std::size_t>(kBanks)) << "weights, phase " << phase << " slice " << s;
    }
    for (int p = 0; p < 2; ++p) {
      std::set<int> banks;
      for (int lane = 8 * phase; lane < 8 * phase + 8; ++lane) {
        const std::set<int> touched = banks_of_chunk(small_m_token_lane_offset(lane) ^ (64 * p));
        banks.insert(touched.begin(), touched.end());
      }
      EXPECT_EQ(banks.size(), static_cast<std::size_t>(kBanks)) << "tokens, phase " << phase << " pair " << p;
    }
  }
}

// ---- TMA boxes --------------------------------------------------------------------------------------

TmaMatrix2d matrix(std::uint64_t rows, std::uint64_t cols, std::uint32_t box_rows,
                   std::uint32_t box_cols, bool swizzle = true) {
  alignas(256) static const char storage[256] = {};
  TmaMatrix2d m;
  m.base = storage;
  m.rows = rows;
  m.cols = cols;
  m.box_rows = box_rows;
  m.box_cols = box_cols;
  m.swizzle_128b = swizzle;
  return m;
}

// The message of the TMA rule `tensor` (a TmaMatrix2d or TmaTensor4d) breaks, "" if none.
template <class Tensor>
std::string rule_broken_by(const Tensor& tensor) {
  try {
    (void)tma_encoding(tensor);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(TmaEncoding, ListsDimensionsInnermostFirstWithByteStrides) {
  const TmaEncoding e = tma_encoding(matrix(4093, 1032, 128, 64));
  EXPECT_EQ(e.global_dim[0], 1032u);
  EXPECT_EQ(e.global_dim[1], 4093u);
  EXPECT_EQ(e.global_stride_bytes[0], 1032u * 2);
  EXPECT_EQ(e.box_dim[0], 64u);
  EXPECT_EQ(e.box_dim[1], 128u);
  EXPECT_EQ(e.element_stride[0], 1u);
  EXPECT_EQ(e.element_stride[1], 1u);
}

TEST(TmaEncoding, AcceptsMatricesSmallerThanTheBox) {  // the out-of-bounds part reads as zeros
  const TmaEncoding e = tma_encoding(matrix(1, 8, 256, 64));
  EXPECT_EQ(e.global_dim[0], 8u);
  EXPECT_EQ(e.box_dim[1], 256u);
}

TEST(TmaEncoding, RefusesRowsThatAreNot16ByteMultiples) {
  EXPECT_NE(rule_broken_by(matrix(128, 1031, 128, 64)).find("multiple of 8"), std::string::npos);
  EXPECT_NE(rule_broken_by(matrix(128, 4, 128, 64)).find("multiple of 16 bytes"), std::string::npos);
}

TEST(TmaEncoding, RefusesBoxesTheHardwareCannotMove) {
  EXPECT_NE(rule_broken_by(matrix(512, 512, 512, 64)).find("1..256"), std::string::npos);
  EXPECT_NE(rule_broken_by(matrix(512, 512, 128, 128)).find("at most 128 bytes"), std::string::npos);
  EXPECT_EQ(rule_broken_by(matrix(512, 512, 128, 128, false)), "");  // fine without the swizzle
  EXPECT_NE(rule_broken_by(matrix(512, 512, 128, 4, false)).find("multiple of 16 bytes"), std::string::npos);
}

TEST(TmaEncoding, RefusesAMisalignedBase) {
  TmaMatrix2d m = matrix(64, 64, 64, 64);
  m.base = static_cast<const char*>(m.base) + 2;
  EXPECT_NE(rule_broken_by(m).find("16-byte aligned"), std::string::npos);
}

// The attention rungs' 4-D view [D, S, H, B] of a [B, H, S, D] tensor (or of the engine's [S, H, D]
// rows: a head stride smaller than the row stride is allowed).
TmaTensor4d tensor_4d(std::uint64_t d, std::uint64_t s, std::uint64_t h, std::uint64_t b, std::uint32_t box_rows) {
  alignas(256) static const char storage[256] = {};
  TmaTensor4d t;
  t.base = storage;
  t.dims[0] = d;
  t.dims[1] = s;
  t.dims[2] = h;
  t.dims[3] = b;
  t.strides_bytes[0] = d * 2;
  t.strides_bytes[1] = s * d * 2;
  t.strides_bytes[2] = h * s * d * 2;
  t.box[0] = 64;
  t.box[1] = box_rows;
  t.box[2] = 1;
  t.box[3] = 1;
  return t;
}

TEST(TmaEncoding4d, ListsDimensionsInnermostFirstWithByteStrides) {
  const TmaEncoding4d e = tma_encoding(tensor_4d(128, 4097, 8, 2, 128));
  EXPECT_EQ(e.global_dim[0], 128u);
  EXPECT_EQ(e.global_dim[1], 4097u);
  EXPECT_EQ(e.global_dim[2], 8u);
  EXPECT_EQ(e.global_dim[3], 2u);
  EXPECT_EQ(e.global_stride_bytes[0], 256u);
  EXPECT_EQ(e.global_stride_bytes[1], 4097u * 256);
  EXPECT_EQ(e.global_stride_bytes[2], 8u * 4097 * 256);
  EXPECT_EQ(e.box_dim[0], 64u);
  EXPECT_EQ(e.box_dim[1], 128u);
  EXPECT_EQ(e.element_stride[3], 1u);
}

TEST(TmaEncoding4d, AcceptsTheEngineRowsAndTensorsShorterThanTheBox) {
  TmaTensor4d rows = tensor_4d(128, 150, 32, 1, 128);  // Q as [S, H, D] rows: head stride D
  rows.strides_bytes[0] = 32 * 128 * 2;
  rows.strides_bytes[1] = 128 * 2;
  EXPECT_EQ(rule_broken_by(rows), "");
  EXPECT_EQ(rule_broken_by(tensor_4d(64, 1, 1, 1, 128)), "");  // one key: the rest of the box reads zeros
}

TEST(TmaEncoding4d, RefusesWhatTheHardwareCannotDescribe) {
  TmaTensor4d odd_stride = tensor_4d(128, 100, 2, 1, 128);
  odd_stride.strides_bytes[0] = 200;  // a row of 100 bf16: 16-byte pieces do not tile it
  EXPECT_NE(rule_broken_by(odd_stride).find("multiples of 16 bytes"), std::string::npos);
  EXPECT_NE(rule_broken_by(tensor_4d(128, 0, 2, 1, 128)).find("1..2^32"), std::string::npos);
  EXPECT_NE(rule_broken_by(tensor_4d(128, 100, 2, 1, 257)).find("1..256"), std::string::npos);
  TmaTensor4d wide_box = tensor_4d(128, 100, 2, 1, 128);
  wide_box.box[0] = 128;  // 256 bytes: wider than the 128-byte swizzle
  EXPECT_NE(rule_broken_by(wide_box).find("16 to 128 bytes"), std::string::npos);
  TmaTensor4d misaligned = tensor_4d(128, 100, 2, 1, 128);
  misaligned.base = static_cast<const char*>(misaligned.base) + 2;
  EXPECT_NE(rule_broken_by(misaligned).find("16-byte aligned"), std::string::npos);
}

// ---- rung 12: M <= 8, a GEMV on the CUDA cores ----------------------------------------------------

TEST(SmallMGemv, AtTheDecodeShapesGroupsFitTheRowAndTheGridCoversTheSms) {
  // Llama-3-8B projections at batch 1 on 132 SMs: {threads per group, blocks}
  struct Case {
    int m, n, k, threads, blocks;
  };
  for (const Case& c : std::vector<Case>{
           {1, 4096, 4096, 256, 1024},   // 512 pieces: 128 threads first, widened to fill the grid
           {1, 1024, 4096, 256, 256},    // K or V: as wide as a group goes
           {1, 28672, 4096, 128, 3584},  // gate and up: 2 groups of 4 columns a block, plenty of blocks
           {1, 4096, 14336, 256, 1024},  // down: 1792 pieces, 7 a thread
           {8, 4096, 4096, 128, 1024},   // M = 8: 2 columns a group
           {1, 576, 576, 64, 36},        // SmolLM2: 72 pieces, no wider than a piece per thread
       }) {
    const SmallMGemvGroup g = choose_small_m_gemv_group(c.m, c.n, c.k, 132);
    EXPECT_EQ(g.threads, c.threads) << c.m << "x" << c.n << "x" << c.k;
    EXPECT_EQ(g.blocks, c.blocks) << c.m << "x" << c.n << "x" << c.k;
  }
}

TEST(SmallMGemv, EveryColumnHasAGroupAndEveryGroupIsWholeWarpsOfABlock) {
  for (const int m : {1, 2, 3, 8})
    for (const int n : {1, 31, 77, 1000, 4096, 28672})
      for (const int k : {8, 520, 4104, 16392})
        for (const int sm_count : {1, 7, 132}) {
          const SmallMGemvGroup g = choose_small_m_gemv_group(m, n, k, sm_count);
          EXPECT_TRUE(g.threads == 32 || g.threads == 64 || g.threads == 128 || g.threads == 256);
          EXPECT_EQ(kSmallMGemvThreads % g.threads, 0);
          const long long columns = static_cast<long long>(kSmallMGemvThreads / g.threads) * small_m_gemv_rows(m);
          EXPECT_GE(g.blocks * columns, n) << m << "x" << n << "x" << k;       // every column owned
          EXPECT_LT((g.blocks - 1) * columns, n) << m << "x" << n << "x" << k;  // no empty block
          // never wider than one piece per thread, unless a warp is already too wide
          EXPECT_TRUE(g.threads == 32 || g.threads <= k / 8) << m << "x" << n << "x" << k;
        }
}

}  // namespace
}  // namespace kc::stage3
