// NaN and Inf through every rung: hand-made rows holding NaN, +Inf, -Inf, all -Inf and large
// magnitudes go through every kernel of the softmax, norm, reduction and activation ops, at row
// lengths that take every code path (scalar and vector accesses, warp and block teams, rows too
// long for registers). Each output must equal the reference exactly where the reference is NaN or
// infinite (compare() demands it), and the rows without special values must be unaffected.
//
// Also a negative control for softmax: the textbook exp(x) / sum(exp(x)) without the max, which
// the harness must reject on the op's inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "device_data.hpp"
#include "kc/common/check.hpp"
#include "kc/core/launch.hpp"
#include "kc/core/reduce.cuh"
#include "kc/stage2/register.hpp"
#include "stage2_registry.hpp"
#include "support/gpu_test.hpp"

namespace kc::stage2 {
namespace {

using kc::testing::shared_context;
using testing::download;
using testing::upload;

constexpr double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::nan("");

using testing::stage2_registry;

// Row kinds of special_rows().
enum SpecialRow { kFinite, kHasNan, kHasPlusInf, kHasMinusInf, kAllMinusInf, kLarge, kFiniteAgain, kRows };

// rows x cols of ordinary values, with row r holding the special values of SpecialRow r. The
// special entries sit at different columns so that they land in different lanes and slots.
// The kLarge row alternates +-large (far beyond exp's float range for softmax).
std::vector<double> special_rows(std::int64_t cols, double large = 1e4) {
  std::vector<double> x(static_cast<std::size_t>(kRows * cols));
  for (std::int64_t r = 0; r < kRows; ++r)
    for (std::int64_t c = 0; c < cols; ++c)
      x[static_cast<std::size_t>(r * cols + c)] = 2.0 * std::sin(0.37 * static_cast<double>(c + 5 * r));
  const auto at = [&](int row, std::int64_t col) -> double& {
    return x[static_cast<std::size_t>(row * cols + col)];
  };
  at(kHasNan, cols / 2) = kNaN;
  at(kHasPlusInf, cols - 1) = kInf;
  at(kHasMinusInf, 0) = -kInf;
  for (std::int64_t c = 0; c < cols; ++c) {
    at(kAllMinusInf, c) = -kInf;
    at(kLarge, c) = c % 2 == 0 ? large : -large;
  }
  return x;
}

// Activation inputs: every special value, the overflow edges of exp, and ordinary values.
std::vector<double> special_values(std::int64_t count) {
  const double specials[] = {kNaN, kInf, -kInf, 0.0, -0.0, 1e4, -1e4, 88.8, -88.8, 100.0, -100.0, 3.0, -3.0};
  std::vector<double> x(static_cast<std::size_t>(count));
  for (std::size_t i = 0; i < x.size(); ++i)
    x[i] = i < std::size(specials) ? specials[i] : 4.0 * std::sin(0.71 * static_cast<double>(i));
  return x;
}

struct Case {
  std::string op;
  Problem problem;
  std::map<std::string, std::vector<double>> inputs;  // replaces the random inputs by name
};

Problem problem(const std::string& op, std::vector<std::int64_t> dims, DType dtype) {
  return stage2_registry().op(op).problem(std::move(dims), dtype);
}

// Runs every rung of the op on the hand-made inputs; returns the outputs of each rung by kernel id.
std::map<std::string, std::map<std::string, std::vector<double>>> run_every_rung(const Case& c) {
  Context& context = shared_context();
  const OpSpec& op = stage2_registry().op(c.op);
  std::map<std::string, std::map<std::string, std::vector<double>>> results;
  for (const KernelEntry& kernel : stage2_registry().kernels()) {
    if (kernel.op != c.op) continue;
    Operands operands = op.make_operands(c.problem, 7, context);
    for (const auto& [name, values] : c.inputs) upload(operands[name], values, context.stream());
    const References reference = op.reference(c.problem, operands, context);
    kernel.launch(c.problem, operands, context.stream());
    KC_CHECK_LAUNCH();
    KC_CUDA_CHECK(cudaStreamSynchronize(context.stream()));
    for (const Tensor& tensor : operands.tensors()) {
      if (!tensor.is_output) continue;
      const std::vector<double> out = download(tensor);
      const std::vector<double> expected = reference.at(tensor.name).to_host(context.stream());
      const CompareResult result =
          compare(out.data(), expected.data(), out.size(), op.accuracy(c.problem, tensor));
      EXPECT_EQ(result.mismatches, 0u) << kernel.id << " on " << c.problem.shape() << ", output "
                                       << tensor.name << ": " << result.summary();
      results[kernel.id][tensor.name] = out;
    }
  }
  EXPECT_FALSE(results.empty()) << "no kernels for " << c.op;
  return results;
}

// Row lengths that take every path: scalar warp (37), vector warp (1000), vector warp with every
// slot full in 16-bit types (1024), vector block (4096, every slot full), scalar block (2050), and
// rows too long to hold in registers (40000).
const std::int64_t kRowLengths[] = {37, 1000, 1024, 2050, 4096, 40000};
const DType kDtypes[] = {DType::bf16, DType::f16, DType::f32};

bool all_nan(const std::vector<double>& y, std::int64_t row, std::int64_t cols) {
  for (std::int64_t c = 0; c < cols; ++c)
    if (!std::isnan(y[static_cast<std::size_t>(row * cols + c)])) return false;
  return true;
}

bool all_finite(const std::vector<double>& y, std::int64_t row, std::int64_t cols) {
  for (std::int64_t c = 0; c < cols; ++c)
    if (!std::isfinite(y[static_cast<std::size_t>(row * cols + c)])) return false;
  return true;
}

TEST(NonFinite, SoftmaxRowsFollowTheMaxSubtractedFormula) {
  KC_SKIP_WITHOUT_GPU();
  for (DType dtype : kDtypes)
    for (std::int64_t cols : kRowLengths) {
      const Case c{"softmax", problem("softmax", {kRows, cols}, dtype), {{"x", special_rows(cols)}}};
      for (const auto& [kernel, outputs] : run_every_rung(c)) {
        const std::vector<double>& y = outputs.at("y");
        EXPECT_TRUE(all_nan(y, kHasNan, cols)) << kernel << " cols " << cols;
        EXPECT_TRUE(all_nan(y, kHasPlusInf, cols)) << kernel << ": exp(inf - inf) is NaN";
        EXPECT_TRUE(all_nan(y, kAllMinusInf, cols)) << kernel;
        EXPECT_EQ(y[static_cast<std::size_t>(kHasMinusInf * cols)], 0.0) << kernel << ": exp(-inf) is 0";
        for (int row : {kFinite, kHasMinusInf, kLarge, kFiniteAgain})
          EXPECT_TRUE(all_finite(y, row, cols)) << kernel << " row " << row << " cols " << cols;
      }
    }
}

TEST(NonFinite, NormRowsTurnNanOnlyWhereTheMathSays) {
  KC_SKIP_WITHOUT_GPU();
  for (DType dtype : kDtypes)
    for (std::int64_t cols : kRowLengths)
      for (const char* base : {"rmsnorm", "layernorm"}) {
        const std::string op = base;
        for (const auto& [kernel, outputs] : run_every_rung({op, problem(op, {kRows, cols}, dtype), {{"x", special_rows(cols)}}})) {
          const std::vector<double>& y = outputs.at("y");
          EXPECT_TRUE(all_nan(y, kHasNan, cols)) << kernel << " cols " << cols;
          EXPECT_TRUE(all_nan(y, kAllMinusInf, cols)) << kernel;
          for (int row : {kFinite, kLarge, kFiniteAgain})
            EXPECT_TRUE(all_finite(y, row, cols)) << kernel << " row " << row << " cols " << cols;
        }
      }
}

TEST(NonFinite, ResidualRmsNormCarriesInfIntoTheSum) {
  KC_SKIP_WITHOUT_GPU();
  for (DType dtype : kDtypes)
    for (std::int64_t cols : kRowLengths) {
      const std::string op = "residual_rmsnorm";
      std::vector<double> residual(static_cast<std::size_t>(kRows * cols), 0.25);
      for (const auto& [kernel, outputs] :
           run_every_rung({op, problem(op, {kRows, cols}, dtype), {{"x", special_rows(cols)}, {"residual", residual}}})) {
        const std::vector<double>& sum = outputs.at("sum");
        EXPECT_EQ(sum[static_cast<std::size_t>(kHasPlusInf * cols + cols - 1)], kInf) << kernel;
        EXPECT_TRUE(all_nan(outputs.at("y"), kHasNan, cols)) << kernel;
        EXPECT_TRUE(all_finite(outputs.at("y"), kFiniteAgain, cols)) << kernel;
      }
    }
}

TEST(NonFinite, RowReductionsPropagateNanAndInf) {
  KC_SKIP_WITHOUT_GPU();
  // Rows up to 4096 with |x| <= 2: finite sums of squares stay inside fp16's range (65504), so
  // every Inf in the outputs comes from an Inf in the inputs.
  for (DType dtype : kDtypes)
    for (std::int64_t cols : {37, 1000, 2050, 4096})
      for (const char* base : {"row_sum", "row_max", "row_mean", "row_sumsq"}) {
        const std::string op = base;
        for (const auto& [kernel, outputs] :
             run_every_rung({op, problem(op, {kRows, cols}, dtype), {{"x", special_rows(cols, 2.0)}}})) {
          const std::vector<double>& out = outputs.at("out");
          EXPECT_TRUE(std::isnan(out[kHasNan])) << kernel << ": a NaN in the row";
          EXPECT_EQ(out[kHasPlusInf], kInf) << kernel;
          EXPECT_TRUE(std::isfinite(out[kFiniteAgain])) << kernel;
        }
      }
}

TEST(NonFinite, ActivationsReturnTheirLimitsAndKeepNan) {
  KC_SKIP_WITHOUT_GPU();
  for (DType dtype : kDtypes)
    for (std::int64_t count : {37, 1000})
      for (const char* base : {"relu", "silu", "gelu_tanh", "gelu_erf"}) {
        const std::string op = base;
        for (const auto& [kernel, outputs] : run_every_rung({op, problem(op, {count}, dtype), {{"a", special_values(count)}}})) {
          const std::vector<double>& out = outputs.at("out");
          EXPECT_TRUE(std::isnan(out[0])) << kernel;
          EXPECT_EQ(out[1], kInf) << kernel;
          EXPECT_EQ(out[2], 0.0) << kernel << ": the limit at -inf";
        }
      }
}

TEST(NonFinite, FusedBiasActivationAndSwigluFollowTheReference) {
  KC_SKIP_WITHOUT_GPU();
  for (DType dtype : kDtypes)
    for (std::int64_t cols : {37, 1000}) {
      for (const char* base : {"bias_relu", "bias_silu", "bias_gelu_tanh", "bias_gelu_erf"}) {
        const std::string op = base;
        run_every_rung({op, problem(op, {kRows, cols}, dtype), {{"x", special_rows(cols)}}});
      }
      // silu(gate) * up of two large values must stay inside fp16's range: |large| = 100.
      const std::string swiglu = "swiglu";
      run_every_rung({swiglu, problem(swiglu, {kRows, cols / 2}, dtype), {{"gate_up", special_rows(cols / 2 * 2, 100.0)}}});
    }
}

// ---- negative controls: softmax without the max, and a softmax that writes zeros ----

__global__ void unsafe_softmax_kernel(const float* x, float* y, int rows, int cols) {
  const int row = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (row >= rows) return;
  float sum = 0.f;
  for (int c = 0; c < cols; ++c) sum += expf(x[row * cols + c]);  // overflows above x = 88.7
  for (int c = 0; c < cols; ++c) y[row * cols + c] = expf(x[row * cols + c]) / sum;
}

__global__ void zero_softmax_kernel(float* y, int count) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < count) y[i] = 0.f;
}

