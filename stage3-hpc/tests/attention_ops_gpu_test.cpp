// The public prefill entry, kc::stage3::attention_forward, as the engine calls it: Q and O with the
// heads of a token side by side ([S, H, D] rows, the engine's projection output), K and V gathered
// [Hkv, S, D], a chunk of Sq < Sk queries under the bottom-right causal mask. It must run the rung
// the measured tables chose for this GPU (on an H100/H200 with sm_90a code: with the mask rung 25
// up to 2048 keys and rung 15 beyond, without it rung 19; rung 05 elsewhere), write every element
// of O and LSE (poisoned first), match the double reference, and the comparison must fail against
// the reference without the mask (the control). Then two calls at once on two streams, and many
// calls with changing lengths, more tensor maps than the Hopper rung's cache keeps. Skips without
// a GPU.
#include <gtest/gtest.h>

#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "kc/common/buffer.hpp"
#include "kc/common/device.hpp"
#include "kc/stage3/attention.hpp"
#include "kc/stage3/attention_ops.hpp"
#include "kc/stage3/gemm.hpp"
#include "attention_test_support.hpp"
#include "support/gpu_test.hpp"

namespace kc::stage3 {
namespace {

using bf16 = __nv_bfloat16;

using testing_support::bf16_values;
using testing_support::upload;

struct ForwardRun {
  std::string_view rung;
  std::vector<double> o;    // [Hq, Sq, D], read back from the [Sq, Hq, D] rows
  std::vector<double> lse;  // [Hq, Sq]
};

// The engine's layout for one sequence of `s`: Q and O rows [Sq, Hq, D], K and V [Hkv, Sk, D], LSE
// [Hq, Sq]; the scale 1/sqrt(D).
AttentionArgs<bf16> engine_layout_args(const AttentionShape& s, const bf16* q, const bf16* k, const bf16* v, bf16* o,
                                       float* lse, bool causal) {
  AttentionArgs<bf16> a;
  a.q = q;
  a.k = k;
  a.v = v;
  a.o = o;
  a.lse = lse;
  a.batch = 1;
  a.q_heads = static_cast<int>(s.q_heads);
  a.kv_heads = static_cast<int>(s.kv_heads);
  a.q_len = static_cast<int>(s.q_len);
  a.kv_len = static_cast<int>(s.kv_len);
  a.head_dim = static_cast<int>(s.head_dim);
  a.q_row_stride = s.q_heads * s.head_dim;
  a.q_head_stride = s.head_dim;
  a.q_batch_stride = s.q_len * a.q_row_stride;
  a.kv_row_stride = s.head_dim;
  a.kv_head_stride = s.kv_len * s.head_dim;
  a.kv_batch_stride = s.kv_heads * a.kv_head_stride;
  a.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.head_dim)));
  a.causal = causal;
  return a;
}

// One engine-layout call: q [Hq, Sq, D] and k, v [Hkv, Sk, D] as doubles; Q is uploaded as
// [Sq, Hq, D] rows, O poisoned with NaN and LSE with 12345.
ForwardRun run_forward(const AttentionShape& s, const std::vector<double>& q, const std::vector<double>& k,
                const std::vector<double>& v, cudaStream_t stream, bool causal = true) {
  const std::int64_t row = s.q_heads * s.head_dim;
  std::vector<double> q_rows(q.size());
  for (std::int64_t h = 0; h < s.q_heads; ++h)
    for (std::int64_t i = 0; i < s.q_len; ++i)
      for (std::int64_t d = 0; d < s.head_dim; ++d)
        q_rows[i * row + h * s.head_dim + d] = q[(h * s.q_len + i) * s.head_dim + d];
  const DeviceBuffer<bf16> q_device = upload(q_rows), k_device = upload(k), v_device = upload(v);
  DeviceBuffer<bf16> o_device(q.size());
  o_device.copy_from_host(std::vector<bf16>(q.size(), __float2bfloat16(std::numeric_limits<float>::quiet_NaN())));
  DeviceBuffer<float> lse_device(static_cast<std::size_t>(s.q_heads * s.q_len));
  lse_device.copy_from_host(std::vector<float>(lse_device.size(), 12345.f));

  const AttentionArgs<bf16> a = engine_layout_args(s, q_device.data(), k_device.data(), v_device.data(),
                                                   o_device.data(), lse_device.data(), causal);
  ForwardRun run;
  run.rung = attention_forward(a, stream);
  KC_CUDA_CHECK(cudaStreamSynchronize(stream));

  const std::vector<bf16> o_rows = o_device.to_host();
  run.o.resize(q.size());
  for (std::int64_t h = 0; h < s.q_heads; ++h)
    for (std::int64_t i = 0; i < s.q_len; ++i)
      for (std::int64_t d = 0; d < s.head_dim; ++d)
        run.o[(h * s.q_len + i) * s.head_dim + d] = __bfloat162float(o_rows[i * row + h * s.head_dim + d]);
  const std::vector<float> lse = lse_device.to_host();
  run.lse.assign(lse.begin(), lse.end());
  return run;
}

