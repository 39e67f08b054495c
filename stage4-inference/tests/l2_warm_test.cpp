// The ranges of the warming link before a decode attention (kc/engine/engine_kernels.hpp,
// l2_warm_after_attention), and warm_l2's refusals, on the CPU: the budget goes to the o
// projection's weight first, then to gate | up's, each range from its weight's start and cut to
// 16-byte multiples; a bad range is refused before any launch.
#include <cstddef>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "kc/common/error.hpp"
#include "kc/engine/engine_kernels.hpp"

namespace {

using kc::engine::L2Range;
using kc::engine::l2_warm_after_attention;

alignas(16) const char kWeights[1 << 12] = {};  // only addresses are taken
const void* const o = kWeights;
const void* const gate_up = kWeights + 1024;

TEST(L2Warm, TheBudgetGoesToTheOProjectionFirstThenToGateUp) {
  // Llama-3.2-1B: o 2048 x 2048 bf16 (8 MiB), gate | up 16384 x 2048 (64 MiB).
  const std::size_t mib = std::size_t{1} << 20;
  std::vector<L2Range> ranges = l2_warm_after_attention(o, 8 * mib, gate_up, 64 * mib, 24 * mib);
  ASSERT_EQ(ranges.size(), 2u);
  EXPECT_EQ(ranges[0].begin, o);
  EXPECT_EQ(ranges[0].bytes, 8 * mib);
  EXPECT_EQ(ranges[1].begin, gate_up);
  EXPECT_EQ(ranges[1].bytes, 16 * mib);

  ranges = l2_warm_after_attention(o, 32 * mib, gate_up, 224 * mib, 24 * mib);  // 8B: o alone takes it
  ASSERT_EQ(ranges.size(), 1u);
  EXPECT_EQ(ranges[0].begin, o);
  EXPECT_EQ(ranges[0].bytes, 24 * mib);

  ranges = l2_warm_after_attention(o, 8 * mib, gate_up, 64 * mib, 100 * mib);  // more than both: both whole
  ASSERT_EQ(ranges.size(), 2u);
  EXPECT_EQ(ranges[0].bytes, 8 * mib);
  EXPECT_EQ(ranges[1].bytes, 64 * mib);
}

TEST(L2Warm, RangesAreWholeSixteenByteMultiplesAndEmptyOnesAreLeftOut) {
  std::vector<L2Range> ranges = l2_warm_after_attention(o, 1000, gate_up, 5000, 1010);
  ASSERT_EQ(ranges.size(), 2u);  // o: 992 bytes; 18 left, 16 for gate | up
  EXPECT_EQ(ranges[0].bytes, 992u);
  EXPECT_EQ(ranges[1].bytes, 16u);
  ranges = l2_warm_after_attention(o, 1000, gate_up, 5000, 1000);  // 8 left after o: nothing for gate | up
  ASSERT_EQ(ranges.size(), 1u);
  EXPECT_EQ(ranges[0].bytes, 992u);
  ranges = l2_warm_after_attention(o, 1000, gate_up, 5000, 1030);
  ASSERT_EQ(ranges.size(), 2u);
  EXPECT_EQ(ranges[0].bytes, 992u);
  EXPECT_EQ(ranges[1].bytes, 32u);
  EXPECT_TRUE(l2_warm_after_attention(o, 1000, gate_up, 5000, 0).empty());
  EXPECT_TRUE(l2_warm_after_attention(o, 1000, gate_up, 5000, 15).empty());
  ranges = l2_warm_after_attention(nullptr, 0, gate_up, 5000, 64);  // no o weight: gate | up alone
  ASSERT_EQ(ranges.size(), 1u);
  EXPECT_EQ(ranges[0].begin, gate_up);
  EXPECT_EQ(ranges[0].bytes, 64u);
}

TEST(L2Warm, BadRangesAreRefusedBeforeAnyLaunch) {
  EXPECT_THROW(kc::engine::warm_l2({}, nullptr), kc::Error);
  EXPECT_THROW(kc::engine::warm_l2({{o, 16}, {o, 16}, {o, 16}, {o, 16}, {o, 16}}, nullptr), kc::Error);
  EXPECT_THROW(kc::engine::warm_l2({{nullptr, 16}}, nullptr), kc::Error);
  EXPECT_THROW(kc::engine::warm_l2({{kWeights + 8, 16}}, nullptr), kc::Error);  // not 16-byte aligned
  EXPECT_THROW(kc::engine::warm_l2({{o, 24}}, nullptr), kc::Error);             // not a multiple of 16
  EXPECT_THROW(kc::engine::warm_l2({{o, 0}}, nullptr), kc::Error);
}

}  // namespace
