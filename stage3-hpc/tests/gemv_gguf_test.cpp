// The gemv_gguf op's host side: its reference decode of the three GGUF block formats on blocks
// built by hand (values worked out below), the nibble order, the shapes it refuses, and the
// repack of rung 02's layout (decoded by a small decoder of that format, below, it gives the
// weights the reference decodes from the original blocks).
//   ctest --test-dir build/ci -R GemvGguf
#include <gtest/gtest.h>

#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <tuple>
#include <vector>

#include "kc/common/error.hpp"
#include "kc/stage3/gemv_gguf.hpp"
#include "src/gemv_gguf_edges.hpp"
#include "support/refusals.hpp"

namespace kc::stage3 {
namespace {

constexpr GgufBlockType kTypes[] = {GgufBlockType::q4_0, GgufBlockType::q4_1, GgufBlockType::q8_0};

// `blocks` blocks of `type` with random bytes, their halves finite (exponent field below 16).
std::vector<std::uint8_t> random_blocks(GgufBlockType type, std::size_t blocks, std::uint64_t seed) {
  const auto size = static_cast<std::size_t>(gguf_block_bytes(type));
  std::vector<std::uint8_t> bytes(blocks * size);
  std::mt19937_64 rng(seed);
  for (std::uint8_t& byte : bytes) byte = static_cast<std::uint8_t>(rng());
  const int halves = type == GgufBlockType::q4_1 ? 2 : 1;
  for (std::size_t b = 0; b < blocks; ++b)
    for (int h = 0; h < halves; ++h) bytes[b * size + 2 * static_cast<std::size_t>(h) + 1] &= 0xBF;
  return bytes;
}

double half_value(const std::uint8_t* p) {
  __half h;
  std::memcpy(&h, p, sizeof h);
  return static_cast<double>(__half2float(h));
}

// The weights of the repacked layout (gemv_gguf_args.hpp), read the way rung 02 reads it: block b's
// quants at b x Q in `quants`, its d (and m) at b x S in `scales`.
std::vector<double> decode_repacked(GgufBlockType type, const GgufRepacked& repacked) {
  const auto quant_bytes = static_cast<std::size_t>(gguf_quant_bytes(type));
  const auto scale_bytes = static_cast<std::size_t>(gguf_scale_bytes(type));
  const std::size_t blocks = repacked.quants.size() / quant_bytes;
  std::vector<double> out(blocks * kGgufBlockWeights);
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::uint8_t* q = repacked.quants.data() + b * quant_bytes;
    const double d = half_value(repacked.scales.data() + b * scale_bytes);
    double* w = out.data() + b * kGgufBlockWeights;
    if (type == GgufBlockType::q8_0) {
      for (int i = 0; i < kGgufBlockWeights; ++i) w[i] = d * static_cast<double>(static_cast<std::int8_t>(q[i]));
      continue;
    }
    const double m = type == GgufBlockType::q4_1 ? half_value(repacked.scales.data() + b * scale_bytes + 2) : 0.0;
    for (int j = 0; j < 16; ++j) {
      const int low = q[j] & 0x0f, high = q[j] >> 4;
      w[j] = type == GgufBlockType::q4_1 ? d * low + m : d * (low - 8);
      w[j + 16] = type == GgufBlockType::q4_1 ? d * high + m : d * (high - 8);
    }
  }
  return out;
}

TEST(GemvGguf, DecodesQ4_0BlocksLowNibblesFirst) {
  // d = 0.5 (half 0x3800); qs[j] = j in the low nibble, 15 - j in the high one:
  // weight j = 0.5 (j - 8), weight j + 16 = 0.5 (15 - j - 8).
  std::vector<std::uint8_t> block = {0x00, 0x38};
  for (int j = 0; j < 16; ++j) block.push_back(static_cast<std::uint8_t>(j | ((15 - j) << 4)));
  const std::vector<double> w = decode_gguf_blocks(GgufBlockType::q4_0, block.data(), 1);
  ASSERT_EQ(w.size(), 32u);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(w[j], 0.5 * (j - 8)) << j;
    EXPECT_EQ(w[j + 16], 0.5 * (7 - j)) << j + 16;
  }
}

TEST(GemvGguf, DecodesQ4_1BlocksWithTheirMinimum) {
  // d = 0.25 (0x3400), m = -1 (0xBC00); qs[j] = 3 low, 12 high: weights -0.25 and 2.
  std::vector<std::uint8_t> block = {0x00, 0x34, 0x00, 0xBC};
  for (int j = 0; j < 16; ++j) block.push_back(0xC3);
  const std::vector<double> w = decode_gguf_blocks(GgufBlockType::q4_1, block.data(), 1);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(w[j], -0.25);
    EXPECT_EQ(w[j + 16], 2.0);
  }
}

