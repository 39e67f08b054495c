// The public GEMM entry (kc/stage3/gemm.hpp) on a GPU:
//   - refused arguments launch nothing: the CUDA context has no pending error, C still holds the
//     sentinel written before the call, and a correct call right after it works;
//   - every path — rung 09, rung 03 (forced through a GemmTarget on an H100/H200), rung 10, and
//     cuBLAS for each fallback (K % 8 != 0, small M, small output, no sm_90a code, padded leading
//     dimensions) — matches the op's reference, and run() returns the path plan() announced;
//   - with padded leading dimensions, the padding of C is left alone;
//   - rung 12 at M = 1: its one- and two-piece K loops give the same bits through the fused calls.
// Skips without a GPU.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iterator>
#include <limits>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "hgemm.hpp"
#include "kc/common/buffer.hpp"
#include "kc/common/check.hpp"
#include "kc/common/error.hpp"
#include "kc/common/gemm.hpp"
#include "kc/core/dependent_launch.hpp"
#include "kc/stage3/gemm.hpp"
#include "kc/stage3/register.hpp"
#include "support/gpu_test.hpp"
#include "support/refusals.hpp"

namespace kc::stage3 {
namespace {

using ::kc::testing::expect_refused;
using ::kc::testing::expect_clean_context;

// The one place this file uses the harness (Problem, operands, reference, comparison), which is
// being reworked: runs `entry` on fresh operands of `problem` (hgemm, or gemm_bias_gelu
// when `bias_gelu`) and compares C with the op's reference. `entry` gets dense arguments, the bias
// (null for the plain GEMM) and the harness's stream.
using EntryCall = std::function<void(const HgemmArgs& args, const bf16* bias, cudaStream_t stream)>;
CheckOutcome check_against_reference(bool bias_gelu, const Problem& problem,
                                     const EntryCall& entry) {
  Context& context = ::kc::testing::shared_context();
  const OpSpec op = bias_gelu ? make_gemm_bias_gelu_op() : make_hgemm_op();
  const RunFn run = [&](const Problem& p, Operands& operands, Context& c) {
    const HgemmArgs args = gemm_args<bf16>(p, operands, BLayout::n_by_k);
    entry(args, bias_gelu ? operands["bias"].data<bf16>() : nullptr, c.stream());
  };
  return check_run(op, run, problem, /*seed=*/17, context);
}

// ---- host data for the tests that do not go through the harness --------------------------------

std::vector<float> values(std::size_t count, std::uint64_t seed) {
  std::vector<float> v(count);
  std::uint64_t state = seed * 0x9E3779B97F4A7C15ull + 99;
  for (float& x : v) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    // Multiples of 1/64 in [-1, 1): exact in bf16, so the host copy is what the device holds.
    x = static_cast<float>(static_cast<int>(state >> 57) - 64) / 64.f;
  }
  return v;
}

std::vector<bf16> to_bf16(const std::vector<float>& v) {
  std::vector<bf16> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = __float2bfloat16_rn(v[i]);
  return out;
}

std::vector<float> to_float(const std::vector<bf16>& v) {
  std::vector<float> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = __bfloat162float(v[i]);
  return out;
}

// Row-major operands with leading dimensions; padding elements hold `padding_value`.
struct HostGemm {
  int m, n, k, lda, ldb, ldc;
  float alpha, beta;
  std::vector<float> a, b, c;

