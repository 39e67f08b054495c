// The public GEMM entry (kc/stage3/gemm.hpp) without a GPU: every refusal of check_gemm_args and
// check_bias_gelu_args with the sentence it gives, and the dispatch (choose_gemm_path,
// choose_bias_gelu_path) over a grid of shapes, leading dimensions, alignments and GPUs — the
// documented rules as properties of every point, plus the measured H200 shapes by name.
// Pointers are made-up addresses: nothing here is dereferenced or touches CUDA.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "kc/common/blas.hpp"
#include "kc/common/error.hpp"
#include "kc/stage3/gemm.hpp"
#include "support/refusals.hpp"

namespace kc::stage3 {
namespace {

using ::kc::testing::expect_refused;

template <typename T>
T* fake(std::uintptr_t slot, std::uintptr_t offset_bytes = 0) {
  return ::kc::testing::fake_pointer<T>(slot, offset_bytes);
}

HgemmArgs dense_args(int m, int n, int k) {
  HgemmArgs args;
  args.m = m;
  args.n = n;
  args.k = k;
  args.a = fake<const bf16>(1);
  args.b = fake<const bf16>(2);
  args.c = fake<bf16>(3);
  args.lda = k;
  args.ldb = k;
  args.ldc = n;
  return args;
}

// ---- refusals ----------------------------------------------------------------------------------

TEST(GemmEntryChecks, AcceptsDenseAndPaddedOperands) {
  EXPECT_NO_THROW(check_gemm_args(dense_args(4096, 4096, 4096)));
  HgemmArgs padded = dense_args(70, 50, 20);
  padded.lda = 40;
  padded.ldb = 24;
  padded.ldc = 64;
  padded.beta = 0.5f;
  EXPECT_NO_THROW(check_gemm_args(padded));
  EXPECT_NO_THROW(check_bias_gelu_args(dense_args(300, 501, 60), fake<const bf16>(4, 4)));
}

// Every shape cuBLAS takes: M = 0 or N = 0 is a GEMM with no output (no pointer is looked at),
// K = 0 is C = beta.C (A and B are not read); a negative dimension is refused, and so are the
// checks of what is still read (C with K = 0). The fused entry has no empty form.
TEST(GemmEntryChecks, TakesEmptyDimensionsAsCublasDoesAndRefusesNegativeOnes) {
  for (const auto& [m, n, k] : std::vector<std::array<int, 3>>{{0, 8, 8}, {8, 0, 8}, {0, 0, 0}, {8, 8, 0}}) {
    HgemmArgs args = dense_args(8, 8, 8);
    args.m = m;
    args.n = n;
    args.k = k;
    args.lda = args.ldb = k;
    args.ldc = n;
    args.a = nullptr;  // never read
    args.b = nullptr;
    if (m == 0 || n == 0) args.c = nullptr;  // nothing written either
    EXPECT_NO_THROW(check_gemm_args(args)) << m << "x" << n << "x" << k;
    const GemmPath path = choose_gemm_path(gemm_problem(args), GemmTarget{90, 232448, true});
    EXPECT_EQ(path.kernel, m == 0 || n == 0 ? GemmKernel::empty_output : GemmKernel::scale_c)
        << m << "x" << n << "x" << k;
    EXPECT_FALSE(path.uses_cublas());
  }
  HgemmArgs scale_only = dense_args(8, 8, 0);
  scale_only.c = nullptr;  // K = 0 still writes C
  expect_refused([&] { check_gemm_args(scale_only); }, {"C is a null pointer"});
  scale_only = dense_args(8, 8, 0);
  scale_only.ldc = 4;
  expect_refused([&] { check_gemm_args(scale_only); }, {"ldc = 4 is smaller than N = 8"});
  for (const auto& [m, n, k] : std::vector<std::array<int, 3>>{{-1, 8, 8}, {8, -1, 8}, {8, 8, -2}}) {
    HgemmArgs args = dense_args(8, 8, 8);
    args.m = m;
    args.n = n;
    args.k = k;
    expect_refused([&] { check_gemm_args(args); },
                   {"kc::stage3::Gemm::run", "M = " + std::to_string(m), "N = " + std::to_string(n),
                    "K = " + std::to_string(k), "cannot be negative"});
  }
  expect_refused([&] { check_bias_gelu_args(dense_args(0, 1024, 256), fake<const bf16>(4)); },
                 {"kc::stage3::Gemm::run_bias_gelu", "M = 0", "at least 1", "Gemm::run"});
  EXPECT_EQ(GemmPath({GemmKernel::empty_output, GemmFallback::none}).name(), "nothing to run (M or N is 0)");
  EXPECT_EQ(GemmPath({GemmKernel::scale_c, GemmFallback::none}).name().rfind("C = beta.C (K is 0)", 0), 0u);
}

TEST(GemmEntryChecks, RefusesNullAndMisalignedOperandsNamingThem) {
  HgemmArgs args = dense_args(256, 256, 256);
  args.a = nullptr;
  expect_refused([&] { check_gemm_args(args); }, {"A is a null pointer", "M x K"});
  args = dense_args(256, 256, 256);
  args.b = nullptr;
  expect_refused([&] { check_gemm_args(args); }, {"B is a null pointer", "N x K"});
  args = dense_args(256, 256, 256);
  args.c = nullptr;
  args.beta = 0.f;  // C is written even when it is not read
  expect_refused([&] { check_gemm_args(args); }, {"C is a null pointer", "M x N"});
  args = dense_args(256, 256, 256);
  args.b = fake<const bf16>(2, 1);
  expect_refused([&] { check_gemm_args(args); }, {"B = ", "not aligned to 2 bytes"});
}

TEST(GemmEntryChecks, RefusesLeadingDimensionsShorterThanARow) {
  HgemmArgs args = dense_args(128, 96, 64);
  args.lda = 0;  // not set: refused, not taken as dense
  expect_refused([&] { check_gemm_args(args); },
                 {"lda = 0 is smaller than K = 64", "set lda = K for a dense A", "row pitch"});
  args = dense_args(128, 96, 64);
  args.ldb = 63;
  expect_refused([&] { check_gemm_args(args); }, {"ldb = 63 is smaller than K = 64", "row of B"});
  args = dense_args(128, 96, 64);
  args.ldc = 95;
  expect_refused([&] { check_gemm_args(args); }, {"ldc = 95 is smaller than N = 96", "row of C"});
}

TEST(GemmEntryChecks, RefusesMatricesBeyond32BitIndexing) {
  HgemmArgs args = dense_args(70000, 1024, 40000);  // A: 69999 x 40000 + 40000 elements
  expect_refused([&] { check_gemm_args(args); },
                 {"A spans (M - 1) x lda + K = 2800000000 elements", "2^31 - 1", "split the GEMM"});
  args = dense_args(1024, 8, 64);
  args.ldc = 4 << 20;  // C: 1023 rows of 4 Mi elements
  expect_refused([&] { check_gemm_args(args); }, {"C spans (M - 1) x ldc + N", "32-bit"});
  args = dense_args(64, 1 << 20, 4096);  // B: 2^20 rows of 4096
  expect_refused([&] { check_gemm_args(args); }, {"B spans (N - 1) x ldb + K"});
}

TEST(GemmEntryChecks, RefusesNonFiniteScalars) {
  for (const float bad :
       {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    HgemmArgs args = dense_args(64, 64, 64);
    args.alpha = bad;
    expect_refused([&] { check_gemm_args(args); }, {"alpha = ", "must both be finite"});
    args = dense_args(64, 64, 64);
    args.beta = -bad;
    expect_refused([&] { check_gemm_args(args); }, {"beta = ", "must both be finite"});
  }
}

TEST(GemmEntryChecks, BiasGeluRefusesMissingOrMisalignedBiasAndAPaddedC) {
  const HgemmArgs args = dense_args(512, 1024, 256);
  expect_refused([&] { check_bias_gelu_args(args, nullptr); },
                 {"kc::stage3::Gemm::run_bias_gelu", "bias is a null pointer", "N = 1024"});
  expect_refused([&] { check_bias_gelu_args(args, fake<const bf16>(4, 2)); },
                 {"bias = ", "not 4-byte aligned", "bf16 pairs"});
  // N % 8 == 0: the separate kernel moves 16-byte vectors of C and bias.
  expect_refused([&] { check_bias_gelu_args(args, fake<const bf16>(4, 4)); },
                 {"N = 1024 (a multiple of 8)", "16-byte aligned"});
  HgemmArgs padded = args;
  padded.ldc = 1032;
  expect_refused([&] { check_bias_gelu_args(padded, fake<const bf16>(4)); },
                 {"ldc = 1032 but N = 1024", "dense C"});
  HgemmArgs bad_gemm = args;
  bad_gemm.k = 0;
  expect_refused([&] { check_bias_gelu_args(bad_gemm, fake<const bf16>(4)); },
                 {"kc::stage3::Gemm::run_bias_gelu", "K = 0"});
}

// The cuBLAS wrapper the fallback calls takes the leading dimensions and checks them before any
// cuBLAS call (so a null handle is never used here).
TEST(GemmEntryChecks, TheCublasWrapperChecksLeadingDimensions) {
  const GemmShape shape{4, 6, 8};
  const auto call = [&](GemmLeadingDims lds) {
    cublas_gemm_ex(nullptr, nullptr, shape, DType::bf16, DType::bf16, 1.f, fake<const bf16>(1),
                   fake<const bf16>(2), BLayout::n_by_k, 0.f, fake<bf16>(3), lds);
  };
  expect_refused([&] { call({7, 0, 0}); }, {"lda = 7 is shorter than a row (8 elements)"});
  expect_refused([&] { call({0, 4, 0}); }, {"ldb = 4 is shorter than a row (8 elements)"});
  expect_refused([&] { call({0, 0, 5}); }, {"ldc = 5 is shorter than a row (6 elements)"});
  expect_refused([&] { call({std::int64_t{1} << 32, 0, 0}); }, {"32-bit leading dimensions"});
}

// ---- the dispatch ------------------------------------------------------------------------------

constexpr GemmTarget kH200{90, 232448, true};
constexpr GemmTarget kH200WithoutSm90a{90, 232448, false};
constexpr GemmTarget kA100{80, 166912, true};
constexpr GemmTarget kRtx4090{89, 101376, true};
constexpr GemmTarget kB200{100, 232448, true};
constexpr GemmTarget kV100{70, 98304, true};
constexpr GemmTarget kT4{75, 65536, false};

GemmProblem problem(int m, int n, int k) { return {m, n, k, k, k, n, true}; }

GemmPath cublas(GemmFallback why) { return {GemmKernel::cublas_gemm_ex, why}; }
constexpr GemmPath kRung09{GemmKernel::hgemm_09_tma_store, GemmFallback::none};
constexpr GemmPath kRung03{GemmKernel::hgemm_03_cp_async, GemmFallback::none};
constexpr GemmPath kRung12{GemmKernel::hgemm_12_small_m_gemv, GemmFallback::none};
constexpr GemmPath kRung17{GemmKernel::hgemm_17_unaligned_k_clusters, GemmFallback::none};

TEST(GemmDispatch, TheMeasuredH200ShapesAndTheDocumentedFallbacks) {
  // docs/benchmarks/h200/stage3-gemm.md: rung 09 at parity or above from 2048³ up, 53% at 1024³.
  EXPECT_EQ(choose_gemm_path(problem(1024, 1024, 1024), kH200), cublas(GemmFallback::small_output));
  EXPECT_EQ(choose_gemm_path(problem(2048, 2048, 2048), kH200), kRung09);
  EXPECT_EQ(choose_gemm_path(problem(4096, 4096, 4096), kH200), kRung09);
  EXPECT_EQ(choose_gemm_path(problem(8192, 8192, 8192), kH200), kRung09);
  EXPECT_EQ(choose_gemm_path(problem(8192, 14336, 4096), kH200), kRung09);
  EXPECT_EQ(choose_gemm_path(problem(8192, 4096, 14336), kH200), kRung09);
  EXPECT_EQ(choose_gemm_path(problem(4093, 2049, 1088), kH200), kRung09);
  // docs/notes/2026-12-02-gemm-k-alignment.md: rung 09 well below cuBLAS where K % 64 != 0; rung
  // 17 too where N % 8 == 0, and several times cuBLAS where N % 8 != 0 (stage-3 README, rung 17).
  EXPECT_EQ(choose_gemm_path(problem(4093, 2048, 1032), kH200), cublas(GemmFallback::k_rows_unaligned));
  EXPECT_EQ(choose_gemm_path(problem(4096, 4096, 4104), kH200), cublas(GemmFallback::k_rows_unaligned));
  EXPECT_EQ(choose_gemm_path(problem(3072, 3072, 3000), kH200), cublas(GemmFallback::k_rows_unaligned));
  EXPECT_EQ(choose_gemm_path(problem(4093, 2049, 1032), kH200), kRung17);
  EXPECT_EQ(choose_gemm_path(problem(3000, 3000, 3000), kH200), cublas(GemmFallback::k_rows_unaligned));
  EXPECT_EQ(choose_gemm_path(problem(3000, 3001, 3000), kH200), kRung17);
  EXPECT_EQ(choose_gemm_path(problem(4096, 4100, 4104), kH200), kRung17);
  EXPECT_EQ(choose_gemm_path(problem(4096, 4095, 4096), kH200), kRung09);  // K aligned: rung 09
  EXPECT_EQ(choose_bias_gelu_path(problem(4096, 4100, 4104), kH200),
            (GemmPath{GemmKernel::cublas_gemm_ex_then_bias_gelu, GemmFallback::k_rows_unaligned}));
  EXPECT_EQ(choose_gemm_path(problem(4096, 4096, 4104), kA100), kRung03);  // the rule is rung 09's
  EXPECT_EQ(choose_gemm_path(problem(4093, 2049, 1031), kH200),
            cublas(GemmFallback::k_not_multiple_of_8));
  EXPECT_EQ(choose_gemm_path(problem(1, 4096, 4096), kH200), kRung12);
  EXPECT_EQ(choose_gemm_path(problem(1, 28672, 4096), kH200), kRung12);
  EXPECT_EQ(choose_gemm_path(problem(1, 4096, 4096), kA100), kRung12);
  // 1 < M <= 64: the small-M table on the H200 (its own test below); cuBLAS elsewhere.
  EXPECT_EQ(choose_gemm_path(problem(2, 4096, 4096), kA100), cublas(GemmFallback::small_m));
  EXPECT_EQ(choose_gemm_path(problem(8, 4096, 4096), kH200WithoutSm90a), cublas(GemmFallback::small_m));
  EXPECT_EQ(choose_gemm_path(problem(64, 14336, 4096), kB200), cublas(GemmFallback::small_m));
  EXPECT_EQ(choose_bias_gelu_path(problem(16, 28672, 4096), kH200),
            (GemmPath{GemmKernel::cublas_gemm_ex_then_bias_gelu, GemmFallback::small_m}));
  EXPECT_EQ(choose_bias_gelu_path(problem(1, 4096, 4096), kH200),
            (GemmPath{GemmKernel::cublas_gemm_ex_then_bias_gelu, GemmFallback::small_m}));
  EXPECT_EQ(choose_gemm_path(problem(65, 65536, 4096), kH200), kRung09);  // 4.26 M outputs
  EXPECT_EQ(choose_gemm_path(problem(65536, 255, 4096), kH200), cublas(GemmFallback::small_output));
  EXPECT_EQ(choose_gemm_path(problem(4096, 4096, 4096), kH200WithoutSm90a),
            cublas(GemmFallback::no_sm90a_code));
  EXPECT_EQ(choose_gemm_path(problem(1024, 1024, 1024), kA100), kRung03);
  EXPECT_EQ(choose_gemm_path(problem(4096, 4096, 4096), kB200), kRung03);
  EXPECT_EQ(choose_gemm_path(problem(4096, 4096, 4096), kRtx4090),
            cublas(GemmFallback::shared_memory));
  EXPECT_EQ(choose_gemm_path(problem(128, kRung03MaxN, 8), kA100), kRung03);
  EXPECT_EQ(choose_gemm_path(problem(128, kRung03MaxN + 1, 8), kA100),
            cublas(GemmFallback::grid_limit));
  EXPECT_EQ(choose_gemm_path(problem(4096, 4096, 4096), kV100), cublas(GemmFallback::architecture));
  EXPECT_EQ(choose_gemm_path(problem(4096, 4096, 4095), kT4), cublas(GemmFallback::architecture));
  GemmProblem padded = problem(4096, 4096, 4096);
  padded.ldc = 4104;
  EXPECT_EQ(choose_gemm_path(padded, kH200), cublas(GemmFallback::leading_dimensions));
  GemmProblem misaligned = problem(4096, 4096, 4096);
  misaligned.operands_16_byte_aligned = false;
  EXPECT_EQ(choose_gemm_path(misaligned, kH200), cublas(GemmFallback::misaligned));
  EXPECT_EQ(choose_gemm_path(misaligned, kA100), cublas(GemmFallback::misaligned));
}

TEST(GemmDispatch, PathNamesAreTheKernelIdsOrTheFallbackWithItsReason) {
  EXPECT_EQ(kRung09.name(), "stage3/hgemm/09_tma_store");
  EXPECT_EQ(kRung03.name(), "stage3/hgemm/03_cp_async");
  EXPECT_EQ(kRung12.name(), "stage3/hgemm/12_small_m_gemv");
  EXPECT_EQ(GemmPath({GemmKernel::hgemm_16_small_m_cluster_split, GemmFallback::none}).name(),
            "stage3/hgemm/16_small_m_cluster_split");
  EXPECT_EQ(kRung17.name(), "stage3/hgemm/17_unaligned_k_clusters");
  EXPECT_FALSE(kRung12.uses_cublas());
  EXPECT_EQ(GemmPath({GemmKernel::gemm_bias_gelu_10_fused, GemmFallback::none}).name(),
            "stage3/gemm_bias_gelu/10_fused_bias_gelu");
  EXPECT_EQ(cublas(GemmFallback::k_not_multiple_of_8).name(),
            "cuBLAS GemmEx (fallback: K % 8 != 0)");
  EXPECT_EQ(GemmPath({GemmKernel::cublas_gemm_ex_then_bias_gelu, GemmFallback::not_sm90}).name(),
            "cuBLAS GemmEx + stage3 bias_gelu_inplace (fallback: not an sm_90 GPU)");
  EXPECT_FALSE(kRung09.uses_cublas());
  EXPECT_TRUE(cublas(GemmFallback::small_m).uses_cublas());
  for (const GemmFallback why :
       {GemmFallback::architecture, GemmFallback::k_not_multiple_of_8,
        GemmFallback::leading_dimensions, GemmFallback::misaligned, GemmFallback::small_m, GemmFallback::small_m_table,
        GemmFallback::small_output, GemmFallback::k_rows_unaligned, GemmFallback::no_sm90a_code,
        GemmFallback::shared_memory,
        GemmFallback::grid_limit, GemmFallback::not_sm90}) {
    EXPECT_FALSE(gemm_fallback_reason(why).empty()) << static_cast<int>(why);
    EXPECT_EQ(cublas(why).name().rfind("cuBLAS GemmEx (fallback: ", 0), 0u) << cublas(why).name();
  }
}

TEST(GemmDispatch, ProblemDescriptionSeesLeadingDimensionsAndEveryPointersAlignment) {
  HgemmArgs args = dense_args(100, 200, 64);
  args.ldc = 208;
  const GemmProblem p = gemm_problem(args);
  EXPECT_EQ(p.m, 100);
  EXPECT_EQ(p.n, 200);
  EXPECT_EQ(p.k, 64);
  EXPECT_EQ(p.lda, 64);
  EXPECT_EQ(p.ldb, 64);
  EXPECT_EQ(p.ldc, 208);
  EXPECT_TRUE(p.operands_16_byte_aligned);
  for (int which = 0; which < 3; ++which) {
    HgemmArgs shifted = dense_args(100, 200, 64);
    if (which == 0) shifted.a = fake<const bf16>(1, 8);
    if (which == 1) shifted.b = fake<const bf16>(2, 8);
    if (which == 2) shifted.c = fake<bf16>(3, 8);
    EXPECT_FALSE(gemm_problem(shifted).operands_16_byte_aligned) << "operand " << which;
  }
}

// Every point of the grid obeys the rules of gemm.hpp, in their documented order.
TEST(GemmDispatch, EveryPointOfTheGridFollowsTheRules) {
  const std::vector<int> ms = {1, 2, 3, 17, 64, 65, 127, 128, 1000, 2047, 2048, 4093, 8192, 70000};
  const std::vector<int> ns = {1,    8,    255,  256,   257,         1000,
                               2048, 2049, 4096, 14336, kRung03MaxN, kRung03MaxN + 8};
  const std::vector<int> ks = {1, 7, 8, 20, 64, 1031, 1032, 4096, 14336};
  const std::vector<GemmTarget> targets = {kH200,
                                           kH200WithoutSm90a,
                                           kA100,
                                           kRtx4090,
                                           kB200,
                                           kV100,
                                           kT4,
                                           GemmTarget{86, 101376, false},
                                           GemmTarget{87, 166912, true}};
  enum class Lds { dense, lda, ldb, ldc };
  std::size_t points = 0, rung09 = 0, rung03 = 0, rung12 = 0, rung16 = 0, rung17 = 0, table_cublas = 0, fused = 0;
  for (const GemmTarget& target : targets)
    for (const int m : ms)
      for (const int n : ns)
        for (const int k : ks)
          for (const Lds lds : {Lds::dense, Lds::lda, Lds::ldb, Lds::ldc})
            for (const bool aligned : {true, false}) {
              GemmProblem p{m, n, k, k, k, n, aligned};
              if (lds == Lds::lda) p.lda = k + 8;
              if (lds == Lds::ldb) p.ldb = k + 8;
              if (lds == Lds::ldc) p.ldc = n + 1;
              const GemmPath path = choose_gemm_path(p, target);
              const GemmPath bias_path = choose_bias_gelu_path(p, target);
              ++points;
              const std::string where =
                  "M " + std::to_string(m) + " N " + std::to_string(n) + " K " + std::to_string(k) +
                  " lds " + std::to_string(static_cast<int>(lds)) + " aligned " +
                  std::to_string(aligned) + " sm_" + std::to_string(target.compute_capability) +
                  " smem " + std::to_string(target.shared_memory_per_block) + " sm90a " +
                  std::to_string(target.has_sm90a_code) + ": " + path.name();

              // The first rule that applies decides, in the order gemm.hpp lists them.
              const long long outputs = static_cast<long long>(m) * n;
              GemmFallback expected = GemmFallback::none;
              const bool table = target.compute_capability == 90 && target.has_sm90a_code && m > 1 && m <= 64;
              const GemmKernel table_kernel = table ? nearest_small_m_entry(m, n, k).kernel : GemmKernel::cublas_gemm_ex;
              if (target.compute_capability < 80)
                expected = GemmFallback::architecture;
              else if (k % 8 != 0)
                expected = GemmFallback::k_not_multiple_of_8;
              else if (lds != Lds::dense)
                expected = GemmFallback::leading_dimensions;
              else if (!aligned)
                expected = GemmFallback::misaligned;
              else if (m == 1)
                expected = GemmFallback::none;  // rung 12 on every GPU from sm_80 on
              else if (table)
                expected = table_kernel == GemmKernel::cublas_gemm_ex ? GemmFallback::small_m_table : GemmFallback::none;
              else if (m <= 64)
                expected = GemmFallback::small_m;
              else if (target.compute_capability == 90 && !target.has_sm90a_code)
                expected = GemmFallback::no_sm90a_code;
              else if (target.compute_capability == 90 && (outputs < 2048LL * 2048 || n < 256))
                expected = GemmFallback::small_output;
              else if (target.compute_capability == 90 && k % 64 != 0 && n % 8 == 0)
                expected = GemmFallback::k_rows_unaligned;
              else if (target.compute_capability != 90 && target.shared_memory_per_block < 148480)
                expected = GemmFallback::shared_memory;
              else if (target.compute_capability != 90 && n > 65535 * 256)
                expected = GemmFallback::grid_limit;
              ASSERT_EQ(path.fallback, expected) << where;

              if (expected != GemmFallback::none) {
                ASSERT_EQ(path.kernel, GemmKernel::cublas_gemm_ex) << where;
                table_cublas += expected == GemmFallback::small_m_table;
              } else if (table) {
                ASSERT_EQ(path.kernel, table_kernel) << where;
                rung12 += table_kernel == GemmKernel::hgemm_12_small_m_gemv;
                rung16 += table_kernel == GemmKernel::hgemm_16_small_m_cluster_split;
              } else if (m == 1) {
                ASSERT_EQ(path.kernel, GemmKernel::hgemm_12_small_m_gemv) << where;
                ++rung12;
              } else if (target.compute_capability == 90 && k % 64 != 0) {  // and N % 8 != 0
                ASSERT_EQ(path.kernel, GemmKernel::hgemm_17_unaligned_k_clusters) << where;
                ++rung17;
              } else if (target.compute_capability == 90) {
                ASSERT_EQ(path.kernel, GemmKernel::hgemm_09_tma_store) << where;
                ++rung09;
              } else {
                ASSERT_EQ(path.kernel, GemmKernel::hgemm_03_cp_async) << where;
                ++rung03;
              }

              // The fused op takes rung 10 exactly where the GEMM takes rung 09; otherwise the
              // unfused pair, for the GEMM's reason (or because the GPU is not sm_90).
              if (path.kernel == GemmKernel::hgemm_09_tma_store) {
                ASSERT_EQ(bias_path,
                          (GemmPath{GemmKernel::gemm_bias_gelu_10_fused, GemmFallback::none}))
                    << where;
                ++fused;
              } else {
                ASSERT_EQ(bias_path.kernel, GemmKernel::cublas_gemm_ex_then_bias_gelu) << where;
                // At M <= 64 the fused op falls back for small M unless a hard constraint came first.
                const bool hard = path.fallback == GemmFallback::k_not_multiple_of_8 ||
                                  path.fallback == GemmFallback::leading_dimensions ||
                                  path.fallback == GemmFallback::misaligned;
                // Rung 17's calls have no fused form: the unfused pair, for rows not 128-byte aligned.
                const GemmFallback gemm_reason = path.kernel == GemmKernel::hgemm_17_unaligned_k_clusters
                                                     ? GemmFallback::k_rows_unaligned
                                                     : path.fallback;
                const GemmFallback bias_expected = target.compute_capability != 90 ? GemmFallback::not_sm90
                                                   : (m <= 64 && !hard)            ? GemmFallback::small_m
                                                                                   : gemm_reason;
                ASSERT_EQ(bias_path.fallback, bias_expected) << where;
              }
            }
  EXPECT_EQ(points, targets.size() * ms.size() * ns.size() * ks.size() * 4 * 2);
  EXPECT_GT(rung09, 0u);
  EXPECT_GT(rung03, 0u);
  EXPECT_GT(rung12, 0u);
  EXPECT_GT(rung16, 0u);
  EXPECT_GT(rung17, 0u);
  EXPECT_GT(table_cublas, 0u);
  EXPECT_EQ(fused, rung09);
}

// ---- the small-M table --------------------------------------------------------------------------

// The rows CMake compiled in from stage3-hpc/gemm/small_m_dispatch_h200.json keep the rules the
// dispatch relies on: 1 < M <= 64; rung 12 only where it launches (M <= 8); every tuned M has the
// same weights (so every bucket has a nearest row for any weight); no shape twice.
TEST(SmallMTable, RowsKeepTheRulesTheDispatchReliesOn) {
  const std::vector<SmallMTableEntry>& rows = small_m_table();
  ASSERT_FALSE(rows.empty());
  std::set<int> ms;
  std::map<int, std::set<std::pair<int, int>>> weights;
  std::set<std::tuple<int, int, int>> shapes;
  for (const SmallMTableEntry& row : rows) {
    const std::string where = std::to_string(row.m) + "x" + std::to_string(row.n) + "x" + std::to_string(row.k);
    EXPECT_GT(row.m, kGemvMaxM) << where;
    EXPECT_LE(row.m, kSmallM) << where;
    EXPECT_GE(row.n, 1) << where;
    EXPECT_EQ(row.k % 8, 0) << where << ": the table's kernels need K % 8 == 0";
    EXPECT_TRUE(row.kernel == GemmKernel::cublas_gemm_ex || row.kernel == GemmKernel::hgemm_16_small_m_cluster_split ||
                (row.kernel == GemmKernel::hgemm_12_small_m_gemv && row.m <= 8))
        << where << ": " << gemm_kernel_name(row.kernel);
    EXPECT_TRUE(shapes.insert({row.m, row.n, row.k}).second) << where << " twice";
    ms.insert(row.m);
    weights[row.m].insert({row.n, row.k});
  }
  EXPECT_EQ(*ms.rbegin(), kSmallM) << "no bucket for the largest small M";
  for (const int m : ms) EXPECT_EQ(weights[m], weights[*ms.begin()]) << "M = " << m << " has other weights";
}

// At a tuned shape the dispatch takes the row's kernel; between tuned shapes it takes the row of
// the M bucket (the smallest tuned M at or above the call's) with the nearest weight, by
// |log2 N ratio| + |log2 K ratio|; every other M, N, K is refused with the range.
TEST(SmallMTable, TheDispatchFollowsTheNearestRowOfTheBucket) {
  const std::vector<SmallMTableEntry>& rows = small_m_table();
  for (const SmallMTableEntry& row : rows) {
    const SmallMTableEntry& found = nearest_small_m_entry(row.m, row.n, row.k);
    EXPECT_EQ(&found, &row) << row.m << "x" << row.n << "x" << row.k;
    const GemmPath path = choose_gemm_path(problem(row.m, row.n, row.k), kH200);
    EXPECT_EQ(path.kernel, row.kernel) << path.name();
    EXPECT_EQ(path.fallback,
              row.kernel == GemmKernel::cublas_gemm_ex ? GemmFallback::small_m_table : GemmFallback::none);
  }
  std::set<int> tuned;
  for (const SmallMTableEntry& row : rows) tuned.insert(row.m);
  for (int m = 2; m <= kSmallM; ++m)
    for (const int n : {1, 100, 777, 5000, 28000, 100000})
      for (const int k : {8, 520, 3000, 9000, 40000}) {
        const SmallMTableEntry& found = nearest_small_m_entry(m, n, k);
        ASSERT_EQ(found.m, *tuned.lower_bound(m)) << m << "x" << n << "x" << k;
        const auto distance = [&](const SmallMTableEntry& e) {
          return std::fabs(std::log2(double(n) / e.n)) + std::fabs(std::log2(double(k) / e.k));
        };
        for (const SmallMTableEntry& other : rows) {
          if (other.m == found.m) {
            ASSERT_LE(distance(found), distance(other)) << m << "x" << n << "x" << k;
          }
        }
      }
  // The tuning weights are the Llama-3 and SmolLM2 projections: M = 3 takes M = 4's row, M = 33
  // M = 64's, and a 5000-wide weight of K = 4096 is nearer 4096 (0.29 in log2) than 6144 (0.30).
  EXPECT_EQ(nearest_small_m_entry(3, 4096, 4096).m, 4);
  EXPECT_EQ(nearest_small_m_entry(33, 5000, 4096).m, 64);
  EXPECT_EQ(nearest_small_m_entry(33, 5000, 4096).n, 4096);
  EXPECT_EQ(nearest_small_m_entry(33, 5000, 4096).k, 4096);
  EXPECT_THROW(nearest_small_m_entry(1, 4096, 4096), Error);
  EXPECT_THROW(nearest_small_m_entry(65, 4096, 4096), Error);
  EXPECT_THROW(nearest_small_m_entry(2, 0, 4096), Error);
}

TEST(GemmDispatch, ConstantsMatchTheKernelsTheyDescribe) {
  EXPECT_EQ(kRung03SharedMemoryBytes, 148480);  // 3 x (16 KiB of A + 32 KiB of B) + 1 KiB: 145 KiB
  EXPECT_EQ(kRung03MaxN, 16776960);
  EXPECT_EQ(kHopperMinOutputElements, 2048LL * 2048);
  EXPECT_LE(kGemvMaxM, 8);  // rung 12 takes M <= 8 (kSmallMGemvMaxM, gemm/gemm_layout.hpp)
}

}  // namespace
}  // namespace kc::stage3