// Elements of O and LSE outside the bf16 bound of `o_ref`, `lse_ref` (NaN counts as outside).
std::size_t mismatches(const ForwardRun& run, const std::vector<double>& o_ref, const std::vector<double>& lse_ref) {
  std::size_t bad = 0;
  for (std::size_t i = 0; i < o_ref.size(); ++i)
    if (!(std::abs(run.o[i] - o_ref[i]) <= 0.02 + std::abs(o_ref[i]) / 64.0)) ++bad;
  for (std::size_t i = 0; i < lse_ref.size(); ++i)
    if (!(std::abs(run.lse[i] - lse_ref[i]) <= 1e-2 * std::max(1.0, std::abs(lse_ref[i])))) ++bad;
  return bad;
}

// One prefill through attention_forward on fresh values (seeds seed, seed + 1, seed + 2 for Q, K,
// V), with the causal mask or without: it runs `expected_rung`, matches the reference, and the
// control — the same output judged against attention with the other mask — fails.
void expect_forward(const AttentionShape& s, std::string_view expected_rung, std::uint64_t seed, cudaStream_t stream,
                    bool causal = true) {
  const std::int64_t d = s.head_dim;
  const std::vector<double> q = bf16_values(static_cast<std::size_t>(s.q_heads * s.q_len * d), seed);
  const std::vector<double> k = bf16_values(static_cast<std::size_t>(s.kv_heads * s.kv_len * d), seed + 1);
  const std::vector<double> v = bf16_values(static_cast<std::size_t>(s.kv_heads * s.kv_len * d), seed + 2);
  const ForwardRun run = run_forward(s, q, k, v, stream, causal);
  EXPECT_EQ(run.rung, expected_rung) << "D = " << d;

  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  std::vector<double> o_ref(q.size()), lse_ref(static_cast<std::size_t>(s.q_heads * s.q_len));
  attention_reference(s, scale, causal, q.data(), k.data(), v.data(), o_ref.data(), lse_ref.data());
  EXPECT_EQ(mismatches(run, o_ref, lse_ref), 0u) << "D = " << d;

  std::vector<double> o_other(q.size()), lse_other(lse_ref.size());
  attention_reference(s, scale, !causal, q.data(), k.data(), v.data(), o_other.data(), lse_other.data());
  EXPECT_GT(mismatches(run, o_other, lse_other), 100u) << "D = " << d;
}

// The rung attention_forward runs: `hopper_rung` where the Hopper rungs run, rung 05 elsewhere.
std::string entry_rung(bool hopper, std::string_view hopper_rung) {
  return "stage3/attention_fwd/" + std::string(hopper ? hopper_rung : "05_fa2_two_tiles_per_warp");
}

