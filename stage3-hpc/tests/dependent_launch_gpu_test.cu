// Programmatic dependent launch (kc/core/dependent_launch.cuh) and rung 12, the kernel the engine's
// decode step chains that way. A first kernel lets its dependents start at once, then spins for a
// while before it writes its output, so a dependent that starts early is certain to run before the
// output exists:
//   - the negative control reads its input before core::wait_for_previous_grids(): inside a
//     ProgrammaticLaunchScope it must see the poison (which proves the dependent really started
//     early, so the other checks test something), after the wait the value; launched ordinarily
//     it sees the value both times;
//   - rung 12 (M = 1, the RMSNorm prologue and a beta = 1 residual step among the launches) in a
//     chain behind the spinning kernel must give, inside the scope, bit for bit what it gives with
//     ordinary launches — also when its threads load their first trip of the weights before the
//     wait (set_small_m_gemv_first_trip_before_wait), with either K loop — and the first product
//     must match a double-precision reference;
//   - the paged decode attention's rung 05, which reads lengths and block tables and prefetches
//     pages before its wait, behind a kernel that writes Q and every K/V row of the cache late
//     (more than its contract allows: only the new tokens' rows may be written by the kernel
//     ahead), gives the ordinary launches' bits: nothing it computes with is read before the wait;
//   - rung 07 (the public entry's RoPE rung), which copies the cached rows of its first tiles into
//     shared memory before its wait, behind a kernel that writes Q and the new tokens' K/V late
//     (what its contract allows) gives the ordinary launches' bits; behind one that writes the
//     cached rows late (what the contract forbids) it computes with the poison — which proves the
//     copies really happen before the wait, so the first check tests something.
// Skips without a GPU, and the early-start checks skip below compute capability 9.0 (no
// programmatic launches there: the kernels launch ordinarily).
#include <gtest/gtest.h>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cuda/atomic>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "hgemm.hpp"
#include "attention_test_support.hpp"
#include "kc/stage3/attention_decode.hpp"
#include "kc/stage3/attention_ops.hpp"
#include "src/register_attention_decode.hpp"
#include "stage3_test_registry.hpp"
#include "kc/common/buffer.hpp"
#include "kc/common/context.hpp"
#include "kc/common/device.hpp"
#include "kc/common/error.hpp"
#include "kc/common/fill.hpp"
#include "kc/core/dependent_launch.cuh"
#include "support/gpu_test.hpp"

