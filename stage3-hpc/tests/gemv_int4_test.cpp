// The gemv_int4 and quantize_int4 ops' host side: the quantizer (exact on a grid it can represent,
// within a step of any weight, refusing non-finite weights and ranges past a half scale, and the
// reference marking those groups instead), the dequantizer on a hand case, the prepared layout
// read back by a decoder of its own (every weight, scale and zero point where gemv_int4_args.hpp
// says, zeros in the padding), the group sizes and shapes they refuse, and the rungs' and the
// quantize entry's argument checks, which throw before any CUDA call; and the op's edge cases
// (src/gemv_int4_edges.hpp): where the conformance problems hold NaN scales and a NaN in x, that the
// reference and the prepared layout carry them, that the bench problems hold none, and that a
// model of each negative control still fails a conformance problem outside the NaN outputs.
//   ctest --test-dir build/ci -R GemvInt4
#include <gtest/gtest.h>

#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "kc/common/compare.hpp"
#include "kc/common/error.hpp"
#include "kc/common/gemm.hpp"
#include "kc/stage3/gemv_gguf.hpp"
#include "kc/stage3/gemv_int4.hpp"
#include "kc/stage3/quantize_int4.hpp"
#include "src/gemv_int4_edges.hpp"
#include "stage3_test_registry.hpp"
#include "support/int4_checkpoint_packing.hpp"

namespace kc::stage3 {
namespace {

using test_support::pack_checkpoint;
using test_support::PackedCheckpoint;
using test_support::stored_q;

float half_value(std::uint16_t bits) {
  __half_raw raw;
  raw.x = bits;
  return __half2float(__half(raw));
}

std::uint16_t half_bits(float value) {
  const __half h = __float2half_rn(value);
  std::uint16_t bits;
  std::memcpy(&bits, &h, sizeof bits);
  return bits;
}

// A random stored weight: every nibble, positive normal scales, zero points over 0..15.
Int4GroupHost random_weight(int n, int k, int group_size, std::uint64_t seed) {
  Int4GroupHost w;
  w.n = n;
  w.k = k;
  w.group_size = group_size;
  std::mt19937_64 rng(seed);
  w.qweight.resize(static_cast<std::size_t>(n) * static_cast<std::size_t>(k / 2));
  for (std::uint8_t& b : w.qweight) b = static_cast<std::uint8_t>(rng());
  const std::size_t entries = static_cast<std::size_t>(n) * static_cast<std::size_t>(k / group_size);
  std::uniform_real_distribution<float> scale(1e-3f, 1e-1f);
  for (std::size_t e = 0; e < entries; ++e) {
    w.scales.push_back(half_bits(scale(rng)));
    w.zeros.push_back(static_cast<std::uint8_t>(rng() % 16));
  }
  return w;
}

TEST(GemvInt4, HalfOfIntegerIsTheHalfOfEachZeroPoint) {
  for (int z = 0; z <= 15; ++z) EXPECT_EQ(int4_half_of_integer(z), half_bits(static_cast<float>(z))) << z;
}

TEST(GemvInt4, QuantizerIsExactOnAGridItCanRepresent) {
  // Weights on the grid 0.5 (q - 7), q = 0..15 twice over: lo = -3.5, hi = 4, so s = 7.5 / 15 =
  // 0.5 exactly, z = 7, and every weight dequantizes to itself.
  std::vector<float> w(32);
  for (int i = 0; i < 32; ++i) w[i] = 0.5f * static_cast<float>(i % 16 - 7);
  const Int4GroupHost q = quantize_int4_groups_on_host(w.data(), 1, 32, 32);
  ASSERT_EQ(q.scales.size(), 1u);
  EXPECT_EQ(q.scales[0], half_bits(0.5f));
  EXPECT_EQ(q.zeros[0], 7);
  for (int i = 0; i < 32; ++i) {
    const int nibble = i % 2 == 0 ? q.qweight[i / 2] & 15 : q.qweight[i / 2] >> 4;
    EXPECT_EQ(nibble, i % 16) << "weight " << i;
  }
  const std::vector<double> back = dequantize_int4_groups(q.view());
  for (int i = 0; i < 32; ++i) EXPECT_EQ(back[static_cast<std::size_t>(i)], static_cast<double>(w[i])) << i;
}

TEST(GemvInt4, QuantizerGivesAGroupOfZerosScaleZeroAndZeroPointEight) {
  std::vector<float> w(2 * 64, 0.f);
  for (int i = 64; i < 128; ++i) w[static_cast<std::size_t>(i)] = 0.25f * static_cast<float>(i % 7);
  const Int4GroupHost q = quantize_int4_groups_on_host(w.data(), 2, 64, 64);
  EXPECT_EQ(q.scales[0], 0);
  EXPECT_EQ(q.zeros[0], 8);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(q.qweight[static_cast<std::size_t>(i)], 0x88) << i;
  EXPECT_NE(q.scales[1], 0);
  const std::vector<double> back = dequantize_int4_groups(q.view());
  for (int i = 0; i < 64; ++i) EXPECT_EQ(back[static_cast<std::size_t>(i)], 0.0);
}

TEST(GemvInt4, QuantizedWeightsAreWithinAStepOfTheWeights) {
  const int n = 9, k = 512;
  for (const int group_size : {32, 64, 128, 256, 512}) {
    std::mt19937_64 rng(static_cast<std::uint64_t>(group_size));
    std::normal_distribution<float> normal(0.f, 0.02f);
    std::vector<float> w(static_cast<std::size_t>(n) * k);
    for (float& v : w) v = normal(rng);
    const Int4GroupHost q = quantize_int4_groups_on_host(w.data(), n, k, group_size);
    const std::vector<double> back = dequantize_int4_groups(q.view());
    double sum_of_steps = 0.0;
    for (int row = 0; row < n; ++row)
      for (int kk = 0; kk < k; ++kk) {
        const std::size_t entry = static_cast<std::size_t>(row) * static_cast<std::size_t>(k / group_size) +
                                  static_cast<std::size_t>(kk / group_size);
        const double s = half_value(q.scales[entry]);
        const std::size_t i = static_cast<std::size_t>(row) * k + static_cast<std::size_t>(kk);
        const double error = std::fabs(back[i] - static_cast<double>(w[i]));
        // Half a step from the rounding; the half scale (11 bits) and the rounded zero point can
        // push the group's largest weight one clamp past 15: never more than a step.
        EXPECT_LE(error, s * 1.001) << "G " << group_size << ", row " << row << ", k " << kk;
        sum_of_steps += error / s;
      }
    // Round to nearest: a quarter of a step on average.
    EXPECT_LT(sum_of_steps / static_cast<double>(w.size()), 0.3) << "G " << group_size;
  }
}

TEST(GemvInt4, QuantizerRefusesNonFiniteWeightsAndScalesPastAHalf) {
  std::vector<float> w(64, 0.1f);
  w[37] = std::nanf("");
  try {
    (void)quantize_int4_groups_on_host(w.data(), 1, 64, 32);
    ADD_FAILURE() << "a NaN weight was quantized";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("weight [0, 37]"), std::string::npos) << e.what();
  }
  w[37] = INFINITY;
  EXPECT_THROW((void)quantize_int4_groups_on_host(w.data(), 1, 64, 32), Error);
  w[37] = 2e6f;  // (2e6 - 0) / 15 > 65504: no half scale holds it
  try {
    (void)quantize_int4_groups_on_host(w.data(), 1, 64, 32);
    ADD_FAILURE() << "a range past a half scale was quantized";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("row 0 from k = 32"), std::string::npos) << e.what();
  }
}