TEST(AttentionOpsGpu, ForwardRunsTheFastestRungOnTheEngineLayoutAndMatchesTheReference) {
  KC_SKIP_WITHOUT_GPU();
  Context& context = testing::shared_context();
  const bool hopper = runs_hopper_rungs(context.device().ordinal);
  for (const std::int64_t d : {64, 128}) {
    // A prefill chunk: 150 new queries over 333 keys (183 cached), 8 query heads on 2 kv heads.
    const AttentionShape s{/*batch=*/1, /*q_heads=*/8, /*kv_heads=*/2, /*q_len=*/150, /*kv_len=*/333, d};
    expect_forward(s, entry_rung(hopper, "25_dynamic_items"), 1, context.stream());
  }
}

// A long prefill (past the 2048 keys up to which the causal entry runs rung 25): at D = 64 rung 15
// runs three consumer warpgroups (192-row tiles); an odd length, so the last tile is partly empty.
TEST(AttentionOpsGpu, LongPrefillAtHeadDim64RunsThreeConsumersAndMatchesTheReference) {
  KC_SKIP_WITHOUT_GPU();
  Context& context = testing::shared_context();
  const bool hopper = runs_hopper_rungs(context.device().ordinal);
  for (const std::int64_t d : {64, 128}) {
    const AttentionShape s{/*batch=*/1, /*q_heads=*/2, /*kv_heads=*/1, /*q_len=*/2048 + 77, /*kv_len=*/2048 + 77, d};
    expect_forward(s, entry_rung(hopper, "15_lazy_rescale"), 4, context.stream());
  }
}

// Without the mask the Hopper entry runs rung 19 (persistent CTAs): an odd length, grouped heads,
// both head dimensions; the control — the same output judged against the causal reference — fails.
TEST(AttentionOpsGpu, ForwardWithoutTheMaskRunsThePersistentRungAndMatchesTheReference) {
  KC_SKIP_WITHOUT_GPU();
  Context& context = testing::shared_context();
  const bool hopper = runs_hopper_rungs(context.device().ordinal);
  for (const std::int64_t d : {64, 128}) {
    const AttentionShape s{/*batch=*/1, /*q_heads=*/8, /*kv_heads=*/2, /*q_len=*/1000, /*kv_len=*/1000, d};
    expect_forward(s, entry_rung(hopper, "19_pair_tiles_together"), 40, context.stream(), /*causal=*/false);
  }
}

// One causal prefill through attention_forward on its own buffers (Q rows [S, Hq, D], K and V
// [Hkv, S, D]), launched on `stream` without waiting; O and LSE read back as their bits.
struct EntryCall {
  DeviceBuffer<bf16> q, k, v, o;
  DeviceBuffer<float> lse;
  AttentionArgs<bf16> a;
  EntryCall(const AttentionShape& s, std::uint64_t seed)
      : q(upload(bf16_values(static_cast<std::size_t>(s.q_len * s.q_heads * s.head_dim), seed))),
        k(upload(bf16_values(static_cast<std::size_t>(s.kv_heads * s.kv_len * s.head_dim), seed + 1))),
        v(upload(bf16_values(static_cast<std::size_t>(s.kv_heads * s.kv_len * s.head_dim), seed + 2))),
        o(static_cast<std::size_t>(s.q_len * s.q_heads * s.head_dim)),
        lse(static_cast<std::size_t>(s.q_heads * s.q_len)),
        a(engine_layout_args(s, q.data(), k.data(), v.data(), o.data(), lse.data(), /*causal=*/true)) {}
  void poison() {
    o.copy_from_host(std::vector<bf16>(o.size(), __float2bfloat16(std::numeric_limits<float>::quiet_NaN())));
    lse.copy_from_host(std::vector<float>(lse.size(), 12345.f));
  }
  std::string_view launch(cudaStream_t stream) { return attention_forward(a, stream); }
  std::vector<std::uint16_t> bits() const {
    std::vector<std::uint16_t> out(o.size());
    const std::vector<bf16> values = o.to_host();
    std::memcpy(out.data(), values.data(), out.size() * sizeof(std::uint16_t));
    const std::vector<float> l = lse.to_host();
    const auto* l_bits = reinterpret_cast<const std::uint16_t*>(l.data());
    out.insert(out.end(), l_bits, l_bits + 2 * l.size());
    return out;
  }
};