  HostGemm(int m_, int n_, int k_, int lda_, int ldb_, int ldc_, float alpha_, float beta_,
           float padding_value)
      : m(m_),
        n(n_),
        k(k_),
        lda(lda_),
        ldb(ldb_),
        ldc(ldc_),
        alpha(alpha_),
        beta(beta_),
        a(values(static_cast<std::size_t>(m_) * lda_, 1)),
        b(values(static_cast<std::size_t>(n_) * ldb_, 2)),
        c(values(static_cast<std::size_t>(m_) * ldc_, 3)) {
    for (int i = 0; i < m; ++i)
      for (int j = n; j < ldc; ++j) c[static_cast<std::size_t>(i) * ldc + j] = padding_value;
  }
  // alpha.A.B^T + beta.C inside M x N, in double.
  double reference(int i, int j) const {
    double dot = 0.0;
    for (int p = 0; p < k; ++p)
      dot += static_cast<double>(a[static_cast<std::size_t>(i) * lda + p]) *
             b[static_cast<std::size_t>(j) * ldb + p];
    return alpha * dot +
           (beta == 0.f ? 0.0
                        : beta * static_cast<double>(c[static_cast<std::size_t>(i) * ldc + j]));
  }
};

struct DeviceGemm {
  DeviceBuffer<bf16> a, b, c;
  explicit DeviceGemm(const HostGemm& host) : a(host.a.size()), b(host.b.size()), c(host.c.size()) {
    a.copy_from_host(to_bf16(host.a));
    b.copy_from_host(to_bf16(host.b));
    c.copy_from_host(to_bf16(host.c));
  }
  HgemmArgs args(const HostGemm& host) {
    HgemmArgs args;
    args.m = host.m;
    args.n = host.n;
    args.k = host.k;
    args.alpha = host.alpha;
    args.beta = host.beta;
    args.a = a.data();
    args.b = b.data();
    args.c = c.data();
    args.lda = host.lda;
    args.ldb = host.ldb;
    args.ldc = host.ldc;
    return args;
  }
};

// C inside M x N against the reference (BF16 output, K-long FP32 dot products: the harness's bound
// for bf16 scaled by sqrt(K)); C outside it, in the padding, bit-for-bit what it was.
void expect_result(const HostGemm& host, const std::vector<float>& c_after,
                   const std::string& what) {
  const double atol =
      1e-2 * (std::abs(host.alpha) * std::sqrt(static_cast<double>(host.k)) + std::abs(host.beta));
  std::size_t wrong = 0, padding_written = 0;
  for (int i = 0; i < host.m; ++i)
    for (int j = 0; j < host.ldc; ++j) {
      const std::size_t at = static_cast<std::size_t>(i) * host.ldc + j;
      if (j >= host.n) {
        if (!(c_after[at] == host.c[at])) ++padding_written;
        continue;
      }
      const double want = host.reference(i, j);
      if (!(std::abs(c_after[at] - want) <= atol + 1.6e-2 * std::abs(want))) {
        if (wrong == 0)
          ADD_FAILURE() << what << ": C[" << i << "][" << j << "] = " << c_after[at]
                        << ", expected " << want;
        ++wrong;
      }
    }
  EXPECT_EQ(wrong, 0u) << what;
  EXPECT_EQ(padding_written, 0u) << what << ": the entry wrote into C's padding (columns N to ldc)";
}

// The H100/H200 this ladder was measured on, with the Hopper rungs built.
bool is_measured_hopper(const GemmTarget& target) {
  return target.compute_capability == 90 && target.has_sm90a_code;
}

// ---- refusals ----------------------------------------------------------------------------------

TEST(GemmEntryGpu, RefusedArgumentsWriteNothingAndLeaveTheContextUsable) {
  KC_SKIP_WITHOUT_GPU();
  Gemm gemm(0);
  constexpr float kSentinel = 7.f;  // no product of these inputs is exactly 7
  HostGemm host(96, 80, 64, 64, 64, 80, 1.f, 0.f, kSentinel);
  std::fill(host.c.begin(), host.c.end(), kSentinel);
  DeviceGemm device(host);
  const std::vector<float> c_before = to_float(device.c.to_host());
  DeviceBuffer<bf16> bias(host.n);
  bias.copy_from_host(to_bf16(values(host.n, 4)));

  HgemmArgs args = device.args(host);
  args.ldc = host.n - 1;
  expect_refused([&] { gemm.run(args, nullptr); }, "ldc = 79 is smaller than N = 80");
  args = device.args(host);
  args.lda = 0;
  expect_refused([&] { gemm.run(args, nullptr); }, "lda = 0 is smaller than K = 64");
  args = device.args(host);
  args.alpha = std::numeric_limits<float>::quiet_NaN();
  expect_refused([&] { gemm.run(args, nullptr); }, "must both be finite");
  args = device.args(host);
  args.b = nullptr;
  expect_refused([&] { gemm.run(args, nullptr); }, "B is a null pointer");
  args = device.args(host);
  args.m = -1;  // M = 0 is an empty product, run as cuBLAS runs it (EmptyDimensionsGiveWhatCublasGives)
  expect_refused([&] { gemm.run(args, nullptr); }, "a dimension cannot be negative");
  args = device.args(host);
  args.m = 0;  // the fused entry has no empty form
  expect_refused([&] { gemm.run_bias_gelu(args, bias.data(), nullptr); }, "each must be at least 1");
  args = device.args(host);
  expect_refused([&] { gemm.run_bias_gelu(args, nullptr, nullptr); }, "bias is a null pointer");
  args.ldc = host.n + 8;
  expect_refused([&] { gemm.run_bias_gelu(args, bias.data(), nullptr); }, "dense C");
  args = device.args(host);
  args.k = -3;
  expect_refused([&] { gemm.plan(args); }, "a dimension cannot be negative");

  expect_clean_context();
  EXPECT_EQ(to_float(device.c.to_host()), c_before) << "a refused call wrote C";

  const GemmPath path = gemm.run(device.args(host), nullptr);
  EXPECT_EQ(path, gemm.plan(device.args(host))) << path.name();
  expect_result(host, to_float(device.c.to_host()),
                "the call after the refusals (" + path.name() + ")");
  expect_clean_context();
}

// ---- each path against the reference -----------------------------------------------------------

struct Case {
  Problem problem;
  GemmKernel kernel_on_h200;
  GemmFallback fallback_on_h200;
};

void check_cases(Gemm& gemm, bool bias_gelu, const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    GemmPath planned, ran;
    const CheckOutcome outcome = check_against_reference(
        bias_gelu, c.problem, [&](const HgemmArgs& args, const bf16* bias, cudaStream_t stream) {
          planned = bias_gelu ? gemm.plan_bias_gelu(args, bias) : gemm.plan(args);
          ran = bias_gelu ? gemm.run_bias_gelu(args, bias, stream) : gemm.run(args, stream);
        });
    EXPECT_TRUE(outcome.passed()) << c.problem.label() << " via " << ran.name() << ": "
                                  << outcome.detail;
    EXPECT_EQ(ran, planned) << c.problem.label() << ": ran " << ran.name() << ", planned "
                            << planned.name();
    if (is_measured_hopper(gemm.target())) {
      EXPECT_EQ(ran, (GemmPath{c.kernel_on_h200, c.fallback_on_h200}))
          << c.problem.label() << ": took " << ran.name();
    }
  }
  expect_clean_context();
}

TEST(GemmEntryGpu, EachPathMatchesTheReference) {
  KC_SKIP_WITHOUT_GPU();
  Gemm gemm(0);
  const std::vector<Case> cases = {
      // 2049 x 2056 = 4.2 M outputs: rung 09 on an H100/H200.
      {gemm_problem(kHgemmOp, {2049, 2056, 128}, DType::bf16, 1.0, 0.0), GemmKernel::hgemm_09_tma_store, GemmFallback::none},
      {gemm_problem(kHgemmOp, {2048, 2048, 1088}, DType::bf16, 1.5, -0.75),
       GemmKernel::hgemm_09_tma_store,
       GemmFallback::none},
      // K % 64 != 0: cuBLAS on an H100/H200 (rungs 09 and 17 measured below it there)...
      {gemm_problem(kHgemmOp, {2048, 2048, 1032}, DType::bf16, 1.5, -0.75),
       GemmKernel::cublas_gemm_ex,
       GemmFallback::k_rows_unaligned},
      // ... unless N % 8 != 0 too: rung 17 (clusters of two, direct stores: rows of C not
      // 16-byte aligned), with an odd number of tile rows and a K tail.
      {gemm_problem(kHgemmOp, {2049, 2051, 1032}, DType::bf16, 1.5, -0.75),
       GemmKernel::hgemm_17_unaligned_k_clusters,
       GemmFallback::none},
      // N odd: rung 09's direct-store epilogue.
      {gemm_problem(kHgemmOp, {4093, 2049, 192}, DType::bf16, -0.5, 0.25),
       GemmKernel::hgemm_09_tma_store,
       GemmFallback::none},
      {gemm_problem(kHgemmOp, {1000, 1000, 104}, DType::bf16, 1.0, 1.0),
       GemmKernel::cublas_gemm_ex,
       GemmFallback::small_output},
      {gemm_problem(kHgemmOp, {200, 300, 1031}, DType::bf16, 1.0, 0.5),
       GemmKernel::cublas_gemm_ex,
       GemmFallback::k_not_multiple_of_8},
      // M = 1: rung 12, with alpha and beta, N odd, a K tail of one piece.
      {gemm_problem(kHgemmOp, {1, 4096, 4096}, DType::bf16, 1.0, 0.0), GemmKernel::hgemm_12_small_m_gemv, GemmFallback::none},
      {gemm_problem(kHgemmOp, {1, 1001, 1032}, DType::bf16, 1.5, -0.75),
       GemmKernel::hgemm_12_small_m_gemv,
       GemmFallback::none},
  };
  check_cases(gemm, /*bias_gelu=*/false, cases);
}