TEST(GemvInt4, DequantizesScaleTimesNibbleMinusZeroPoint) {
  Int4GroupHost w;
  w.n = 1;
  w.k = 64;
  w.group_size = 32;
  w.qweight.assign(32, 0);
  w.qweight[0] = 0xF3;   // k 0: 3, k 1: 15
  w.qweight[16] = 0x0A;  // k 32: 10, k 33: 0
  w.scales = {half_bits(0.25f), half_bits(-2.f)};
  w.zeros = {4, 12};
  const std::vector<double> v = dequantize_int4_groups(w.view());
  EXPECT_EQ(v[0], 0.25 * (3 - 4));
  EXPECT_EQ(v[1], 0.25 * (15 - 4));
  EXPECT_EQ(v[2], 0.25 * (0 - 4));
  EXPECT_EQ(v[32], -2.0 * (10 - 12));
  EXPECT_EQ(v[33], -2.0 * (0 - 12));
}

// The prepared layout read back position by position, from the picture in gemv_int4_args.hpp (not
// from prepare_int4_group_lane's loops): weight (row, k) is nibble i of word 2j + h of lane 4g + t.
struct PreparedEntry {
  int q;
  std::uint16_t scale;
  int zero;
};

PreparedEntry read_prepared(const Int4Prepared& p, int n, int k, int group_size, int row, int kk) {
  const int chunks = (k + 127) / 128;
  const std::size_t tile_chunk = static_cast<std::size_t>(row / 16) * static_cast<std::size_t>(chunks) +
                                 static_cast<std::size_t>(kk / 128);
  const int g = row % 8, h = (row % 16) / 8;
  const int j = (kk % 128) / 32, t = (kk % 32) / 8, e = kk % 8;
  const int lane = 4 * g + t;
  const std::uint8_t* word = p.quants.data() + (tile_chunk * 32 + static_cast<std::size_t>(lane)) * 32 + 4 * (2 * j + h);
  std::uint32_t bits;
  std::memcpy(&bits, word, sizeof bits);
  const int position = e % 2 == 0 ? e / 2 : e / 2 + 4;
  const int entries = 2 * int4_groups_per_chunk(group_size);
  const int u = group_size >= 128 ? 0 : (kk % 128) / group_size;
  const std::uint32_t entry = p.scales[(tile_chunk * 8 + static_cast<std::size_t>(g)) * static_cast<std::size_t>(entries) +
                                       static_cast<std::size_t>(2 * u + h)];
  (void)n;
  return PreparedEntry{static_cast<int>((bits >> (4 * position)) & 15u), static_cast<std::uint16_t>(entry & 0xffffu),
                       static_cast<int>(half_value(static_cast<std::uint16_t>(entry >> 16)))};
}

TEST(GemvInt4, PreparedLayoutHoldsEveryWeightScaleAndZeroPoint) {
  struct Case {
    int n, k, group_size;
  };
  for (const Case c : {Case{37, 96, 32}, Case{16, 576, 64}, Case{33, 384, 128}, Case{20, 512, 256}, Case{5, 1152, 1152}}) {
    const Int4GroupHost w = random_weight(c.n, c.k, c.group_size, static_cast<std::uint64_t>(c.n * c.k));
    const Int4Prepared p = prepare_int4_groups(w.view());
    ASSERT_EQ(p.quants.size(), int4_prepared_quant_bytes(c.n, c.k));
    ASSERT_EQ(p.scales.size() * 4, int4_prepared_scale_bytes(c.n, c.k, c.group_size));
    const int padded_n = (c.n + 15) / 16 * 16, padded_k = (c.k + 127) / 128 * 128;
    for (int row = 0; row < padded_n; ++row)
      for (int kk = 0; kk < padded_k; ++kk) {
        const PreparedEntry got = read_prepared(p, c.n, c.k, c.group_size, row, kk);
        if (row >= c.n || kk >= c.k) {
          ASSERT_EQ(got.q, 0) << "padding at row " << row << ", k " << kk;
          ASSERT_EQ(got.scale, 0) << "padding at row " << row << ", k " << kk;
          ASSERT_EQ(got.zero, 0) << "padding at row " << row << ", k " << kk;
          continue;
        }
        const std::uint8_t byte = w.qweight[static_cast<std::size_t>(row) * static_cast<std::size_t>(c.k / 2) +
                                            static_cast<std::size_t>(kk / 2)];
        const std::size_t entry = static_cast<std::size_t>(row) * static_cast<std::size_t>(c.k / c.group_size) +
                                  static_cast<std::size_t>(kk / c.group_size);
        ASSERT_EQ(got.q, kk % 2 == 0 ? byte & 15 : byte >> 4) << c.n << "x" << c.k << " G " << c.group_size
                                                                << ": row " << row << ", k " << kk;
        ASSERT_EQ(got.scale, w.scales[entry]) << "row " << row << ", k " << kk;
        ASSERT_EQ(got.zero, w.zeros[entry]) << "row " << row << ", k " << kk;
      }
  }
}

// The rungs decode the prepared quants with the GGUF rungs' q4 decode (quant/gemv_gguf_mma.cuh), so
// they must be, byte for byte, the layout=3 quants the GGUF GEMV's own repack makes of q4_1 blocks
// holding the same nibbles (ggml's block: half d, half m, then byte j = weight j | weight j + 16
// << 4) — checked against repack_gguf_blocks_for_mma16, not against this file's reading of the
// layout.
TEST(GemvInt4, PreparedQuantsAreTheGgufLayout3QuantsOfTheSameNibbles) {
  struct Case {
    int n, k, group_size;
  };
  for (const Case c : {Case{37, 96, 32}, Case{16, 576, 64}, Case{33, 384, 128}}) {
    const Int4GroupHost w = random_weight(c.n, c.k, c.group_size, static_cast<std::uint64_t>(7 * c.n + c.k));
    std::vector<std::uint8_t> blocks;
    for (int row = 0; row < c.n; ++row)
      for (int b = 0; b < c.k / 32; ++b) {
        const std::uint16_t d = half_bits(1.f), m = half_bits(0.f);
        for (const std::uint16_t h : {d, m}) {
          blocks.push_back(static_cast<std::uint8_t>(h & 0xff));
          blocks.push_back(static_cast<std::uint8_t>(h >> 8));
        }
        for (int j = 0; j < 16; ++j)
          blocks.push_back(static_cast<std::uint8_t>(stored_q(w, row, 32 * b + j) | (stored_q(w, row, 32 * b + j + 16) << 4)));
      }
    const GgufRepacked gguf = repack_gguf_blocks_for_mma16(GgufBlockType::q4_1, blocks.data(), blocks.size(), c.n, c.k);
    const Int4Prepared p = prepare_int4_groups(w.view());
    ASSERT_EQ(p.quants.size(), gguf.quants.size()) << c.n << "x" << c.k;
    std::size_t differ = 0;
    for (std::size_t i = 0; i < p.quants.size(); ++i) differ += p.quants[i] != gguf.quants[i];
    EXPECT_EQ(differ, 0u) << c.n << "x" << c.k << " G " << c.group_size << ": of " << p.quants.size() << " bytes";
  }
}