// Two causal prefills at once on two streams: on Hopper rung 25, whose CTAs take their items from
// a counter (one pair of counters per stream: launches that shared one would take each other's
// items and leave rows unwritten). 512 query-tile items a call (16 tiles x 32 heads) against 132
// CTAs, so every CTA takes items from the counter; each call, repeated four times at once with the
// other, must give the bits it gives alone (every element poisoned before).
TEST(AttentionOpsGpu, CausalCallsOnTwoStreamsAtOnceGiveTheBitsEachGivesAlone) {
  KC_SKIP_WITHOUT_GPU();
  Context& context = testing::shared_context();
  const bool hopper = runs_hopper_rungs(context.device().ordinal);
  const AttentionShape s{/*batch=*/1, /*q_heads=*/32, /*kv_heads=*/8, /*q_len=*/2048, /*kv_len=*/2048, 128};
  cudaStream_t streams[2];
  for (cudaStream_t& stream : streams) KC_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  EntryCall calls[2] = {EntryCall(s, 70), EntryCall(s, 80)};
  std::vector<std::uint16_t> alone[2];
  for (int c = 0; c < 2; ++c) {
    calls[c].poison();
    EXPECT_EQ(calls[c].launch(streams[c]), entry_rung(hopper, "25_dynamic_items"));
    KC_CUDA_CHECK(cudaStreamSynchronize(streams[c]));
    alone[c] = calls[c].bits();
  }
  ASSERT_NE(alone[0], alone[1]);  // different inputs, different outputs: the comparison below can fail
  for (int repeat = 0; repeat < 4; ++repeat) {
    for (EntryCall& call : calls) call.poison();
    KC_CUDA_CHECK(cudaDeviceSynchronize());
    for (int c = 0; c < 2; ++c) calls[c].launch(streams[c]);
    for (cudaStream_t stream : streams) KC_CUDA_CHECK(cudaStreamSynchronize(stream));
    for (int c = 0; c < 2; ++c) EXPECT_EQ(calls[c].bits(), alone[c]) << "call " << c << ", repeat " << repeat;
  }
  for (cudaStream_t stream : streams) KC_CUDA_CHECK(cudaStreamDestroy(stream));
}

TEST(AttentionOpsGpu, ManyChunkLengthsInARowStayCorrect) {
  KC_SKIP_WITHOUT_GPU();
  Context& context = testing::shared_context();
  AttentionShape s;
  s.batch = 1;
  s.q_heads = 2;
  s.kv_heads = 1;
  s.head_dim = 64;
  // 3 tensor maps a call on the Hopper rung: 400 lengths pass its cache's bound of 1024.
  for (std::int64_t length = 1; length <= 400; ++length) {
    s.q_len = std::max<std::int64_t>(1, length / 3);
    s.kv_len = length;
    const std::vector<double> q = bf16_values(static_cast<std::size_t>(s.q_heads * s.q_len * 64), 10 + length);
    const std::vector<double> k = bf16_values(static_cast<std::size_t>(s.kv_len * 64), 20 + length);
    const std::vector<double> v = bf16_values(static_cast<std::size_t>(s.kv_len * 64), 30 + length);
    const ForwardRun run = run_forward(s, q, k, v, context.stream());
    if (length % 57 != 1 && length != 400) continue;  // check a spread of them against the reference
    std::vector<double> o_ref(q.size()), lse_ref(static_cast<std::size_t>(s.q_heads * s.q_len));
    attention_reference(s, 0.125, true, q.data(), k.data(), v.data(), o_ref.data(), lse_ref.data());
    ASSERT_EQ(mismatches(run, o_ref, lse_ref), 0u) << "Sq = " << s.q_len << ", Sk = " << length;
  }
}

}  // namespace
}  // namespace kc::stage3