// 1 < M <= 64 follows the small-M table on an H100/H200 (cuBLAS elsewhere): for each kernel the
// table names — rung 12, rung 16, cuBLAS — up to three of its rows as tuned and off the tuned
// shape (M one below the row's where that stays in its bucket, N + 3: odd, K + 8: a K tail that
// is not a whole 64-wide tile), with alpha and beta, against the reference; the path each took is
// the row's. A table without one of the three kernels fails here: the entry's launch of it would
// go untested.
TEST(GemmEntryGpu, SmallMTablePathsMatchTheReference) {
  KC_SKIP_WITHOUT_GPU();
  Gemm gemm(0);
  std::vector<Case> cases;
  std::set<int> tuned_m;
  for (const SmallMTableEntry& row : small_m_table()) tuned_m.insert(row.m);
  for (const GemmKernel kernel : {GemmKernel::hgemm_12_small_m_gemv, GemmKernel::hgemm_16_small_m_cluster_split,
                                  GemmKernel::cublas_gemm_ex}) {
    int taken = 0;
    for (const SmallMTableEntry& row : small_m_table()) {
      if (row.kernel != kernel || taken == 3) continue;
      ++taken;
      const GemmFallback why = kernel == GemmKernel::cublas_gemm_ex ? GemmFallback::small_m_table : GemmFallback::none;
      cases.push_back({gemm_problem(kHgemmOp, {row.m, row.n, row.k}, DType::bf16, 1.0, 0.0), kernel, why});
      const auto bucket_below = tuned_m.lower_bound(row.m);
      const bool one_less_stays = bucket_below == tuned_m.begin() ? row.m - 1 > kGemvMaxM : *std::prev(bucket_below) < row.m - 1;
      const int m = one_less_stays ? row.m - 1 : row.m;
      const SmallMTableEntry& nearest = nearest_small_m_entry(m, row.n + 3, row.k + 8);
      cases.push_back({gemm_problem(kHgemmOp, {m, row.n + 3, row.k + 8}, DType::bf16, 1.5, -0.75), nearest.kernel,
                       nearest.kernel == GemmKernel::cublas_gemm_ex ? GemmFallback::small_m_table : GemmFallback::none});
    }
    EXPECT_GT(taken, 0) << "the small-M table has no row for " << gemm_kernel_name(kernel);
  }
  if (!is_measured_hopper(gemm.target()))
    for (Case& c : cases) c = {c.problem, GemmKernel::cublas_gemm_ex, GemmFallback::small_m};
  check_cases(gemm, /*bias_gelu=*/false, cases);
}

TEST(GemmEntryGpu, BiasGeluMatchesTheReferenceFusedAndUnfused) {
  KC_SKIP_WITHOUT_GPU();
  Gemm gemm(0);
  const std::vector<Case> cases = {
      {gemm_problem(kBiasGeluOp, {2048, 2056, 64}, DType::bf16, 1.0, 0.0),
       GemmKernel::gemm_bias_gelu_10_fused,
       GemmFallback::none},
      {gemm_problem(kBiasGeluOp, {300, 504, 64}, DType::bf16, 1.0, 0.5),
       GemmKernel::cublas_gemm_ex_then_bias_gelu,
       GemmFallback::small_output},
      // K % 8 != 0 and N odd: cuBLAS and the scalar path of the bias+GELU kernel.
      {gemm_problem(kBiasGeluOp, {300, 501, 60}, DType::bf16, 1.0, 0.0),
       GemmKernel::cublas_gemm_ex_then_bias_gelu,
       GemmFallback::k_not_multiple_of_8},
  };
  check_cases(gemm, /*bias_gelu=*/true, cases);
}

