// The FlashAttention ladder on the GPU, beyond what the conformance suite checks (every rung on
// every conformance problem, tests/conformance): scores whose maxima rise from tile to tile, and
// non-finite inputs. A NaN in a key some rows see
// must make exactly those rows NaN (O and LSE), and rows that do not see it must stay what the
// definition says — the mask must select, not add, and the running maximum must not drop the NaN.
// Skips without a GPU.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "kc/common/fill.hpp"
#include "kc/common/registry.hpp"
#include "kc/stage3/attention.hpp"
#include "kc/stage3/register.hpp"
#include "src/register_attention.hpp"
#include "stage3_test_registry.hpp"
#include "attention_test_support.hpp"
#include "support/gpu_test.hpp"

namespace kc::stage3 {
namespace {

using testing_support::download;

using testing_support::plant_nan;
using testing_support::plant_value;
using testing_support::upload_values;

// `kernel` on `operands` (inputs planted already), then its outputs and the host reference computed
// from the same inputs (its arithmetic is the definition's, non-finite values included).
struct LaunchAndReference {
  std::vector<double> q, o, lse, o_ref, lse_ref;
};
LaunchAndReference launch_and_reference(const KernelEntry& kernel, const Problem& problem, Operands& operands,
                                        cudaStream_t stream) {
  kernel.launch(problem, operands, stream);
  KC_CUDA_CHECK(cudaStreamSynchronize(stream));
  const AttentionShape shape = attention_shape(problem);
  LaunchAndReference run;
  run.q = download(operands["Q"], stream);
  const std::vector<double> k = download(operands["K"], stream);
  const std::vector<double> v = download(operands["V"], stream);
  run.o_ref.resize(run.q.size());
  run.lse_ref.resize(static_cast<std::size_t>(shape.batch * shape.q_heads * shape.q_len));
  attention_reference(shape, attention_scale(problem), problem.param("causal") != 0.0, run.q.data(), k.data(), v.data(),
                      run.o_ref.data(), run.lse_ref.data());
  run.o = download(operands["O"], stream);
  run.lse = download(operands["LSE"], stream);
  return run;
}

// Causal, Sq = 100, Sk = 130 (row i sees keys j <= i + 30), two query heads on one kv head. K of
// key 129 holds a NaN: only row 99 (of both heads) sees it. Key 129 lies in the last K/V tile of
// every rung, next to keys that rows 64-98 do see, so tiles that hold both kinds are exercised.
TEST(AttentionLadderGpu, NanInAKeyReachesTheRowsThatSeeItOnly) {
  KC_SKIP_WITHOUT_GPU();
  Context& context = testing::shared_context();
  const Registry& r = stage3_test_registry();
  const OpSpec& op = r.op(kAttentionFwdOp);
  constexpr std::int64_t kD = 64, kSq = 100, kSk = 130, kNanKey = 129;
  for (const KernelEntry* kernel : r.select("^stage3/attention_fwd/"))
    for (const DType dtype : {DType::bf16, DType::f16}) {
      const Problem problem = op.problem({1, 2, 1, kSq, kSk, kD}, dtype, {{"causal", 1.0}});
      Operands operands = op.make_operands(problem, 17, context);
      plant_nan(operands["K"], static_cast<std::size_t>(kNanKey * kD + 5), context.stream());
      const LaunchAndReference run = launch_and_reference(*kernel, problem, operands, context.stream());
      const std::vector<double>&o = run.o, &lse = run.lse, &o_ref = run.o_ref, &lse_ref = run.lse_ref;

      int wrong_rows = 0;
      for (std::int64_t row = 0; row < 2 * kSq; ++row) {
        const bool sees_nan = row % kSq == kSq - 1;
        bool row_ok = std::isnan(lse[row]) == sees_nan &&
                      (sees_nan || std::abs(lse[row] - lse_ref[row]) <= 1e-2 * std::max(1.0, std::abs(lse_ref[row])));
        for (std::int64_t c = 0; c < kD; ++c) {
          const double value = o[row * kD + c];
          row_ok = row_ok && std::isnan(value) == sees_nan &&
                   (sees_nan || std::abs(value - o_ref[row * kD + c]) <= 5e-2);
        }
        EXPECT_EQ(std::isnan(lse_ref[row]), sees_nan);  // the reference agrees on which rows
        wrong_rows += row_ok ? 0 : 1;
      }
      EXPECT_EQ(wrong_rows, 0) << kernel->id << " " << dtype_name(dtype) << ": " << wrong_rows
                               << " rows differ from the definition (rows 99 and 199 NaN, the rest finite)";
    }
}

// What attention.hpp says of a row after one input element is made non-finite, per output
// element: NaN, +Inf, or finite and equal to the reference (the reference on the same planted
// inputs: its arithmetic is the definition's).
enum class Expect { finite, nan, plus_inf, unchecked };

struct RowExpectation {
  Expect lse = Expect::finite;
  std::vector<Expect> o;  // one per column
};

// One kind of planted value: where it goes, and what each row of the problem must then hold.
struct NonFiniteCase {
  std::string name;
  const char* tensor;  // "Q", "K" or "V"
  std::int64_t row, column;  // in the first head (query head 0, kv head 0)
  float value;
  bool causal;
};

TEST(AttentionLadderGpu, NonFiniteInputsFollowTheDefinition) {
  KC_SKIP_WITHOUT_GPU();
  Context& context = testing::shared_context();
  const Registry& r = stage3_test_registry();
  const OpSpec& op = r.op(kAttentionFwdOp);
  // One query head over one kv head, Sq = 100 and Sk = 130 as above (causal: row i sees keys
  // j <= i + 30; key 129 only by row 99), D = 64. Key 40 is seen by every row without the mask and
  // by rows 10-99 with it; key 129 lies in the last K/V tile of every rung.
  constexpr std::int64_t kD = 64, kSq = 100, kSk = 130;
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<NonFiniteCase> cases = {
      {"NaN in Q row 37", "Q", 37, 5, nan, true},
      {"+Inf in K key 40", "K", 40, 7, inf, true},
      {"-Inf in K key 129", "K", 129, 3, -inf, true},
      {"NaN in V key 40, no mask", "V", 40, 11, nan, false},
      {"+Inf in V key 40, no mask", "V", 40, 12, inf, false},
      {"NaN in V key 129, causal", "V", 129, 13, nan, true},
  };
  for (const KernelEntry* kernel : r.select("^stage3/attention_fwd/"))
    for (const DType dtype : {DType::bf16, DType::f16})
      for (const NonFiniteCase& c : cases) {
        const Problem problem = op.problem({1, 1, 1, kSq, kSk, kD}, dtype, {{"causal", c.causal ? 1.0 : 0.0}});
        Operands operands = op.make_operands(problem, 23, context);
        plant_value(operands[c.tensor], static_cast<std::size_t>(c.row * kD + c.column), c.value, context.stream());
        const LaunchAndReference run = launch_and_reference(*kernel, problem, operands, context.stream());
        const std::vector<double>&q = run.q, &o = run.o, &lse = run.lse, &o_ref = run.o_ref, &lse_ref = run.lse_ref;

        int wrong_rows = 0;
        std::string first_wrong;
        for (std::int64_t i = 0; i < kSq; ++i) {
          const bool sees_row_key = !c.causal || c.row <= i + (kSk - kSq);
          RowExpectation want;
          want.o.assign(static_cast<std::size_t>(kD), Expect::finite);
          const auto whole_row = [&](Expect e) {
            want.lse = e;
            std::fill(want.o.begin(), want.o.end(), e);
          };
          if (std::string(c.tensor) == "Q") {
            if (i == c.row) whole_row(Expect::nan);
          } else if (std::string(c.tensor) == "K") {
            // The score of key c.row is q[i][column] x value plus finite terms.
            const double meets = q[static_cast<std::size_t>(i * kD + c.column)];
            const bool score_plus_inf_or_nan = meets == 0.0 || (meets > 0) == (c.value > 0);
            if (sees_row_key && score_plus_inf_or_nan) whole_row(Expect::nan);
          } else if (sees_row_key) {
            want.o[static_cast<std::size_t>(c.column)] = std::isnan(c.value) ? Expect::nan : Expect::plus_inf;
          } else {
            want.o[static_cast<std::size_t>(c.column)] = Expect::unchecked;  // not defined (attention.hpp)
          }
          const auto holds = [](Expect e, double got, double ref, double tolerance) {
            switch (e) {
              case Expect::nan: return std::isnan(got);
              case Expect::plus_inf: return std::isinf(got) && got > 0;
              case Expect::unchecked: return true;
              case Expect::finite: return std::isfinite(got) && std::abs(got - ref) <= tolerance;
            }
            return false;
          };
          bool row_ok = holds(want.lse, lse[i], lse_ref[i], 1e-2 * std::max(1.0, std::abs(lse_ref[i])));
          for (std::int64_t col = 0; col < kD; ++col)
            row_ok = row_ok && holds(want.o[static_cast<std::size_t>(col)], o[i * kD + col], o_ref[i * kD + col], 5e-2);
          // The reference agrees with the expectation wherever the definition fixes it.
          if (want.lse == Expect::nan) {
            EXPECT_TRUE(std::isnan(lse_ref[i])) << c.name << " row " << i;
          }
          if (!row_ok) {
            if (wrong_rows == 0) first_wrong = std::to_string(i);
            ++wrong_rows;
          }
        }
        EXPECT_EQ(wrong_rows, 0) << kernel->id << " " << dtype_name(dtype) << ", " << c.name << ": " << wrong_rows
                                 << " rows differ from attention.hpp's definition (the first: row " << first_wrong
                                 << ")";
      }
}

// Scores that rise along the keys, so the rows' running maxima keep growing from tile to tile:
// column 0 of every query holds 4 and column 0 of key j holds j x step (the other columns stay
// random), so a row's score rises by 4 . step . scale . log2(e) a key: 0.72 step (log2 units) at
// D = 64, 0.51 step at D = 128. With step 0.08 that is 5-7 a 128-key tile: rung 15 keeps a row's
// base for a tile (its probabilities then reach 2^5-2^7) and moves it on the next; with step 2 it
// is 130-184 a tile, every tile moves the base, and past its first 64 keys a row climbs 241-340
// more, beyond FP32's range (2^128). Sq = Sk = 300 leaves the last query tile two of rung 14's three consumers at
// D = 64 and one (working alone) at D = 128. Every rung must match the reference.
//
// The random inputs of the conformance problems cannot tell a base that moves from one that never
// does (any base is right while nothing overflows, and random scores settle within a few units of
// their first maximum). The negative control attention_16_with_a_base_that_never_moves — rung 16
// keeping each row's first finite base for good — must pass a random problem and fail the climbing
// one: that is what this test adds to the conformance suite.
struct RisingCase {
  DType dtype;
  std::int64_t head_dim;
  double step;
  bool causal;
};
constexpr std::int64_t kRisingLength = 300;

// `launch` on the rising problem of `c` (or, `rising` false, on its random inputs as drawn), and
// the rows whose O or LSE is not finite and within tolerance of the reference.
int rows_off_the_reference(const LaunchFn& launch, const RisingCase& c, bool rising, Context& context) {
  const OpSpec& op = stage3_test_registry().op(kAttentionFwdOp);
  const std::int64_t s = kRisingLength, d = c.head_dim;
  const Problem problem = op.problem({1, 1, 1, s, s, d}, c.dtype, {{"causal", c.causal ? 1.0 : 0.0}});
  Operands operands = op.make_operands(problem, 31, context);
  if (rising) {
    std::vector<double> q = download(operands["Q"], context.stream());
    std::vector<double> k = download(operands["K"], context.stream());
    for (std::int64_t i = 0; i < s; ++i) q[static_cast<std::size_t>(i * d)] = 4.0;
    for (std::int64_t j = 0; j < s; ++j) k[static_cast<std::size_t>(j * d)] = static_cast<double>(j) * c.step;
    upload_values(operands["Q"], q, context.stream());
    upload_values(operands["K"], k, context.stream());
  }
  KernelEntry entry;
  entry.launch = launch;
  const LaunchAndReference run = launch_and_reference(entry, problem, operands, context.stream());
  int wrong_rows = 0;
  for (std::int64_t i = 0; i < s; ++i) {
    bool row_ok = std::isfinite(run.lse[i]) &&
                  std::abs(run.lse[i] - run.lse_ref[i]) <= 1e-2 * std::max(1.0, std::abs(run.lse_ref[i]));
    for (std::int64_t col = 0; col < d; ++col) {
      const std::size_t at = static_cast<std::size_t>(i * d + col);
      row_ok = row_ok && std::isfinite(run.o[at]) && std::abs(run.o[at] - run.o_ref[at]) <= 5e-2;
    }
    wrong_rows += row_ok ? 0 : 1;
  }
  return wrong_rows;
}

std::vector<RisingCase> rising_cases() {
  std::vector<RisingCase> cases;
  for (const DType dtype : {DType::bf16, DType::f16})
    for (const std::int64_t d : {64, 128})
      for (const double step : {0.08, 2.0})
        for (const bool causal : {false, true}) cases.push_back({dtype, d, step, causal});
  return cases;
}

std::string describe(const RisingCase& c) {
  return std::string(dtype_name(c.dtype)) + " D = " + std::to_string(c.head_dim) + " step " + std::to_string(c.step) +
         (c.causal ? " causal" : "");
}

TEST(AttentionLadderGpu, RisingScoresMoveTheSoftmaxBaseCorrectly) {
  KC_SKIP_WITHOUT_GPU();
  Context& context = testing::shared_context();
  const Registry& r = stage3_test_registry();
  for (const KernelEntry* kernel : r.select("^stage3/attention_fwd/"))
    for (const RisingCase& c : rising_cases())
      EXPECT_EQ(rows_off_the_reference(kernel->launch, c, true, context), 0)
          << kernel->id << " " << describe(c) << ": rows differ from the reference";

  // The negative control: right on random scores, wrong once they climb past FP32's range.
  const LaunchFn fixed_base = attention_16_with_a_base_that_never_moves();
  for (const RisingCase& c : rising_cases()) {
    if (c.step < 2.0) continue;
    EXPECT_EQ(rows_off_the_reference(fixed_base, c, false, context), 0)
        << "the control on random scores, " << describe(c) << ": the random problem should not see its flaw";
    EXPECT_GT(rows_off_the_reference(fixed_base, c, true, context), 0)
        << "the control on climbing scores, " << describe(c) << ": the rising problem must catch a base that never moves";
  }
}

}  // namespace
}  // namespace kc::stage3
