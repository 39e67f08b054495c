// The shared-memory layout of the mma.sync attention rungs (attention/fa2_layout.hpp), checked on
// the CPU: the XOR swizzle spreads every ldmatrix's eight rows and every row's eight 16-byte
// stores over the eight 16-byte bank groups, and rung 23's xor_slice_offset equals the XOR it
// replaces for every lane offset the rungs read Q, K and V from, at every slice they read. The
// negative controls: an unswizzled tile puts an ldmatrix's rows in one bank group, and
// xor_slice_offset past the slices of D = 64 is not the XOR — the checks can fail.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "attention/fa2_layout.hpp"

namespace kc::stage3 {
namespace {

// A lane offset of fa2_mma.cuh's ldmatrix reads, and how many slices (or O block pairs) it steps
// through with lane_offset ^ (32 i).
struct LaneOffsets {
  std::string what;
  std::vector<std::uint32_t> offsets;
  int slices;
};

// The lane offsets the warp step reads K, Q (not held) and V from (k_lane_offset, q_lane_offset,
// v_lane_offset: the functions fa2_mma.cuh calls), every lane of every warp.
template <class Shape>
std::vector<LaneOffsets> lane_offsets() {
  LaneOffsets k{"K", {}, Shape::kDimSlices}, q{"Q", {}, Shape::kDimSlices}, v{"V", {}, Shape::kDimBlocks / 2};
  for (int lane = 0; lane < 32; ++lane) {
    k.offsets.push_back(k_lane_offset<Shape>(lane));
    v.offsets.push_back(v_lane_offset<Shape>(lane));
    for (int warp = 0; warp < Shape::kWarps; ++warp) q.offsets.push_back(q_lane_offset<Shape>(warp, lane));
  }
  return {k, q, v};
}

// The lane offsets (and slices) at which xor_slice_offset differs from the XOR, as text.
std::vector<std::string> split_xor_mismatches(const std::vector<LaneOffsets>& reads, int extra_slices = 0) {
  std::vector<std::string> mismatches;
  for (const LaneOffsets& read : reads)
    for (const std::uint32_t offset : read.offsets)
      for (int i = 0; i < read.slices + extra_slices; ++i)
        if (xor_slice_offset(offset, i) != (offset ^ (32u * static_cast<std::uint32_t>(i))))
          mismatches.push_back(read.what + " offset " + std::to_string(offset) + " slice " + std::to_string(i));
  return mismatches;
}

template <class Shape>
void expect_split_xor_is_the_xor() {
  const std::vector<std::string> mismatches = split_xor_mismatches(lane_offsets<Shape>());
  EXPECT_TRUE(mismatches.empty()) << "D = " << Shape::kHeadDim << ", " << Shape::kTilesPerWarp << " tile(s) a warp: "
                                  << mismatches.size() << " mismatches, first " << mismatches.front();
}

TEST(AttentionFa2Layout, SplitXorIsTheXorAtEverySliceTheRungsRead) {
  expect_split_xor_is_the_xor<Fa2Shape<128, 2>>();      // rungs 21, 23, 24
  expect_split_xor_is_the_xor<Fa2Shape<128, 2, 32>>();  // rung 22
  expect_split_xor_is_the_xor<Fa2Shape<128, 1>>();      // rungs 03-05, 16 at D = 128
  expect_split_xor_is_the_xor<Fa2Shape<64, 2>>();       // D = 64
  expect_split_xor_is_the_xor<Fa2Shape<64, 1>>();
}

// Negative control: at D = 64 a row is 128 bytes, so bit 7 of an offset is the row's bit 0, not a
// free chunk bit; slices 4-7 (which no D = 64 rung reads) break the identity for the odd rows.
TEST(AttentionFa2Layout, SplitXorPastTheSlicesOfHeadDim64IsNotTheXor) {
  EXPECT_FALSE(split_xor_mismatches(lane_offsets<Fa2Shape<64, 2>>(), 4).empty());
}

// The number of different 16-byte bank groups (of the eight a 128-byte bank line has) that eight
// 16-byte accesses at these offsets fall in: 8 is conflict-free.
int bank_groups(const std::vector<std::uint32_t>& offsets) {
  std::set<std::uint32_t> groups;
  for (const std::uint32_t offset : offsets) groups.insert((offset / 16) % 8);
  return static_cast<int>(groups.size());
}

// Every ldmatrix reads 8 rows (a multiple of 8 apart from row 0) at one logical chunk; every
// thread's cp.async stores of a row's chunks 8c .. 8c + 7 come from 8 consecutive threads.
template <class Shape>
void expect_conflict_free(const std::function<std::uint32_t(int, int)>& offset_of, int rows, bool expect) {
  int worst = 8;
  for (int row0 = 0; row0 < rows; row0 += 8)
    for (int chunk = 0; chunk < Shape::kChunksPerRow; ++chunk) {
      std::vector<std::uint32_t> column, row;
      for (int k = 0; k < 8; ++k) {
        column.push_back(offset_of(row0 + k, chunk));
        row.push_back(offset_of(row0, (chunk / 8) * 8 + k));
      }
      worst = std::min({worst, bank_groups(column), bank_groups(row)});
    }
  EXPECT_EQ(worst == 8, expect) << "D = " << Shape::kHeadDim << ": worst case " << worst << " bank groups of 8";
}

TEST(AttentionFa2Layout, TheSwizzleSpreadsEveryLdmatrixAndEveryRowOverEightBankGroups) {
  expect_conflict_free<Fa2Shape<128, 2>>(&swizzled_offset<Fa2Shape<128, 2>>, 128, true);
  expect_conflict_free<Fa2Shape<64, 2>>(&swizzled_offset<Fa2Shape<64, 2>>, 128, true);
}

// Negative control: the same tile without the swizzle puts an ldmatrix's eight rows of one chunk
// in a single bank group (rows are a multiple of 128 bytes apart).
TEST(AttentionFa2Layout, AnUnswizzledTileFailsTheBankGroupCheck) {
  using Shape = Fa2Shape<128, 2>;
  const auto unswizzled = [](int row, int chunk) {
    return static_cast<std::uint32_t>(row * Shape::kRowBytes + chunk * 16);
  };
  expect_conflict_free<Shape>(unswizzled, 128, false);
}

}  // namespace
}  // namespace kc::stage3