// Rung 03 is kc's kernel on sm_80-class GPUs; on an H100/H200 a target that takes sm_90 away makes
// the entry run it, and one that takes the sm_90a code away makes it fall back to cuBLAS.
TEST(GemmEntryGpu, ForcedTargetsRunRung03AndTheNoSm90aFallback) {
  KC_SKIP_WITHOUT_GPU();
  const GemmTarget actual = Gemm(0).target();
  if (actual.compute_capability < 80 || actual.shared_memory_per_block < kRung03SharedMemoryBytes)
    GTEST_SKIP() << "rung 03 needs sm_80+ and " << kRung03SharedMemoryBytes
                 << " bytes of shared memory per block; this GPU is sm_"
                 << actual.compute_capability;
  Gemm as_sm80(0, GemmTarget{80, kRung03SharedMemoryBytes, false});
  for (const Problem& problem : {gemm_problem(kHgemmOp, {1000, 1000, 104}, DType::bf16, 1.0, 1.0),
                                 gemm_problem(kHgemmOp, {257, 4100, 72}, DType::bf16, 1.0, 0.0),
                                 gemm_problem(kHgemmOp, {2049, 2056, 64}, DType::bf16, -1.0, 0.5)}) {
    GemmPath ran;
    const CheckOutcome outcome = check_against_reference(
        false, problem, [&](const HgemmArgs& args, const bf16*, cudaStream_t stream) {
          ran = as_sm80.run(args, stream);
        });
    EXPECT_TRUE(outcome.passed()) << problem.label() << ": " << outcome.detail;
    EXPECT_EQ(ran, (GemmPath{GemmKernel::hgemm_03_cp_async, GemmFallback::none})) << ran.name();
  }
  // Not sm_90: the fused op falls back to cuBLAS + the separate kernel.
  GemmPath unfused;
  const CheckOutcome outcome =
      check_against_reference(true, gemm_problem(kBiasGeluOp, {2048, 2048, 64}, DType::bf16, 1.0, 0.0),
                              [&](const HgemmArgs& args, const bf16* bias, cudaStream_t stream) {
                                unfused = as_sm80.run_bias_gelu(args, bias, stream);
                              });
  EXPECT_TRUE(outcome.passed()) << outcome.detail;
  EXPECT_EQ(unfused, (GemmPath{GemmKernel::cublas_gemm_ex_then_bias_gelu, GemmFallback::not_sm90}));

  if (actual.compute_capability == 90) {
    Gemm without_sm90a(0, GemmTarget{90, actual.shared_memory_per_block, false});
    GemmPath ran;
    const CheckOutcome fallback =
        check_against_reference(false, gemm_problem(kHgemmOp, {2048, 2048, 64}, DType::bf16, 1.0, 0.0),
                                [&](const HgemmArgs& args, const bf16*, cudaStream_t stream) {
                                  ran = without_sm90a.run(args, stream);
                                });
    EXPECT_TRUE(fallback.passed()) << fallback.detail;
    EXPECT_EQ(ran, (GemmPath{GemmKernel::cublas_gemm_ex, GemmFallback::no_sm90a_code}));
  }
  expect_refused(
      [&] {
        Gemm(0, GemmTarget{actual.compute_capability + 10, actual.shared_memory_per_block, false});
      },
      "a target may only take capabilities away");
  expect_clean_context();
}

// Leading dimensions other than K, K, N go to cuBLAS, which honours them; the padding of C (columns
// N to ldc) is never written.
TEST(GemmEntryGpu, PaddedLeadingDimensionsRunOnCublasAndLeaveThePadding) {
  KC_SKIP_WITHOUT_GPU();
  Gemm gemm(0);
  constexpr float kPadding = 7.f;  // outside the inputs' [-1, 1): a write into the padding shows
  struct Padded {
    HostGemm host;
    GemmFallback reason;
  };
  const std::vector<Padded> cases = {
      {HostGemm(70, 50, 24, 40, 32, 64, 1.25f, -0.5f, kPadding), GemmFallback::leading_dimensions},
      {HostGemm(130, 300, 64, 64, 64, 304, 1.f, 0.f, kPadding),
       GemmFallback::leading_dimensions},  // ldc only
      {HostGemm(65, 33, 20, 24, 20, 33, 1.f, 1.f, kPadding), GemmFallback::k_not_multiple_of_8},
  };
  for (const Padded& c : cases) {
    DeviceGemm device(c.host);
    const GemmPath path = gemm.run(device.args(c.host), nullptr);
    EXPECT_EQ(path, (GemmPath{GemmKernel::cublas_gemm_ex, c.reason})) << path.name();
    expect_result(c.host, to_float(device.c.to_host()), path.name());
  }
  expect_clean_context();
}

// Operands 2-byte aligned but not 16 (an element past an aligned start): the entry must take them
// to cuBLAS (the kc kernels move 16-byte pieces) and give the reference, at shapes that would
// otherwise run rung 12, the small-M table and rung 09.
TEST(GemmEntryGpu, OperandsAlignedToAnElementOnlyRunOnCublasAndMatch) {
  KC_SKIP_WITHOUT_GPU();
  Gemm gemm(0);
  for (const auto& [m, n, k] : std::vector<std::array<int, 3>>{{1, 256, 512}, {8, 384, 256}, {2048, 2048, 256}})
    for (int which = 0; which < 3; ++which) {  // A, B or C one element off
      HostGemm host(m, n, k, k, k, n, 1.f, 0.5f, 0.f);
      DeviceBuffer<bf16> a(host.a.size() + 8), b(host.b.size() + 8), c(host.c.size() + 8);
      const int a_off = which == 0 ? 1 : 0, b_off = which == 1 ? 1 : 0, c_off = which == 2 ? 1 : 0;
      const auto put = [](DeviceBuffer<bf16>& buffer, int offset, const std::vector<float>& values) {
        std::vector<bf16> host_values(buffer.size(), __float2bfloat16(0.f));
        const std::vector<bf16> converted = to_bf16(values);
        std::copy(converted.begin(), converted.end(), host_values.begin() + offset);
        buffer.copy_from_host(host_values);
      };
      put(a, a_off, host.a);
      put(b, b_off, host.b);
      put(c, c_off, host.c);
      HgemmArgs args;
      args.m = m;
      args.n = n;
      args.k = k;
      args.alpha = host.alpha;
      args.beta = host.beta;
      args.a = a.data() + a_off;
      args.b = b.data() + b_off;
      args.c = c.data() + c_off;
      args.lda = args.ldb = k;
      args.ldc = n;
      const GemmPath path = gemm.run(args, nullptr);
      EXPECT_EQ(path, (GemmPath{GemmKernel::cublas_gemm_ex, GemmFallback::misaligned})) << path.name();
      const std::vector<float> all = to_float(c.to_host());
      expect_result(host, std::vector<float>(all.begin() + c_off, all.begin() + c_off + static_cast<std::ptrdiff_t>(host.c.size())),
                    fmt::format("{}x{}x{}, operand {} one element off", m, n, k, "ABC"[which]));
    }
  expect_clean_context();
}

