// The packed variable-length form on the GPU, beyond what the conformance suite checks (the rung on
// every conformance problem of attention_fwd_varlen, tests/conformance): the op's FP64 device
// reference agrees with its host reference; its baseline (the dense entry once per sequence)
// passes the check; the check rejects the rung run with a wrong scale or without the mask, and the
// dense entry run over the packed tensors as one sequence (attention across sequences); the public
// entry runs its packed rung (15 on an H100/H200, 05 elsewhere) on a hand-made ragged batch
// (poisoned outputs, an empty sequence, one with no keys, Sq_b != Sk_b) and matches the reference,
// and so does the Hopper rung 15 called on its own, negative scales included; and no sequence reads its neighbour's keys (NaN planted in the
// next sequence's first key and value stays there) — in rung 05, in rung 15, and, as the negative
// control, not in rung 15's kernel with its partial tiles loaded by TMA. Skips without a GPU (the
// rung-15 parts without a Hopper GPU and sm_90a code).
#include <gtest/gtest.h>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "kc/common/buffer.hpp"
#include "kc/common/check.hpp"
#include "kc/common/registry.hpp"
#include "kc/stage3/attention.hpp"
#include "kc/stage3/attention_ops.hpp"
#include "kc/stage3/attention_varlen.hpp"
#include "kc/stage3/gemm.hpp"
#include "arch/sm90/tma_descriptor.hpp"
#include "attention_test_support.hpp"
#include "src/register_attention.hpp"
#include "stage3_test_registry.hpp"
#include "support/gpu_test.hpp"