TEST(GemvInt4, PrepareRefusesGroupSizesThatDoNotDivideKAndWideZeroPoints) {
  Int4GroupHost w = random_weight(4, 384, 128, 7);
  w.group_size = 256;  // 384 = 1.5 groups of 256
  try {
    (void)prepare_int4_groups(w.view());
    ADD_FAILURE() << "a group size that does not divide K was prepared";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not divide K = 384"), std::string::npos) << e.what();
  }
  w.group_size = 96;
  try {
    (void)prepare_int4_groups(w.view());
    ADD_FAILURE() << "a group size of 96 was prepared";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not 32, 64 or a multiple of 128"), std::string::npos) << e.what();
  }
  w.group_size = 128;
  w.zeros[5] = 16;
  try {
    (void)prepare_int4_groups(w.view());
    ADD_FAILURE() << "a zero point of 16 was prepared";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("row 1, group 2 is 16"), std::string::npos) << e.what();
  }
}

TEST(GemvInt4, OpRefusesShapesItDoesNotDefine) {
  const OpSpec op = make_gemv_int4_op();
  EXPECT_EQ(gemv_int4_shape_error(op.problem({1, 64, 4096}, DType::bf16, {})), "");
  EXPECT_NE(gemv_int4_shape_error(op.problem({1, 64, 192}, DType::bf16, {})).find("must divide K"), std::string::npos);
  EXPECT_NE(gemv_int4_shape_error(op.problem({1, 64, 960}, DType::bf16, {{"group_size", 96.0}})).find("32, 64"),
            std::string::npos);
  EXPECT_NE(gemv_int4_shape_error(op.problem({65, 64, 128}, DType::bf16, {})).find("at most 64"), std::string::npos);
  EXPECT_EQ(gemv_int4_shape_error(op.problem({64, 64, 128}, DType::bf16, {})), "");
  EXPECT_NE(gemv_int4_rows_error(op.problem({17, 64, 128}, DType::bf16, {}), kInt4GemvMaxRows).find("at most 16"),
            std::string::npos);
  for (const Problem& p : op.conformance_problems) EXPECT_EQ(gemv_int4_shape_error(p), "") << p.label();
  for (const Problem& p : op.bench_problems) EXPECT_EQ(gemv_int4_shape_error(p), "") << p.label();
}

TEST(GemvInt4, BytesAreXYAndThePreparedWeight) {
  const OpSpec op = make_gemv_int4_op();
  const Problem p = op.problem({1, 4096, 4096}, DType::bf16, {});
  // x and y: 4096 x 2 bytes each; quants 4096 x 4096 / 2; one 4-byte entry a row and group of 128.
  EXPECT_EQ(op.work(p).bytes, 2.0 * 4096 * 2 + 4096.0 * 4096 / 2 + 4096.0 * 32 * 4);
}

TEST(GemvInt4, RungRefusesBadArgumentsBeforeAnyCudaCall) {
  alignas(16) static std::uint8_t storage[64];
  Int4GemvArgs a;
  a.m = 1;
  a.n = 16;
  a.k = 256;
  a.group_size = 128;
  a.x = reinterpret_cast<const __nv_bfloat16*>(storage);
  a.quants = storage;
  a.scales = reinterpret_cast<const std::uint32_t*>(storage);
  a.y = reinterpret_cast<__nv_bfloat16*>(storage);
  Int4GemvArgs bad = a;
  bad.m = 17;
  EXPECT_THROW(gemv_int4_01_group_scales(bad, nullptr), Error);
  bad = a;
  bad.k = 192;  // G = 128 does not divide it
  EXPECT_THROW(gemv_int4_01_group_scales(bad, nullptr), Error);
  bad = a;
  bad.group_size = 96;
  bad.k = 192;
  EXPECT_THROW(gemv_int4_01_group_scales(bad, nullptr), Error);
  bad = a;
  bad.scales = nullptr;
  EXPECT_THROW(gemv_int4_01_group_scales(bad, nullptr), Error);
  bad = a;
  bad.quants = storage + 4;
  EXPECT_THROW(gemv_int4_01_group_scales(bad, nullptr), Error);
  bad = a;
  EXPECT_THROW(gemv_int4_01_flawed(bad, Int4Flaw::next_group_scales, nullptr), Error)
      << "G = 128 has no next group in a chunk";
  bad = a;
  bad.m = 0;
  EXPECT_THROW(gemv_int4_02_bulk_stream(bad, nullptr), Error);
  // Rung 03: a plan that is not plan_gguf_batch's for the shape, and a split plan without a workspace.
  bad = a;
  bad.m = 40;
  GgufBatchPlan plan = plan_gguf_batch(bad.m, bad.n, bad.k, 132, 2);
  GgufBatchPlan wrong = plan;
  wrong.token_tiles = 1;
  EXPECT_THROW(gemv_int4_03_batch(bad, wrong, GgufBatchWorkspace{}, nullptr), Error);
  plan.splits = 2;
  EXPECT_THROW(gemv_int4_03_batch(bad, plan, GgufBatchWorkspace{}, nullptr), Error);
  bad.m = 65;
  EXPECT_THROW(gemv_int4_03_batch(bad, plan_gguf_batch(64, bad.n, bad.k, 132, 2), GgufBatchWorkspace{}, nullptr),
               Error);
  Int4GroupWeights weights;
  weights.n = 4;
  weights.k = 192;
  weights.group_size = 128;
  weights.qweight = storage;
  weights.scales = reinterpret_cast<const std::uint16_t*>(storage);
  weights.zeros = storage;
  EXPECT_THROW(prepare_int4_groups_on_device(weights, storage, reinterpret_cast<std::uint32_t*>(storage), nullptr),
               Error);
}