// Empty GEMMs as cuBLAS takes them: M = 0 or N = 0 leaves C as it was (nothing runs, no pointer
// is read); K = 0 writes beta.C — +0 for beta = 0 even over a NaN, C itself for beta = 1, stage 2's
// scale otherwise, by rows when C is padded — and A and B are never read (null here); the padding
// is untouched.
TEST(GemmEntryGpu, EmptyDimensionsGiveWhatCublasGives) {
  KC_SKIP_WITHOUT_GPU();
  Gemm gemm(0);
  constexpr float kPadding = 7.f;
  for (const float beta : {0.f, 1.f, -0.5f})
    for (const int ldc : {40, 48}) {
      HostGemm host(33, 40, 0, 8, 8, ldc, 1.25f, beta, kPadding);
      host.c[5] = std::numeric_limits<float>::quiet_NaN();  // beta = 0 must not read it
      DeviceGemm device(host);
      HgemmArgs args = device.args(host);
      args.a = nullptr;
      args.b = nullptr;
      const GemmPath path = gemm.run(args, nullptr);
      EXPECT_EQ(path.kernel, GemmKernel::scale_c) << path.name();
      if (beta == 0.f) host.c[5] = 0.f;  // the reference reads C only for beta != 0
      std::vector<float> after = to_float(device.c.to_host());
      if (beta != 0.f) {
        EXPECT_TRUE(std::isnan(after[5])) << "beta = " << beta << ": beta x NaN is NaN";
        after[5] = host.c[5] = 0.f;  // compared above
      }
      expect_result(host, after, fmt::format("K = 0, beta = {}, ldc = {}", beta, ldc));
    }
  HostGemm untouched(33, 8, 16, 16, 16, 8, 1.f, 0.f, kPadding);
  DeviceGemm device(untouched);
  for (const auto& [m, n] : std::vector<std::pair<int, int>>{{0, 8}, {33, 0}}) {
    HgemmArgs args = device.args(untouched);
    args.m = m;
    args.n = n;
    EXPECT_EQ(gemm.run(args, nullptr).kernel, GemmKernel::empty_output);
    args.a = args.b = nullptr;
    args.c = nullptr;
    EXPECT_EQ(gemm.run(args, nullptr).kernel, GemmKernel::empty_output);
  }
  KC_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> after = to_float(device.c.to_host());
  std::size_t changed = 0;
  for (std::size_t i = 0; i < after.size(); ++i) changed += after[i] == to_float(to_bf16({untouched.c[i]}))[0] ? 0 : 1;
  EXPECT_EQ(changed, 0u) << "an empty GEMM wrote C";
  expect_clean_context();
}

// ---- the shared-A entries (rung 12 and its prologues) ---------------------------------------------

// `host` in bf16 on the device.
DeviceBuffer<bf16> on_device(const std::vector<float>& host) {
  DeviceBuffer<bf16> buffer(host.size());
  buffer.copy_from_host(to_bf16(host));
  return buffer;
}

// The bound of these tests: bf16 output rounding plus FP32 sums of about a thousand products.
bool within_bf16_bound(double got, double ref) { return std::abs(got - ref) <= 0.02 + std::abs(ref) / 128.0; }

// The paths run() would take for each weight of a shared-A call, and whether they are all rung 12
// (the shared-A entries fuse exactly then).
bool all_on_rung12(const Gemm& gemm, int m, int k, const bf16* a, const Gemm::SharedAWeight* weights, int count,
                   GemmPath* paths) {
  bool all = true;
  for (int w = 0; w < count; ++w) {
    paths[w] = gemm.plan(Gemm::shared_a_args(m, k, a, weights[w]));
    all = all && paths[w].kernel == GemmKernel::hgemm_12_small_m_gemv;
  }
  return all;
}

// run_shared_a: Q, K and V of one layer against their double references, fused (M = 1: one launch
// of rung 12; M = 2 where the small-M table puts each weight on rung 12) and not (M = 9, beyond
// rung 12: three calls of run()), outputs poisoned with NaN first so an element no launch writes
// fails; and a negative control: the check must see one weight's output compared with another's
// reference.
TEST(GemmEntryGpu, SharedAWeightsMatchTheirReferencesFusedAndNot) {
  KC_SKIP_WITHOUT_GPU();
  Gemm gemm(0);
  const int k = 1032;
  const int widths[3] = {2048, 512, 517};
  for (const int m : {1, 2, 9}) {
    const std::vector<float> a = values(static_cast<std::size_t>(m) * k, 11);
    const DeviceBuffer<bf16> a_device = on_device(a);
    std::vector<std::vector<float>> b(3);
    std::vector<DeviceBuffer<bf16>> b_device, c_device;
    Gemm::SharedAWeight weights[3];
    for (int w = 0; w < 3; ++w) {
      b[w] = values(static_cast<std::size_t>(widths[w]) * k, 20 + w);
      b_device.push_back(on_device(b[w]));
      c_device.emplace_back(static_cast<std::size_t>(m) * widths[w]);
      c_device.back().copy_from_host(std::vector<bf16>(static_cast<std::size_t>(m) * widths[w],
                                                       __float2bfloat16(std::numeric_limits<float>::quiet_NaN())));
    }
    for (int w = 0; w < 3; ++w) weights[w] = {b_device[w].data(), c_device[w].data(), widths[w]};
    GemmPath paths[3], planned[3];
    const bool fused = all_on_rung12(gemm, m, k, a_device.data(), weights, 3, planned);
    EXPECT_TRUE(m != 1 || fused) << "M = 1 is rung 12's";
    EXPECT_TRUE(m != 9 || !fused) << "M = 9 is never rung 12's";
    gemm.run_shared_a(m, k, a_device.data(), weights, 3, nullptr, paths);
    KC_CUDA_CHECK(cudaDeviceSynchronize());
    for (int w = 0; w < 3; ++w) EXPECT_EQ(paths[w], planned[w]) << "M " << m << " weight " << w << ": " << paths[w].name();

    const auto mismatches = [&](int got_weight, int reference_weight) {
      const std::vector<float> got = to_float(c_device[got_weight].to_host());
      int bad = 0;
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < widths[got_weight] && j < widths[reference_weight]; ++j) {
          double ref = 0.0;
          for (int p = 0; p < k; ++p)
            ref += static_cast<double>(a[static_cast<std::size_t>(i) * k + p]) *
                   b[reference_weight][static_cast<std::size_t>(j) * k + p];
          const double value = got[static_cast<std::size_t>(i) * widths[got_weight] + j];
          bad += !within_bf16_bound(value, ref);
        }
      return bad;
    };
    for (int w = 0; w < 3; ++w) EXPECT_EQ(mismatches(w, w), 0) << "M " << m << " weight " << w;
    EXPECT_GT(mismatches(1, 2), 100) << "M " << m << ": K's output passes against V's reference";
  }
  expect_clean_context();
}