namespace kc::stage3 {
namespace {

using bf16 = __nv_bfloat16;

constexpr const char* kRung = "stage3/attention_fwd_varlen/05_fa2_two_tiles_per_warp";
constexpr const char* kHopperRung = "stage3/attention_fwd_varlen/15_lazy_rescale";

// Whether this GPU runs the Hopper rung (compute capability 9.0 and sm_90a code in the build).
bool hopper_here() {
  int device = 0;
  KC_CUDA_CHECK(cudaGetDevice(&device));
  return runs_hopper_rungs(device);
}

const OpSpec& varlen_op() { return stage3_test_registry().op(kAttentionVarlenOp); }

TEST(AttentionVarlenGpu, DeviceReferenceAgreesWithTheHostReference) {
  KC_SKIP_WITHOUT_GPU();
  Context& context = testing::shared_context();
  const OpSpec& op = varlen_op();
  for (const DType dtype : {DType::bf16, DType::f16})
    for (const double causal : {0.0, 1.0})
      for (const std::vector<std::int64_t>& dims :
           {std::vector<std::int64_t>{9, 4, 2, 150, 300, 64}, std::vector<std::int64_t>{7, 8, 1, 300, 77, 128}}) {
        const Problem problem = op.problem(dims, dtype, {{"causal", causal}, {"lengths", 1.0}});
        const Operands operands = op.make_operands(problem, 7, context);
        testing_support::expect_references_agree(op, problem, operands, context);
      }
}

TEST(AttentionVarlenGpu, TheBaselinePassesEveryConformanceProblemItRuns) {
  KC_SKIP_WITHOUT_GPU();
  Context& context = testing::shared_context();
  const OpSpec& op = varlen_op();
  int checked = 0;
  for (const Problem& problem : op.conformance_problems) {
    const CheckOutcome outcome = check_baseline(op, problem, 11, context);
    if (outcome.status == CheckOutcome::Status::unsupported) {
      EXPECT_EQ(varlen_shape(problem).head_dim, 80) << problem.label() << ": " << outcome.detail;
      continue;
    }
    ++checked;
    EXPECT_TRUE(outcome.passed()) << problem.label() << ": " << outcome.detail;
  }
  EXPECT_GT(checked, 0);
}

// The tolerance must not let a realistic bug through: the rung run with another problem's
// parameters (a scale 25% off; the causal mask dropped), and attention that ignores the sequence
// boundaries (the dense entry over the whole packed tensors as one sequence), judged against the
// right reference.
TEST(AttentionVarlenGpu, TheCheckRejectsAWrongScaleAMissingMaskAndCrossSequenceAttention) {
  KC_SKIP_WITHOUT_GPU();
  Context& context = testing::shared_context();
  const Registry& r = stage3_test_registry();
  const OpSpec& op = varlen_op();
  std::vector<const char*> rungs = {kRung};
  if (hopper_here()) rungs.push_back(kHopperRung);
  for (const DType dtype : {DType::bf16, DType::f16}) {
    const Problem problem = op.problem({9, 8, 2, 300, 500, 128}, dtype, {{"causal", 1.0}, {"lengths", 1.0}});
    for (const char* name : rungs) {
      const KernelEntry& rung = r.kernel(name);
      ASSERT_TRUE(check_kernel(r, rung, problem, 5, context).passed()) << name << " " << problem.label();
      for (const Problem& wrong : testing_support::wrongly_parameterized(problem)) {
        const CheckOutcome outcome = check_run(
            op, [&](const Problem&, Operands& operands, Context& c) { rung.launch(wrong, operands, c.stream()); },
            problem, 5, context);
        EXPECT_FALSE(outcome.passed()) << name << " " << problem.label() << " computed as " << wrong.label()
                                       << " passed: " << outcome.detail;
      }
    }
    if (dtype != DType::bf16) continue;
    const auto across_sequences = [](const Problem& p, Operands& operands, Context& c) {
      AttentionArgs<bf16> a = varlen_attention_args<bf16>(p, operands);
      a.cu_seqlens_q = a.cu_seqlens_k = nullptr;
      a.batch = 1;  // one sequence: the whole packed tensors
      a.q_len = static_cast<int>(operands["Q"].shape[0]);  // every row of the packed tensors
      a.kv_len = static_cast<int>(operands["K"].shape[0]);
      a.q_batch_stride = a.q_len * a.q_row_stride;
      a.kv_batch_stride = a.kv_len * a.kv_row_stride;
      attention_forward(a, c.stream());
    };
    const CheckOutcome outcome = check_run(op, across_sequences, problem, 5, context);
    EXPECT_FALSE(outcome.passed()) << problem.label() << " computed as one sequence passed: " << outcome.detail;
  }
}

using testing_support::bf16_values;
using testing_support::upload;

// A hand-made packed batch: lengths, offsets and the packed Q, K, V as doubles.
struct PackedBatch {
  std::int64_t q_heads = 8, kv_heads = 2, head_dim = 64;
  std::vector<std::int32_t> q_lens, kv_lens, cu_q, cu_k;
  std::vector<double> q, k, v;