namespace kc::stage3 {
namespace {

// About half a millisecond at the H200's clocks: far longer than a launch.
constexpr long long kSpinCycles = 1'000'000;

// Lets its dependents start, spins, then copies `count` elements from `from` to `to`.
__global__ void spin_then_copy(const bf16* from, bf16* to, int count, long long cycles) {
  core::let_dependent_grids_start();
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
  for (int i = static_cast<int>(threadIdx.x); i < count; i += static_cast<int>(blockDim.x)) to[i] = from[i];
}

// The negative control: breaks the contract by reading its input before the wait.
__global__ void read_before_the_wait(const bf16* input, float* seen) {
  const float early = __bfloat162float(input[0]);
  core::wait_for_previous_grids();
  if (threadIdx.x == 0) {
    seen[0] = early;
    seen[1] = __bfloat162float(input[0]);
  }
}

bool programmatic_launch_available() {
  return query_device().compute_capability() >= 90;
}

TEST(DependentLaunch, TheDependentStartsEarlyAndTheWaitHoldsItUntilTheInputIsWritten) {
  KC_SKIP_WITHOUT_GPU();
  if (!programmatic_launch_available()) GTEST_SKIP() << "programmatic dependent launch needs compute capability 9.0";
  Stream stream;
  const std::vector<bf16> one(1, __float2bfloat16(1.f));
  DeviceBuffer<bf16> source(1), input(1);
  DeviceBuffer<float> seen(2);
  source.copy_from_host(one, stream.get());
  // A kernel's first launch in a process may load its module (lazy loading), which waits for the
  // work in flight: the checked round comes after a warm-up round of both kernels.
  for (int round = 0; round < 2; ++round) {
    for (const bool dependent : {true, false}) {
      poison(input.data(), DType::bf16, 1, stream.get());
      {
        const core::ProgrammaticLaunchScope scope{dependent};
        spin_then_copy<<<1, 32, 0, stream.get()>>>(source.data(), input.data(), 1, kSpinCycles);
        KC_CHECK_LAUNCH();
        EXPECT_EQ(core::launch_dependent(read_before_the_wait, dim3(1), dim3(32), 0, stream.get(), input.data(),
                                         seen.data()),
                  dependent);
      }
      const std::vector<float> got = seen.to_host(stream.get());
      if (round == 0) continue;
      if (dependent)
        EXPECT_TRUE(std::isnan(got[0])) << "the dependent read " << got[0]
                                        << " before its wait: it did not start before the first kernel wrote";
      else
        EXPECT_EQ(got[0], 1.f) << "an ordinary launch started before the kernel ahead of it ended";
      EXPECT_EQ(got[1], 1.f) << (dependent ? "after the wait" : "ordinary launch")
                             << ": the input is not the value written";
    }
  }
}

std::vector<std::uint16_t> bits_of(const DeviceBuffer<bf16>& buffer, cudaStream_t stream) {
  const std::vector<bf16> values = buffer.to_host(stream);
  std::vector<std::uint16_t> bits(values.size());
  std::memcpy(bits.data(), values.data(), values.size() * sizeof(bf16));
  return bits;
}

// x (written late by the spinning kernel) -> y1 = rmsnorm(x) . W1^T -> y2 = y1 . W2^T ->
// y3 += y2 . W3^T (beta = 1), every launch of rung 12 at M = 1; returns y1, y2 and y3.
TEST(DependentLaunch, Rung12ChainedBehindALateInputGivesTheOrdinaryLaunchesBits) {
  KC_SKIP_WITHOUT_GPU();
  constexpr int kN = 4096, kK = 4096;
  Stream stream;
  DeviceBuffer<bf16> x_source(kK), norm_weight(kK), w1(std::size_t{kN} * kK), w2(std::size_t{kN} * kK),
      w3(std::size_t{kN} * kK), y3_start(kN);
  fill_random(x_source, 11, {}, stream.get());
  fill_random(norm_weight, 12, {}, stream.get());
  fill_random(w1, 13, {}, stream.get());
  fill_random(w2, 14, {}, stream.get());
  fill_random(w3, 15, {}, stream.get());
  fill_random(y3_start, 16, {}, stream.get());
  // Launch modes: ordinary; programmatic dependents; programmatic dependents that load their first
  // trip of B before the wait, with the one-piece and the two-piece K loops.
  struct Mode {
    bool dependent, first_trip_before_wait;
    SmallMGemvTrip trip;
  };
  const Mode modes[] = {{false, false, SmallMGemvTrip::automatic},
                        {true, false, SmallMGemvTrip::automatic},
                        {true, true, SmallMGemvTrip::one_piece},
                        {true, true, SmallMGemvTrip::two_pieces}};
  constexpr int kModes = sizeof modes / sizeof modes[0];
  std::vector<std::uint16_t> results[kModes][3];
  const SmallMGemvKnobsRestorer restore_knobs;  // the modes set them; the process's after the test
  for (int mode = 0; mode < kModes; ++mode) {
    const bool dependent = modes[mode].dependent;
    set_small_m_gemv_first_trip_before_wait(modes[mode].first_trip_before_wait);
    set_small_m_gemv_trip(modes[mode].trip);
    DeviceBuffer<bf16> x(kK), y1(kN), y2(kN), y3(kN);
    poison(x.data(), DType::bf16, kK, stream.get());
    poison(y1.data(), DType::bf16, kN, stream.get());
    poison(y2.data(), DType::bf16, kN, stream.get());
    KC_CUDA_CHECK(cudaMemcpyAsync(y3.data(), y3_start.data(), y3.bytes(), cudaMemcpyDeviceToDevice, stream.get()));
    {
      const core::ProgrammaticLaunchScope scope{dependent};
      spin_then_copy<<<1, 256, 0, stream.get()>>>(x_source.data(), x.data(), kK, kSpinCycles);
      KC_CHECK_LAUNCH();
      const SmallMGemvWeight first{w1.data(), y1.data(), kN};
      hgemm_12_small_m_gemv_shared_a(1, kK, 1.f, x.data(), &first, 1, 0.f, stream.get(), norm_weight.data(), 1e-5f);
      const SmallMGemvWeight second{w2.data(), y2.data(), kN};
      hgemm_12_small_m_gemv_shared_a(1, kK, 1.f, y1.data(), &second, 1, 0.f, stream.get());
      const SmallMGemvWeight third{w3.data(), y3.data(), kN};
      hgemm_12_small_m_gemv_shared_a(1, kK, 1.f, y2.data(), &third, 1, 1.f, stream.get());
    }
    results[mode][0] = bits_of(y1, stream.get());
    results[mode][1] = bits_of(y2, stream.get());
    results[mode][2] = bits_of(y3, stream.get());
  }
  for (int mode = 1; mode < kModes; ++mode)
    for (int i = 0; i < 3; ++i)
      EXPECT_EQ(results[0][i], results[mode][i])
          << "output " << i + 1 << " of the chain differs between the ordinary launches and mode " << mode;

  // The first product against double precision: rmsnorm(x) . W1^T.
  const std::vector<double> x = to_host_double(x_source.data(), DType::bf16, kK, stream.get());
  const std::vector<double> g = to_host_double(norm_weight.data(), DType::bf16, kK, stream.get());
  const std::vector<double> w = to_host_double(w1.data(), DType::bf16, std::size_t{kN} * kK, stream.get());
  double squares = 0;
  for (double v : x) squares += v * v;
  const double inverse_rms = 1.0 / std::sqrt(squares / kK + 1e-5);
  int bad = 0;
  for (int n = 0; n < kN; ++n) {
    double dot = 0, magnitude = 0;
    for (int k = 0; k < kK; ++k) {
      const double term = x[k] * g[k] * w[static_cast<std::size_t>(n) * kK + k];
      dot += term;
      magnitude += std::fabs(term);
    }
    const double got = decode_element(reinterpret_cast<const std::byte*>(results[kModes - 1][0].data()), DType::bf16,
                                      static_cast<std::size_t>(n));
    // bf16 output rounding plus FP32 accumulation over K terms.
    const double bound = std::fabs(dot * inverse_rms) * 0.0079 + magnitude * inverse_rms * 2e-5 + 1e-6;
    if (!(std::fabs(got - dot * inverse_rms) <= bound)) ++bad;
  }
  EXPECT_EQ(bad, 0) << bad << " of " << kN << " outputs of the first GEMV are off the double-precision reference";
}

// Lets its dependents start, spins, then copies three arrays (Q and the two caches) into place.
__global__ void spin_then_copy_three(const bf16* q_from, bf16* q_to, std::int64_t q_count, const bf16* k_from,
                                     bf16* k_to, const bf16* v_from, bf16* v_to, std::int64_t cache_count,
                                     long long cycles) {
  core::let_dependent_grids_start();
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
  for (std::int64_t i = threadIdx.x; i < q_count; i += blockDim.x) q_to[i] = q_from[i];
  for (std::int64_t i = threadIdx.x; i < cache_count; i += blockDim.x) {
    k_to[i] = k_from[i];
    v_to[i] = v_from[i];
  }
}

// Three tensors of `operands` written late: their values saved, the tensors poisoned, and
// launch() starts spin_then_copy_three to put the values back after its spin (the second and third
// tensors have the same element count).
class LateWriter {
 public:
  LateWriter(Operands& operands, const char* first, const char* second, const char* third, cudaStream_t stream)
      : a_(operands[first]), b_(operands[second]), c_(operands[third]),
        a_source_(a_.count()), b_source_(b_.count()), c_source_(c_.count()) {
    for (auto [tensor, source] : {std::pair{&a_, &a_source_}, std::pair{&b_, &b_source_}, std::pair{&c_, &c_source_}}) {
      KC_CUDA_CHECK(cudaMemcpyAsync(source->data(), tensor->raw(), tensor->bytes(), cudaMemcpyDeviceToDevice, stream));
      poison(tensor->raw(), DType::bf16, tensor->count(), stream);
    }
  }