// run_rmsnorm_shared_a: where every weight takes rung 12 (M = 1; M = 2 where the small-M table
// says so) the norm runs inside rung 12's launch and each C_i matches rmsnorm(x).B_i^T in double;
// the unnormalized product must fail the same comparison (negative control). Elsewhere (M = 9,
// beyond rung 12) it launches nothing and says so: C keeps its NaN poison.
TEST(GemmEntryGpu, RmsNormSharedAMatchesTheNormThenTheGemmAtMOne) {
  KC_SKIP_WITHOUT_GPU();
  Gemm gemm(0);
  const int k = 1032;
  const float eps = 1e-5f;
  const int widths[2] = {777, 2048};
  const std::vector<float> norm = values(static_cast<std::size_t>(k), 31);
  const DeviceBuffer<bf16> norm_device = on_device(norm);
  for (const int m : {1, 2, 9}) {
    const std::vector<float> x = values(static_cast<std::size_t>(m) * k, 32);
    const DeviceBuffer<bf16> x_device = on_device(x);
    std::vector<std::vector<float>> b(2);
    std::vector<DeviceBuffer<bf16>> b_device, c_device;
    Gemm::SharedAWeight weights[2];
    const bf16 nan = __float2bfloat16(std::numeric_limits<float>::quiet_NaN());
    for (int w = 0; w < 2; ++w) {
      b[w] = values(static_cast<std::size_t>(widths[w]) * k, 40 + w);
      b_device.push_back(on_device(b[w]));
      c_device.emplace_back(static_cast<std::size_t>(m) * widths[w]);
      c_device.back().copy_from_host(std::vector<bf16>(static_cast<std::size_t>(m) * widths[w], nan));
    }
    for (int w = 0; w < 2; ++w) weights[w] = {b_device[w].data(), c_device[w].data(), widths[w]};
    GemmPath planned[2];
    const bool fused = all_on_rung12(gemm, m, k, x_device.data(), weights, 2, planned);
    EXPECT_TRUE(m != 1 || fused);
    EXPECT_TRUE(m != 9 || !fused);
    const bool ran = gemm.run_rmsnorm_shared_a(m, k, x_device.data(), norm_device.data(), eps, weights, 2, nullptr);
    KC_CUDA_CHECK(cudaDeviceSynchronize());
    EXPECT_EQ(ran, fused) << "M " << m;
    if (!fused) {
      EXPECT_FALSE(ran) << "M " << m << " is not rung 12's: nothing should run";
      for (int w = 0; w < 2; ++w)
        for (const float v : to_float(c_device[w].to_host())) ASSERT_TRUE(std::isnan(v)) << "M " << m << ": C written";
      continue;
    }
    ASSERT_TRUE(ran);
    const auto mismatches = [&](int w, bool normalized) {
      const std::vector<float> got = to_float(c_device[w].to_host());
      int bad = 0;
      for (int i = 0; i < m; ++i) {
        double squares = 0.0;
        for (int p = 0; p < k; ++p) squares += static_cast<double>(x[i * k + p]) * x[i * k + p];
        const double inv_rms = normalized ? 1.0 / std::sqrt(squares / k + eps) : 1.0;
        for (int j = 0; j < widths[w]; ++j) {
          double ref = 0.0;
          for (int p = 0; p < k; ++p)
            ref += static_cast<double>(x[i * k + p]) * inv_rms * (normalized ? norm[p] : 1.0) *
                   b[w][static_cast<std::size_t>(j) * k + p];
          bad += !within_bf16_bound(got[static_cast<std::size_t>(i) * widths[w] + j], ref);
        }
      }
      return bad;
    };
    for (int w = 0; w < 2; ++w) {
      EXPECT_EQ(mismatches(w, true), 0) << "weight " << w;
      EXPECT_GT(mismatches(w, false), widths[w] / 2) << "weight " << w << ": the norm made no difference";
    }
  }
  EXPECT_THROW(gemm.run_rmsnorm_shared_a(1, k, nullptr, nullptr, eps, nullptr, 1, nullptr), Error);
  expect_clean_context();
}

// run_swiglu: where the product takes rung 12 (M = 1; M = 2 where the small-M table says so) the
// activation runs inside rung 12's launch: C = (silu(gate) . up).B^T + C (beta = 1, the residual
// stream's use) against double; the product of gate alone must fail the same comparison (negative
// control); elsewhere (M = 9) it launches nothing and says so.
TEST(GemmEntryGpu, SwigluProjectionMatchesTheActivationThenTheGemmAtMOne) {
  KC_SKIP_WITHOUT_GPU();
  Gemm gemm(0);
  const int k = 1032, n = 777;
  const std::vector<float> b = values(static_cast<std::size_t>(n) * k, 51);
  const DeviceBuffer<bf16> b_device = on_device(b);
  for (const int m : {1, 2, 9}) {
    const std::vector<float> gate_up = values(static_cast<std::size_t>(m) * 2 * k, 52);
    const std::vector<float> c0 = values(static_cast<std::size_t>(m) * n, 53);
    const DeviceBuffer<bf16> a_device = on_device(gate_up);
    DeviceBuffer<bf16> c_device = on_device(c0);
    GemmPath path;
    const bool ran = gemm.run_swiglu(m, k, a_device.data(), {b_device.data(), c_device.data(), n}, 1.f, nullptr, &path);
    KC_CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<float> got = to_float(c_device.to_host());
    EXPECT_TRUE(m != 1 || ran);
    EXPECT_TRUE(m != 9 || !ran);
    if (!ran) {
      EXPECT_NE(path.kernel, GemmKernel::hgemm_12_small_m_gemv) << path.name();  // run() would take another path
      EXPECT_EQ(got, c0) << "M " << m << ": C changed although nothing should have run";
      continue;
    }
    ASSERT_TRUE(ran);
    EXPECT_EQ(path.kernel, GemmKernel::hgemm_12_small_m_gemv);
    const auto mismatches = [&](bool activated) {
      int bad = 0;
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) {
          double ref = c0[static_cast<std::size_t>(i) * n + j];
          for (int p = 0; p < k; ++p) {
            const double g = gate_up[static_cast<std::size_t>(i) * 2 * k + p];
            const double u = gate_up[static_cast<std::size_t>(i) * 2 * k + k + p];
            const double a = activated ? g / (1.0 + std::exp(-g)) * u : g;
            ref += a * b[static_cast<std::size_t>(j) * k + p];
          }
          bad += !within_bf16_bound(got[static_cast<std::size_t>(i) * n + j], ref);
        }
      return bad;
    };
    EXPECT_EQ(mismatches(true), 0);
    EXPECT_GT(mismatches(false), n / 2) << "the activation made no difference";
  }
  expect_clean_context();
}

