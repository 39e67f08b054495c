// The attention_fwd op on the host: its reference on cases worked by hand (one key, equal scores,
// the bottom-right causal mask both ways, grouped heads, NaN behind and in front of the mask), the
// visible-pair count its FLOPs use, the chunking of the unfused path, and the op's wiring.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <vector>

#include "kc/common/registry.hpp"
#include "kc/stage3/attention.hpp"
#include "kc/stage3/register.hpp"

namespace kc::stage3 {
namespace {

AttentionShape shape_of(std::int64_t b, std::int64_t hq, std::int64_t hkv, std::int64_t sq, std::int64_t sk,
                        std::int64_t d) {
  AttentionShape s;
  s.batch = b;
  s.q_heads = hq;
  s.kv_heads = hkv;
  s.q_len = sq;
  s.kv_len = sk;
  s.head_dim = d;
  return s;
}

struct Result {
  std::vector<double> o, lse;
};

Result run_reference(const AttentionShape& s, double scale, bool causal, const std::vector<double>& q,
                     const std::vector<double>& k, const std::vector<double>& v) {
  Result r;
  r.o.assign(static_cast<std::size_t>(s.batch * s.q_heads * s.q_len * s.head_dim), -7.0);
  r.lse.assign(static_cast<std::size_t>(s.batch * s.q_heads * s.q_len), -7.0);
  attention_reference(s, scale, causal, q.data(), k.data(), v.data(), r.o.data(), r.lse.data());
  return r;
}

TEST(AttentionReference, OneKeyGivesItsValueAndItsScore) {
  const AttentionShape s = shape_of(1, 1, 1, 1, 1, 2);
  const Result r = run_reference(s, 0.5, false, {1.0, 2.0}, {3.0, -1.0}, {0.25, -0.75});
  EXPECT_DOUBLE_EQ(r.o[0], 0.25);
  EXPECT_DOUBLE_EQ(r.o[1], -0.75);
  EXPECT_DOUBLE_EQ(r.lse[0], 0.5 * (3.0 - 2.0));  // LSE of one score is the score
}

TEST(AttentionReference, EqualScoresAverageTheValues) {
  // q = 0: every score is 0, the weights are equal, LSE = log(Sk).
  const AttentionShape s = shape_of(1, 1, 1, 1, 3, 2);
  const Result r = run_reference(s, 1.0, false, {0.0, 0.0}, {1, 2, 3, 4, 5, 6}, {1, 10, 2, 20, 6, 60});
  EXPECT_NEAR(r.o[0], 3.0, 1e-15);
  EXPECT_NEAR(r.o[1], 30.0, 1e-13);
  EXPECT_NEAR(r.lse[0], std::log(3.0), 1e-15);
}

TEST(AttentionReference, TheCausalMaskIsAlignedBottomRight) {
  // Sq = 2 < Sk = 3: query 0 sees keys 0-1, query 1 (the last) sees all three.
  const AttentionShape s = shape_of(1, 1, 1, 2, 3, 1);
  const Result r = run_reference(s, 1.0, true, {0.0, 0.0}, {5.0, 6.0, 7.0}, {1.0, 2.0, 6.0});
  EXPECT_NEAR(r.o[0], 1.5, 1e-15);
  EXPECT_NEAR(r.o[1], 3.0, 1e-15);
  EXPECT_NEAR(r.lse[0], std::log(2.0), 1e-15);
  EXPECT_NEAR(r.lse[1], std::log(3.0), 1e-15);
  EXPECT_EQ(visible_keys(s, true, 0), 2);
  EXPECT_EQ(visible_keys(s, true, 1), 3);
}

TEST(AttentionReference, RowsThatSeeNoKeyAreZeroWithMinusInfinityLse) {
  // Sq = 3 > Sk = 1: queries 0 and 1 see nothing; query 2 sees key 0.
  const AttentionShape s = shape_of(1, 1, 1, 3, 1, 2);
  const Result r = run_reference(s, 1.0, true, {1, 1, 1, 1, 1, 1}, {0.5, 0.5}, {4.0, -4.0});
  for (int row = 0; row < 2; ++row) {
    EXPECT_EQ(r.o[2 * row], 0.0);
    EXPECT_EQ(r.o[2 * row + 1], 0.0);
    EXPECT_TRUE(std::isinf(r.lse[row]) && r.lse[row] < 0) << r.lse[row];
  }
  EXPECT_DOUBLE_EQ(r.o[4], 4.0);
  EXPECT_DOUBLE_EQ(r.lse[2], 1.0);
}

TEST(AttentionReference, GroupedQueryHeadsShareTheirKvHead) {
  // Hq = 4 over Hkv = 2: heads 0-1 read kv head 0, heads 2-3 kv head 1. q = 0 averages the values.
  const AttentionShape s = shape_of(1, 4, 2, 1, 2, 1);
  const Result r = run_reference(s, 1.0, false, {0, 0, 0, 0}, {1, 1, 1, 1}, {1.0, 3.0, 10.0, 30.0});
  EXPECT_NEAR(r.o[0], 2.0, 1e-15);
  EXPECT_NEAR(r.o[1], 2.0, 1e-15);
  EXPECT_NEAR(r.o[2], 20.0, 1e-14);
  EXPECT_NEAR(r.o[3], 20.0, 1e-14);
}

TEST(AttentionReference, BatchesAreIndependent) {
  const AttentionShape s = shape_of(2, 1, 1, 1, 1, 1);
  const Result r = run_reference(s, 1.0, false, {1.0, 1.0}, {1.0, 2.0}, {5.0, -5.0});
  EXPECT_DOUBLE_EQ(r.o[0], 5.0);
  EXPECT_DOUBLE_EQ(r.o[1], -5.0);
  EXPECT_DOUBLE_EQ(r.lse[1], 2.0);
}

TEST(AttentionReference, NanBehindTheMaskIsNeverReadAndNanInFrontPropagates) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const AttentionShape s = shape_of(1, 1, 1, 2, 2, 1);
  // Key 1 is NaN: query 0 does not see it (causal), query 1 does.
  const Result r = run_reference(s, 1.0, true, {1.0, 1.0}, {0.5, nan}, {2.0, nan});
  EXPECT_DOUBLE_EQ(r.o[0], 2.0);
  EXPECT_DOUBLE_EQ(r.lse[0], 0.5);
  EXPECT_TRUE(std::isnan(r.o[1]));
  EXPECT_TRUE(std::isnan(r.lse[1]));
}

TEST(AttentionReference, LargeScoresDoNotOverflow) {
  // exp(1000) overflows a double; the reference subtracts the row's maximum first.
  const AttentionShape s = shape_of(1, 1, 1, 1, 2, 1);
  const Result r = run_reference(s, 1.0, false, {1.0}, {1000.0, 999.0}, {1.0, 0.0});
  const double w = 1.0 / (1.0 + std::exp(-1.0));
  EXPECT_NEAR(r.o[0], w, 1e-15);
  EXPECT_NEAR(r.lse[0], 1000.0 + std::log1p(std::exp(-1.0)), 1e-12);
}

TEST(AttentionWork, VisiblePairsCountTheCausalTriangleExactly) {
  EXPECT_EQ(visible_pairs(shape_of(1, 1, 1, 4, 4, 8), true), 10.0);  // 1 + 2 + 3 + 4
  EXPECT_EQ(visible_pairs(shape_of(1, 1, 1, 4, 4, 8), false), 16.0);
  EXPECT_EQ(visible_pairs(shape_of(1, 1, 1, 2, 4, 8), true), 7.0);   // 3 + 4
  EXPECT_EQ(visible_pairs(shape_of(1, 1, 1, 4, 2, 8), true), 3.0);   // 0 + 0 + 1 + 2
  EXPECT_EQ(visible_pairs(shape_of(3, 2, 1, 4, 4, 8), true), 60.0);  // per head x B x Hq
}

TEST(AttentionChunks, CoverEveryRowOnceWithinTheLimit) {
  struct Case {
    AttentionShape shape;
    std::size_t limit;
  };
  const std::vector<Case> cases = {
      {shape_of(2, 8, 2, 100, 300, 64), std::size_t{1} << 30},  // everything in one chunk
      {shape_of(2, 8, 2, 100, 300, 64), 4 * 100 * 300 * 4},     // one group of 400 rows per chunk
      {shape_of(2, 8, 2, 100, 300, 64), 2 * 400 * 300 * 4 + 5}, // two groups per chunk
      {shape_of(1, 4, 1, 1000, 77, 64), 77 * 4 * 333},          // a group cut into blocks of 333 rows
      {shape_of(3, 1, 1, 1, 5, 64), 5 * 4},                     // one row of S per chunk
  };
  for (const Case& c : cases) {
    const AttentionShape& s = c.shape;
    const std::int64_t rows_per_group = s.group() * s.q_len;
    std::map<std::pair<std::int64_t, std::int64_t>, int> seen;  // (group, row) -> times
    for (const AttentionChunk& chunk : attention_chunks(s, 4, c.limit)) {
      EXPECT_LE(static_cast<std::size_t>(chunk.groups * chunk.rows * s.kv_len * 4), c.limit);
      EXPECT_TRUE(chunk.groups == 1 || (chunk.first_row == 0 && chunk.rows == rows_per_group));
      for (std::int64_t g = chunk.first_group; g < chunk.first_group + chunk.groups; ++g)
        for (std::int64_t r = chunk.first_row; r < chunk.first_row + chunk.rows; ++r) ++seen[{g, r}];
    }
    EXPECT_EQ(static_cast<std::int64_t>(seen.size()), s.batch * s.kv_heads * rows_per_group);
    for (const auto& [where, times] : seen) EXPECT_EQ(times, 1) << where.first << "," << where.second;
  }
  EXPECT_THROW(attention_chunks(shape_of(1, 1, 1, 1, 100, 64), 4, 399), Error);
}

Registry stage3_registry() {
  Registry registry;
  register_kernels(registry);
  return registry;
}

TEST(AttentionOp, IsRegisteredWithItsParametersAndShapes) {
  const Registry registry = stage3_registry();
  const OpSpec& op = registry.op(kAttentionFwdOp);
  EXPECT_EQ(op.dim_names, (std::vector<std::string>{"B", "Hq", "Hkv", "Sq", "Sk", "D"}));
  EXPECT_EQ(op.dtypes, (std::vector<DType>{DType::bf16, DType::f16}));
  EXPECT_FALSE(op.bench_problems.empty());
  EXPECT_FALSE(op.conformance_problems.empty());
  const Problem p = op.problem({1, 4, 2, 8, 16, 64}, DType::bf16, {{"causal", 1.0}});
  EXPECT_EQ(p.label(), "1x4x2x8x16x64 bf16 causal=1");
  EXPECT_TRUE(attention_causal(p));
  EXPECT_DOUBLE_EQ(attention_scale(p), 0.125);
  EXPECT_DOUBLE_EQ(attention_scale(op.problem({1, 4, 2, 8, 16, 64}, DType::bf16, {{"scale", 0.3}})), 0.3);
}

TEST(AttentionOp, CountsFourDFlopsPerVisiblePair) {
  const Registry registry = stage3_registry();
  const OpSpec& op = registry.op(kAttentionFwdOp);
  const Problem dense = op.problem({2, 4, 2, 8, 16, 64}, DType::bf16);
  EXPECT_DOUBLE_EQ(op.work(dense).flops, 4.0 * 64 * 2 * 4 * 8 * 16);
  const Problem causal = op.problem({1, 1, 1, 4, 4, 128}, DType::bf16, {{"causal", 1.0}});
  EXPECT_DOUBLE_EQ(op.work(causal).flops, 4.0 * 128 * 10);
}

TEST(AttentionOp, RefusesHeadsThatDoNotGroup) {
  const Registry registry = stage3_registry();
  const OpSpec& op = registry.op(kAttentionFwdOp);
  const std::string reason = op.supports(op.problem({1, 6, 4, 8, 8, 64}, DType::bf16));
  EXPECT_NE(reason.find("not a multiple of Hkv"), std::string::npos) << reason;
  EXPECT_EQ(op.supports(op.problem({1, 8, 4, 8, 8, 64}, DType::bf16)), "");
}

TEST(AttentionOp, OutputToleranceAllowsTheRoundingOfPButTheLseIsFp32) {
  const Registry registry = stage3_registry();
  const OpSpec& op = registry.op(kAttentionFwdOp);
  const Problem p = op.problem({1, 2, 2, 64, 4096, 128}, DType::bf16);
  Tensor o;
  o.name = "O";
  o.dtype = DType::bf16;
  Tensor lse;
  lse.name = "LSE";
  lse.dtype = DType::f32;
  const Accuracy for_o = op.accuracy(p, o);
  EXPECT_EQ(for_o.output, DType::bf16);
  EXPECT_EQ(for_o.terms, 4096.0);
  EXPECT_EQ(for_o.roundings, 1);
  EXPECT_DOUBLE_EQ(for_o.intermediate_error, std::ldexp(1.0, -8));  // u(bf16) x max|V|
  const Accuracy for_lse = op.accuracy(p, lse);
  EXPECT_EQ(for_lse.output, DType::f32);
  EXPECT_EQ(for_lse.intermediate_error, 0.0);
}

}  // namespace
}  // namespace kc::stage3