  void launch(cudaStream_t stream) {
    spin_then_copy_three<<<1, 256, 0, stream>>>(a_source_.data(), a_.data<bf16>(), static_cast<std::int64_t>(a_.count()),
                                                b_source_.data(), b_.data<bf16>(), c_source_.data(), c_.data<bf16>(),
                                                static_cast<std::int64_t>(b_.count()), kSpinCycles);
    KC_CHECK_LAUNCH();
  }

 private:
  Tensor &a_, &b_, &c_;
  DeviceBuffer<bf16> a_source_, b_source_, c_source_;
};

// Decode rung 05 (the public entry's default) behind the late writer: inside the scope its CTAs
// read the lengths and block tables and prefetch pages while the writer spins, so the poison is
// still in Q and the caches then; its output must be the ordinary launch's bit for bit (and the
// ordinary launch passes the op's check in the ladder tests).
TEST(DependentLaunch, DecodeRung05BehindALateCacheWriteGivesTheOrdinaryLaunchesBits) {
  KC_SKIP_WITHOUT_GPU();
  if (!programmatic_launch_available()) GTEST_SKIP() << "programmatic dependent launch needs compute capability 9.0";
  Context& context = testing::shared_context();
  const OpSpec& op = stage3_test_registry().op(kAttentionDecodeOp);
  // 3 sequences (ragged), 2 new tokens, 8 query heads over 2 kv heads, D = 64, blocks of 16:
  // rung 05's splits start inside, at and past the lengths.
  const Problem problem = op.problem({3, 8, 2, 2, 300, 64}, DType::bf16, {{"lengths", 1.0}});
  std::vector<double> outputs[2][2];  // [ordinary, programmatic][O, LSE]
  for (const bool dependent : {false, true}) {
    Operands operands = op.make_operands(problem, 5, context);
    LateWriter writer(operands, "Q", "K_cache", "V_cache", context.stream());
    PagedDecodeAttention decode;
    decode.set_min_keys_per_split(64);  // several splits a sequence
    const DecodeArgs<bf16> args = decode_args<bf16>(problem, operands);
    decode.reserve(args);
    {
      const core::ProgrammaticLaunchScope scope{dependent};
      writer.launch(context.stream());
      EXPECT_EQ(decode.run(args, context.stream()), "stage3/attention_decode_paged/05_early_pages");
    }
    outputs[dependent][0] = testing_support::download(operands["O"], context.stream());
    outputs[dependent][1] = testing_support::download(operands["LSE"], context.stream());
  }
  for (int t = 0; t < 2; ++t) {
    std::size_t differ = 0, nan = 0;
    for (std::size_t i = 0; i < outputs[0][t].size(); ++i) {
      differ += outputs[0][t][i] == outputs[1][t][i] ? 0 : 1;
      nan += std::isnan(outputs[1][t][i]) ? 1 : 0;
    }
    EXPECT_EQ(differ, 0u) << (t == 0 ? "O" : "LSE") << " differs between launch modes in " << differ << " values";
    EXPECT_EQ(nan, 0u) << (t == 0 ? "O" : "LSE") << " holds " << nan << " NaN values (the poison read early)";
  }
}

// A decode rung's outputs, downloaded: O, LSE, K_cache and V_cache.
using DecodeOutputs = std::vector<double>[4];

// How two runs' outputs compare: values that differ (a NaN equals a NaN: the caches' poisoned
// rows past each length), and the NaN in each run's O.
struct DecodeComparison {
  std::size_t differ = 0, nan_first = 0, nan_second = 0;
};
DecodeComparison compare_decode_outputs(const DecodeOutputs& first, const DecodeOutputs& second) {
  DecodeComparison c;
  for (int t = 0; t < 4; ++t)
    for (std::size_t i = 0; i < first[t].size(); ++i) {
      const double a = first[t][i], b = second[t][i];
      c.differ += (a == b || (std::isnan(a) && std::isnan(b))) ? 0 : 1;
      if (t == 0) {
        c.nan_first += std::isnan(a) ? 1 : 0;
        c.nan_second += std::isnan(b) ? 1 : 0;
      }
    }
  return c;
}

// Decode rungs 07 to 10 behind the late writer. Contract kept: the writer copies Q, K_new and
// V_new (the projections' output) late; the rung must give the ordinary launch's O, LSE and caches
// bit for bit, with no NaN in O. Contract broken: the writer copies Q and the caches late; with
// ordinary launches nothing changes, with programmatic ones the rung's copies before its wait read
// the poisoned cache rows, and O must hold NaN.
TEST(DependentLaunch, DecodeRungs07To10ReadOnlyTheKernelAheadsOutputAfterTheirWait) {
  KC_SKIP_WITHOUT_GPU();
  if (!programmatic_launch_available()) GTEST_SKIP() << "programmatic dependent launch needs compute capability 9.0";
  Context& context = testing::shared_context();
  const OpSpec& op = stage3_test_registry().op(kAttentionDecodeRopeOp);
  // 3 sequences (ragged), 2 new tokens, 8 query heads over 2 kv heads, D = 64, blocks of 16.
  const Problem problem = op.problem({3, 8, 2, 2, 300, 64}, DType::bf16, {{"lengths", 1.0}});
  for (const auto rung :
       {PagedDecodeAttention::RopeRung::pages_before_wait, PagedDecodeAttention::RopeRung::page_walk,
        PagedDecodeAttention::RopeRung::workers_first, PagedDecodeAttention::RopeRung::release_acquire_merge}) {
    SCOPED_TRACE(std::string(PagedDecodeAttention::rope_rung_id(rung)));
    for (const bool late_cache : {false, true}) {
      std::vector<double> outputs[2][4];  // [ordinary, programmatic][O, LSE, K_cache, V_cache]
      for (const bool dependent : {false, true}) {
        Operands operands = op.make_operands(problem, 5, context);
        LateWriter writer(operands, "Q", late_cache ? "K_cache" : "K_new", late_cache ? "V_cache" : "V_new",
                          context.stream());
        PagedDecodeAttention decode;
        decode.set_min_keys_per_split(64);  // several splits a sequence
        decode.set_rope_rung(rung);
        const DecodeArgs<bf16> args = decode_args<bf16>(problem, operands);
        const DecodeRopeArgs<bf16> rope = decode_rope_args<bf16>(problem, operands);
        decode.reserve(args);
        {
          const core::ProgrammaticLaunchScope scope{dependent};
          writer.launch(context.stream());
          EXPECT_EQ(decode.run_rope(args, rope, context.stream()), PagedDecodeAttention::rope_rung_id(rung));
        }
        int t = 0;
        for (const char* name : {"O", "LSE", "K_cache", "V_cache"})
          outputs[dependent][t++] = testing_support::download(operands[name], context.stream());
      }
      const auto [differ, nan_ordinary, nan_dependent] = compare_decode_outputs(outputs[0], outputs[1]);
      EXPECT_EQ(nan_ordinary, 0u) << "ordinary launches: O holds " << nan_ordinary << " NaN";
      if (!late_cache) {
        EXPECT_EQ(differ, 0u) << "O, LSE and caches differ between launch modes in " << differ << " values";
        EXPECT_EQ(nan_dependent, 0u) << "O holds " << nan_dependent << " NaN (the kernel ahead's output read early)";
      } else {
        EXPECT_GT(nan_dependent, 0u) << "with the cached rows written late, the rung's early copies should have read "
                                        "the poison: no NaN in O means they did not happen before the wait";
      }
    }
  }
}

// Decode rung 11's hand-over, with a producer the test controls: it lets its dependents start, then
// for each kv head in turn spins, copies that head's rows of Q (its query heads), K_new and V_new
// for every sequence, and counts them written (target columns, one release) — so head h's rows
// exist only kSpinCycles x (h + 1) after the start, and the last head's long after the first's.
__global__ void write_heads_in_turn(const bf16* q_from, bf16* q_to, const bf16* k_from, bf16* k_to, const bf16* v_from,
                                    bf16* v_to, unsigned* written, unsigned target, int batch, int q_heads,
                                    int kv_heads, int head_dim, long long cycles) {
  core::let_dependent_grids_start();
  const int group = q_heads / kv_heads;
  for (int h = 0; h < kv_heads; ++h) {
    const long long start = clock64();
    while (clock64() - start < cycles) {
    }
    for (int b = 0; b < batch; ++b) {
      const std::int64_t q0 = (static_cast<std::int64_t>(b) * q_heads + h * group) * head_dim;
      for (int i = static_cast<int>(threadIdx.x); i < group * head_dim; i += static_cast<int>(blockDim.x))
        q_to[q0 + i] = q_from[q0 + i];
      const std::int64_t kv0 = (static_cast<std::int64_t>(b) * kv_heads + h) * head_dim;
      for (int i = static_cast<int>(threadIdx.x); i < head_dim; i += static_cast<int>(blockDim.x)) {
        k_to[kv0 + i] = k_from[kv0 + i];
        v_to[kv0 + i] = v_from[kv0 + i];
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      cuda::atomic_ref<unsigned, cuda::thread_scope_device> count(written[h]);
      count.fetch_add(target, cuda::memory_order_release);
    }
  }
}

// Decode rung 11 behind write_heads_in_turn (one new token, 3 ragged sequences, 8 query heads over
// 2 kv heads, D = 64, three splits a sequence). Launched ordinarily, and as a programmatic
// dependent that acquires its head's count, it must give rung 10's bits (rung 10 launched
// ordinarily after the same producer), with no NaN in O: it read no head's rows before they were
// counted. Its negative control — every CTA acquiring head 0's count — read head 1's rows while
// they still held the poison, and O must hold NaN: proof that rung 11's CTAs really ran before
// the last head was written, so the first check tests something.
TEST(DependentLaunch, DecodeRung11ReadsEachKvHeadsRowsOnlyOnceTheyAreCounted) {
  KC_SKIP_WITHOUT_GPU();
  if (!programmatic_launch_available()) GTEST_SKIP() << "programmatic dependent launch needs compute capability 9.0";
  Context& context = testing::shared_context();
  const cudaStream_t stream = context.stream();
  const OpSpec& op = stage3_test_registry().op(kAttentionDecodeRopeOp);
  const Problem problem = op.problem({3, 8, 2, 1, 300, 64}, DType::bf16, {{"lengths", 1.0}});
  constexpr unsigned kTarget = 384;  // any positive count: the producer adds it whole
  enum class Run { rung10_ordinary, rung11_ordinary, rung11_dependent, flaw_dependent };
  DecodeOutputs outputs[4];  // by run
  for (const Run run : {Run::rung10_ordinary, Run::rung11_ordinary, Run::rung11_dependent, Run::flaw_dependent}) {
    Operands operands = op.make_operands(problem, 5, context);
    Tensor &q = operands["Q"], &k_new = operands["K_new"], &v_new = operands["V_new"];
    DeviceBuffer<bf16> q_source(q.count()), k_source(k_new.count()), v_source(v_new.count());
    for (auto [tensor, source] : {std::pair{&q, &q_source}, std::pair{&k_new, &k_source}, std::pair{&v_new, &v_source}}) {
      KC_CUDA_CHECK(cudaMemcpyAsync(source->data(), tensor->raw(), tensor->bytes(), cudaMemcpyDeviceToDevice, stream));
      poison(tensor->raw(), DType::bf16, tensor->count(), stream);
    }
    DeviceBuffer<unsigned> written(2);
    KC_CUDA_CHECK(cudaMemsetAsync(written.data(), 0, written.bytes(), stream));
    const DecodeArgs<bf16> args = decode_args<bf16>(problem, operands);
    DecodeRopeArgs<bf16> rope = decode_rope_args<bf16>(problem, operands);
    if (run != Run::rung10_ordinary) {
      rope.heads_written = written.data();
      rope.heads_written_target = kTarget;
    }
    const DecodeSplitPlan plan = decode_plan_with_splits(args.group_rows(), args.max_keys(), 3);
    ASSERT_TRUE(plan.combines());
    DeviceScratch partials;
    const std::size_t floats =
        decode_split_workspace_floats(args.batch, args.q_heads, args.q_len, args.head_dim, plan);
    DecodeSplitWorkspace workspace = decode_split_workspace(
        reinterpret_cast<float*>(partials.reserve(floats * sizeof(float))), args.batch, args.q_heads, args.q_len,
        args.head_dim, plan);
    DeviceCounters arrivals;
    arrivals.reserve(decode_split_arrival_counters(args.batch, args.kv_heads, plan), stream);
    workspace.arrivals = arrivals.data();
    const bool dependent = run == Run::rung11_dependent || run == Run::flaw_dependent;
    // A warm-up round first (a kernel's first launch may load its module, which waits for the
    // work in flight), then the checked one; the caches' new rows are rewritten each round.
    for (int round = 0; round < 2; ++round) {
      if (round == 1) {
        for (Tensor* tensor : {&q, &k_new, &v_new}) poison(tensor->raw(), DType::bf16, tensor->count(), stream);
        KC_CUDA_CHECK(cudaMemsetAsync(written.data(), 0, written.bytes(), stream));
      }
      const core::ProgrammaticLaunchScope scope{dependent};
      write_heads_in_turn<<<1, 128, 0, stream>>>(q_source.data(), q.data<bf16>(), k_source.data(),
                                                 k_new.data<bf16>(), v_source.data(), v_new.data<bf16>(),
                                                 written.data(), kTarget, args.batch, args.q_heads, args.kv_heads,
                                                 args.head_dim, kSpinCycles);
      KC_CHECK_LAUNCH();
      if (run == Run::rung10_ordinary)
        attention_decode_10_release_acquire_merge(args, rope, plan, workspace, stream);
      else if (run == Run::flaw_dependent)
        attention_decode_11_waits_for_head_zero(args, rope, plan, workspace, stream);
      else
        attention_decode_11_heads_handed_over(args, rope, plan, workspace, stream);
      KC_CUDA_CHECK(cudaStreamSynchronize(stream));
    }
    int t = 0;
    for (const char* name : {"O", "LSE", "K_cache", "V_cache"})
      outputs[static_cast<int>(run)][t++] = testing_support::download(operands[name], stream);
  }
  const auto compare = [&](Run run, const char* what) {
    const DecodeComparison c = compare_decode_outputs(outputs[0], outputs[static_cast<int>(run)]);
    const std::size_t differ = c.differ, nan = c.nan_second;
    SCOPED_TRACE(what);
    if (run == Run::flaw_dependent) {
      EXPECT_GT(nan, 0u) << "the control read head 1's rows after head 0's count and found no poison: rung 11's CTAs "
                            "did not start before the producer wrote, so the hand-over was not tested";
    } else {
      EXPECT_EQ(differ, 0u) << "O, LSE and caches differ from rung 10's in " << differ << " values";
      EXPECT_EQ(nan, 0u) << "O holds " << nan << " NaN (rows read before their head was counted)";
    }
  };
  EXPECT_EQ(compare_decode_outputs(outputs[0], outputs[0]).nan_first, 0u) << "rung 10 after the producer: O holds NaN";
  compare(Run::rung11_ordinary, "rung 11, ordinary launches");
  compare(Run::rung11_dependent, "rung 11, programmatic dependent");
  compare(Run::flaw_dependent, "rung 11's control, programmatic dependent");
}

// The engine's pair: rung 12's q|k|v projection (RMSNorm inside, M = 3) counting its columns by kv
// head (Gemm::ColumnCounts through hgemm_12_small_m_gemv_shared_a) into Q, K_new and V_new, behind
// a kernel that writes x late, then decode rung 11 acquiring those counts through the public entry
// (PagedDecodeAttention::run_rope). As programmatic dependents it must give the ordinary launches'
// bits with no NaN, and every head's count must end at its columns in q, k and v ((4 + 2) x 64).
TEST(DependentLaunch, Rung12CountsTheColumnsDecodeRung11Acquires) {
  KC_SKIP_WITHOUT_GPU();
  if (!programmatic_launch_available()) GTEST_SKIP() << "programmatic dependent launch needs compute capability 9.0";
  Context& context = testing::shared_context();
  const cudaStream_t stream = context.stream();
  const OpSpec& op = stage3_test_registry().op(kAttentionDecodeRopeOp);
  constexpr int kBatch = 3, kQHeads = 8, kKvHeads = 2, kHeadDim = 64, kHidden = 512;
  const Problem problem =
      op.problem({kBatch, kQHeads, kKvHeads, 1, 300, kHeadDim}, DType::bf16, {{"lengths", 1.0}});
  const unsigned target = (kQHeads / kKvHeads + 2) * kHeadDim;
  DeviceBuffer<bf16> x_source(std::size_t{kBatch} * kHidden), x(std::size_t{kBatch} * kHidden), norm_weight(kHidden),
      wq(std::size_t{kQHeads} * kHeadDim * kHidden), wk(std::size_t{kKvHeads} * kHeadDim * kHidden),
      wv(std::size_t{kKvHeads} * kHeadDim * kHidden);
  fill_random(x_source, 21, {}, stream);
  fill_random(norm_weight, 22, {}, stream);
  fill_random(wq, 23, {}, stream);
  fill_random(wk, 24, {}, stream);
  fill_random(wv, 25, {}, stream);
  std::vector<double> outputs[2][4];  // [ordinary, programmatic][O, LSE, K_cache, V_cache]
  for (const bool dependent : {false, true}) {
    Operands operands = op.make_operands(problem, 5, context);
    Tensor &q = operands["Q"], &k_new = operands["K_new"], &v_new = operands["V_new"];
    DeviceBuffer<unsigned> written(kKvHeads);
    PagedDecodeAttention decode;
    decode.set_min_keys_per_split(64);  // several splits a sequence
    decode.set_rope_rung(PagedDecodeAttention::RopeRung::heads_handed_over);
    const DecodeArgs<bf16> args = decode_args<bf16>(problem, operands);
    DecodeRopeArgs<bf16> rope = decode_rope_args<bf16>(problem, operands);
    rope.heads_written = written.data();
    rope.heads_written_target = target;
    decode.reserve(args);
    const SmallMGemvWeight weights[3] = {{wq.data(), q.data<bf16>(), kQHeads * kHeadDim},
                                         {wk.data(), k_new.data<bf16>(), kKvHeads * kHeadDim},
                                         {wv.data(), v_new.data<bf16>(), kKvHeads * kHeadDim}};
    const int slices[3] = {kQHeads / kKvHeads * kHeadDim, kHeadDim, kHeadDim};
    for (int round = 0; round < 2; ++round) {  // a warm-up round (module loading), then the checked one
      poison(x.data(), DType::bf16, x.size(), stream);
      for (Tensor* tensor : {&q, &k_new, &v_new}) poison(tensor->raw(), DType::bf16, tensor->count(), stream);
      KC_CUDA_CHECK(cudaMemsetAsync(written.data(), 0, written.bytes(), stream));
      const core::ProgrammaticLaunchScope scope{dependent};
      spin_then_copy<<<1, 256, 0, stream>>>(x_source.data(), x.data(), kBatch * kHidden, kSpinCycles);
      KC_CHECK_LAUNCH();
      hgemm_12_small_m_gemv_shared_a(kBatch, kHidden, 1.f, x.data(), weights, 3, 0.f, stream, norm_weight.data(),
                                     1e-5f, false, written.data(), slices);
      KC_CHECK_LAUNCH();
      EXPECT_EQ(decode.run_rope(args, rope, stream),
                PagedDecodeAttention::rope_rung_id(PagedDecodeAttention::RopeRung::heads_handed_over));
      KC_CUDA_CHECK(cudaStreamSynchronize(stream));
    }
    for (const unsigned count : written.to_host(stream))
      EXPECT_EQ(count, target) << "a kv head's count is not its columns in q, k and v";
    int t = 0;
    for (const char* name : {"O", "LSE", "K_cache", "V_cache"})
      outputs[dependent][t++] = testing_support::download(operands[name], stream);
  }
  const auto [differ, nan_ordinary, nan_dependent] = compare_decode_outputs(outputs[0], outputs[1]);
  EXPECT_EQ(nan_ordinary, 0u) << "ordinary launches: O holds " << nan_ordinary << " NaN";
  EXPECT_EQ(nan_dependent, 0u) << "programmatic: O holds " << nan_dependent << " NaN (rows read before counted)";
  EXPECT_EQ(differ, 0u) << "O, LSE and caches differ between launch modes in " << differ << " values";
}

}  // namespace
}  // namespace kc::stage3
