// The stage-3 ops and ladder as the registry sees them: which kernels exist, where they may run,
// which shapes they refuse and why, and the host side of the fused op (GELU reference, work).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "arch/sm90/tma_descriptor.hpp"
#include "gemm_layout.hpp"
#include "hgemm.hpp"
#include "kc/common/gemm.hpp"
#include "kc/stage3/register.hpp"
#include "kc/common/registry.hpp"
#include "kc/core/gelu.hpp"
#include "kc/stage3/register.hpp"

namespace kc::stage3 {
namespace {

Registry stage3_registry() {
  Registry registry;
  register_kernels(registry);
  return registry;
}

// The GEMM ladder's rungs (the hgemm and gemm_bias_gelu ops), in registration order; stage 3 also
// registers the attention ladder (attention_ladder_test.cpp).
// The ladder's rungs: the hgemm and bias_gelu kernels but the entry's row (its own report).
std::vector<const KernelEntry*> gemm_ladder(const Registry& registry) {
  std::vector<const KernelEntry*> ladder;
  for (const KernelEntry& k : registry.kernels())
    if ((k.op == kHgemmOp || k.op == kBiasGeluOp) && k.report_group() != kGemmEntryReport) ladder.push_back(&k);
  return ladder;
}

// The public entry is timed like a rung, in its own report, on every shape the op defines (K % 8
// != 0 too: its cuBLAS fallback takes them), from sm_80 on.
TEST(Stage3Ladder, TheGemmEntryHasItsOwnReportAndRefusesNothing) {
  const Registry registry = stage3_registry();
  const KernelEntry& entry = registry.kernel(std::string("stage3/hgemm/") + kGemmEntryName);
  EXPECT_EQ(entry.report_group(), kGemmEntryReport);
  EXPECT_EQ(entry.rung, kGemmEntryRung);
  EXPECT_TRUE(entry.refuses.empty());
  EXPECT_EQ(entry.min_compute_capability, 80);
  for (const Problem& p : make_hgemm_op().conformance_problems) EXPECT_EQ(entry.supports(p), "") << p.label();
  // Its rows name the path it took (KernelEntry::note; kc-bench's GPU test reads them back).
  EXPECT_TRUE(static_cast<bool>(entry.note));
}

constexpr int kSmallMRung = 11;
constexpr int kSmallMGemvRung = 12;
constexpr int kWeightsAsARung = 14;  // 13 is the public entry's row (its own report)
constexpr int kSmallMTmaWgmmaRung = 15;
constexpr int kSmallMClusterSplitRung = 16;

bool is_hopper_small_m_rung(int rung) { return rung == kSmallMTmaWgmmaRung || rung == kSmallMClusterSplitRung; }

// The rungs for M <= 64 only; all but 15 and 16 (WGMMA) run from sm_80 on.
bool is_small_m_rung(int rung) {
  return rung == kSmallMRung || rung == kSmallMGemvRung || rung == kWeightsAsARung || is_hopper_small_m_rung(rung);
}

const std::vector<std::string>& expected_refusals(int rung) {
  if (rung == kSmallMRung || rung == kWeightsAsARung || is_hopper_small_m_rung(rung)) return small_m_refusals();
  if (rung == kSmallMGemvRung) return small_m_gemv_refusals();
  return hgemm_refusals();
}

TEST(Stage3Ladder, RegistersSixteenRungsInOrderInTheStage3GemmReport) {
  const Registry registry = stage3_registry();
  const std::vector<const KernelEntry*> ladder = gemm_ladder(registry);
  ASSERT_EQ(ladder.size(), 16u);
  for (std::size_t i = 0; i < ladder.size(); ++i) {
    const KernelEntry& k = *ladder[i];
    // 1..12, then 14 to 17: number 13 is the public entry's row, in its own report
    EXPECT_EQ(k.rung, i < 12 ? static_cast<int>(i) + 1 : static_cast<int>(i) + 2) << k.id;
    EXPECT_EQ(k.report_group(), "stage3-gemm") << k.id;
    EXPECT_EQ(k.dtypes, std::vector<DType>{DType::bf16}) << k.id;
    EXPECT_EQ(k.refuses, expected_refusals(k.rung)) << k.id;
    EXPECT_FALSE(k.constraints.empty()) << k.id;
  }
  EXPECT_EQ(ladder[9]->id, "stage3/gemm_bias_gelu/10_fused_bias_gelu");
  EXPECT_EQ(ladder[10]->id, "stage3/hgemm/11_small_m_split_k");
  EXPECT_EQ(ladder[11]->id, "stage3/hgemm/12_small_m_gemv");
  EXPECT_EQ(ladder[12]->id, "stage3/hgemm/14_small_m_weights_as_a");
  EXPECT_EQ(ladder[13]->id, "stage3/hgemm/15_small_m_tma_wgmma");
  EXPECT_EQ(ladder[14]->id, "stage3/hgemm/16_small_m_cluster_split");
  EXPECT_EQ(ladder.back()->id, "stage3/hgemm/17_unaligned_k_clusters");
}

TEST(Stage3Ladder, HopperRungsRunOnSm90OnlyAndTheOthersFromSm80) {
  const Registry registry = stage3_registry();
  for (const KernelEntry* entry : gemm_ladder(registry)) {
    const KernelEntry& k = *entry;
    if (k.rung <= 3 || (is_small_m_rung(k.rung) && !is_hopper_small_m_rung(k.rung))) {
      EXPECT_EQ(k.min_compute_capability, 80) << k.id;
      EXPECT_EQ(k.max_compute_capability, 0) << k.id;
    } else {
      EXPECT_EQ(k.min_compute_capability, 90) << k.id;
      EXPECT_EQ(k.max_compute_capability, 90) << k.id;
    }
  }
}

TEST(Stage3Ladder, OnAnAmpereOrBlackwellGpuHopperRungsAreRefusedWithAReason) {
  const Registry registry = stage3_registry();
  DeviceInfo ampere;
  ampere.name = "NVIDIA A100";
  ampere.cc_major = 8;
  DeviceInfo blackwell;
  blackwell.name = "NVIDIA B200";
  blackwell.cc_major = 10;
  const KernelEntry& wgmma = registry.kernel("stage3/hgemm/04_tma_wgmma");
  const Problem problem = gemm_problem(kHgemmOp, {256, 256, 256}, DType::bf16);
  EXPECT_NE(unsupported_reason(registry, wgmma, problem, &ampere).find("9.0"), std::string::npos);
  EXPECT_NE(unsupported_reason(registry, wgmma, problem, &blackwell).find("sm_90"), std::string::npos);
  const KernelEntry& mma = registry.kernel("stage3/hgemm/03_cp_async");
  EXPECT_EQ(unsupported_reason(registry, mma, problem, &ampere), "");
  EXPECT_EQ(unsupported_reason(registry, mma, problem, &blackwell), "");
}

TEST(Stage3Ladder, EveryTileRungTakesAnyMAndNButRefusesKNotAMultipleOf8) {
  const Registry registry = stage3_registry();
  for (const KernelEntry* entry : gemm_ladder(registry)) {
    const KernelEntry& k = *entry;
    if (is_small_m_rung(k.rung)) continue;  // small M only: the next tests
    for (const auto& dims : {std::vector<std::int64_t>{1, 1, 8}, {4093, 17, 1032}, {129, 4093, 264}})
      EXPECT_EQ(unsupported_reason(registry, k, gemm_problem(k.op, dims, DType::bf16), nullptr), "") << k.id;
    const std::string reason =
        unsupported_reason(registry, k, gemm_problem(k.op, {128, 128, 1031}, DType::bf16), nullptr);
    EXPECT_NE(reason.find("multiple of 8"), std::string::npos) << k.id << ": " << reason;
  }
}

TEST(Stage3Ladder, TheSmallMRungTakesMUpTo64AnyNAndRefusesLargerMOrKNotAMultipleOf8) {
  const Registry registry = stage3_registry();
  const KernelEntry& k = registry.kernel("stage3/hgemm/11_small_m_split_k");
  for (const auto& dims : {std::vector<std::int64_t>{1, 1, 8}, {3, 4093, 1032}, {64, 17, 16392}, {64, 4096, 14336}})
    EXPECT_EQ(unsupported_reason(registry, k, gemm_problem(k.op, dims, DType::bf16), nullptr), "");
  const std::string large_m = unsupported_reason(registry, k, gemm_problem(k.op, {65, 4096, 4096}, DType::bf16), nullptr);
  EXPECT_NE(large_m.find("at most 64"), std::string::npos) << large_m;
  const std::string odd_k = unsupported_reason(registry, k, gemm_problem(k.op, {16, 128, 1031}, DType::bf16), nullptr);
  EXPECT_NE(odd_k.find("multiple of 8"), std::string::npos) << odd_k;
}

TEST(Stage3Ladder, TheWeightsAsARungsTakeMUpTo64AnyNAndRefuseLargerMOrKNotAMultipleOf8) {
  const Registry registry = stage3_registry();
  for (const char* id : {"stage3/hgemm/14_small_m_weights_as_a", "stage3/hgemm/15_small_m_tma_wgmma",
                         "stage3/hgemm/16_small_m_cluster_split"}) {
    const KernelEntry& k = registry.kernel(id);
    EXPECT_EQ(k.constraints, "M <= 64, K % 8 == 0");
    for (const auto& dims : {std::vector<std::int64_t>{1, 1, 8}, {9, 4093, 1032}, {64, 17, 16392}, {64, 4096, 14336}})
      EXPECT_EQ(unsupported_reason(registry, k, gemm_problem(k.op, dims, DType::bf16), nullptr), "") << id;
    const std::string large_m = unsupported_reason(registry, k, gemm_problem(k.op, {65, 4096, 4096}, DType::bf16), nullptr);
    EXPECT_NE(large_m.find("at most 64"), std::string::npos) << large_m;
    EXPECT_NE(large_m.find("token tiles of 8"), std::string::npos) << large_m;
    const std::string odd_k = unsupported_reason(registry, k, gemm_problem(k.op, {16, 128, 1031}, DType::bf16), nullptr);
    EXPECT_NE(odd_k.find("multiple of 8"), std::string::npos) << odd_k;
  }
}

TEST(Stage3Ladder, TheGemvRungTakesMUpTo8AnyNAndRefusesLargerMOrKNotAMultipleOf8) {
  const Registry registry = stage3_registry();
  const KernelEntry& k = registry.kernel("stage3/hgemm/12_small_m_gemv");
  for (const auto& dims : {std::vector<std::int64_t>{1, 1, 8}, {8, 4093, 1032}, {3, 17, 16392}, {1, 28672, 4096}})
    EXPECT_EQ(unsupported_reason(registry, k, gemm_problem(k.op, dims, DType::bf16), nullptr), "");
  const std::string large_m = unsupported_reason(registry, k, gemm_problem(k.op, {9, 4096, 4096}, DType::bf16), nullptr);
  EXPECT_NE(large_m.find("at most 8"), std::string::npos) << large_m;
  const std::string odd_k = unsupported_reason(registry, k, gemm_problem(k.op, {1, 128, 1031}, DType::bf16), nullptr);
  EXPECT_NE(odd_k.find("multiple of 8"), std::string::npos) << odd_k;
}

// The conformance problems rung 12 must run: every M from 1 to 8, odd N, a K of one piece, K tails
// against every group size, alpha and beta.
TEST(Stage3Ops, ConformanceHasTheEdgesRung12Needs) {
  const OpSpec op = make_hgemm_op();
  std::set<std::int64_t> ms;
  std::set<int> group_threads;
  int odd_n = 0, scaled = 0, one_piece = 0;
  for (const Problem& p : op.conformance_problems) {
    if (!small_m_gemv_shape_error(p).empty()) continue;
    const GemmShape s = gemm_shape(p);
    ms.insert(s.m);
    odd_n += s.n % 2;
    scaled += !p.params_text().empty();
    one_piece += s.k == 8;
    group_threads.insert(
        choose_small_m_gemv_group(static_cast<int>(s.m), static_cast<int>(s.n), static_cast<int>(s.k), 132).threads);
  }
  for (std::int64_t m = 1; m <= kSmallMGemvMaxM; ++m) EXPECT_EQ(ms.count(m), 1u) << "M = " << m;
  EXPECT_GE(odd_n, 3);
  EXPECT_GE(scaled, 1);
  EXPECT_GE(one_piece, 2);
  EXPECT_EQ(group_threads, (std::set<int>{32, 64, 128, 256}));
}

// The small-M conformance problems rung 11 must run: M = 1, 3, 16 or 17, 64; odd N; K tails; a
// split into many CTAs; alpha and beta.
TEST(Stage3Ops, ConformanceHasTheSmallMEdgesRung11Needs) {
  const OpSpec op = make_hgemm_op();
  std::set<std::int64_t> small_ms;
  int odd_n = 0, k_tail = 0, scaled = 0, many_splits = 0;
  for (const Problem& p : op.conformance_problems) {
    if (!small_m_shape_error(p).empty()) continue;
    const GemmShape s = gemm_shape(p);
    small_ms.insert(s.m);
    odd_n += s.n % 2;
    k_tail += s.k % kSmallMBlockK != 0;
    scaled += !p.params_text().empty();
    many_splits += plan_small_m_split_k(static_cast<int>(s.m), static_cast<int>(s.n), static_cast<int>(s.k), 132).splits >= 8;
  }
  for (const std::int64_t m : {1, 3, 17, 64}) EXPECT_EQ(small_ms.count(m), 1u) << "M = " << m;
  EXPECT_GE(odd_n, 3);
  EXPECT_GE(k_tail, 3);
  EXPECT_GE(scaled, 3);
  EXPECT_GE(many_splits, 2);
}

// The small-M conformance problems rung 14 must run: every token-tile count 1..8 (one kernel
// instance each), M = 1, 3, 8, 9, 17, 33, 64, odd N, K tails, splits that do not divide the K
// tiles evenly, many splits and one split (nothing to reduce), alpha and beta.
TEST(Stage3Ops, ConformanceHasTheSmallMEdgesRung14Needs) {
  const OpSpec op = make_hgemm_op();
  std::set<std::int64_t> small_ms;
  std::set<int> token_tiles;
  int odd_n = 0, k_tail = 0, scaled = 0, many_splits = 0, one_split = 0, uneven_splits = 0;
  for (const Problem& p : op.conformance_problems) {
    if (!small_m_weights_as_a_shape_error(p).empty()) continue;
    const GemmShape s = gemm_shape(p);
    const SmallMWeightsAsAPlan plan =
        plan_small_m_weights_as_a(static_cast<int>(s.m), static_cast<int>(s.n), static_cast<int>(s.k), 132);
    small_ms.insert(s.m);
    token_tiles.insert(plan.token_tiles);
    odd_n += s.n % 2;
    k_tail += s.k % kSmallMBlockK != 0;
    scaled += !p.params_text().empty();
    many_splits += plan.splits >= 8;
    one_split += plan.splits == 1;
    uneven_splits += plan.k_tiles % plan.splits != 0;
  }
  for (const std::int64_t m : {1, 3, 8, 9, 17, 33, 64}) EXPECT_EQ(small_ms.count(m), 1u) << "M = " << m;
  for (int tiles = 1; tiles <= kSmallMMaxTokenTiles; ++tiles) EXPECT_EQ(token_tiles.count(tiles), 1u) << tiles << " token tiles";
  EXPECT_GE(odd_n, 6);
  EXPECT_GE(k_tail, 6);
  EXPECT_GE(scaled, 3);
  EXPECT_GE(many_splits, 4);
  EXPECT_GE(one_split, 2);
  EXPECT_GE(uneven_splits, 4);
}

TEST(Stage3Ops, ConformanceProblemsMixAcceptedEdgeShapesAndRefusals) {
  const Registry registry = stage3_registry();
  for (const char* name : {kHgemmOp, kBiasGeluOp}) {
    const OpSpec& op = registry.op(name);
    int accepted = 0, refused = 0, odd_m = 0, odd_n = 0, partial_k_tile = 0, scaled = 0;
    for (const Problem& p : op.conformance_problems) {
      if (!hgemm_shape_error(p).empty()) {
        ++refused;
        continue;
      }
      ++accepted;
      odd_m += p.dims[0] % 2;
      odd_n += p.dims[1] % 2;
      partial_k_tile += p.dims[2] % 64 != 0;
      scaled += !p.params_text().empty();
    }
    EXPECT_GE(accepted, 15) << name;
    EXPECT_GE(refused, 1) << name;
    EXPECT_GE(odd_m, 3) << name;
    EXPECT_GE(odd_n, 3) << name;
    EXPECT_GE(partial_k_tile, 3) << name;
    EXPECT_GE(scaled, 2) << name;
  }
}

TEST(Stage3Ops, BenchProblemsAreTheDocumentedShapes) {
  const OpSpec op = make_hgemm_op();
  std::vector<std::string> shapes;
  for (const Problem& p : op.bench_problems) shapes.push_back(p.shape());
  for (const char* expected : {"4096x4096x4096", "8192x8192x8192", "8192x14336x4096", "8192x4096x14336",
                               "2048x2048x2048", "4093x2049x1032", "1x4096x4096", "16x4096x4096",
                               "64x4096x4096", "64x4096x14336"})
    EXPECT_NE(std::find(shapes.begin(), shapes.end(), expected), shapes.end()) << expected;
  for (const Problem& p : op.bench_problems) EXPECT_EQ(hgemm_shape_error(p), "") << p.shape();
}

TEST(Stage3Ops, HgemmIsBf16TnOnTheTensorCoresAgainstCublasGemmEx) {
  const OpSpec op = make_hgemm_op();
  EXPECT_EQ(op.math, MathUnit::fp16_tensor);
  EXPECT_NE(op.description.find("B N×K"), std::string::npos) << op.description;
  EXPECT_NE(op.baseline_name.find("GemmEx"), std::string::npos);
  EXPECT_TRUE(op.baseline_computes_op);
}

TEST(Stage3Ops, FusedOpCountsTheBiasAndHasCublasLtsFusedEpilogueAsItsBaseline) {
  const OpSpec gemm = make_hgemm_op();
  const OpSpec fused = make_gemm_bias_gelu_op();
  const Problem p = gemm_problem(kBiasGeluOp, {8192, 14336, 4096}, DType::bf16);
  const Problem q = gemm_problem(kHgemmOp, {8192, 14336, 4096}, DType::bf16);
  EXPECT_DOUBLE_EQ(fused.work(p).flops, gemm.work(q).flops);
  EXPECT_DOUBLE_EQ(fused.work(p).bytes, gemm.work(q).bytes + 2.0 * 14336);
  EXPECT_NE(fused.baseline_name.find("GELU_BIAS"), std::string::npos) << fused.baseline_name;
  ASSERT_EQ(fused.peers.size(), 1u);
  EXPECT_NE(fused.peers[0].name.find("bias+GELU kernel"), std::string::npos);
  EXPECT_NE(fused.description.find("gelu"), std::string::npos);
}

TEST(GeluReference, IsTheTanhForm) {
  EXPECT_DOUBLE_EQ(gelu_tanh_reference(0.0), 0.0);
  EXPECT_NEAR(gelu_tanh_reference(1.0), 0.8411919906, 1e-9);
  EXPECT_NEAR(gelu_tanh_reference(-1.0), -0.1588080094, 1e-9);
  EXPECT_NEAR(gelu_tanh_reference(6.0), 6.0, 1e-6);
  EXPECT_NEAR(gelu_tanh_reference(-6.0), 0.0, 1e-6);
  // The same function as the textbook tanh form where that form is accurate ...
  for (double x = -3.0; x <= 3.0; x += 0.125) {
    const double u = std::sqrt(2.0 / 3.14159265358979323846) * (x + 0.044715 * x * x * x);
    EXPECT_NEAR(gelu_tanh_reference(x), 0.5 * x * (1.0 + std::tanh(u)), 1e-15) << x;
  }
  // ... and correct in the negative tail, where 1 + tanh(u) cancels even in double: at x = -12,
  // u = -71.2 and GELU = -12 / (1 + e^142.45) = -1.636e-61, not 0 or 1e-16.
  EXPECT_LT(gelu_tanh_reference(-12.0), 0.0);
  EXPECT_NEAR(gelu_tanh_reference(-12.0) / -1.636e-61, 1.0, 1e-3);
  // The erf form differs by ~1e-4 here: the reference must not silently be the other GELU.
  const double erf_form = 0.5 * 1.0 * (1.0 + std::erf(1.0 / std::sqrt(2.0)));
  EXPECT_GT(std::fabs(gelu_tanh_reference(1.0) - erf_form), 1e-5);
}

// The op's reference and the formula the kernels evaluate (kc/core/gelu.hpp, which stage 2's
// references also use) are one function in one form, x / (1 + exp(-2u)): they agree to the
// rounding of the exponent everywhere, the negative tail included (there exp(-2u) amplifies its
// argument's rounding, |2u| x 2^-53 relative: about 1e-13 at x = -20, where 2u = -603).
TEST(GeluReference, IsTheSharedFormula) {
  for (double x = -20.0; x <= 20.0; x += 1.0 / 32) {
    const double shared = core::gelu_tanh<core::ReferenceMath>(x);
    EXPECT_NEAR(gelu_tanh_reference(x), shared, 1e-12 * std::fabs(shared)) << x;
  }
}


// The launch checks of rungs 14-16 run before any CUDA call, so they are tested here: each rule a
// call breaks is named in the kc::Error, and rung 16 refuses a plan with more splits than a cluster
// holds (rung 15's plan at N = 1024 has 16).
TEST(SmallMLaunchChecks, NameTheRuleTheArgumentsBreak) {
  alignas(16) static bf16 storage[64];  // never read: the checks look at the addresses only
  HgemmArgs good;
  good.m = 64;
  good.n = 1024;
  good.k = 4096;
  good.a = storage;
  good.b = storage;
  good.c = storage;
  good.lda = good.k;
  good.ldb = good.k;
  good.ldc = good.n;
  const auto message = [](auto&& call) {
    try {
      call();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const SmallMWeightsAsAPlan cluster = plan_small_m_cluster_split(64, 1024, 4096, 132);
  const SmallMWeightsAsAPlan wide = plan_small_m_tma_wgmma(64, 1024, 4096, 132);
  ASSERT_EQ(cluster.splits, 8);
  ASSERT_EQ(wide.splits, 16);
  EXPECT_EQ(message([&] { require_small_m_swapped_plan(good, cluster, "hgemm rung 16"); }), "no error");
  HopperLaunchCache cache;
  const std::string too_many = message([&] { hgemm_16_small_m_cluster_split(good, wide, {}, nullptr, cache); });
  EXPECT_NE(too_many.find("hgemm rung 16: 16 splits"), std::string::npos) << too_many;
  EXPECT_NE(too_many.find("at most 8 CTAs"), std::string::npos) << too_many;
  const std::string no_workspace = message([&] { require_small_m_weights_as_a_launch(good, wide, {}, "hgemm rung 15"); });
  EXPECT_NE(no_workspace.find("hgemm rung 15: 16 splits need a workspace"), std::string::npos) << no_workspace;
  HgemmArgs rows = good;
  rows.m = 65;
  EXPECT_NE(message([&] { require_small_m_swapped_plan(rows, cluster, "hgemm rung 16"); }).find("outside 1..64"),
            std::string::npos);
  HgemmArgs padded = good;
  padded.lda = good.k + 8;
  EXPECT_NE(message([&] { require_small_m_swapped_plan(padded, cluster, "hgemm rung 16"); }).find("dense operands only"),
            std::string::npos);
  const SmallMWeightsAsAPlan other = plan_small_m_cluster_split(64, 2048, 4096, 132);
  EXPECT_NE(message([&] { require_small_m_swapped_plan(good, other, "hgemm rung 16"); }).find("is not one for 64x1024x4096"),
            std::string::npos);
}

}  // namespace
}  // namespace kc::stage3
