// The packed variable-length form of attention on the host: the offsets helpers
// (cu_seqlens_from_lengths, validate_cu_seqlens), the lengths of the attention_fwd_varlen op's
// problems, its reference on a case worked by hand (per-sequence causal alignment, empty
// sequences, rows that see no key, keys of a sequence no query reads) and against attention_fwd's
// reference on equal lengths (where the packed LSE is the dense one), its FLOP count and wiring,
// its rung's registration and refusals, and the checks every launch makes before any CUDA call:
// the packed form's rules, and the dense rungs refusing it.
#include <gtest/gtest.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "arch/sm90/tma_descriptor.hpp"
#include "kc/common/error.hpp"
#include "kc/common/registry.hpp"
#include "kc/common/splitmix.hpp"
#include "kc/stage3/attention.hpp"
#include "kc/stage3/attention_args.hpp"
#include "kc/stage3/attention_ops.hpp"
#include "kc/stage3/attention_varlen.hpp"
#include "src/register_attention.hpp"
#include "stage3_test_registry.hpp"
#include "support/refusals.hpp"

namespace kc::stage3 {
namespace {

const double kInf = std::numeric_limits<double>::infinity();

const OpSpec& varlen_op() { return stage3_test_registry().op(kAttentionVarlenOp); }

using kc::testing::contains;
using kc::testing::error_of;

TEST(VarlenOffsets, AreTheRunningSumsOfTheLengths) {
  EXPECT_EQ(cu_seqlens_from_lengths({3, 0, 5}), (std::vector<std::int32_t>{0, 3, 3, 8}));
  EXPECT_EQ(cu_seqlens_from_lengths({}), (std::vector<std::int32_t>{0}));
  EXPECT_EQ(cu_seqlens_from_lengths({0, 0}), (std::vector<std::int32_t>{0, 0, 0}));
  EXPECT_TRUE(contains(error_of([] { cu_seqlens_from_lengths({4, -1}); }), "sequence 1 has length -1"));
  // Two sequences of 2^30 rows: 2^31, one past what int32 offsets hold.
  EXPECT_TRUE(contains(error_of([] { cu_seqlens_from_lengths({1 << 30, 1 << 30}); }), "int32"));
  EXPECT_EQ(cu_seqlens_from_lengths({1 << 30, (1 << 30) - 1}).back(), INT32_MAX);
}

TEST(VarlenOffsets, ValidationNamesTheSequenceAndTheRule) {
  const std::vector<std::int32_t> good = {0, 3, 3, 8};
  EXPECT_EQ(error_of([&] { validate_cu_seqlens(good.data(), 3, 5, "cu_seqlens_q"); }), "");
  const std::vector<std::int32_t> late_start = {1, 3, 3, 8};
  EXPECT_TRUE(contains(error_of([&] { validate_cu_seqlens(late_start.data(), 3, 5, "cu_seqlens_q"); }), "must be 0"));
  const std::vector<std::int32_t> decreasing = {0, 3, 2, 8};
  const std::string backwards = error_of([&] { validate_cu_seqlens(decreasing.data(), 3, 8, "cu_seqlens_k"); });
  EXPECT_TRUE(contains(backwards, "cu_seqlens_k") && contains(backwards, "sequence 1") &&
              contains(backwards, "never decrease"))
      << backwards;
  const std::string too_long = error_of([&] { validate_cu_seqlens(good.data(), 3, 4, "cu_seqlens_q"); });
  EXPECT_TRUE(contains(too_long, "sequence 2 has 5 rows") && contains(too_long, "longest")) << too_long;
  EXPECT_NE(error_of([&] { validate_cu_seqlens(good.data(), 0, 5, "cu_seqlens_q"); }), "");
  EXPECT_NE(error_of([&] { validate_cu_seqlens(nullptr, 3, 5, "cu_seqlens_q"); }), "");
}

VarlenShape varlen_shape_of(std::int64_t b, std::int64_t hq, std::int64_t hkv, std::int64_t sq, std::int64_t sk,
                            std::int64_t d, VarlenLengths lengths) {
  VarlenShape s;
  s.batch = b;
  s.q_heads = hq;
  s.kv_heads = hkv;
  s.max_q_len = sq;
  s.max_kv_len = sk;
  s.head_dim = d;
  s.lengths = lengths;
  return s;
}

TEST(VarlenLengths, RaggedStartsWithTheEdgeCasesThenHashedLengthsInRange) {
  const VarlenShape s = varlen_shape_of(40, 8, 2, 300, 500, 64, VarlenLengths::ragged);
  const VarlenLengthsOf l = varlen_lengths(s);
  ASSERT_EQ(l.q.size(), 40u);
  ASSERT_EQ(l.kv.size(), 40u);
  const std::vector<std::int32_t> q_edges = {300, 1, 0, 1, 300, 0}, kv_edges = {500, 1, 0, 500, 0, 500};
  for (std::size_t b = 0; b < 6; ++b) {
    EXPECT_EQ(l.q[b], q_edges[b]) << b;
    EXPECT_EQ(l.kv[b], kv_edges[b]) << b;
  }
  bool q_above_kv = false, q_below_kv = false;
  for (std::size_t b = 6; b < 40; ++b) {
    EXPECT_GE(l.q[b], 1);
    EXPECT_LE(l.q[b], 300);
    EXPECT_GE(l.kv[b], 1);
    EXPECT_LE(l.kv[b], 500);
    q_above_kv |= l.q[b] > l.kv[b];
    q_below_kv |= l.q[b] < l.kv[b];
  }
  EXPECT_TRUE(q_above_kv && q_below_kv);
  // The problem alone decides them (they set its FLOPs): the same every time.
  const VarlenLengthsOf again = varlen_lengths(s);
  EXPECT_EQ(again.q, l.q);
  EXPECT_EQ(again.kv, l.kv);
  // A short batch keeps the first edges.
  const VarlenLengthsOf three = varlen_lengths(varlen_shape_of(3, 1, 1, 17, 17, 64, VarlenLengths::ragged));
  EXPECT_EQ(three.q, (std::vector<std::int32_t>{17, 1, 0}));
  EXPECT_EQ(three.kv, (std::vector<std::int32_t>{17, 1, 0}));
  // Full: the dense problem packed.
  const VarlenLengthsOf full = varlen_lengths(varlen_shape_of(4, 1, 1, 7, 9, 64, VarlenLengths::full));
  EXPECT_EQ(full.q, (std::vector<std::int32_t>(4, 7)));
  EXPECT_EQ(full.kv, (std::vector<std::int32_t>(4, 9)));
}

// Hq = 2 over Hkv = 1, D = 1, q = 0 (every visible key weighs the same: O is the mean of the
// visible values, LSE = log(visible count)). Sequences (Sq_b, Sk_b): (2, 3), (0, 2), (3, 1), (1, 0).
// Sequence 1's keys hold 100 and 200 and no query may see them.
struct HandCase {
  VarlenShape shape = varlen_shape_of(4, 2, 1, 3, 3, 1, VarlenLengths::ragged);
  std::vector<std::int32_t> cu_q = {0, 2, 2, 5, 6}, cu_k = {0, 3, 5, 6, 6};
  std::vector<double> q = std::vector<double>(6 * 2, 0.0);
  std::vector<double> k = std::vector<double>(6, 0.5);
  std::vector<double> v = {1.0, 2.0, 6.0, 100.0, 200.0, 7.0};
};

struct Result {
  std::vector<double> o, lse;
};

Result run_hand_case(bool causal) {
  const HandCase c;
  Result r;
  r.o.assign(12, -7.0);
  r.lse.assign(12, -7.0);
  attention_varlen_reference(c.shape, 1.0, causal, c.cu_q.data(), c.cu_k.data(), c.q.data(), c.k.data(), c.v.data(),
                             r.o.data(), r.lse.data());
  return r;
}

TEST(VarlenReference, EachSequenceHasItsOwnBottomRightMaskAndLseBlock) {
  const Result r = run_hand_case(true);
  // O [6 rows, 2 heads]: sequence 0 row 0 sees keys 0-1 (j <= 0 + 3 - 2), row 1 all three;
  // sequence 2's rows 0-1 see nothing (j <= i - 2), row 2 its one key (7); sequence 3 has none.
  const std::vector<double> o = {1.5, 1.5, 3.0, 3.0, 0.0, 0.0, 0.0, 0.0, 7.0, 7.0, 0.0, 0.0};
  for (std::size_t i = 0; i < o.size(); ++i) EXPECT_NEAR(r.o[i], o[i], 1e-15) << i;
  // LSE: sequence 0's [2 heads, 2 rows] block at 0, sequence 2's [2, 3] at 2 x 2 = 4, sequence 3's
  // [2, 1] at 5 x 2 = 10.
  const std::vector<double> lse = {std::log(2.0), std::log(3.0), std::log(2.0), std::log(3.0), -kInf, -kInf,
                                   0.0,           -kInf,         -kInf,         0.0,           -kInf, -kInf};
  for (std::size_t i = 0; i < lse.size(); ++i) {
    if (std::isinf(lse[i]))
      EXPECT_TRUE(std::isinf(r.lse[i]) && r.lse[i] < 0) << i << ": " << r.lse[i];
    else
      EXPECT_NEAR(r.lse[i], lse[i], 1e-15) << i;
  }
}

TEST(VarlenReference, WithoutTheMaskEveryRowSeesItsSequencesKeysOnly) {
  const Result r = run_hand_case(false);
  const std::vector<double> o = {3.0, 3.0, 3.0, 3.0, 7.0, 7.0, 7.0, 7.0, 7.0, 7.0, 0.0, 0.0};
  for (std::size_t i = 0; i < o.size(); ++i) EXPECT_NEAR(r.o[i], o[i], 1e-15) << i;
  for (std::size_t i : {0, 1, 2, 3}) EXPECT_NEAR(r.lse[i], std::log(3.0), 1e-15) << i;
  for (std::size_t i : {4, 5, 6, 7, 8, 9}) EXPECT_NEAR(r.lse[i], 0.0, 1e-15) << i;
  for (std::size_t i : {10, 11}) EXPECT_TRUE(std::isinf(r.lse[i]) && r.lse[i] < 0) << i;
}

TEST(VarlenReference, RefusesOffsetsThatBreakTheRules) {
  HandCase c;
  std::vector<double> o(12), lse(12);
  c.cu_k = {0, 3, 2, 6, 6};  // sequence 1 runs backwards
  EXPECT_TRUE(contains(error_of([&] {
                         attention_varlen_reference(c.shape, 1.0, true, c.cu_q.data(), c.cu_k.data(), c.q.data(),
                                                    c.k.data(), c.v.data(), o.data(), lse.data());
                       }),
                       "never decrease"));
}

// Equal lengths: the packed problem is the dense one with Q, K, V and O's rows reordered
// ([B, S, H, D] against [B, H, S, D]) and the LSE in the same place.
TEST(VarlenReference, EqualLengthsGiveTheDenseResultAndTheDenseLseLayout) {
  const std::int64_t b = 3, hq = 4, hkv = 2, sq = 5, sk = 7, d = 3;
  const VarlenShape s = varlen_shape_of(b, hq, hkv, sq, sk, d, VarlenLengths::full);
  std::uint64_t state = 11;
  const auto draw = [&](std::size_t n) {
    std::vector<double> x(n);
    for (double& e : x) e = static_cast<double>(splitmix64_next(state) >> 11) * 0x1.0p-53 * 2.0 - 1.0;
    return x;
  };
  const std::vector<double> q = draw(static_cast<std::size_t>(b * sq * hq * d));  // packed [B.Sq, Hq, D]
  const std::vector<double> k = draw(static_cast<std::size_t>(b * sk * hkv * d));
  const std::vector<double> v = draw(k.size());
  // The dense copies: [B, H, S, D].
  const auto to_dense = [&](const std::vector<double>& packed, std::int64_t heads, std::int64_t rows) {
    std::vector<double> dense(packed.size());
    for (std::int64_t bb = 0; bb < b; ++bb)
      for (std::int64_t h = 0; h < heads; ++h)
        for (std::int64_t i = 0; i < rows; ++i)
          for (std::int64_t c = 0; c < d; ++c)
            dense[static_cast<std::size_t>(((bb * heads + h) * rows + i) * d + c)] =
                packed[static_cast<std::size_t>(((bb * rows + i) * heads + h) * d + c)];
    return dense;
  };
  AttentionShape dense_shape;
  dense_shape.batch = b;
  dense_shape.q_heads = hq;
  dense_shape.kv_heads = hkv;
  dense_shape.q_len = sq;
  dense_shape.kv_len = sk;
  dense_shape.head_dim = d;
  const std::vector<std::int32_t> cu_q = cu_seqlens_from_lengths(varlen_lengths(s).q);
  const std::vector<std::int32_t> cu_k = cu_seqlens_from_lengths(varlen_lengths(s).kv);
  for (const bool causal : {false, true}) {
    std::vector<double> o(q.size()), lse(static_cast<std::size_t>(b * hq * sq));
    attention_varlen_reference(s, 0.7, causal, cu_q.data(), cu_k.data(), q.data(), k.data(), v.data(), o.data(),
                               lse.data());
    std::vector<double> o_dense(q.size()), lse_dense(lse.size());
    const std::vector<double> q_dense = to_dense(q, hq, sq), k_dense = to_dense(k, hkv, sk),
                              v_dense = to_dense(v, hkv, sk);
    attention_reference(dense_shape, 0.7, causal, q_dense.data(), k_dense.data(), v_dense.data(), o_dense.data(),
                        lse_dense.data());
    const std::vector<double> o_as_dense = to_dense(o, hq, sq);
    for (std::size_t i = 0; i < o.size(); ++i) EXPECT_DOUBLE_EQ(o_as_dense[i], o_dense[i]) << i;
    for (std::size_t i = 0; i < lse.size(); ++i) EXPECT_DOUBLE_EQ(lse[i], lse_dense[i]) << i;
  }
}

TEST(VarlenOp, CountsFourDFlopsPerVisiblePairOfEachSequence) {
  // Ragged, Sq = Sk = 4: (4, 4), (1, 1), (0, 0), (1, 4), (4, 0), (0, 4). Per head, causal:
  // 1 + 2 + 3 + 4, 1, 0, 4, 0, 0 = 15 pairs; without the mask 16 + 1 + 4 = 21.
  const OpSpec& op = varlen_op();
  const Problem causal = op.problem({6, 2, 1, 4, 4, 64}, DType::bf16, {{"causal", 1.0}, {"lengths", 1.0}});
  EXPECT_DOUBLE_EQ(op.work(causal).flops, 4.0 * 64 * 2 * 15);
  const Problem open = op.problem({6, 2, 1, 4, 4, 64}, DType::bf16, {{"lengths", 1.0}});
  EXPECT_DOUBLE_EQ(op.work(open).flops, 4.0 * 64 * 2 * 21);
  // Equal lengths count what the dense problem counts.
  const OpSpec& dense = stage3_test_registry().op(kAttentionFwdOp);
  for (const double mask : {0.0, 1.0})
    EXPECT_DOUBLE_EQ(op.work(op.problem({3, 8, 2, 77, 100, 128}, DType::f16, {{"causal", mask}})).flops,
                     dense.work(dense.problem({3, 8, 2, 77, 100, 128}, DType::f16, {{"causal", mask}})).flops);
}

TEST(VarlenOp, IsRegisteredWithItsParametersAndPackedOperands) {
  const OpSpec& op = varlen_op();
  EXPECT_EQ(op.dim_names, (std::vector<std::string>{"B", "Hq", "Hkv", "Sq", "Sk", "D"}));
  EXPECT_EQ(op.dtypes, (std::vector<DType>{DType::bf16, DType::f16}));
  EXPECT_FALSE(op.bench_problems.empty());
  EXPECT_FALSE(op.baseline_name.empty());
  const Problem p = op.problem({6, 4, 2, 8, 16, 64}, DType::bf16, {{"causal", 1.0}, {"lengths", 1.0}});
  EXPECT_EQ(p.label(), "6x4x2x8x16x64 bf16 causal=1 lengths=1");
  EXPECT_DOUBLE_EQ(attention_scale(p), 0.125);
  const VarlenShape s = varlen_shape(p);
  EXPECT_EQ(s.lengths, VarlenLengths::ragged);
  EXPECT_EQ(s.max_q_len, 8);
  EXPECT_EQ(s.max_kv_len, 16);
}

TEST(VarlenOp, RefusesHeadsThatDoNotGroupUnknownLengthsAndTotalsPastInt32) {
  const OpSpec& op = varlen_op();
  EXPECT_TRUE(contains(op.supports(op.problem({2, 6, 4, 8, 8, 64}, DType::bf16)), "not a multiple of Hkv"));
  EXPECT_TRUE(contains(op.supports(op.problem({2, 8, 4, 8, 8, 64}, DType::bf16, {{"lengths", 2.0}})), "lengths"));
  EXPECT_TRUE(contains(op.supports(op.problem({3, 1, 1, 1 << 30, 8, 64}, DType::bf16)), "int32"));
  EXPECT_EQ(op.supports(op.problem({2, 8, 4, 8, 8, 64}, DType::bf16, {{"lengths", 1.0}})), "");
}

// What the conformance suite must exercise: empty sequences, length 1, Sq_b != Sk_b both ways (and
// rows that see no key), causal and not, grouped heads 1/4/8, D = 64 and 128, both dtypes, a
// problem that needs the device reference and one the host reference serves.
TEST(VarlenOp, ConformanceProblemsCoverTheEdgeCases) {
  const OpSpec& op = varlen_op();
  bool empty = false, single = false, q_above = false, q_below = false, no_keys = false, causal = false,
       open = false, groups[3] = {}, dims[2] = {}, dtypes[2] = {};
  for (const Problem& p : op.conformance_problems) {
    const VarlenShape s = varlen_shape(p);
    const VarlenLengthsOf l = varlen_lengths(s);
    for (std::size_t b = 0; b < l.q.size(); ++b) {
      empty |= l.q[b] == 0 && l.kv[b] == 0;
      single |= l.q[b] == 1 && l.kv[b] == 1;
      q_above |= l.q[b] > l.kv[b] && l.kv[b] > 0 && attention_causal(p);
      q_below |= l.q[b] < l.kv[b] && l.q[b] > 1 && attention_causal(p);
      no_keys |= l.q[b] > 0 && l.kv[b] == 0;
    }
    causal |= attention_causal(p) && s.lengths == VarlenLengths::ragged;
    open |= !attention_causal(p) && s.lengths == VarlenLengths::ragged;
    groups[0] |= s.group() == 1;
    groups[1] |= s.group() == 4;
    groups[2] |= s.group() == 8;
    dims[0] |= s.head_dim == 64;
    dims[1] |= s.head_dim == 128;
    dtypes[0] |= p.dtype == DType::bf16;
    dtypes[1] |= p.dtype == DType::f16;
  }
  EXPECT_TRUE(empty && single && q_above && q_below && no_keys);
  EXPECT_TRUE(causal && open);
  EXPECT_TRUE(groups[0] && groups[1] && groups[2]);
  EXPECT_TRUE(dims[0] && dims[1]);
  EXPECT_TRUE(dtypes[0] && dtypes[1]);
}

// A packed rung's registration: its op, number, dtypes, compute capabilities and report group; the
// ragged problem at D = 64 and 128 supported (in dtype `supported`), D = 80 refused (in `refused`)
// with a reason that names it; its refusals the op's.
void expect_packed_rung_registered(const std::string& id, int rung, int min_cc, int max_cc, DType supported,
                                   DType refused) {
  const Registry& r = stage3_test_registry();
  const KernelEntry& k = r.kernel(id);
  EXPECT_EQ(k.op, kAttentionVarlenOp) << id;
  EXPECT_EQ(k.rung, rung) << id;
  EXPECT_TRUE(k.runs_dtype(DType::bf16)) << id;
  EXPECT_TRUE(k.runs_dtype(DType::f16)) << id;
  EXPECT_EQ(k.min_compute_capability, min_cc) << id;
  EXPECT_EQ(k.max_compute_capability, max_cc) << id;
  EXPECT_EQ(k.report_group(), "stage3-attention") << id;
  const OpSpec& op = varlen_op();
  for (const std::int64_t d : {64, 128})
    EXPECT_EQ(unsupported_reason(r, k, op.problem({9, 8, 2, 300, 500, d}, supported, {{"lengths", 1.0}}), nullptr),
              "")
        << id << ", D = " << d;
  const std::string reason = unsupported_reason(r, k, op.problem({6, 2, 1, 33, 45, 80}, refused), nullptr);
  EXPECT_TRUE(contains(reason, "D = 80")) << id << ": " << reason;
  EXPECT_EQ(k.refuses, varlen_attention_refusals()) << id;
}

TEST(VarlenLadder, Rung05IsRegisteredAndRefusesWhatItIsNotCompiledFor) {
  expect_packed_rung_registered("stage3/attention_fwd_varlen/05_fa2_two_tiles_per_warp", 5, 80, 0, DType::f16,
                                DType::bf16);
  EXPECT_EQ(stage3_test_registry().select("^stage3/attention_fwd_varlen/").size(), 2u);  // rungs 05 and 15
  const OpSpec& op = varlen_op();
  ASSERT_FALSE(varlen_attention_refusals().empty());
  for (const std::string& label : varlen_attention_refusals()) {
    const bool found = std::any_of(op.conformance_problems.begin(), op.conformance_problems.end(),
                                   [&](const Problem& p) { return p.label() == label; });
    EXPECT_TRUE(found) << label << " is not a conformance problem of attention_fwd_varlen";
  }
}

TEST(VarlenLadder, Rung15IsRegisteredForHopperOnly) {
  expect_packed_rung_registered("stage3/attention_fwd_varlen/15_lazy_rescale", 15, 90, 90, DType::bf16, DType::f16);
}

// Packed arguments that pass every check but the one a test breaks. The pointers are never
// dereferenced: every case throws before anything touches the GPU.
template <typename T>
AttentionArgs<T> packed_args() {
  static const std::int32_t offsets[2] = {0, 1};  // host memory: never read by the checks
  AttentionArgs<T> a;
  a.q = a.k = a.v = reinterpret_cast<const T*>(std::uintptr_t{4096});
  a.o = reinterpret_cast<T*>(std::uintptr_t{8192});
  a.lse = reinterpret_cast<float*>(std::uintptr_t{12288});
  a.cu_seqlens_q = offsets;
  a.cu_seqlens_k = offsets;
  a.batch = 1;
  a.q_heads = 8;
  a.kv_heads = 2;
  a.q_len = 300;
  a.kv_len = 500;
  a.head_dim = 128;
  a.q_row_stride = 8 * 128;
  a.q_head_stride = 128;
  a.kv_row_stride = 2 * 128;
  a.kv_head_stride = 128;
  a.scale = 0.125f;
  return a;
}

TEST(VarlenArgs, TheEntryChecksThePackedFormBeforeAnyCudaCall) {
  using bf16 = __nv_bfloat16;
  const auto entry_error = [](const AttentionArgs<bf16>& a) {
    return error_of([&] { attention_forward(a, nullptr); });
  };
  AttentionArgs<bf16> a = packed_args<bf16>();
  a.cu_seqlens_k = nullptr;
  const std::string one_array = entry_error(a);
  EXPECT_TRUE(contains(one_array, "both cu_seqlens_q and cu_seqlens_k") && contains(one_array, "cu_seqlens_k is null"))
      << one_array;
  a = packed_args<bf16>();
  a.cu_seqlens_q = nullptr;
  EXPECT_TRUE(contains(entry_error(a), "cu_seqlens_q is null"));
  a = packed_args<bf16>();
  a.q_batch_stride = 300 * 8 * 128;
  EXPECT_TRUE(contains(entry_error(a), "set q_batch_stride and kv_batch_stride to 0"));
  a = packed_args<bf16>();
  a.batch = 0;
  EXPECT_TRUE(contains(entry_error(a), "every dimension must be >= 1"));
  a = packed_args<bf16>();
  a.q_len = 0;
  const std::string no_bound = entry_error(a);
  EXPECT_TRUE(contains(no_bound, "every dimension must be >= 1") && contains(no_bound, "max_seqlen_q")) << no_bound;
  a = packed_args<bf16>();
  a.q_heads = 6;
  a.kv_heads = 4;
  a.q_row_stride = 6 * 128;
  EXPECT_TRUE(contains(entry_error(a), "not a multiple of Hkv"));
  a = packed_args<bf16>();
  a.head_dim = 80;
  EXPECT_TRUE(contains(entry_error(a), "D = 80"));
  a = packed_args<bf16>();
  a.q_row_stride = 8 * 128 + 4;
  EXPECT_TRUE(contains(entry_error(a), "multiple of 8 elements"));
  a = packed_args<bf16>();
  a.o = reinterpret_cast<bf16*>(std::uintptr_t{8194});
  EXPECT_TRUE(contains(entry_error(a), "16-byte aligned"));
  // The packed rung itself checks the same.
  AttentionArgs<__half> h = packed_args<__half>();
  h.cu_seqlens_q = nullptr;
  EXPECT_TRUE(contains(error_of([&] { attention_fwd_varlen_05_fa2_two_tiles_per_warp(h, nullptr); }),
                       "cu_seqlens_q is null"));
  // And so does the Hopper rung (before it asks for a tensor map or a launch).
  HopperLaunchCache cache;
  const std::string hopper_null = error_of([&] { attention_fwd_varlen_15_lazy_rescale(h, nullptr, cache); });
  EXPECT_TRUE(contains(hopper_null, "cu_seqlens_q is null") && contains(hopper_null, "rung 15")) << hopper_null;
  h = packed_args<__half>();
  h.kv_batch_stride = 500 * 2 * 128;
  EXPECT_TRUE(contains(error_of([&] { attention_fwd_varlen_15_lazy_rescale(h, nullptr, cache); }),
                       "set q_batch_stride and kv_batch_stride to 0"));
  h = packed_args<__half>();
  h.head_dim = 96;
  EXPECT_TRUE(contains(error_of([&] { attention_fwd_varlen_15_lazy_rescale(h, nullptr, cache); }), "D = 96"));
}

// The dense form through the same entry: every refusal is a kc::Error naming the entry and the
// rule, raised before the entry asks which GPU it runs on (on a machine without one, a check that
// came after that question would surface as the CUDA error instead).
TEST(VarlenArgs, TheEntryChecksTheDenseFormBeforeAnyCudaCall) {
  using bf16 = __nv_bfloat16;
  const auto dense = [] {
    AttentionArgs<bf16> a = packed_args<bf16>();
    a.cu_seqlens_q = a.cu_seqlens_k = nullptr;
    a.batch = 2;
    a.q_row_stride = 128;
    a.q_head_stride = 300 * 128;
    a.q_batch_stride = 8 * 300 * 128;
    a.kv_row_stride = 128;
    a.kv_head_stride = 500 * 128;
    a.kv_batch_stride = 2 * 500 * 128;
    return a;
  };
  const auto refused = [](const AttentionArgs<bf16>& a, const std::string& rule) {
    kc::testing::expect_refused([&] { attention_forward(a, nullptr); }, {"attention_forward", rule});
  };
  AttentionArgs<bf16> a = dense();
  a.head_dim = 80;
  refused(a, "D = 80");
  a = dense();
  a.q_heads = 6;
  a.kv_heads = 4;
  refused(a, "not a multiple of Hkv");
  a = dense();
  a.kv_len = 0;
  refused(a, "every dimension must be >= 1");
  a = dense();
  a.batch = 70000;
  refused(a, "must be <= 65535");
  a = dense();
  a.kv_head_stride = 500 * 128 + 2;
  refused(a, "multiple of 8 elements");
  a = dense();
  a.k = reinterpret_cast<const bf16*>(std::uintptr_t{4098});
  refused(a, "16-byte aligned");
  a = dense();
  a.q_len = INT32_MAX - 100;
  refused(a, "room for a tile");
}

TEST(VarlenArgs, TheDenseRungsRefuseThePackedForm) {
  using bf16 = __nv_bfloat16;
  const AttentionArgs<bf16> a = packed_args<bf16>();
  HopperLaunchCache cache;
  const std::vector<std::string> errors = {
      error_of([&] { attention_fwd_02_tiled_online_softmax(a, nullptr); }),
      error_of([&] { attention_fwd_03_fa2_mma_sync(a, nullptr); }),
      error_of([&] { attention_fwd_04_fa2_cp_async(a, nullptr); }),
      error_of([&] { attention_fwd_05_fa2_two_tiles_per_warp(a, nullptr); }),
      error_of([&] { attention_fwd_06_tma_wgmma(a, nullptr, cache); }),
      error_of([&] { attention_fwd_07_fa3_overlap(a, nullptr, cache); }),
      error_of([&] { attention_fwd_08_persistent(a, nullptr, cache); }),
      error_of([&] { attention_fwd_09_three_consumers(a, nullptr, cache); }),
      error_of([&] { attention_fwd_10_wide_key_tiles(a, nullptr, cache); }),
      error_of([&] { attention_fwd_11_sleeping_producer(a, nullptr, cache); }),
      error_of([&] { attention_fwd_12_added_descriptors(a, nullptr, cache); }),
      error_of([&] { attention_fwd_13_scale_in_exponent(a, nullptr, cache); }),
      error_of([&] { attention_fwd_14_rowless_consumers_leave(a, nullptr, cache); }),
      error_of([&] { attention_fwd_15_lazy_rescale(a, nullptr, cache); }),
      error_of([&] { attention_fwd_16_fa2_lean_softmax(a, nullptr); }),
      error_of([&] { attention_fwd_17_wide_key_tiles_d128(a, nullptr, cache); }),
      error_of([&] { attention_fwd_18_persistent_turns_run_on(a, nullptr, cache); }),
      error_of([&] { attention_fwd_19_pair_tiles_together(a, nullptr, cache); }),
      error_of([&] { attention_fwd_20_causal_pair_groups(a, nullptr, cache); }),
      error_of([&] { attention_fwd_21_fa2_two_tiles_d128(a, nullptr); }),
      error_of([&] { attention_fwd_22_fa2_narrow_key_tiles(a, nullptr); }),
      error_of([&] { attention_fwd_23_fa2_fragments_ahead(a, nullptr); }),
      error_of([&] { attention_fwd_24_fa2_whole_tile_copies(a, nullptr); }),
      error_of([&] { attention_fwd_25_dynamic_items(a, nullptr, cache); }),
      error_of([&] { attention_fwd_26_exponentials_on_fma(a, nullptr, cache); }),
      error_of([&] { attention_fwd_27_wide_tiles_lean_softmax(a, nullptr, cache); }),
  };
  for (std::size_t i = 0; i < errors.size(); ++i)
    EXPECT_TRUE(contains(errors[i], "packed variable-length form") && contains(errors[i], "does not run") &&
                contains(errors[i], "attention_forward"))
        << "rung " << (i + 2 < 10 ? "0" : "") << i + 2 << ": " << errors[i];
  // One offset array alone is the packed form too (and refused as such).
  AttentionArgs<bf16> half_packed = a;
  half_packed.cu_seqlens_q = nullptr;
  EXPECT_TRUE(contains(error_of([&] { attention_fwd_05_fa2_two_tiles_per_warp(half_packed, nullptr); }),
                       "packed variable-length form"));
}

}  // namespace
}  // namespace kc::stage3