TEST(GemvGguf, DecodesQ8_0BlocksAsSignedBytes) {
  // d = 2 (0x4000); q[i] = i - 16 as a signed byte: weight 2 (i - 16). Two blocks in a row.
  std::vector<std::uint8_t> blocks;
  for (int b = 0; b < 2; ++b) {
    blocks.push_back(0x00);
    blocks.push_back(0x40);
    for (int i = 0; i < 32; ++i) blocks.push_back(static_cast<std::uint8_t>(static_cast<std::int8_t>(i - 16)));
  }
  const std::vector<double> w = decode_gguf_blocks(GgufBlockType::q8_0, blocks.data(), 2);
  ASSERT_EQ(w.size(), 64u);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(w[i], 2.0 * ((i % 32) - 16)) << i;
}

TEST(GemvGguf, RefusesShapesItDoesNotDefine) {
  const OpSpec op = make_gemv_gguf_op();
  EXPECT_EQ(gemv_gguf_shape_error(op.problem({16, 7, 64}, DType::bf16)), "");
  EXPECT_EQ(gemv_gguf_shape_error(op.problem({64, 7, 64}, DType::bf16)), "");  // rung 09's rows
  EXPECT_NE(gemv_gguf_shape_error(op.problem({65, 7, 64}, DType::bf16)).find("at most 64"), std::string::npos);
  EXPECT_NE(gemv_gguf_shape_error(op.problem({1, 7, 48}, DType::bf16)).find("multiple of 32"), std::string::npos);
  EXPECT_NE(gemv_gguf_shape_error(op.problem({1, 7, 64}, DType::bf16, {{"ggml_type", 6.0}})).find("ggml_type"),
            std::string::npos);
  EXPECT_EQ(gguf_block_type(op.problem({1, 7, 64}, DType::bf16, {{"ggml_type", 8.0}})), GgufBlockType::q8_0);
  EXPECT_EQ(gemv_gguf_shape_error(op.problem({1, 7, 64}, DType::bf16, {{"layout", 2.0}})), "");
  EXPECT_EQ(gemv_gguf_shape_error(op.problem({1, 7, 64}, DType::bf16, {{"layout", 3.0}})), "");
  EXPECT_NE(gemv_gguf_shape_error(op.problem({1, 7, 64}, DType::bf16, {{"layout", 4.0}})).find("layout"),
            std::string::npos);
}

