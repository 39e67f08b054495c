// The attention_decode_paged op on the host: its reference on cases worked by hand (one block,
// the causal mask among new tokens, grouped heads, empty sequences, NaN in unread rows), a
// sequence spread over shuffled blocks against the same sequence contiguous through attention_fwd's
// reference, the lengths and the seeded block placement of its operands, the validation of block
// tables, the FLOP and byte counts, and that the tolerance rejects a page read from the wrong block.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "kc/common/compare.hpp"
#include "kc/stage3/attention.hpp"
#include "kc/stage3/attention_decode.hpp"
#include "stage3_test_registry.hpp"

namespace kc::stage3 {
namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();

const OpSpec& decode_op() { return stage3_test_registry().op(kAttentionDecodeOp); }

DecodeShape shape_of(std::int64_t b, std::int64_t hq, std::int64_t hkv, std::int64_t sq, std::int64_t d,
                     std::int64_t block_size) {
  DecodeShape s;
  s.batch = b;
  s.q_heads = hq;
  s.kv_heads = hkv;
  s.q_len = sq;
  s.head_dim = d;
  s.block_size = block_size;
  return s;
}

// A layout written by hand: `blocks[b]` lists sequence b's block ids slot by slot.
PagedKvLayout layout_of(const DecodeShape& s, std::int64_t num_blocks, std::vector<std::int32_t> lengths,
                        const std::vector<std::vector<std::int32_t>>& blocks, std::int64_t max_blocks) {
  PagedKvLayout layout;
  layout.batch = s.batch;
  layout.max_blocks = max_blocks;
  layout.block_size = s.block_size;
  layout.num_blocks = num_blocks;
  layout.seq_lens = std::move(lengths);
  layout.block_table.assign(static_cast<std::size_t>(s.batch * max_blocks), kNoBlock);
  for (std::size_t b = 0; b < blocks.size(); ++b)
    for (std::size_t slot = 0; slot < blocks[b].size(); ++slot)
      layout.block_table[b * static_cast<std::size_t>(max_blocks) + slot] = blocks[b][slot];
  return layout;
}

// A pool of NaN (what no kernel may read) with sequence b's contiguous [Hkv, L, D] rows `rows[b]`
// written where `layout` puts them.
std::vector<double> scatter(const DecodeShape& s, const PagedKvLayout& layout,
                            const std::vector<std::vector<double>>& rows) {
  std::vector<double> pool(static_cast<std::size_t>(layout.num_blocks * s.kv_heads * s.block_size * s.head_dim), kNaN);
  for (std::int64_t b = 0; b < s.batch; ++b) {
    const std::int64_t length = layout.seq_lens[static_cast<std::size_t>(b)];
    for (std::int64_t h = 0; h < s.kv_heads; ++h)
      for (std::int64_t j = 0; j < length; ++j)
        for (std::int64_t c = 0; c < s.head_dim; ++c) {
          const std::int64_t block = layout.block(b, j / s.block_size);
          pool[static_cast<std::size_t>(((block * s.kv_heads + h) * s.block_size + j % s.block_size) * s.head_dim + c)] =
              rows[static_cast<std::size_t>(b)][static_cast<std::size_t>((h * length + j) * s.head_dim + c)];
        }
  }
  return pool;
}

struct Result {
  std::vector<double> o, lse;
};

Result run_reference(const DecodeShape& s, double scale, const PagedKvLayout& layout, const std::vector<double>& q,
                     const std::vector<double>& k_pool, const std::vector<double>& v_pool) {
  Result r;
  r.o.assign(static_cast<std::size_t>(s.batch * s.q_heads * s.q_len * s.head_dim), -7.0);
  r.lse.assign(static_cast<std::size_t>(s.batch * s.q_heads * s.q_len), -7.0);
  attention_decode_reference(s, scale, layout, q.data(), k_pool.data(), v_pool.data(), r.o.data(), r.lse.data());
  return r;
}

std::vector<double> random_values(std::size_t count, double stddev, std::mt19937_64& rng) {
  std::normal_distribution<double> normal(0.0, stddev);
  std::vector<double> values(count);
  for (double& v : values) v = normal(rng);
  return values;
}

bool is_minus_infinity(double x) { return std::isinf(x) && x < 0; }

TEST(AttentionDecodeReference, OneBlockAveragesItsRowsAndNeverReadsTheRest) {
  // Three keys in block 1 of a pool of two; block 0 and rows 3-15 of block 1 are NaN. q = 0: the
  // scores are equal, O is the mean of the three values, LSE = log 3.
  const DecodeShape s = shape_of(1, 1, 1, 1, 2, 16);
  const PagedKvLayout layout = layout_of(s, 2, {3}, {{1}}, 1);
  const std::vector<double> k = scatter(s, layout, {{1, 2, 3, 4, 5, 6}});
  const std::vector<double> v = scatter(s, layout, {{1, 10, 2, 20, 6, 60}});
  const Result r = run_reference(s, 1.0, layout, {0.0, 0.0}, k, v);
  EXPECT_NEAR(r.o[0], 3.0, 1e-15);
  EXPECT_NEAR(r.o[1], 30.0, 1e-13);
  EXPECT_NEAR(r.lse[0], std::log(3.0), 1e-15);
}

TEST(AttentionDecodeReference, OneKeyGivesItsValueAndItsScore) {
  const DecodeShape s = shape_of(1, 1, 1, 1, 2, 16);
  const PagedKvLayout layout = layout_of(s, 1, {1}, {{0}}, 1);
  const Result r = run_reference(s, 0.5, layout, {1.0, 2.0}, scatter(s, layout, {{3.0, -1.0}}),
                                 scatter(s, layout, {{0.25, -0.75}}));
  EXPECT_DOUBLE_EQ(r.o[0], 0.25);
  EXPECT_DOUBLE_EQ(r.o[1], -0.75);
  EXPECT_DOUBLE_EQ(r.lse[0], 0.5);  // 0.5 * (3 - 2)
}

TEST(AttentionDecodeReference, NewTokensAreCausalAmongThemselves) {
  // Sq = 2 new tokens, the last two of L = 3 keys: token 0 sees keys 0-1, token 1 all three.
  const DecodeShape s = shape_of(1, 1, 1, 2, 1, 16);
  const PagedKvLayout layout = layout_of(s, 1, {3}, {{0}}, 1);
  const Result r =
      run_reference(s, 1.0, layout, {0.0, 0.0}, scatter(s, layout, {{5, 6, 7}}), scatter(s, layout, {{1, 2, 6}}));
  EXPECT_NEAR(r.o[0], 1.5, 1e-15);
  EXPECT_NEAR(r.o[1], 3.0, 1e-15);
  EXPECT_NEAR(r.lse[0], std::log(2.0), 1e-15);
  EXPECT_NEAR(r.lse[1], std::log(3.0), 1e-15);
  EXPECT_EQ(decode_visible_keys(3, 2, 0), 2);
  EXPECT_EQ(decode_visible_keys(3, 2, 1), 3);
}

TEST(AttentionDecodeReference, RowsThatSeeNoKeyAndEmptySequencesAreZeroWithMinusInfinityLse) {
  // Sequence 0: L = 1 < Sq = 3, tokens 0 and 1 see nothing, token 2 sees key 0. Sequence 1: L = 0,
  // an empty batch slot whose table row holds nothing valid.
  const DecodeShape s = shape_of(2, 1, 1, 3, 1, 16);
  const PagedKvLayout layout = layout_of(s, 1, {1, 0}, {{0}, {}}, 1);
  const Result r = run_reference(s, 1.0, layout, {1, 1, 1, 1, 1, 1}, scatter(s, layout, {{0.5}, {}}),
                                 scatter(s, layout, {{4.0}, {}}));
  for (int row : {0, 1, 3, 4, 5}) {
    EXPECT_EQ(r.o[static_cast<std::size_t>(row)], 0.0) << row;
    EXPECT_TRUE(is_minus_infinity(r.lse[static_cast<std::size_t>(row)])) << row << ": " << r.lse[static_cast<std::size_t>(row)];
  }
  EXPECT_DOUBLE_EQ(r.o[2], 4.0);
  EXPECT_DOUBLE_EQ(r.lse[2], 0.5);
  EXPECT_EQ(decode_visible_keys(1, 3, 0), 0);
  EXPECT_EQ(decode_visible_keys(0, 1, 0), 0);
}

TEST(AttentionDecodeReference, GroupedQueryHeadsShareTheirKvHead) {
  // Hq = 4 over Hkv = 2: heads 0-1 read kv head 0, heads 2-3 kv head 1. q = 0 averages the values.
  const DecodeShape s = shape_of(1, 4, 2, 1, 1, 16);
  const PagedKvLayout layout = layout_of(s, 3, {2}, {{2}}, 1);
  const Result r = run_reference(s, 1.0, layout, {0, 0, 0, 0}, scatter(s, layout, {{1, 1, 1, 1}}),
                                 scatter(s, layout, {{1.0, 3.0, 10.0, 30.0}}));
  EXPECT_NEAR(r.o[0], 2.0, 1e-15);
  EXPECT_NEAR(r.o[1], 2.0, 1e-15);
  EXPECT_NEAR(r.o[2], 20.0, 1e-14);
  EXPECT_NEAR(r.o[3], 20.0, 1e-14);
}

TEST(AttentionDecodeReference, ShuffledBlocksGiveWhatTheContiguousSequenceGives) {
  // Two sequences (40 and 17 keys, blocks of 16) over a pool of five blocks in no order, unread
  // rows NaN; each must equal attention_fwd's reference on its contiguous K and V with the
  // bottom-right causal mask.
  const DecodeShape s = shape_of(2, 4, 2, 2, 8, 16);
  const PagedKvLayout layout = layout_of(s, 5, {40, 17}, {{4, 0, 2}, {3, 1}}, 3);
  std::mt19937_64 rng(17);
  const std::vector<double> q = random_values(static_cast<std::size_t>(2 * 4 * 2 * 8), 1.5, rng);
  std::vector<std::vector<double>> k_rows, v_rows;
  for (std::int64_t length : {40, 17}) {
    k_rows.push_back(random_values(static_cast<std::size_t>(2 * length * 8), 1.5, rng));
    v_rows.push_back(random_values(static_cast<std::size_t>(2 * length * 8), 0.5, rng));
  }
  const Result paged = run_reference(s, 0.3, layout, q, scatter(s, layout, k_rows), scatter(s, layout, v_rows));
  for (std::size_t b = 0; b < 2; ++b) {
    AttentionShape one;
    one.batch = 1;
    one.q_heads = 4;
    one.kv_heads = 2;
    one.q_len = 2;
    one.kv_len = layout.seq_lens[b];
    one.head_dim = 8;
    std::vector<double> o(4 * 2 * 8), lse(4 * 2);
    attention_reference(one, 0.3, true, q.data() + b * o.size(), k_rows[b].data(), v_rows[b].data(), o.data(),
                        lse.data());
    for (std::size_t i = 0; i < o.size(); ++i) EXPECT_EQ(paged.o[b * o.size() + i], o[i]) << b << "," << i;
    for (std::size_t i = 0; i < lse.size(); ++i) EXPECT_EQ(paged.lse[b * lse.size() + i], lse[i]) << b << "," << i;
    for (std::size_t i = 0; i < o.size(); ++i) EXPECT_TRUE(std::isfinite(o[i]));
  }
}

TEST(AttentionDecodeLengths, FullAndRaggedAreFixedByTheProblem) {
  DecodeShape s = shape_of(8, 4, 1, 1, 64, 16);
  s.max_len = 100;
  EXPECT_EQ(decode_seq_lens(s), std::vector<std::int32_t>(8, 100));
  s.lengths = DecodeLengths::ragged;
  const std::vector<std::int32_t> ragged = decode_seq_lens(s);
  ASSERT_EQ(ragged.size(), 8u);
  EXPECT_EQ(std::vector<std::int32_t>(ragged.begin(), ragged.begin() + 6),
            (std::vector<std::int32_t>{100, 1, 15, 17, 0, 16}));
  for (std::size_t b = 6; b < 8; ++b) EXPECT_TRUE(ragged[b] >= 1 && ragged[b] <= 100) << ragged[b];
  EXPECT_EQ(decode_seq_lens(s), ragged);  // no seed: the same every time
  s.max_len = 10;                          // clamped to Sk
  const std::vector<std::int32_t> short_ones = decode_seq_lens(s);
  EXPECT_EQ(std::vector<std::int32_t>(short_ones.begin(), short_ones.begin() + 6),
            (std::vector<std::int32_t>{10, 1, 10, 10, 0, 10}));
}

TEST(AttentionDecodeLayout, EveryUsedSlotHoldsItsOwnBlockInAShuffledOrder) {
  const OpSpec& op = decode_op();
  const std::vector<Problem> problems = {
      op.problem({7, 32, 8, 4, 257, 128}, DType::bf16, {{"lengths", 1.0}}),
      op.problem({9, 8, 1, 1, 1000, 64}, DType::f16, {{"lengths", 1.0}, {"block_size", 64.0}}),
      op.problem({3, 8, 2, 1, 33, 64}, DType::bf16, {{"block_size", 32.0}}),
      op.problem({1, 1, 1, 1, 40, 64}, DType::bf16),  // one sequence of three blocks
      op.problem({64, 32, 8, 1, 8192, 128}, DType::bf16)};
  for (const Problem& p : problems)
    for (std::uint64_t seed : {1u, 2u, 77u}) {
      const PagedKvLayout layout = decode_layout(p, seed);
      const DecodeShape s = decode_shape(p);
      EXPECT_EQ(layout.seq_lens, decode_seq_lens(s));
      EXPECT_EQ(layout.num_blocks, decode_num_blocks(p));
      EXPECT_NO_THROW(validate_paged_kv(table_view(layout))) << p.label();
      std::set<std::int32_t> seen;
      std::int64_t next_to_predecessor = 0;
      for (std::int64_t b = 0; b < s.batch; ++b) {
        const std::int64_t used = blocks_for(layout.seq_lens[static_cast<std::size_t>(b)], s.block_size);
        for (std::int64_t slot = 0; slot < s.max_blocks(); ++slot) {
          const std::int32_t id = layout.block(b, slot);
          if (slot >= used) {
            EXPECT_EQ(id, kNoBlock) << p.label() << " sequence " << b << " slot " << slot;
            continue;
          }
          EXPECT_TRUE(id >= 0 && id < layout.num_blocks) << id;
          EXPECT_TRUE(seen.insert(id).second) << p.label() << ": block " << id << " used twice";
          if (slot > 0 && id == layout.block(b, slot - 1) + 1) ++next_to_predecessor;
        }
      }
      EXPECT_EQ(static_cast<std::int64_t>(seen.size()), layout.num_blocks) << p.label();
      EXPECT_EQ(next_to_predecessor, 0) << p.label() << " seed " << seed;
      EXPECT_EQ(decode_layout(p, seed).block_table, layout.block_table);  // seeded: reproducible
    }
  const Problem big = problems.back();
  EXPECT_NE(decode_layout(big, 1).block_table, decode_layout(big, 2).block_table);
  EXPECT_EQ(decode_num_blocks(big), 64 * 512);
}

TEST(AttentionDecodeValidation, NamesTheSequenceTheSlotAndTheValue) {
  const DecodeShape s = shape_of(2, 1, 1, 1, 8, 16);
  // Sequence 1 has 40 keys: slots 0-2 are used.
  PagedKvLayout layout = layout_of(s, 7, {16, 40}, {{0}, {3, 5, 6}}, 4);
  EXPECT_NO_THROW(validate_paged_kv(table_view(layout)));
  layout.block_table[4 + 3] = 1234;  // an unused slot: never read, never checked
  EXPECT_NO_THROW(validate_paged_kv(table_view(layout)));

  const auto message_of = [](const PagedKvLayout& bad) {
    try {
      validate_paged_kv(table_view(bad));
    } catch (const Error& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  for (std::int32_t bad_id : {7, -1, 1 << 30}) {
    PagedKvLayout bad = layout;
    bad.block_table[4 + 2] = bad_id;
    const std::string message = message_of(bad);
    EXPECT_NE(message.find("sequence 1, block-table slot 2 holds block id " + std::to_string(bad_id)),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("[0, 7)"), std::string::npos) << message;
  }
  PagedKvLayout negative = layout;
  negative.seq_lens[0] = -3;
  EXPECT_NE(message_of(negative).find("sequence 0 has length -3"), std::string::npos) << message_of(negative);
  PagedKvLayout too_long = layout;
  too_long.seq_lens[1] = 65;  // 4 slots of 16 hold 64 keys
  EXPECT_NE(message_of(too_long).find("sequence 1 has length 65, more keys than its block-table row holds (4 slots "
                                      "of 16 = 64 keys)"),
            std::string::npos)
      << message_of(too_long);
  // The host reference validates before it reads.
  PagedKvLayout bad = layout;
  bad.block_table[0] = 9;
  const std::vector<double> pool(static_cast<std::size_t>(7 * 16 * 8), 0.0);
  std::vector<double> q(2 * 8, 0.0), o(2 * 8), lse(2);
  EXPECT_THROW(attention_decode_reference(s, 1.0, bad, q.data(), pool.data(), pool.data(), o.data(), lse.data()),
               Error);
}

TEST(AttentionDecodeOp, IsRegisteredWithItsParametersAndShapes) {
  const OpSpec& op = decode_op();
  EXPECT_EQ(op.dim_names, (std::vector<std::string>{"B", "Hq", "Hkv", "Sq", "Sk", "D"}));
  EXPECT_EQ(op.dtypes, (std::vector<DType>{DType::bf16, DType::f16}));
  EXPECT_EQ(op.bound, Bound::memory);
  EXPECT_FALSE(op.baseline_computes_op);  // the copy of its bytes
  const Problem p = op.problem({64, 32, 8, 1, 8192, 128}, DType::bf16, {{"block_size", 32.0}, {"lengths", 1.0}});
  EXPECT_EQ(p.label(), "64x32x8x1x8192x128 bf16 block_size=32 lengths=1");
  EXPECT_DOUBLE_EQ(attention_scale(p), 1.0 / std::sqrt(128.0));
  EXPECT_EQ(decode_shape(p).max_blocks(), 256);
  EXPECT_EQ(op.bench_problems.size(), 14u);
  for (const auto* problems : {&op.bench_problems, &op.conformance_problems})
    for (const Problem& q : *problems) EXPECT_EQ(op.supports(q), "") << q.label();
  bool has_empty = false, has_f16 = false;
  for (const Problem& q : op.conformance_problems) {
    const std::vector<std::int32_t> lengths = decode_seq_lens(decode_shape(q));
    has_empty |= std::find(lengths.begin(), lengths.end(), 0) != lengths.end();
    has_f16 |= q.dtype == DType::f16;
  }
  EXPECT_TRUE(has_empty && has_f16);
}

TEST(AttentionDecodeOp, RefusesWhatItDoesNotDefine) {
  const OpSpec& op = decode_op();
  const auto reason = [&](std::vector<std::int64_t> dims, ParamValues params = {}) {
    return op.supports(op.problem(std::move(dims), DType::bf16, params));
  };
  EXPECT_NE(reason({1, 6, 4, 1, 64, 64}).find("not a multiple of Hkv"), std::string::npos);
  EXPECT_NE(reason({1, 8, 2, 9, 64, 64}).find("at most 8"), std::string::npos);
  EXPECT_NE(reason({1, 8, 2, 1, 64, 64}, {{"block_size", 24.0}}).find("16, 32 or 64"), std::string::npos);
  EXPECT_NE(reason({1, 8, 2, 1, 64, 64}, {{"block_size", 0.0}}).find("16, 32 or 64"), std::string::npos);
  EXPECT_NE(reason({1, 8, 2, 1, 64, 64}, {{"lengths", 2.0}}).find("lengths = 2"), std::string::npos);
  EXPECT_NE(reason({65536, 8, 2, 1, 1 << 20, 64}).find("2^31 - 1"), std::string::npos);
  EXPECT_EQ(reason({3, 8, 2, 8, 64, 64}, {{"block_size", 64.0}}), "");
}

TEST(AttentionDecodeOp, CountsTheKvRowsTheSequencesHoldAndFourDFlopsPerVisiblePair) {
  const OpSpec& op = decode_op();
  // Two sequences of 40 keys, Hkv = 2, D = 64, bf16, Sq = 2 (visible 39 + 40 per head).
  const Problem p = op.problem({2, 4, 2, 2, 40, 64}, DType::bf16);
  const Work work = op.work(p);
  EXPECT_DOUBLE_EQ(work.flops, 4.0 * 64 * 4 * 2 * (39 + 40));
  const double kv = 2 * 40 * 2 * 64 * 2 * 2.0;            // keys x Hkv x D x (K, V) x 2 bytes
  const double q_and_o = 2 * (2 * 4 * 2 * 64) * 2.0;       // B x Hq x Sq x D, in and out
  const double lse = 2 * 4 * 2 * 4.0;
  const double bookkeeping = 2 * 4.0 + 2 * 3 * 4.0;         // seq_lens, three used slots each
  EXPECT_DOUBLE_EQ(work.bytes, kv + q_and_o + lse + bookkeeping);
  // Ragged: the sum of the lengths, not B x Sk.
  const Problem ragged = op.problem({6, 1, 1, 1, 40, 64}, DType::f16, {{"lengths", 1.0}});
  const double keys = 40 + 1 + 15 + 17 + 0 + 16;
  const double slots = 3 + 1 + 1 + 2 + 0 + 1;
  EXPECT_DOUBLE_EQ(op.work(ragged).bytes, keys * 64 * 2 * 2 + 2 * 6 * 64 * 2 + 6 * 4 + 6 * 4 + slots * 4);
  EXPECT_DOUBLE_EQ(op.work(ragged).flops, 4.0 * 64 * keys);
}

TEST(AttentionDecodeOp, ToleranceIsAttentionFwdsForTheLongestSequence) {
  const OpSpec& op = decode_op();
  const Problem p = op.problem({8, 32, 8, 1, 4096, 128}, DType::bf16);
  Tensor o;
  o.name = "O";
  o.dtype = DType::bf16;
  Tensor lse;
  lse.name = "LSE";
  lse.dtype = DType::f32;
  EXPECT_EQ(op.accuracy(p, o).terms, 4096.0);
  EXPECT_DOUBLE_EQ(op.accuracy(p, o).intermediate_error, std::ldexp(1.0, -8));
  EXPECT_EQ(op.accuracy(p, lse).output, DType::f32);
  EXPECT_EQ(op.accuracy(p, lse).intermediate_error, 0.0);
}

// What the check will hold kernels to: at a shape like the conformance ones, a kernel that reads
// one page from the wrong block, or that ignores the table and reads each sequence's blocks in
// pool order, computes an O far outside the tolerance.
TEST(AttentionDecodeOp, APageFromTheWrongBlockFailsTheTolerance) {
  const OpSpec& op = decode_op();
  const Problem p = op.problem({4, 32, 8, 1, 1000, 128}, DType::bf16);
  const DecodeShape s = decode_shape(p);
  const PagedKvLayout layout = decode_layout(p, 5);
  std::mt19937_64 rng(3);
  const std::size_t pool_size = static_cast<std::size_t>(layout.num_blocks * s.kv_heads * s.block_size * s.head_dim);
  const std::vector<double> q = random_values(static_cast<std::size_t>(4 * 32 * 128), 1.5, rng);
  const std::vector<double> k = random_values(pool_size, 1.5, rng);
  std::vector<double> v(pool_size);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  for (double& x : v) x = uniform(rng);
  const Result right = run_reference(s, attention_scale(p), layout, q, k, v);
  Tensor o;
  o.name = "O";
  o.dtype = DType::bf16;
  const Accuracy accuracy = op.accuracy(p, o);
  EXPECT_TRUE(compare(right.o.data(), right.o.data(), right.o.size(), accuracy).passed);

  PagedKvLayout wrong_page = layout;  // sequence 2's slot 30 reads sequence 0's slot 7
  wrong_page.block_table[static_cast<std::size_t>(2 * layout.max_blocks + 30)] = layout.block(0, 7);
  PagedKvLayout pool_order = layout;  // each sequence's blocks taken as if laid out in order
  for (std::int64_t b = 0; b < s.batch; ++b)
    for (std::int64_t slot = 0; slot < layout.max_blocks; ++slot)
      pool_order.block_table[static_cast<std::size_t>(b * layout.max_blocks + slot)] =
          static_cast<std::int32_t>(b * layout.max_blocks + slot);
  for (const PagedKvLayout* wrong : {&wrong_page, &pool_order}) {
    const Result r = run_reference(s, attention_scale(p), *wrong, q, k, v);
    const CompareResult outcome = compare(r.o.data(), right.o.data(), r.o.size(), accuracy);
    EXPECT_FALSE(outcome.passed) << outcome.summary();
  }
}

}  // namespace
}  // namespace kc::stage3