// Rungs 01, 02, 04 and 05 take a decode step (16 rows) and refuse exactly the op's conformance
// problems of more rows (x of every other one fits next to the links' rings); rung 03 takes every
// problem the op defines.
TEST(GemvInt4, RungsRefuseExactlyTheProblemsOfMoreRowsThanTheyTake) {
  const Registry& r = stage3_test_registry();
  struct Rung {
    const char* id;
    int max_rows;
  };
  int more_rows = 0;
  for (const Problem& p : r.op(kGemvInt4Op).conformance_problems) more_rows += p.dims[0] > kInt4GemvMaxRows;
  EXPECT_GE(more_rows, 5) << "the conformance problems must reach rung 03's range";
  for (const Rung rung : {Rung{"stage3/gemv_int4/01_group_scales", kInt4GemvMaxRows},
                          Rung{"stage3/gemv_int4/02_bulk_stream", kInt4GemvMaxRows},
                          Rung{"stage3/gemv_int4/03_batch", kInt4BatchMaxRows},
                          Rung{"stage3/gemv_int4/04_x_resident", kInt4GemvMaxRows},
                          Rung{"stage3/gemv_int4/05_x_f16", kInt4GemvMaxRows}}) {
    const KernelEntry& entry = r.kernel(rung.id);
    EXPECT_EQ(entry.op, kGemvInt4Op);
    EXPECT_EQ(entry.refuses, gemv_int4_refusals(rung.max_rows)) << rung.id;
    for (const Problem& p : r.op(kGemvInt4Op).conformance_problems)
      EXPECT_EQ(entry.supports(p).empty(), p.dims[0] <= rung.max_rows) << rung.id << " " << p.label();
  }
  EXPECT_TRUE(r.kernel("stage3/gemv_int4/03_batch").refuses.empty());
  EXPECT_EQ(r.kernel("stage3/gemv_int4/02_bulk_stream").min_compute_capability, 90);
  EXPECT_EQ(r.kernel("stage3/gemv_int4/02_bulk_stream").max_compute_capability, 90);
}

// Rung 04 keeps x's M rows of K + 8 bf16 next to its ring (4 stages of 8 chunks: 8 x (1024 + 64)
// bytes a stage at G >= 128) in 200 KiB: at M = 1 and G = 128 that is K up to 84984, so 84864 (a
// multiple of 128) fits and 84992 does not. The registered rung refuses the benchmark problems that
// do not fit, saying so, and takes the others.
TEST(GemvInt4, RungFourTakesTheRowsThatFitNextToItsRing) {
  EXPECT_TRUE(gemv_int4_04_fits(1, 84864, 128));
  EXPECT_FALSE(gemv_int4_04_fits(1, 84992, 128));
  EXPECT_TRUE(gemv_int4_04_fits(1, 14336, 128));
  EXPECT_TRUE(gemv_int4_04_fits(16, 4096, 128));
  EXPECT_FALSE(gemv_int4_04_fits(16, 14336, 128));
  EXPECT_FALSE(gemv_int4_04_fits(0, 4096, 128));
  EXPECT_FALSE(gemv_int4_04_fits(1, 4096, 96));
  const Registry& r = stage3_test_registry();
  const KernelEntry& rung = r.kernel("stage3/gemv_int4/04_x_resident");
  int refused = 0;
  for (const Problem& p : r.op(kGemvInt4Op).bench_problems) {
    const std::string why = rung.supports(p);
    const bool fits = p.dims[0] <= kInt4GemvMaxRows &&
                      gemv_int4_04_fits(static_cast<int>(p.dims[0]), static_cast<int>(p.dims[2]),
                                        gemv_int4_group_size(p));
    EXPECT_EQ(why.empty(), fits) << p.label() << ": " << why;
    if (p.dims[0] <= kInt4GemvMaxRows && !fits) {
      EXPECT_NE(why.find("does not fit next to the ring"), std::string::npos) << why;
      ++refused;
    }
  }
  EXPECT_EQ(refused, 1) << "16 x 4096 x 14336 is the one decode-step benchmark problem whose x does not fit";
}

// Rung 05 keeps 16 bytes of sums a row and block of 32 more (and 576 bytes of row maxima and
// exponents): at M = 1 and G = 128, K + 8 bf16 and K / 2 bytes of sums next to the 34816-byte ring
// in 200 KiB is K up to 67756, so 67712 fits and 67840 does not (rung 04 takes it); 16 rows of
// 4096 still fit.
TEST(GemvInt4, RungFiveKeepsTheBlockSumsOfXToo) {
  EXPECT_TRUE(gemv_int4_05_fits(1, 67712, 128));
  EXPECT_FALSE(gemv_int4_05_fits(1, 67840, 128));
  EXPECT_TRUE(gemv_int4_04_fits(1, 67840, 128));
  EXPECT_TRUE(gemv_int4_05_fits(16, 4096, 128));
  EXPECT_FALSE(gemv_int4_05_fits(16, 14336, 128));
  EXPECT_FALSE(gemv_int4_05_fits(1, 4096, 48));
  const Registry& r = stage3_test_registry();
  const KernelEntry& rung = r.kernel("stage3/gemv_int4/05_x_f16");
  EXPECT_EQ(rung.min_compute_capability, 90);
  for (const Problem& p : r.op(kGemvInt4Op).bench_problems) {
    const bool fits = p.dims[0] <= kInt4GemvMaxRows &&
                      gemv_int4_05_fits(static_cast<int>(p.dims[0]), static_cast<int>(p.dims[2]),
                                        gemv_int4_group_size(p));
    EXPECT_EQ(rung.supports(p).empty(), fits) << p.label();
  }
}

TEST(GemvInt4, QuantizeReferenceMarksTheGroupsTheHostQuantizerRefuses) {
  // Four groups of 32: a NaN, an Inf, a range past a half scale, and an ordinary one.
  std::vector<float> w(128, 0.25f);
  w[3] = std::nanf("");
  w[32 + 7] = -INFINITY;
  w[64 + 1] = 1e6f;
  w[64 + 2] = -1e6f;
  const Int4GroupHost q = quantize_int4_groups_reference(w.data(), 1, 128, 32);
  for (int u = 0; u < 3; ++u) {
    EXPECT_EQ(q.scales[static_cast<std::size_t>(u)], kInt4InvalidScaleBits) << "group " << u;
    EXPECT_EQ(q.zeros[static_cast<std::size_t>(u)], 0) << "group " << u;
    for (int b = 0; b < 16; ++b) EXPECT_EQ(q.qweight[static_cast<std::size_t>(16 * u + b)], 0) << "group " << u;
  }
  EXPECT_NE(q.scales[3], kInt4InvalidScaleBits);
  const std::vector<double> back = dequantize_int4_groups(q.view());
  EXPECT_TRUE(std::isnan(back[0]) && std::isnan(back[40]) && std::isnan(back[70])) << "marked groups dequantize to NaN";
  EXPECT_NEAR(back[100], 0.25, 0.25 / 15 / 2);  // within half a step
  EXPECT_THROW((void)quantize_int4_groups_on_host(w.data(), 1, 128, 32), Error);
}