  PackedBatch(std::vector<std::int32_t> queries, std::vector<std::int32_t> keys, std::int64_t d, std::uint64_t seed)
      : head_dim(d), q_lens(std::move(queries)), kv_lens(std::move(keys)) {
    cu_q = cu_seqlens_from_lengths(q_lens);
    cu_k = cu_seqlens_from_lengths(kv_lens);
    q = bf16_values(static_cast<std::size_t>(cu_q.back() * q_heads * d), seed);
    k = bf16_values(static_cast<std::size_t>(cu_k.back() * kv_heads * d), seed + 1);
    v = bf16_values(static_cast<std::size_t>(cu_k.back() * kv_heads * d), seed + 2);
  }
  int batch() const { return static_cast<int>(q_lens.size()); }
  int max_q() const { return *std::max_element(q_lens.begin(), q_lens.end()); }
  int max_kv() const { return *std::max_element(kv_lens.begin(), kv_lens.end()); }
  VarlenShape shape() const {
    VarlenShape s;
    s.batch = batch();
    s.q_heads = q_heads;
    s.kv_heads = kv_heads;
    s.max_q_len = max_q();
    s.max_kv_len = max_kv();
    s.head_dim = head_dim;
    return s;
  }
};

struct PackedRun {
  std::string_view rung;
  std::vector<double> o, lse;
};

// A launch of the packed form other than the public entry (a rung called directly).
using PackedLaunch = std::function<void(const AttentionArgs<bf16>&, cudaStream_t)>;

// `values` in a device buffer of at least `rows` rows of `row` elements (zeros after them): room
// for the flawed rung 15, whose TMA reads go as far as B x max_seqlen rows.
DeviceBuffer<bf16> upload_padded(const std::vector<double>& values, std::int64_t rows, std::int64_t row) {
  std::vector<double> padded = values;
  padded.resize(std::max(values.size(), static_cast<std::size_t>(rows * row)), 0.0);
  return upload(padded);
}

// attention_forward (or `launch`) on the packed batch (bf16), O poisoned with NaN and LSE with
// 12345 first; Q, K and V in buffers of B x max_seqlen rows.
PackedRun run_packed(const PackedBatch& batch, bool causal, float scale, cudaStream_t stream,
                     const PackedLaunch& launch = {}) {
  const std::int64_t sequences = batch.batch();
  const DeviceBuffer<bf16> q = upload_padded(batch.q, sequences * batch.max_q(), batch.q_heads * batch.head_dim);
  const DeviceBuffer<bf16> k = upload_padded(batch.k, sequences * batch.max_kv(), batch.kv_heads * batch.head_dim);
  const DeviceBuffer<bf16> v = upload_padded(batch.v, sequences * batch.max_kv(), batch.kv_heads * batch.head_dim);
  DeviceBuffer<bf16> o(batch.q.size());
  o.copy_from_host(std::vector<bf16>(o.size(), __float2bfloat16(std::numeric_limits<float>::quiet_NaN())));
  DeviceBuffer<float> lse(static_cast<std::size_t>(batch.cu_q.back() * batch.q_heads));
  lse.copy_from_host(std::vector<float>(lse.size(), 12345.f));
  DeviceBuffer<std::int32_t> cu_q(batch.cu_q.size()), cu_k(batch.cu_k.size());
  cu_q.copy_from_host(batch.cu_q);
  cu_k.copy_from_host(batch.cu_k);

  AttentionArgs<bf16> a;
  a.q = q.data();
  a.k = k.data();
  a.v = v.data();
  a.o = o.data();
  a.lse = lse.data();
  a.cu_seqlens_q = cu_q.data();
  a.cu_seqlens_k = cu_k.data();
  a.batch = batch.batch();
  a.q_heads = static_cast<int>(batch.q_heads);
  a.kv_heads = static_cast<int>(batch.kv_heads);
  a.q_len = batch.max_q();
  a.kv_len = batch.max_kv();
  a.head_dim = static_cast<int>(batch.head_dim);
  a.q_row_stride = batch.q_heads * batch.head_dim;
  a.q_head_stride = batch.head_dim;
  a.kv_row_stride = batch.kv_heads * batch.head_dim;
  a.kv_head_stride = batch.head_dim;
  a.scale = scale;
  a.causal = causal;
  PackedRun run;
  if (launch)
    launch(a, stream);
  else
    run.rung = attention_forward(a, stream);
  KC_CUDA_CHECK(cudaStreamSynchronize(stream));
  const std::vector<bf16> o_host = o.to_host();
  run.o.resize(o_host.size());
  std::transform(o_host.begin(), o_host.end(), run.o.begin(), [](bf16 x) { return double{__bfloat162float(x)}; });
  const std::vector<float> lse_host = lse.to_host();
  run.lse.assign(lse_host.begin(), lse_host.end());
  return run;
}

// Elements of O and LSE outside the bf16 bound of the reference (NaN outside; the -inf of rows
// that see no key must be -inf).
std::size_t mismatches(const PackedRun& run, const std::vector<double>& o_ref, const std::vector<double>& lse_ref) {
  std::size_t bad = 0;
  for (std::size_t i = 0; i < o_ref.size(); ++i)
    if (!(std::abs(run.o[i] - o_ref[i]) <= 0.02 + std::abs(o_ref[i]) / 64.0)) ++bad;
  for (std::size_t i = 0; i < lse_ref.size(); ++i) {
    if (std::isinf(lse_ref[i])) {
      bad += run.lse[i] == lse_ref[i] ? 0 : 1;
      continue;
    }
    if (!(std::abs(run.lse[i] - lse_ref[i]) <= 1e-2 * std::max(1.0, std::abs(lse_ref[i])))) ++bad;
  }
  return bad;
}

struct Reference {
  std::vector<double> o, lse;
};
Reference reference_of(const PackedBatch& batch, bool causal, double scale) {
  Reference r;
  r.o.assign(batch.q.size(), 0.0);
  r.lse.assign(static_cast<std::size_t>(batch.cu_q.back() * batch.q_heads), -std::numeric_limits<double>::infinity());
  attention_varlen_reference(batch.shape(), scale, causal, batch.cu_q.data(), batch.cu_k.data(), batch.q.data(),
                             batch.k.data(), batch.v.data(), r.o.data(), r.lse.data());
  return r;
}

// The entry runs the packed rung 15 on an H100/H200 (sm_90a code built) and rung 05 elsewhere.
TEST(AttentionVarlenGpu, TheEntryRunsItsPackedRungOnARaggedBatchAndMatchesTheReference) {
  KC_SKIP_WITHOUT_GPU();
  Context& context = testing::shared_context();
  for (const std::int64_t d : {64, 128}) {
    // A prefill chunk over a cached prefix, a decoding token, an empty slot, a sequence with
    // queries and no keys yet, one with more queries than keys, and one of exactly two query tiles.
    const PackedBatch batch({150, 1, 0, 37, 200, 256}, {333, 1000, 5, 0, 129, 256}, d, 100 + d);
    for (const bool causal : {true, false}) {
      const double scale = 1.0 / std::sqrt(static_cast<double>(d));
      const PackedRun run = run_packed(batch, causal, static_cast<float>(scale), context.stream());
      EXPECT_EQ(run.rung, hopper_here() ? kHopperRung : kRung);
      const Reference ref = reference_of(batch, causal, scale);
      EXPECT_EQ(mismatches(run, ref.o, ref.lse), 0u) << "D = " << d << (causal ? ", causal" : "");
      // The control: the same output judged against the other mask must fail.
      const Reference other = reference_of(batch, !causal, scale);
      EXPECT_GT(mismatches(run, other.o, other.lse), 100u) << "D = " << d;
    }
  }
}

// Rung 15 on the packed form, called directly, on the entry test's ragged batch and one more
// sequence: its partial Q and K/V tiles are the producer warp's copies, the others TMA's; a
// sequence of exactly two tiles of keys (256) has no partial tile, one of 129 keys a partial tile
// of one key. A scale that is not positive runs the packed rung 05 and must give the same answers.
TEST(AttentionVarlenGpu, TheHopperRungMatchesTheReferenceOnARaggedBatch) {
  KC_SKIP_WITHOUT_GPU();
  if (!hopper_here()) GTEST_SKIP() << "rung 15 needs a Hopper GPU and a build with sm_90a code";
  Context& context = testing::shared_context();
  HopperLaunchCache cache;
  const PackedLaunch rung15 = [&](const AttentionArgs<bf16>& a, cudaStream_t s) {
    attention_fwd_varlen_15_lazy_rescale(a, s, cache);
  };
  for (const std::int64_t d : {64, 128}) {
    const PackedBatch batch({150, 1, 0, 37, 200, 256, 193}, {333, 1000, 5, 0, 129, 256, 64}, d, 200 + d);
    for (const bool causal : {true, false})
      for (const double scale : {1.0 / std::sqrt(static_cast<double>(d)), -0.3}) {
        const PackedRun run = run_packed(batch, causal, static_cast<float>(scale), context.stream(), rung15);
        const Reference ref = reference_of(batch, causal, scale);
        EXPECT_EQ(mismatches(run, ref.o, ref.lse), 0u) << "D = " << d << (causal ? ", causal" : "") << ", scale "
                                                       << scale;
        const Reference other = reference_of(batch, !causal, scale);
        EXPECT_GT(mismatches(run, other.o, other.lse), 100u) << "D = " << d << ", scale " << scale;
      }
  }
}

// Sequence 0 has 100 queries over 130 keys: its last K/V tile (64 keys in rung 05 at D = 64, 128 in
// rung 15) holds keys 128-129 and would run into sequence 1's keys; its last Q tile into sequence
// 1's rows. NaN in sequence 1's first key and value (which every row of sequence 1 sees) must make
// exactly sequence 1's rows NaN and leave sequence 0 as the reference has it: a kernel that loaded
// sequence 1's rows into sequence 0's tile would multiply that NaN value by P = 0 and spread it —
// as rung 15's kernel with its partial tiles by TMA does (the negative control, which must fail).
TEST(AttentionVarlenGpu, NoSequenceReadsItsNeighboursKeys) {
  KC_SKIP_WITHOUT_GPU();
  Context& context = testing::shared_context();
  HopperLaunchCache cache;
  struct Candidate {
    const char* name;
    PackedLaunch launch;  // empty: the public entry
    bool flawed;
  };
  std::vector<Candidate> candidates = {{"the entry", {}, false}};
  if (hopper_here()) {
    candidates.push_back({"rung 15",
                          [&](const AttentionArgs<bf16>& a, cudaStream_t s) {
                            attention_fwd_varlen_15_lazy_rescale(a, s, cache);
                          },
                          false});
    candidates.push_back({"rung 15 with its partial tiles by TMA (negative control)",
                          [&](const AttentionArgs<bf16>& a, cudaStream_t s) {
                            attention_fwd_varlen_15_with_whole_tiles_by_tma(a, s, cache);
                          },
                          true});
  }
  for (const Candidate& candidate : candidates)
  for (const std::int64_t d : {64, 128})
  for (const bool causal : {false, true}) {
    PackedBatch batch({100, 50}, {130, 70}, d, 7);
    const double scale = 0.125;
    const Reference clean = reference_of(batch, causal, scale);
    const std::int64_t key_row = batch.cu_k[1] * batch.kv_heads * batch.head_dim;  // sequence 1's key 0
    for (std::int64_t e = 0; e < batch.kv_heads * batch.head_dim; ++e) {
      batch.k[static_cast<std::size_t>(key_row + e)] = std::numeric_limits<double>::quiet_NaN();
      batch.v[static_cast<std::size_t>(key_row + e)] = std::numeric_limits<double>::quiet_NaN();
    }
    const PackedRun run = run_packed(batch, causal, static_cast<float>(scale), context.stream(), candidate.launch);
    const std::int64_t row = batch.q_heads * batch.head_dim;
    std::size_t wrong = 0;
    for (std::int64_t t = 0; t < batch.cu_q.back(); ++t) {
      const bool second = t >= batch.cu_q[1];
      for (std::int64_t e = 0; e < row; ++e) {
        const double value = run.o[static_cast<std::size_t>(t * row + e)];
        const double expected = clean.o[static_cast<std::size_t>(t * row + e)];
        wrong += second ? (std::isnan(value) ? 0 : 1) : (std::abs(value - expected) <= 0.02 + std::abs(expected) / 64.0 ? 0 : 1);
      }
    }
    for (std::size_t i = 0; i < run.lse.size(); ++i) {
      const bool second = static_cast<std::int64_t>(i) >= batch.cu_q[1] * batch.q_heads;
      wrong += second ? (std::isnan(run.lse[i]) ? 0 : 1)
                      : (std::abs(run.lse[i] - clean.lse[i]) <= 1e-2 * std::max(1.0, std::abs(clean.lse[i])) ? 0 : 1);
    }
    if (candidate.flawed)
      EXPECT_GT(wrong, 0u) << candidate.name << ", D = " << d << (causal ? ", causal" : ", no mask")
                           << ": the neighbour's NaN did not reach sequence 0, so the test could not catch it";
    else
      EXPECT_EQ(wrong, 0u) << candidate.name << ", D = " << d << (causal ? ", causal" : ", no mask")
                           << ": elements differ (sequence 0 as the reference, sequence 1 all NaN)";
  }
}

}  // namespace
}  // namespace kc::stage3