// run_rmsnorm_mlp: the MLP in one launch (rung 12's two passes with a grid-wide barrier) against
// run_rmsnorm_shared_a on [gate | up] followed by run_swiglu with beta = 1, bit for bit in gate_up
// and x, at M = 1 (the entry sends rung 12 one row) and M = 2 where the small-M table puts both
// products on rung 12, on widths that leave partial blocks (hidden 520, intermediate 1000)
// and on SmolLM2's (576, 1536), launched the ordinary way and as programmatic dependents, three
// calls in a row on one Gemm (the barrier's words reused); both gate_up buffers start as NaN, so an
// element neither path writes fails; x must have moved (the down product was added). At M = 9
// (beyond rung 12) it launches nothing and says so; x as its own gate_up is refused.
TEST(GemmEntryGpu, TheMlpInOneLaunchIsTheTwoLaunchesBitForBit) {
  KC_SKIP_WITHOUT_GPU();
  Gemm gemm(0);
  const cudaStream_t stream = ::kc::testing::shared_context().stream();
  const float eps = 1e-5f;
  const auto bits_equal = [](const DeviceBuffer<bf16>& a, const DeviceBuffer<bf16>& b) {
    const std::vector<bf16> x = a.to_host(), y = b.to_host();
    return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(bf16)) == 0;
  };
  struct Widths {
    int hidden, intermediate;
  };
  int fused_cases = 0;
  for (const Widths w : {Widths{520, 1000}, Widths{576, 1536}}) {
    const int h = w.hidden, i = w.intermediate;
    const DeviceBuffer<bf16> norm = on_device(values(static_cast<std::size_t>(h), 61));
    const DeviceBuffer<bf16> w_up = on_device(values(static_cast<std::size_t>(2 * i) * h, 62));
    const DeviceBuffer<bf16> w_down = on_device(values(static_cast<std::size_t>(h) * i, 63));
    for (const int launch : {0, 1, 2, 3}) {  // M = 1 and 2, each the ordinary way and as a programmatic dependent
      const int m = 1 + launch / 2;
      const bool programmatic = launch % 2 == 1;
      const core::ProgrammaticLaunchScope scope{programmatic};
      for (int call = 0; call < 3; ++call) {
        const std::vector<float> x0 = values(static_cast<std::size_t>(m) * h, 70 + call);
        const std::vector<float> poison(static_cast<std::size_t>(m) * 2 * i, std::numeric_limits<float>::quiet_NaN());
        DeviceBuffer<bf16> x_two = on_device(x0), x_one = on_device(x0);
        DeviceBuffer<bf16> up_two = on_device(poison), up_one = on_device(poison);
        const Gemm::SharedAWeight up_weight{w_up.data(), up_two.data(), 2 * i};
        const Gemm::SharedAWeight down_weight{w_down.data(), x_two.data(), h};
        GemmPath planned[2];
        const bool fused = all_on_rung12(gemm, m, h, x_two.data(), &up_weight, 1, &planned[0]) &&
                           all_on_rung12(gemm, m, i, up_two.data(), &down_weight, 1, &planned[1]);
        if (m > 1 && !fused) continue;  // both products on rung 12 is the table's call at M = 2
        const std::string where = fmt::format("hidden {}, intermediate {}, M {}, {} launch, call {}", h, i, m,
                                              programmatic ? "programmatic" : "ordinary", call);
        ASSERT_TRUE(gemm.run_rmsnorm_shared_a(m, h, x_two.data(), norm.data(), eps, &up_weight, 1, stream));
        ASSERT_TRUE(gemm.run_swiglu(m, i, up_two.data(), {w_down.data(), x_two.data(), h}, 1.f, stream));
        GemmPath paths[2];
        const bool launched = gemm.run_rmsnorm_mlp(m, h, i, x_one.data(), norm.data(), eps, w_up.data(), up_one.data(),
                                                   w_down.data(), stream, paths);
        KC_CUDA_CHECK(cudaStreamSynchronize(stream));
        if (!launched && m > 1) {  // M = 2's instance may hold fewer CTAs at once than its grid: it then declines
          std::printf("  %s: the one-launch MLP declined (grid larger than the GPU holds at once)\n", where.c_str());
          EXPECT_EQ(to_float(x_one.to_host()), x0) << where << ": x changed although nothing should have run";
          continue;
        }
        ASSERT_TRUE(launched) << where;
        ++fused_cases;
        EXPECT_EQ(paths[0].kernel, GemmKernel::hgemm_12_small_m_gemv) << where;
        EXPECT_EQ(paths[1].kernel, GemmKernel::hgemm_12_small_m_gemv) << where;
        EXPECT_TRUE(bits_equal(up_one, up_two)) << where << ": gate_up differs";
        EXPECT_TRUE(bits_equal(x_one, x_two)) << where << ": x differs";
        const std::vector<float> got = to_float(x_one.to_host());
        int moved = 0;
        for (std::size_t e = 0; e < got.size(); ++e) moved += got[e] != x0[e];
        EXPECT_GT(moved, m * h / 2) << where << ": the down product was not added";
        for (const float v : to_float(up_one.to_host())) ASSERT_FALSE(std::isnan(v)) << where << ": gate_up unwritten";
      }
    }
  }
  EXPECT_GE(fused_cases, 2 * 2 * 3);  // M = 1 on both widths, both launch kinds, three calls
  std::printf("  the one launch compared with the two at %d points (width, M, launch kind, call)\n", fused_cases);
  const int h = 576, i = 1536, m = kSmallMGemvMaxM + 1;
  const DeviceBuffer<bf16> norm = on_device(values(static_cast<std::size_t>(h), 61));
  const DeviceBuffer<bf16> w_up = on_device(values(static_cast<std::size_t>(2 * i) * h, 62));
  const DeviceBuffer<bf16> w_down = on_device(values(static_cast<std::size_t>(h) * i, 63));
  const std::vector<float> x0 = values(static_cast<std::size_t>(m) * h, 80);
  DeviceBuffer<bf16> x = on_device(x0), up(static_cast<std::size_t>(m) * 2 * i);
  GemmPath paths[2];
  EXPECT_FALSE(gemm.run_rmsnorm_mlp(m, h, i, x.data(), norm.data(), eps, w_up.data(), up.data(), w_down.data(), stream,
                                    paths));
  KC_CUDA_CHECK(cudaStreamSynchronize(stream));
  EXPECT_NE(paths[0].kernel, GemmKernel::hgemm_12_small_m_gemv) << paths[0].name();
  EXPECT_EQ(to_float(x.to_host()), x0) << "M " << m << ": x changed although nothing should have run";
  EXPECT_THROW(gemm.run_rmsnorm_mlp(1, h, i, x.data(), norm.data(), eps, w_up.data(), x.data(), w_down.data(), stream),
               Error);
  expect_clean_context();
}