TEST(GemvInt4, QuantizeEntryRefusesBadArgumentsBeforeAnyCudaCall) {
  alignas(16) static std::uint8_t storage[64];
  QuantizeInt4Args a;
  a.rows = 2;
  a.k = 256;
  a.group_size = 128;
  a.x = reinterpret_cast<const __nv_bfloat16*>(storage);
  a.qweight = storage;
  a.scales = reinterpret_cast<std::uint16_t*>(storage);
  a.zeros = storage;
  EXPECT_NO_THROW(check_quantize_int4_args(a));
  QuantizeInt4Args bad = a;
  bad.k = 384;
  bad.group_size = 256;
  try {
    quantize_int4_groups(bad, nullptr);
    ADD_FAILURE() << "G = 256 with K = 384 was quantized";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not divide K = 384"), std::string::npos) << e.what();
  }
  bad = a;
  bad.group_size = 48;
  EXPECT_THROW(quantize_int4_groups(bad, nullptr), Error);
  bad = a;
  bad.rows = 0;
  EXPECT_THROW(quantize_int4_groups(bad, nullptr), Error);
  bad = a;
  bad.zeros = nullptr;
  EXPECT_THROW(quantize_int4_groups(bad, nullptr), Error);
  bad = a;
  bad.x = reinterpret_cast<const __nv_bfloat16*>(storage + 8);
  EXPECT_THROW(quantize_int4_groups(bad, nullptr), Error);
  bad = a;
  bad.qweight = storage + 2;
  EXPECT_THROW(quantize_int4_groups(bad, nullptr), Error);
  // 4-byte aligned is enough from G = 64; at G = 32 a lane stores its group's 16 bytes at once.
  bad = a;
  bad.qweight = storage + 4;
  bad.group_size = 64;
  EXPECT_NO_THROW(check_quantize_int4_args(bad));
  bad.group_size = 32;
  try {
    quantize_int4_groups(bad, nullptr);
    ADD_FAILURE() << "G = 32 with qweight 4 bytes past a 16-byte boundary was quantized";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("at group size 32 qweight must be 16-byte aligned"), std::string::npos)
        << e.what();
  }
}

TEST(GemvInt4, QuantizeRungsRefuseExactlyTheProblemsTheOpDoesNotDefine) {
  const Registry& r = stage3_test_registry();
  for (const char* id : {"stage3/quantize_int4/01_lanes_per_group", "stage3/quantize_int4/02_reciprocal",
                         "stage3/quantize_int4/03_eight_chunks", "stage3/quantize_int4/04_corrected_quotient",
                         "stage3/quantize_int4/05_next_group_in_flight", "stage3/quantize_int4/06_cta_per_long_group"}) {
    const KernelEntry& rung = r.kernel(id);
    int refused = 0;
    for (const Problem& p : r.op(kQuantizeInt4Op).conformance_problems) {
      const std::string error = quantize_int4_shape_error(p);
      EXPECT_EQ(rung.supports(p), error) << id << " " << p.label();
      refused += !error.empty();
    }
    EXPECT_EQ(refused, 1) << id;
    EXPECT_EQ(rung.refuses, quantize_int4_refusals()) << id;
  }
  for (const Problem& p : r.op(kQuantizeInt4Op).bench_problems) EXPECT_EQ(quantize_int4_shape_error(p), "") << p.label();
}