TEST(GemvGguf, RepackedBlocksDecodeToTheSameWeights) {
  // Odd N, K of one block and of many; N x K / 32 blocks, row after row.
  for (const GgufBlockType type : kTypes)
    for (const auto& [n, k] : std::vector<std::pair<std::size_t, std::size_t>>{{1, 32}, {3, 32}, {37, 96}, {7, 1024}}) {
      const std::size_t blocks = n * k / kGgufBlockWeights;
      const std::vector<std::uint8_t> original = random_blocks(type, blocks, 17 * n + k);
      const GgufRepacked repacked = repack_gguf_blocks(type, original.data(), original.size());
      ASSERT_EQ(repacked.quants.size(), blocks * static_cast<std::size_t>(gguf_quant_bytes(type)));
      ASSERT_EQ(repacked.scales.size(), blocks * static_cast<std::size_t>(gguf_scale_bytes(type)));
      const std::vector<double> expected = decode_gguf_blocks(type, original.data(), blocks);
      const std::vector<double> got = decode_repacked(type, repacked);
      ASSERT_EQ(got.size(), expected.size());
      for (std::size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(got[i], expected[i]) << "ggml type " << static_cast<int>(type) << ", " << n << "x" << k
                                       << ", weight " << i;
    }
}

TEST(GemvGguf, RepackedQuantsStartOn16ByteBoundaries) {
  for (const GgufBlockType type : kTypes) {
    const int quant_bytes = gguf_quant_bytes(type);
    EXPECT_EQ(quant_bytes % 16, 0);
    EXPECT_EQ(quant_bytes + gguf_scale_bytes(type), gguf_block_bytes(type)) << "the repack adds no byte";
    // Block b's quants are bytes [b Q, b Q + Q) of the array: its own bytes, in their order.
    const std::vector<std::uint8_t> original = random_blocks(type, 5, 3);
    const GgufRepacked repacked = repack_gguf_blocks(type, original.data(), original.size());
    const int scale_bytes = gguf_scale_bytes(type);
    for (int b = 0; b < 5; ++b) {
      EXPECT_EQ((b * quant_bytes) % 16, 0);
      const std::uint8_t* block = original.data() + b * gguf_block_bytes(type);
      EXPECT_TRUE(std::equal(block + scale_bytes, block + gguf_block_bytes(type),
                             repacked.quants.begin() + b * quant_bytes));
      // d first, then m (q4_1): a half2 (d, m).
      EXPECT_TRUE(std::equal(block, block + scale_bytes, repacked.scales.begin() + b * scale_bytes));
    }
  }
}

TEST(GemvGguf, RepackRefusesBytesThatAreNotWholeBlocks) {
  const std::vector<std::uint8_t> bytes(100, 0);
  EXPECT_NO_THROW(repack_gguf_blocks(GgufBlockType::q4_0, bytes.data(), 90));  // 5 blocks of 18
  for (const auto& [type, count] : std::vector<std::pair<GgufBlockType, std::size_t>>{
           {GgufBlockType::q4_0, 17}, {GgufBlockType::q4_1, 30}, {GgufBlockType::q8_0, 35}}) {
    try {
      repack_gguf_blocks(type, bytes.data(), count);
      ADD_FAILURE() << count << " bytes were accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("not whole blocks"), std::string::npos) << e.what();
    }
  }
}

TEST(GemvGguf, EachRungReadsOneLayoutAndRefusesTheOther) {
  const OpSpec op = make_gemv_gguf_op();
  const Problem blocks = op.problem({3, 37, 96}, DType::bf16);
  const Problem repacked = op.problem({3, 37, 96}, DType::bf16, {{"layout", 1.0}});
  EXPECT_EQ(gemv_gguf_layout_error(blocks, GgufLayout::blocks), "");
  EXPECT_EQ(gemv_gguf_layout_error(repacked, GgufLayout::repacked), "");
  EXPECT_NE(gemv_gguf_layout_error(repacked, GgufLayout::blocks).find("layout=0"), std::string::npos);
  EXPECT_NE(gemv_gguf_layout_error(blocks, GgufLayout::repacked).find("layout=1"), std::string::npos);
  const Problem mma = op.problem({3, 37, 96}, DType::bf16, {{"layout", 2.0}});
  EXPECT_EQ(gemv_gguf_layout_error(mma, GgufLayout::mma), "");
  EXPECT_NE(gemv_gguf_layout_error(mma, GgufLayout::repacked).find("layout=1"), std::string::npos);
  EXPECT_NE(gemv_gguf_layout_error(repacked, GgufLayout::mma).find("layout=2"), std::string::npos);
  // Every conformance problem of at most 16 rows is run by the rungs of its layout and refused by
  // the others (each layout has a quarter of them); the problems with more rows (layout=3) are
  // rungs 09 and 10's alone.
  const std::vector<std::string> refused_by_01 = gemv_gguf_refusals(GgufLayout::blocks);
  const std::vector<std::string> refused_by_02 = gemv_gguf_refusals(GgufLayout::repacked);
  const std::vector<std::string> refused_by_03 = gemv_gguf_refusals(GgufLayout::mma);
  const std::vector<std::string> refused_by_05 = gemv_gguf_refusals(GgufLayout::mma_weights_a);
  const std::vector<std::string> refused_by_09 = gemv_gguf_refusals(GgufLayout::mma_weights_a, kGgufBatchMaxRows);
  std::vector<std::string> batch;
  for (const Problem& problem : op.conformance_problems)
    if (problem.dims[0] > kGgufGemvMaxRows) {
      EXPECT_EQ(gguf_layout(problem), GgufLayout::mma_weights_a) << problem.label();
      batch.push_back(problem.label());
    }
  ASSERT_FALSE(batch.empty());
  const std::size_t decode = op.conformance_problems.size() - batch.size();
  EXPECT_EQ(refused_by_01.size() + refused_by_02.size() + refused_by_03.size() + refused_by_05.size(),
            3 * decode + 4 * batch.size());
  EXPECT_EQ(refused_by_01.size(), refused_by_02.size());
  EXPECT_EQ(refused_by_01.size(), refused_by_03.size());
  EXPECT_EQ(refused_by_01.size(), refused_by_05.size());
  EXPECT_EQ(refused_by_09.size() + batch.size(), refused_by_05.size());
  for (const std::string& label : batch) {
    EXPECT_NE(std::find(refused_by_05.begin(), refused_by_05.end(), label), refused_by_05.end()) << label;
    EXPECT_EQ(std::find(refused_by_09.begin(), refused_by_09.end(), label), refused_by_09.end()) << label;
  }
  for (const std::string& label : refused_by_09) EXPECT_EQ(label.find("layout=3"), std::string::npos) << label;
  for (const std::string& label : refused_by_01) EXPECT_NE(label.find("layout="), std::string::npos) << label;
  for (const std::string& label : refused_by_02) EXPECT_EQ(label.find("layout=1"), std::string::npos) << label;
  for (const std::string& label : refused_by_03) EXPECT_EQ(label.find("layout=2"), std::string::npos) << label;
  // A decode rung says where more rows go; the op itself stops at 64.
  const Problem rows33 = op.problem({33, 40, 160}, DType::bf16, {{"layout", 3.0}});
  EXPECT_NE(gemv_gguf_layout_error(rows33, GgufLayout::mma_weights_a).find("rungs 09 and 10"), std::string::npos);
  EXPECT_EQ(gemv_gguf_layout_error(rows33, GgufLayout::mma_weights_a, kGgufBatchMaxRows), "");
  EXPECT_NE(gemv_gguf_shape_error(op.problem({65, 40, 160}, DType::bf16, {{"layout", 3.0}})).find("at most 64"),
            std::string::npos);
}

// Rung 09's plan: 128 columns a CTA, 128 k a chunk, splits that fill the SMs' CTAs without a split
// shorter than 8 chunks, and the workspace it needs.
// The batch rungs' launches (09, 10) check their arguments first (check_gguf_batch_args): a bad
// argument is a kc::Error naming the rung and the rule, before any CUDA call. No GPU needed: the
// pointers are never read.
TEST(GemvGguf, BatchLaunchChecksNameTheRuleTheArgumentsBreak) {
  alignas(16) static std::uint8_t quants[64], scales[64];
  alignas(16) static std::uint16_t x[64], y[64];
  GgufGemvArgs good;
  good.m = 17;
  good.n = 40;
  good.k = 160;
  good.x = reinterpret_cast<const __nv_bfloat16*>(x);
  good.quants = quants;
  good.scales = scales;
  good.y = reinterpret_cast<__nv_bfloat16*>(y);
  const GgufBatchPlan plan = plan_gguf_batch(good.m, good.n, good.k, 132, 1);
  ASSERT_FALSE(plan.needs_workspace());
  const auto message = [&](const GgufGemvArgs& args, const GgufBatchPlan& p, const GgufBatchWorkspace& w,
                           int x_alignment) {
    try {
      check_gguf_batch_args(args, p, w, "rung 10", x_alignment);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message(good, plan, {}, 16), "no error");
  GgufGemvArgs rows = good;
  rows.m = 65;
  EXPECT_NE(message(rows, plan, {}, 16).find("M must be in [1, 64]"), std::string::npos);
  GgufGemvArgs k_tail = good;
  k_tail.k = 150;
  EXPECT_NE(message(k_tail, plan, {}, 16).find("multiple of 32"), std::string::npos);
  GgufGemvArgs no_y = good;
  no_y.y = nullptr;
  EXPECT_NE(message(no_y, plan, {}, 16).find("non-null"), std::string::npos);
  GgufGemvArgs odd_x = good;
  odd_x.x = reinterpret_cast<const __nv_bfloat16*>(x + 2);  // 4-byte aligned, not 16
  EXPECT_NE(message(odd_x, plan, {}, 16).find("x 16-byte aligned"), std::string::npos) << message(odd_x, plan, {}, 16);
  EXPECT_EQ(message(odd_x, plan, {}, 4), "no error");  // rung 10 copies x in 4-byte pairs
  GgufGemvArgs odd_quants = good;
  odd_quants.quants = quants + 4;
  EXPECT_NE(message(odd_quants, plan, {}, 4).find("16-byte aligned"), std::string::npos);
  const GgufBatchPlan other = plan_gguf_batch(good.m, good.n, 4096, 132, 1);
  EXPECT_NE(message(good, other, {}, 16).find("make it with plan_gguf_batch"), std::string::npos);
  const GgufGemvArgs long_k = [&] {
    GgufGemvArgs args = good;
    args.k = 4224;
    return args;
  }();
  const GgufBatchPlan split = plan_gguf_batch(long_k.m, long_k.n, long_k.k, 132, 1);
  ASSERT_TRUE(split.needs_workspace());
  EXPECT_NE(message(long_k, split, {}, 16).find("zeroed counters"), std::string::npos);
  EXPECT_NE(message(rows, plan, {}, 16).find("rung 10"), std::string::npos);
}

TEST(GemvGguf, BatchPlanSplitsKWithoutShortSplits) {
  const GgufBatchPlan square = plan_gguf_batch(64, 4096, 4096, 132, 1);
  EXPECT_EQ(square.token_tiles, 8);
  EXPECT_EQ(square.column_blocks, 32);
  EXPECT_EQ(square.chunks, 32);
  EXPECT_EQ(square.splits, 4);  // 132 / 32 = 4, and 32 chunks allow 4 of 8
  EXPECT_EQ(square.partial_floats(), 32LL * 4 * 128 * 64);
  EXPECT_EQ(square.counters(), 32);
  EXPECT_EQ(plan_gguf_batch(64, 4096, 4096, 132, 2).splits, 4);  // 8 would leave 4 chunks a split
  const GgufBatchPlan down = plan_gguf_batch(16, 4096, 14336, 132, 2);
  EXPECT_EQ(down.chunks, 112);
  EXPECT_EQ(down.splits, 8);  // 264 / 32
  for (int split = 0; split < down.splits; ++split)
    EXPECT_GE(down.chunk_begin(split + 1) - down.chunk_begin(split), kGgufBatchMinChunksPerSplit);
  EXPECT_EQ(down.chunk_begin(down.splits), down.chunks);
  const GgufBatchPlan up = plan_gguf_batch(1, 14336, 4096, 132, 1);
  EXPECT_EQ(up.token_tiles, 1);
  EXPECT_EQ(up.column_blocks, 112);
  EXPECT_EQ(up.splits, 1);
  EXPECT_FALSE(up.needs_workspace());
  EXPECT_EQ(up.partial_floats(), 0);
  EXPECT_EQ(up.counters(), 0);
  // A K tail: 4224 = 33 chunks (the last of one block); a short K keeps one split.
  EXPECT_EQ(plan_gguf_batch(33, 129, 4224, 132, 1).chunks, 33);
  EXPECT_EQ(plan_gguf_batch(33, 129, 4224, 132, 1).splits, 4);
  EXPECT_EQ(plan_gguf_batch(17, 40, 160, 132, 1).splits, 1);
}

// The weights of the fragment layout (layout=2, gemv_gguf_args.hpp), read from its description:
// row r, weight k of block b is in tile r / 8, chunk b / 4, lane 4 (r % 8) + (k % 32) / 8, word (or
// 8 bytes) b % 4, at nibble position i for k % 8 = 2i and i + 4 for 2i + 1; the scales of rows
// 2t + p at entry (t, 2 (b % 4) + p).
double mma_layout_weight(GgufBlockType type, const GgufRepacked& r, int k, int row, int kk) {
  const int k_blocks = k / kGgufBlockWeights, chunks = (k_blocks + 3) / 4;
  const int block = kk / kGgufBlockWeights, within = kk % kGgufBlockWeights;
  const std::size_t tile_chunk = static_cast<std::size_t>(row / 8) * chunks + static_cast<std::size_t>(block / 4);
  const int lane = 4 * (row % 8) + within / 8, j = block % 4, e = within % 8;
  const bool q8 = type == GgufBlockType::q8_0;
  const std::uint8_t* lane_bytes = r.quants.data() + (tile_chunk * 32 + static_cast<std::size_t>(lane)) * (q8 ? 32 : 16);
  int q = 0;
  if (q8) {
    q = static_cast<std::int8_t>(lane_bytes[8 * j + e]);
  } else {
    std::uint32_t word;
    std::memcpy(&word, lane_bytes + 4 * j, 4);
    const int position = e % 2 == 0 ? e / 2 : e / 2 + 4;
    q = static_cast<int>((word >> (4 * position)) & 15u);
  }
  const int t = (row % 8) / 2, p = row % 2;
  const std::size_t scale_bytes = static_cast<std::size_t>(gguf_scale_bytes(type));
  const std::uint8_t* scale = r.scales.data() + ((tile_chunk * 4 + static_cast<std::size_t>(t)) * 8 +
                                                 2 * static_cast<std::size_t>(j) + static_cast<std::size_t>(p)) * scale_bytes;
  const double d = half_value(scale);
  if (type == GgufBlockType::q4_1) return d * q + half_value(scale + 2);
  return type == GgufBlockType::q4_0 ? d * (q - 8) : d * q;
}

TEST(GemvGguf, MmaLayoutHoldsTheSameWeightsAndZeroPadding) {
  for (const GgufBlockType type : kTypes)
    for (const auto& [n, k] : std::vector<std::pair<int, int>>{{1, 32}, {3, 32}, {37, 96}, {16, 576}, {9, 1024}}) {
      const std::size_t blocks = static_cast<std::size_t>(n) * static_cast<std::size_t>(k / kGgufBlockWeights);
      const std::vector<std::uint8_t> original = random_blocks(type, blocks, 31 * static_cast<std::uint64_t>(n) + k);
      const GgufRepacked r = repack_gguf_blocks_for_mma(type, original.data(), original.size(), n, k);
      ASSERT_EQ(r.quants.size(), gguf_mma_quant_bytes(type, n, k));
      ASSERT_EQ(r.scales.size(), gguf_mma_scale_bytes(type, n, k));
      const std::vector<double> expected = decode_gguf_blocks(type, original.data(), blocks);
      for (int row = 0; row < n; ++row)
        for (int kk = 0; kk < k; ++kk)
          ASSERT_EQ(mma_layout_weight(type, r, k, row, kk), expected[static_cast<std::size_t>(row) * k + kk])
              << "ggml type " << static_cast<int>(type) << ", " << n << "x" << k << ", row " << row << ", k " << kk;
      // Padding rows (up to a multiple of 8) and blocks (up to a multiple of 4) have scale 0.
      const int padded_n = (n + 7) / 8 * 8, padded_k = (k / kGgufBlockWeights + 3) / 4 * 4 * kGgufBlockWeights;
      for (int row = 0; row < padded_n; ++row)
        for (int kk = 0; kk < padded_k; kk += kGgufBlockWeights)
          if (row >= n || kk >= k) {
            ASSERT_EQ(mma_layout_weight(type, r, k, row, kk), 0.0) << "padding row " << row << ", k " << kk;
          }
    }
}

// The weights of layout=3 read from its description: row r, weight k of block b is in tile r / 16,
// chunk b / 4, lane 4 (r % 8) + (k % 32) / 8, word (or 8 bytes) 2 (b % 4) + (r % 16) / 8, at nibble
// position i for k % 8 = 2i and i + 4 for 2i + 1; its scale at entry (r % 8, 2 (b % 4) + (r % 16) / 8).
double mma16_layout_weight(GgufBlockType type, const GgufRepacked& r, int k, int row, int kk) {
  const int k_blocks = k / kGgufBlockWeights, chunks = (k_blocks + 3) / 4;
  const int block = kk / kGgufBlockWeights, within = kk % kGgufBlockWeights;
  const std::size_t tile_chunk = static_cast<std::size_t>(row / 16) * chunks + static_cast<std::size_t>(block / 4);
  const int g = row % 8, h = (row % 16) / 8;
  const int lane = 4 * g + within / 8, word = 2 * (block % 4) + h, e = within % 8;
  const bool q8 = type == GgufBlockType::q8_0;
  const std::uint8_t* lane_bytes = r.quants.data() + (tile_chunk * 32 + static_cast<std::size_t>(lane)) * (q8 ? 64 : 32);
  int q = 0;
  if (q8) {
    q = static_cast<std::int8_t>(lane_bytes[8 * word + e]);
  } else {
    std::uint32_t bits;
    std::memcpy(&bits, lane_bytes + 4 * word, 4);
    q = static_cast<int>((bits >> (4 * (e % 2 == 0 ? e / 2 : e / 2 + 4))) & 15u);
  }
  const std::size_t scale_bytes = static_cast<std::size_t>(gguf_scale_bytes(type));
  const std::uint8_t* scale = r.scales.data() + ((tile_chunk * 8 + static_cast<std::size_t>(g)) * 8 +
                                                 static_cast<std::size_t>(word)) * scale_bytes;
  const double d = half_value(scale);
  if (type == GgufBlockType::q4_1) return d * q + half_value(scale + 2);
  return type == GgufBlockType::q4_0 ? d * (q - 8) : d * q;
}

TEST(GemvGguf, WeightsAsALayoutHoldsTheSameWeightsAndZeroPadding) {
  for (const GgufBlockType type : kTypes)
    for (const auto& [n, k] : std::vector<std::pair<int, int>>{{1, 32}, {3, 32}, {37, 96}, {16, 576}, {17, 1024}}) {
      const std::size_t blocks = static_cast<std::size_t>(n) * static_cast<std::size_t>(k / kGgufBlockWeights);
      const std::vector<std::uint8_t> original = random_blocks(type, blocks, 41 * static_cast<std::uint64_t>(n) + k);
      const GgufRepacked r = repack_gguf_blocks_for_mma16(type, original.data(), original.size(), n, k);
      ASSERT_EQ(r.quants.size(), gguf_mma16_quant_bytes(type, n, k));
      ASSERT_EQ(r.scales.size(), gguf_mma16_scale_bytes(type, n, k));
      const std::vector<double> expected = decode_gguf_blocks(type, original.data(), blocks);
      for (int row = 0; row < n; ++row)
        for (int kk = 0; kk < k; ++kk)
          ASSERT_EQ(mma16_layout_weight(type, r, k, row, kk), expected[static_cast<std::size_t>(row) * k + kk])
              << "ggml type " << static_cast<int>(type) << ", " << n << "x" << k << ", row " << row << ", k " << kk;
      const int padded_n = (n + 15) / 16 * 16, padded_k = (k / kGgufBlockWeights + 3) / 4 * 4 * kGgufBlockWeights;
      for (int row = 0; row < padded_n; ++row)
        for (int kk = 0; kk < padded_k; kk += kGgufBlockWeights)
          if (row >= n || kk >= k) {
            ASSERT_EQ(mma16_layout_weight(type, r, k, row, kk), 0.0) << "padding row " << row << ", k " << kk;
          }
    }
  const std::vector<std::uint8_t> bytes(2 * 3 * 34, 0);
  EXPECT_NO_THROW(repack_gguf_blocks_for_mma16(GgufBlockType::q8_0, bytes.data(), bytes.size(), 2, 96));
  EXPECT_THROW(repack_gguf_blocks_for_mma16(GgufBlockType::q8_0, bytes.data(), bytes.size(), 2, 64), Error);
}

TEST(GemvGguf, MmaRepackRefusesAByteCountThatIsNotTheWeight) {
  const std::vector<std::uint8_t> bytes(2 * 3 * 20, 0);
  EXPECT_NO_THROW(repack_gguf_blocks_for_mma(GgufBlockType::q4_1, bytes.data(), bytes.size(), 2, 96));
  EXPECT_THROW(repack_gguf_blocks_for_mma(GgufBlockType::q4_1, bytes.data(), bytes.size(), 3, 96), Error);
  EXPECT_THROW(repack_gguf_blocks_for_mma(GgufBlockType::q4_1, bytes.data(), bytes.size(), 2, 80), Error);
}

// The GPU repacks check their arguments before the launch (no GPU needed: nothing is launched for
// a refused call): the shape, non-null buffers, and the 16-byte alignment the GEMV rungs' loads
// need of the buffers they write.
TEST(GemvGguf, DeviceRepacksCheckTheirBuffersBeforeTheLaunch) {
  alignas(16) static std::uint8_t blocks[2 * 3 * 34], quants[4096], scales[1024];
  using kc::testing::expect_refused;
  for (const auto repack : {repack_gguf_blocks_for_mma_on_device, repack_gguf_blocks_for_mma16_on_device}) {
    expect_refused([&] { repack(GgufBlockType::q8_0, blocks, 2, 96, quants + 8, scales, nullptr); }, "16-byte aligned");
    expect_refused([&] { repack(GgufBlockType::q8_0, blocks, 2, 96, quants, scales + 2, nullptr); }, "16-byte aligned");
    expect_refused([&] { repack(GgufBlockType::q8_0, nullptr, 2, 96, quants, scales, nullptr); }, "must be non-null");
    expect_refused([&] { repack(GgufBlockType::q8_0, blocks, 2, 80, quants, scales, nullptr); }, "multiple of 32");
  }
}

// What a block's scale is, by its half's bits: the edge cases of src/gemv_gguf_edges.hpp or normal.
enum class HalfKind { plus_zero, minus_zero, subnormal, nan, infinite, normal };

HalfKind half_kind(const std::uint8_t* p) {
  std::uint16_t bits;
  std::memcpy(&bits, p, sizeof bits);
  const int exponent = (bits >> 10) & 0x1f, mantissa = bits & 0x3ff;
  if (exponent == 0x1f) return mantissa != 0 ? HalfKind::nan : HalfKind::infinite;
  if (exponent != 0) return HalfKind::normal;
  if (mantissa != 0) return HalfKind::subnormal;
  return (bits & 0x8000) != 0 ? HalfKind::minus_zero : HalfKind::plus_zero;
}

// Every conformance problem draws each edge case the op defines (src/gemv_gguf_edges.hpp): d = +0
// (q4_1: with m = 0), d = -0 (q4_1: with its drawn m, nonzero), subnormal d, q4_1 subnormal m, and in
// problems of 16 rows of w or more 1 + N / 256 rows with one NaN d each; at M >= 2 one NaN in x. No
// block has an Inf. The blocks that are no edge case keep the plain draw's normal scales, and the
// bench problems (which time the plain draws) have no edge case at all.
TEST(GemvGguf, ConformanceProblemsDrawEveryEdgeCaseAndBenchProblemsNone) {
  const OpSpec op = make_gemv_gguf_op();
  std::map<GgufBlockType, std::set<std::string>> seen;  // the kinds drawn, over a type's problems
  for (const Problem& problem : op.conformance_problems) {
    ASSERT_TRUE(weight_only_gemv_has_edge_cases(problem)) << problem.label();
    const GgufBlockType type = gguf_block_type(problem);
    const bool with_min = type == GgufBlockType::q4_1;
    const std::int64_t m = problem.dims[0], n = problem.dims[1], k = problem.dims[2], per_row = k / 32;
    const auto size = static_cast<std::size_t>(gguf_block_bytes(type));
    for (const std::uint64_t seed : {1u, 17u, 2026u}) {
      const std::vector<std::uint8_t> blocks = gemv_gguf_draw_blocks(problem, seed);
      ASSERT_EQ(blocks.size(), static_cast<std::size_t>(n * per_row) * size) << problem.label();
      EXPECT_EQ(gemv_gguf_draw_blocks(problem, seed), blocks) << problem.label() << ": not deterministic";
      std::set<std::int64_t> nan_rows;
      for (std::size_t b = 0; b < blocks.size() / size; ++b) {
        const std::uint8_t* block = blocks.data() + b * size;
        const HalfKind d = half_kind(block), offset = with_min ? half_kind(block + 2) : HalfKind::normal;
        const std::string where =
            problem.label() + ", seed " + std::to_string(seed) + ", block " + std::to_string(b);
        ASSERT_NE(d, HalfKind::infinite) << where;
        ASSERT_NE(offset, HalfKind::infinite) << where;
        ASSERT_NE(offset, HalfKind::nan) << where;
        if (d == HalfKind::nan) {
          nan_rows.insert(static_cast<std::int64_t>(b) / per_row);
          seen[type].insert("nan d");
          continue;
        }
        switch (b % 8) {
          case 1:
            EXPECT_EQ(d, HalfKind::plus_zero) << where;
            if (with_min) {
              EXPECT_EQ(offset, HalfKind::plus_zero) << where;
            }
            seen[type].insert("+0 d");
            break;
          case 3:
            EXPECT_EQ(d, HalfKind::minus_zero) << where;
            if (with_min) {
              EXPECT_EQ(offset, HalfKind::normal) << where << ": d = 0 with m nonzero";
            }
            seen[type].insert("-0 d");
            break;
          case 5:
            EXPECT_EQ(d, HalfKind::subnormal) << where;
            EXPECT_EQ(offset, HalfKind::normal) << where;
            seen[type].insert("subnormal d");
            break;
          case 6:
            EXPECT_EQ(d, HalfKind::normal) << where;
            if (with_min) {
              EXPECT_EQ(offset, HalfKind::subnormal) << where;
              seen[type].insert("subnormal m");
            }
            break;
          default:
            EXPECT_EQ(d, HalfKind::normal) << where;
            EXPECT_EQ(offset, HalfKind::normal) << where;
        }
      }
      EXPECT_EQ(nan_rows.size(), n >= 16 ? static_cast<std::size_t>(1 + n / 256) : 0u) << problem.label();
      const std::int64_t nan_x = weight_only_gemv_nan_x_index(problem, seed);
      if (m >= 2) {
        EXPECT_GE(nan_x, 0) << problem.label();
        EXPECT_LT(nan_x, m * k) << problem.label();
        seen[type].insert("nan x");
      } else {
        EXPECT_EQ(nan_x, -1) << problem.label();
      }
    }
  }
  for (const GgufBlockType type : kTypes) {
    std::set<std::string> expected = {"+0 d", "-0 d", "subnormal d", "nan d", "nan x"};
    if (type == GgufBlockType::q4_1) expected.insert("subnormal m");
    EXPECT_EQ(seen[type], expected) << "ggml type " << static_cast<int>(type);
  }

  // The bench problems: plain draws only (one draw of each type and weight; the layouts share it).
  std::set<std::tuple<GgufBlockType, std::int64_t, std::int64_t>> drawn;
  for (const Problem& problem : op.bench_problems) {
    EXPECT_FALSE(weight_only_gemv_has_edge_cases(problem)) << problem.label();
    EXPECT_EQ(weight_only_gemv_nan_x_index(problem, 16), -1) << problem.label();
    const GgufBlockType type = gguf_block_type(problem);
    if (!drawn.insert({type, problem.dims[1], problem.dims[2]}).second) continue;
    const std::vector<std::uint8_t> blocks = gemv_gguf_draw_blocks(problem, 17);
    const auto size = static_cast<std::size_t>(gguf_block_bytes(type));
    std::size_t not_normal = 0;
    for (std::size_t b = 0; b < blocks.size() / size; ++b) {
      not_normal += half_kind(blocks.data() + b * size) != HalfKind::normal;
      if (type == GgufBlockType::q4_1)
        not_normal += half_kind(blocks.data() + b * size + 2) != HalfKind::normal;
    }
    EXPECT_EQ(not_normal, 0u) << problem.label();
  }
  EXPECT_EQ(drawn.size(), 5u) << "q4_0 at three weights, q4_1 and q8_0 at one";
}

// The op's reference decode on the edge cases: a block of d = 0 decodes to zeros (q4_0, q8_0; q4_1
// with m = 0) or to m (q4_1), a subnormal d to d q exactly, a NaN d to NaN weights; so y (the
// decoded weights times x, summed in double as the reference sums them) is NaN exactly in the
// columns of the NaN-d rows of w and in the row of x's NaN, finite everywhere else.
TEST(GemvGguf, ReferenceDecodesTheEdgeCasesAndYIsNanOnlyWhereItMustBe) {
  const OpSpec op = make_gemv_gguf_op();
  for (const GgufBlockType type : kTypes) {
    const Problem problem =
        op.problem({7, 100, 1024}, DType::bf16, {{"ggml_type", static_cast<double>(static_cast<int>(type))}});
    const std::int64_t m = problem.dims[0], n = problem.dims[1], k = problem.dims[2], per_row = k / 32;
    const auto size = static_cast<std::size_t>(gguf_block_bytes(type));
    const std::vector<std::uint8_t> blocks = gemv_gguf_draw_blocks(problem, 33);
    const std::vector<double> w = decode_gguf_blocks(type, blocks.data(), static_cast<std::size_t>(n * per_row));
    std::set<std::int64_t> nan_columns;
    for (std::size_t b = 0; b < static_cast<std::size_t>(n * per_row); ++b) {
      const std::uint8_t* block = blocks.data() + b * size;
      const double* weights = w.data() + b * kGgufBlockWeights;
      const HalfKind d = half_kind(block);
      for (int i = 0; i < kGgufBlockWeights; ++i) {
        if (d == HalfKind::nan) {
          ASSERT_TRUE(std::isnan(weights[i])) << "block " << b;
        } else if (d == HalfKind::plus_zero || d == HalfKind::minus_zero) {
          ASSERT_EQ(weights[i], type == GgufBlockType::q4_1 ? half_value(block + 2) : 0.0) << "block " << b;
        } else {
          ASSERT_TRUE(std::isfinite(weights[i])) << "block " << b;
        }
      }
      if (d == HalfKind::subnormal && type == GgufBlockType::q8_0) {
        // d q for the signed byte q: d itself a multiple of 2^-24 below 2^-14.
        const double scale = half_value(block);
        EXPECT_LT(std::fabs(scale), std::ldexp(1.0, -14));
        EXPECT_EQ(weights[0], scale * static_cast<std::int8_t>(block[2])) << "block " << b;
      }
      if (d == HalfKind::nan) nan_columns.insert(static_cast<std::int64_t>(b) / per_row);
    }
    ASSERT_EQ(nan_columns.size(), 1u);
    std::vector<double> x(static_cast<std::size_t>(m * k));
    std::mt19937_64 rng(5);
    std::uniform_real_distribution<double> uniform(-1.0, 1.0);
    for (double& v : x) v = uniform(rng);
    const std::int64_t nan_x = weight_only_gemv_nan_x_index(problem, 32);
    ASSERT_GE(nan_x, 0);
    x[static_cast<std::size_t>(nan_x)] = std::nan("");
    for (std::int64_t row = 0; row < m; ++row)
      for (std::int64_t column = 0; column < n; ++column) {
        double sum = 0.0;
        for (std::int64_t i = 0; i < k; ++i)
          sum += x[static_cast<std::size_t>(row * k + i)] * w[static_cast<std::size_t>(column * k + i)];
        const bool nan_expected = row == nan_x / k || nan_columns.count(column) == 1;
        EXPECT_EQ(std::isnan(sum), nan_expected) << "y[" << row << "][" << column << "]";
        if (!nan_expected) {
          EXPECT_TRUE(std::isfinite(sum)) << "y[" << row << "][" << column << "]";
        }
      }
  }
}

}  // namespace
}  // namespace kc::stage3