// Rung 12 at M = 1 has two K loops (12_small_m_gemv.cu: two pieces of each row a trip, or one, by
// the grid). Through the entry's three fused calls — q|k|v, the RMSNorm prologue (both onto C
// poisoned with NaN), the SwiGLU prologue with beta = 1 onto a random C — on a grid the two-piece instance holds at
// once (777 and 2048 outputs of K = 1032: a partial last trip) and a larger one (3 x 4104 outputs
// of K = 2056), each instance forced in turn and then the automatic choice: the same bits
// everywhere (both add in the same order), no element left with its NaN poison, and the plain
// product within the bf16 bound of a double reference. The forced choice goes back to what it was
// even when a check fails.
TEST(GemmEntryGpu, RungTwelvesOneAndTwoPieceTripsGiveTheSameBits) {
  KC_SKIP_WITHOUT_GPU();
  const SmallMGemvKnobsRestorer restore_knobs;
  Gemm gemm(0);
  const cudaStream_t stream = ::kc::testing::shared_context().stream();
  struct Shape {
    int k;
    std::vector<int> widths;
  };
  for (const Shape& shape : {Shape{1032, {777, 2048}}, Shape{2056, {4104, 4104, 4104}}}) {
    const int k = shape.k, count = static_cast<int>(shape.widths.size());
    const std::vector<float> a = values(static_cast<std::size_t>(2 * k), 91);  // [gate | up] for SwiGLU
    const DeviceBuffer<bf16> a_device = on_device(a);
    const DeviceBuffer<bf16> norm = on_device(values(static_cast<std::size_t>(k), 92));
    std::vector<std::vector<float>> b, c0;
    std::vector<DeviceBuffer<bf16>> b_device;
    for (int w = 0; w < count; ++w) {
      b.push_back(values(static_cast<std::size_t>(shape.widths[w]) * k, 93 + w));
      c0.push_back(values(static_cast<std::size_t>(shape.widths[w]), 96 + w));
      b_device.push_back(on_device(b[w]));
    }
    // One call of each kind with `trip`; returns every C, the three calls' outputs one after another.
    const auto run_all = [&](SmallMGemvTrip trip) {
      set_small_m_gemv_trip(trip);
      std::vector<bf16> out;
      for (int kind = 0; kind < 3; ++kind) {
        std::vector<DeviceBuffer<bf16>> c;
        Gemm::SharedAWeight weights[3];
        for (int w = 0; w < count; ++w) {
          const std::vector<float> start =
              kind < 2 ? std::vector<float>(c0[w].size(), std::numeric_limits<float>::quiet_NaN()) : c0[w];
          c.push_back(on_device(start));
          weights[w] = {b_device[w].data(), c.back().data(), shape.widths[w]};
        }
        if (kind == 0) {
          GemmPath paths[3];
          gemm.run_shared_a(1, k, a_device.data(), weights, count, stream, paths);
          EXPECT_EQ(paths[0].kernel, GemmKernel::hgemm_12_small_m_gemv) << paths[0].name();
        } else if (kind == 1) {
          EXPECT_TRUE(gemm.run_rmsnorm_shared_a(1, k, a_device.data(), norm.data(), 1e-5f, weights, count, stream));
        } else {
          for (int w = 0; w < count; ++w)
            EXPECT_TRUE(gemm.run_swiglu(1, k, a_device.data(), weights[w], 1.f, stream));
        }
        KC_CUDA_CHECK(cudaStreamSynchronize(stream));
        for (const DeviceBuffer<bf16>& each : c) {
          const std::vector<bf16> host = each.to_host();
          out.insert(out.end(), host.begin(), host.end());
        }
      }
      return out;
    };
    const std::vector<bf16> two = run_all(SmallMGemvTrip::two_pieces);
    const std::vector<bf16> one = run_all(SmallMGemvTrip::one_piece);
    const std::vector<bf16> automatic = run_all(SmallMGemvTrip::automatic);
    const std::string where = fmt::format("K {}, {} weights of {} outputs", k, count, shape.widths[0]);
    ASSERT_EQ(one.size(), two.size());
    ASSERT_EQ(automatic.size(), two.size());
    EXPECT_EQ(std::memcmp(one.data(), two.data(), two.size() * sizeof(bf16)), 0) << where << ": one piece a trip differs";
    EXPECT_EQ(std::memcmp(automatic.data(), two.data(), two.size() * sizeof(bf16)), 0) << where;
    for (const bf16 v : one) ASSERT_FALSE(std::isnan(__bfloat162float(v))) << where << ": an output left unwritten";
    // The plain product (the first call's outputs) against double: C = A[0, K).B^T.
    int bad = 0;
    std::size_t at = 0;
    for (int w = 0; w < count; ++w)
      for (int j = 0; j < shape.widths[w]; ++j, ++at) {
        double ref = 0.0;
        for (int p = 0; p < k; ++p) ref += static_cast<double>(a[p]) * b[w][static_cast<std::size_t>(j) * k + p];
        bad += !within_bf16_bound(__bfloat162float(one[at]), ref);
      }
    EXPECT_EQ(bad, 0) << where;
  }
  expect_clean_context();
}

}  // namespace
}  // namespace kc::stage3