TEST(SoftmaxNegativeControl, WithoutTheMaxTheOpsInputsOverflow) {
  KC_SKIP_WITHOUT_GPU();
  const Problem p32 = problem("softmax", {7, 1000}, DType::f32);
  const CheckOutcome outcome = check_run(
      stage2_registry().op("softmax"),
      [](const Problem& p, Operands& o, Context& context) {
        const int rows = static_cast<int>(p.dims[0]), cols = static_cast<int>(p.dims[1]);
        unsafe_softmax_kernel<<<1, 32, 0, context.stream()>>>(o["x"].data<float>(), o["y"].data<float>(), rows, cols);
      },
      p32, 1, shared_context());
  EXPECT_EQ(outcome.status, CheckOutcome::Status::failed) << outcome.detail;
  EXPECT_NE(outcome.detail.find("non-finite"), std::string::npos) << outcome.detail;
}

TEST(SoftmaxNegativeControl, ZerosFailBecauseTheToleranceScalesWithTheOutputs) {
  KC_SKIP_WITHOUT_GPU();
  const CheckOutcome outcome = check_run(
      stage2_registry().op("softmax"),
      [](const Problem&, Operands& o, Context& context) {
        Tensor& y = o["y"];  // bf16 zero is the bit pattern 0
        KC_CUDA_CHECK(cudaMemsetAsync(y.raw(), 0, y.bytes(), context.stream()));
      },
      problem("softmax", {3, 4096}, DType::bf16), 1, shared_context());
  EXPECT_EQ(outcome.status, CheckOutcome::Status::failed) << outcome.detail;
}

TEST(SoftmaxNegativeControl, ZeroKernelIsCaughtForFloatToo) {
  KC_SKIP_WITHOUT_GPU();
  const CheckOutcome outcome = check_run(
      stage2_registry().op("softmax"),
      [](const Problem& p, Operands& o, Context& context) {
        const int count = static_cast<int>(p.dims[0] * p.dims[1]);
        zero_softmax_kernel<<<static_cast<unsigned>(core::ceil_div(count, 256)), 256, 0, context.stream()>>>(
            o["y"].data<float>(), count);
      },
      problem("softmax", {5, 31}, DType::f32), 1, shared_context());
  EXPECT_EQ(outcome.status, CheckOutcome::Status::failed) << outcome.detail;
}

}  // namespace
}  // namespace kc::stage2