// Quantize rung 04's arithmetic. The corrected quotient q0 + (w - q0 s) r (r = 1 / s rounded) is
// w / s as IEEE division rounds it: checked here for every positive finite half scale s and every
// finite bf16 w whose quotient is at most 64 in magnitude (a valid group's are under 23), bit for
// bit down to |w / s| = 2^-60 and after rintf everywhere (below 2^-60 the remainder underflows and
// both quotients are far under 1/2). About 10^9 pairs, a few seconds.
TEST(GemvInt4, CorrectedQuotientIsTheDivisionForEveryScaleAndWeight) {
  long long pairs = 0, rounded_apart = 0, bits_apart = 0;
  for (std::uint16_t h = 1; h < 0x7C00; ++h) {
    __half_raw raw;
    raw.x = h;
    const float scale = __half2float(__half(raw));
    const float reciprocal = 1.f / scale;
    for (std::uint32_t b = 0; b < 0x10000; ++b) {
      const std::uint32_t bits = b << 16;
      float w;
      std::memcpy(&w, &bits, sizeof w);
      const float quotient = w / scale;
      if (!std::isfinite(w) || !(std::fabs(quotient) <= 64.f)) continue;
      const float corrected = int4_corrected_quotient(w, scale, reciprocal);
      ++pairs;
      if (std::rint(corrected) != std::rint(quotient) && rounded_apart++ < 5)
        ADD_FAILURE() << "scale " << scale << ", w " << w << ": rint of " << corrected << " against " << quotient;
      if (std::fabs(quotient) >= 0x1p-60f && corrected != quotient && bits_apart++ < 5)
        ADD_FAILURE() << "scale " << scale << ", w " << w << ": " << corrected << " against " << quotient;
    }
  }
  EXPECT_EQ(rounded_apart, 0);
  EXPECT_EQ(bits_apart, 0);
  EXPECT_GT(pairs, 1'000'000'000LL);  // the loops ran over what they claim
}

// int4_pack_corrected (rung 04's packing: the corrected quotient, the bias of 1.5 x 2^23, the
// clamp through the zero point's bounds, the folded word) against int4_quantize_value on groups
// of random bf16 weights, on groups whose quotients are exact ties (a grid of their scale: rint
// rounds half to even, which adding the zero point before rounding would break), and at every
// zero point.
TEST(GemvInt4, CorrectedPackingWritesTheReferenceNibbles) {
  std::mt19937_64 rng(41);
  std::uniform_real_distribution<float> uniform(-1.f, 1.f);
  std::uniform_int_distribution<int> half_steps(-16, 14);
  const auto bf16 = [](float v) { return static_cast<float>(__float2bfloat16(v)); };
  int words = 0, wrong = 0;
  for (int group = 0; group < 20000; ++group) {
    float w[32];
    const bool grid = group % 2 == 1;
    const float unit = static_cast<float>(1 + group % 7) / 8.f;
    for (int i = 0; i < 32; ++i) {
      w[i] = grid ? bf16(static_cast<float>(half_steps(rng)) * unit / 2.f) : bf16(uniform(rng) * (1 + group % 5));
    }
    if (grid) {
      w[0] = bf16(-8.f * unit);
      w[1] = bf16(7.f * unit);
    }
    float lo = 0.f, hi = 0.f;
    for (const float v : w) {
      lo = std::fmin(lo, v);
      hi = std::fmax(hi, v);
    }
    std::uint16_t scale_bits = 0;
    float scale = 0.f;
    int zero = 0;
    ASSERT_TRUE(int4_group_scale(lo, hi, scale_bits, scale, zero));
    ASSERT_GT(scale, 0.f);
    const float reciprocal = 1.f / scale;
    // The group's own zero point, and every other one (the packing must not depend on its parity).
    for (const int z : {zero, group % 16}) {
      for (int c = 0; c < 4; ++c) {
        float chunk[8];
        std::uint32_t expected = 0;
        for (int e = 0; e < 8; ++e) {
          chunk[e] = w[8 * c + e];
          expected |= static_cast<std::uint32_t>(int4_quantize_value(chunk[e], scale, z)) << (4 * e);
        }
        const std::uint32_t got = int4_pack_corrected(chunk, scale, reciprocal, z);
        ++words;
        if (got != expected && wrong++ < 5)
          ADD_FAILURE() << "group " << group << " chunk " << c << " zero " << z << ": " << std::hex << got
                        << " against " << expected;
      }
    }
  }
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(words, 20000 * 2 * 4);
}

TEST(GemvInt4, CheckpointFormatsConvertToTheStoredForm) {
  const int n = 24, k = 256;
  for (const Int4CheckpointFormat format :
       {Int4CheckpointFormat::gptq_v1, Int4CheckpointFormat::gptq_v2, Int4CheckpointFormat::awq})
    for (const int group_size : {32, 128, 256}) {
      Int4GroupHost w = random_weight(n, k, group_size, 3);
      if (format == Int4CheckpointFormat::gptq_v1)
        for (std::uint8_t& z : w.zeros) z = static_cast<std::uint8_t>(1 + z % 15);  // v1 cannot hold 0
      const PackedCheckpoint packed = pack_checkpoint(w, format);
      const Int4GroupHost back =
          int4_groups_from_checkpoint(format, packed.tensors(k, n, group_size), "model.layers.0.mlp.down_proj");
      EXPECT_EQ(back.qweight, w.qweight) << int4_checkpoint_format_name(format) << " G " << group_size;
      EXPECT_EQ(back.scales, w.scales) << int4_checkpoint_format_name(format) << " G " << group_size;
      EXPECT_EQ(back.zeros, w.zeros) << int4_checkpoint_format_name(format) << " G " << group_size;
    }
}

TEST(GemvInt4, CheckpointNibbleOrdersByHand) {
  // K = 32, N = 8, one group. GPTQ: every qweight word 0x76543210 means q(n, k) = k % 8. AWQ: every
  // word 0x75316420 means q(n, k) = n (nibble i holds column (0, 2, 4, 6, 1, 3, 5, 7)[i]).
  std::vector<std::int32_t> gptq_words(4 * 8, 0x76543210), awq_words(32, 0x75316420);
  std::vector<std::int32_t> zeros_v1(1, 0x77777777), zeros_awq(1, 0x75316420);
  std::vector<std::uint16_t> scales(8, half_bits(1.f));
  Int4CheckpointTensors t;
  t.k = 32;
  t.n = 8;
  t.group_size = 32;
  t.scales = scales.data();
  t.qweight = gptq_words.data();
  t.qzeros = zeros_v1.data();
  const Int4GroupHost gptq = int4_groups_from_checkpoint(Int4CheckpointFormat::gptq_v1, t, "q_proj");
  t.qweight = awq_words.data();
  t.qzeros = zeros_awq.data();
  const Int4GroupHost awq = int4_groups_from_checkpoint(Int4CheckpointFormat::awq, t, "q_proj");
  for (int column = 0; column < 8; ++column) {
    EXPECT_EQ(gptq.zeros[static_cast<std::size_t>(column)], 8) << "v1 stores 7 for a zero point of 8";
    EXPECT_EQ(awq.zeros[static_cast<std::size_t>(column)], column);
    for (int kk = 0; kk < 32; ++kk) {
      EXPECT_EQ(stored_q(gptq, column, kk), kk % 8) << "column " << column << ", k " << kk;
      EXPECT_EQ(stored_q(awq, column, kk), column) << "column " << column << ", k " << kk;
    }
  }
}

TEST(GemvInt4, CheckpointConversionRefusesWhatTheFormCannotHold) {
  Int4GroupHost w = random_weight(16, 256, 128, 4);
  for (std::uint8_t& z : w.zeros) z = 8;
  const PackedCheckpoint packed = pack_checkpoint(w, Int4CheckpointFormat::gptq_v2);
  const auto refused = [&](Int4CheckpointFormat format, Int4CheckpointTensors t, const std::string& expected) {
    try {
      (void)int4_groups_from_checkpoint(format, t, "model.layers.3.self_attn.o_proj");
      ADD_FAILURE() << "converted; expected: " << expected;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("model.layers.3.self_attn.o_proj"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  };
  // Act-order: g_idx that is not k / G.
  std::vector<std::int32_t> g_idx(256);
  for (int kk = 0; kk < 256; ++kk) g_idx[static_cast<std::size_t>(kk)] = kk / 128;
  Int4CheckpointTensors t = packed.tensors(256, 16, 128);
  t.g_idx = g_idx.data();
  EXPECT_NO_THROW((void)int4_groups_from_checkpoint(Int4CheckpointFormat::gptq_v2, t, "o_proj"));
  std::swap(g_idx[3], g_idx[200]);
  refused(Int4CheckpointFormat::gptq_v2, t, "act-order");
  // GPTQ v1's stored 15: a zero point of 16.
  std::vector<std::int32_t> qzeros = packed.qzeros;
  qzeros[0] = static_cast<std::int32_t>(0xF);
  t = packed.tensors(256, 16, 128);
  t.qzeros = qzeros.data();
  refused(Int4CheckpointFormat::gptq_v1, t, "is 16");
  // Shapes.
  t = packed.tensors(256, 12, 128);
  refused(Int4CheckpointFormat::awq, t, "multiple of 8");
  t = packed.tensors(192, 16, 128);
  refused(Int4CheckpointFormat::gptq_v2, t, "divide K = 192");
}

// The edge cases of src/gemv_int4_edges.hpp. The seeds of one run's operands: build_op seeds
// operand i of run r with 16 r + i (x is 0, w_qweight 1, w_scales 2, w_zeros 3, w_quants 4).
constexpr std::uint64_t kRunSeeds[] = {1, 17, 2026};
std::uint64_t operand_seed(std::uint64_t run, std::uint64_t operand) { return 16 * run + operand; }

bool half_is_nan(std::uint16_t bits) { return (bits & 0x7c00) == 0x7c00 && (bits & 0x3ff) != 0; }
bool half_is_infinite(std::uint16_t bits) { return (bits & 0x7fff) == 0x7c00; }

// Every conformance problem holds the edge cases: 1 + N / 256 groups of scale NaN where N >= 16,
// each in a row of its own (none where N < 16), and one NaN in x where M >= 2; no Inf anywhere;
// the zero and subnormal groups of the plain draw still there. The prepared operands (drawn again
// from the stored operands' seeds) carry the same scales, the NaN entries in every chunk of their
// group. The bench problems hold no NaN.
TEST(GemvInt4, ConformanceProblemsHoldNanScalesAndANanInXAndBenchProblemsNone) {
  const OpSpec op = make_gemv_int4_op();
  std::set<std::string> seen;
  for (const Problem& problem : op.conformance_problems) {
    ASSERT_TRUE(weight_only_gemv_has_edge_cases(problem)) << problem.label();
    const std::int64_t m = problem.dims[0], n = problem.dims[1], k = problem.dims[2];
    const int group_size = gemv_int4_group_size(problem);
    const std::int64_t groups = k / group_size;
    for (const std::uint64_t run : kRunSeeds) {
      const std::string where = problem.label() + ", run " + std::to_string(run);
      const std::vector<std::uint16_t> scales = gemv_int4_draw_scales(problem, operand_seed(run, 2));
      ASSERT_EQ(scales.size(), static_cast<std::size_t>(n * groups)) << where;
      EXPECT_EQ(gemv_int4_draw_scales(problem, operand_seed(run, 2)), scales) << where << ": not deterministic";
      std::set<std::int64_t> nan_rows;
      std::size_t nan_groups = 0;
      for (std::size_t e = 0; e < scales.size(); ++e) {
        ASSERT_FALSE(half_is_infinite(scales[e])) << where << ", group " << e;
        if (half_is_nan(scales[e])) {
          ++nan_groups;
          nan_rows.insert(static_cast<std::int64_t>(e) / groups);
          seen.insert("nan scale");
        } else if (scales[e] == 0) {
          seen.insert("zero scale");
        } else if ((scales[e] & 0x7c00) == 0) {
          seen.insert("subnormal scale");
        }
      }
      const std::size_t expected_rows = n >= 16 ? static_cast<std::size_t>(1 + n / 256) : 0u;
      EXPECT_EQ(nan_rows.size(), expected_rows) << where;
      EXPECT_EQ(nan_groups, expected_rows) << where << ": one NaN group a row";
      EXPECT_LE(2 * nan_rows.size(), static_cast<std::size_t>(n)) << where << ": NaN in most columns of y";

      // Each operand of the prepared weight draws the stored one again: the same scales, and the
      // prepared entries hold them (a group of G > 128 in each of its chunks).
      const Int4GroupHost w = gemv_int4_draw_weight(problem, operand_seed(run, 4));
      ASSERT_EQ(w.scales, scales) << where;
      EXPECT_EQ(gemv_int4_draw_weight(problem, operand_seed(run, 5)).scales, scales) << where;
      const Int4Prepared prepared = prepare_int4_groups(w.view());
      std::size_t prepared_nan = 0;
      for (const std::uint32_t entry : prepared.scales) prepared_nan += half_is_nan(static_cast<std::uint16_t>(entry));
      const std::size_t chunks_per_group = static_cast<std::size_t>(group_size > 128 ? group_size / 128 : 1);
      EXPECT_EQ(prepared_nan, nan_groups * chunks_per_group) << where;
      for (const std::int64_t row : nan_rows)
        for (std::int64_t u = 0; u < groups; ++u) {
          const std::uint16_t stored = scales[static_cast<std::size_t>(row * groups + u)];
          for (std::int64_t c = 0; c < static_cast<std::int64_t>(chunks_per_group); ++c) {
            const PreparedEntry got = read_prepared(prepared, static_cast<int>(n), static_cast<int>(k), group_size,
                                                    static_cast<int>(row), static_cast<int>(u * group_size + 128 * c));
            EXPECT_EQ(got.scale, stored) << where << ": row " << row << ", group " << u;
          }
        }

      const std::int64_t nan_x = weight_only_gemv_nan_x_index(problem, operand_seed(run, 0));
      if (m >= 2) {
        EXPECT_GE(nan_x, 0) << where;
        EXPECT_LT(nan_x, m * k) << where;
        seen.insert("nan x");
      } else {
        EXPECT_EQ(nan_x, -1) << where;
      }
    }
  }
  EXPECT_EQ(seen, (std::set<std::string>{"nan scale", "zero scale", "subnormal scale", "nan x"}));

  // The bench problems: the plain draws only (one draw a weight shape and group size).
  std::set<std::tuple<std::int64_t, std::int64_t, int>> drawn;
  for (const Problem& problem : op.bench_problems) {
    EXPECT_FALSE(weight_only_gemv_has_edge_cases(problem)) << problem.label();
    EXPECT_EQ(weight_only_gemv_nan_x_index(problem, operand_seed(1, 0)), -1) << problem.label();
    if (!drawn.insert({problem.dims[1], problem.dims[2], gemv_int4_group_size(problem)}).second) continue;
    std::size_t non_finite = 0;
    for (const std::uint16_t bits : gemv_int4_draw_scales(problem, operand_seed(1, 2)))
      non_finite += (bits & 0x7c00) == 0x7c00;
    EXPECT_EQ(non_finite, 0u) << problem.label();
  }
  EXPECT_EQ(drawn.size(), 6u) << "three weights at G = 128, and 4096 x 4096 at G = 32, 64 and 4096";
}

// The inputs of the op's host reference as the harness hands them over (every operand decoded to
// double: the i8 operands signed, the scales' halves, NaN included), with x uniform in [-1, 1]
// and the NaN of the edge cases.
HostTensors reference_inputs(const Problem& problem, std::uint64_t run) {
  const std::int64_t m = problem.dims[0], k = problem.dims[2];
  const Int4GroupHost w = gemv_int4_draw_weight(problem, operand_seed(run, 1));
  HostTensors in;
  for (const std::uint8_t b : w.qweight) in["w_qweight"].push_back(static_cast<double>(static_cast<std::int8_t>(b)));
  for (const std::uint16_t bits : w.scales) in["w_scales"].push_back(static_cast<double>(half_value(bits)));
  for (const std::uint8_t z : w.zeros) in["w_zeros"].push_back(static_cast<double>(static_cast<std::int8_t>(z)));
  std::vector<double>& x = in["x"];
  std::mt19937_64 rng(run);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  x.resize(static_cast<std::size_t>(m * k));
  for (double& v : x) v = uniform(rng);
  const std::int64_t nan_x = weight_only_gemv_nan_x_index(problem, operand_seed(run, 0));
  if (nan_x >= 0) x[static_cast<std::size_t>(nan_x)] = std::nan("");
  return in;
}

// The reference is NaN exactly in the columns of the rows of w with a NaN scale and in the row of
// x's NaN (its NaN half survives the double-to-half step), finite everywhere else.
TEST(GemvInt4, ReferenceIsNanExactlyInTheNanColumnsAndTheNanRow) {
  const OpSpec op = make_gemv_int4_op();
  for (const auto& [dims, group_size] : std::vector<std::pair<Shape, double>>{
           {{7, 100, 1024}, 32.0}, {{3, 40, 512}, 256.0}, {{24, 100, 1152}, 64.0}, {{1, 17, 64}, 64.0}}) {
    const Problem problem = op.problem(dims, DType::bf16, {{"group_size", group_size}});
    const std::int64_t m = problem.dims[0], n = problem.dims[1], k = problem.dims[2];
    const std::int64_t groups = k / gemv_int4_group_size(problem);
    const HostTensors in = reference_inputs(problem, 3);
    std::set<std::int64_t> nan_columns;
    const std::vector<std::uint16_t> scales = gemv_int4_draw_scales(problem, operand_seed(3, 2));
    for (std::size_t e = 0; e < scales.size(); ++e)
      if (half_is_nan(scales[e])) nan_columns.insert(static_cast<std::int64_t>(e) / groups);
    ASSERT_EQ(nan_columns.size(), static_cast<std::size_t>(1 + n / 256)) << problem.label();
    const std::int64_t nan_x = weight_only_gemv_nan_x_index(problem, operand_seed(3, 0));
    ASSERT_EQ(nan_x >= 0, m >= 2) << problem.label();
    const std::vector<double> y = gemv_int4_host_reference(problem, in).at("y");
    ASSERT_EQ(y.size(), static_cast<std::size_t>(m * n));
    for (std::int64_t row = 0; row < m; ++row)
      for (std::int64_t column = 0; column < n; ++column) {
        const double v = y[static_cast<std::size_t>(row * n + column)];
        const bool nan_expected = (nan_x >= 0 && row == nan_x / k) || nan_columns.count(column) == 1;
        EXPECT_EQ(std::isnan(v), nan_expected) << problem.label() << ": y[" << row << "][" << column << "]";
        if (!nan_expected) {
          EXPECT_TRUE(std::isfinite(v)) << problem.label() << ": y[" << row << "][" << column << "]";
        }
      }
  }
}

// A model of what each negative control (tests/negative_controls/gemv_int4_controls.cpp) computes:
// the stored weight read with the control's one mistake, in double. Rung 01's flaws as
// gemv_int4_args.hpp says (nibbles of each pair exchanged; the next group's entry of its chunk, a
// padding entry (0, 0) past K; every zero point 8; s twice), rung 03's zero point of the row 8
// apart in its 16-row tile (0, the padding's, past N).
enum class ControlModel { none, swapped_nibbles, next_group_scales, zero_point_ignored, scale_applied_twice,
                          swapped_zero_points };

std::vector<double> control_weights(const Int4GroupHost& w, ControlModel flaw) {
  const int groups = w.k / w.group_size;
  const int groups_per_chunk = int4_groups_per_chunk(w.group_size);
  std::vector<double> out(static_cast<std::size_t>(w.n) * static_cast<std::size_t>(w.k));
  for (int row = 0; row < w.n; ++row)
    for (int kk = 0; kk < w.k; ++kk) {
      const int q = stored_q(w, row, flaw == ControlModel::swapped_nibbles ? kk ^ 1 : kk);
      int u = kk / w.group_size;
      if (flaw == ControlModel::next_group_scales) {
        const int chunk = kk / 128, u_in_chunk = (kk % 128) / w.group_size;
        u = chunk * groups_per_chunk + (u_in_chunk + 1) % groups_per_chunk;
      }
      double s = 0.0;
      int z = 0;
      if (u < groups) {
        const std::size_t e =
            static_cast<std::size_t>(row) * static_cast<std::size_t>(groups) + static_cast<std::size_t>(u);
        s = half_value(w.scales[e]);
        z = w.zeros[e];
      }
      if (flaw == ControlModel::zero_point_ignored) z = 8;
      if (flaw == ControlModel::scale_applied_twice) s *= s;
      if (flaw == ControlModel::swapped_zero_points) {
        const int partner = row % 16 < 8 ? row + 8 : row - 8;
        z = partner < w.n ? w.zeros[static_cast<std::size_t>(partner) * static_cast<std::size_t>(groups) +
                                    static_cast<std::size_t>(u)]
                          : 0;
      }
      out[static_cast<std::size_t>(row) * static_cast<std::size_t>(w.k) + static_cast<std::size_t>(kk)] =
          s * static_cast<double>(q - z);
    }
  return out;
}

// The edge cases must not hide a negative control: on the conformance problems each control runs
// (rung 01's: M <= 16, the next-group one G < 128; rung 03's: G >= 128), its model, rounded to bf16,
// fails the op's tolerance on at least one problem in every run — with outputs off where the
// reference is finite, not only in the NaN rows and columns — while the model without a flaw
// passes every problem.
TEST(GemvInt4, EachNegativeControlStillFailsAConformanceProblemOutsideTheNanOutputs) {
  const OpSpec op = make_gemv_int4_op();
  const auto runs = [](ControlModel flaw, const Problem& p) {
    const int g = gemv_int4_group_size(p);
    if (flaw == ControlModel::swapped_zero_points) return g >= 128;
    if (p.dims[0] > kInt4GemvMaxRows) return false;
    return flaw != ControlModel::next_group_scales || g < 128;
  };
  const auto check = [&](ControlModel flaw, const Problem& p, std::uint64_t run) {
    const std::int64_t m = p.dims[0], n = p.dims[1], k = p.dims[2];
    const HostTensors in = reference_inputs(p, run);
    const std::vector<double> ref = gemv_int4_host_reference(p, in).at("y");
    const std::vector<double> weights = control_weights(gemv_int4_draw_weight(p, operand_seed(run, 1)), flaw);
    std::vector<double> out(ref.size());
    gemm_reference(GemmShape{m, n, k}, 1.0, in.at("x").data(), weights.data(), BLayout::n_by_k, 0.0, nullptr,
                   out.data());
    for (double& v : out) v = round_to(DType::bf16, v);
    Accuracy accuracy;
    accuracy.output = DType::bf16;
    accuracy.terms = static_cast<double>(k);
    return compare(out.data(), ref.data(), out.size(), accuracy);
  };
  for (const std::uint64_t run : kRunSeeds) {
    for (const Problem& p : op.conformance_problems) {
      const CompareResult right = check(ControlModel::none, p, run);
      EXPECT_TRUE(right.passed) << p.label() << ", run " << run << ": " << right.summary();
    }
    for (const ControlModel flaw : {ControlModel::swapped_nibbles, ControlModel::next_group_scales,
                                    ControlModel::zero_point_ignored, ControlModel::scale_applied_twice,
                                    ControlModel::swapped_zero_points}) {
      int caught = 0;
      for (const Problem& p : op.conformance_problems) {
        if (!runs(flaw, p)) continue;
        const CompareResult wrong = check(flaw, p, run);
        caught += wrong.mismatches > wrong.nonfinite_mismatches;
      }
      EXPECT_GE(caught, 1) << "control " << static_cast<int>(flaw) << ", run " << run
                           << ": no conformance problem shows it outside the NaN outputs";
    }
  }
}

}  // namespace
}  // namespace kc::stage3
