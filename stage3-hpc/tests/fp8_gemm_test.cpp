// The fp8_gemm op's host side: where each scale lies (the maps the references read, against the
// indices the kernel computes), the scale operands' shapes per scaling, refusals, the problems, the
// FLOP and byte counts, and the ladder's registration. The kernels' conformance and the negative
// controls run on an H100/H200 (tests/conformance, tests/harness: ctest -R fp8_gemm).
//   ctest --test-dir build/ci -R Fp8Gemm
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "arch/sm90/tma_descriptor.hpp"
#include "kc/common/error.hpp"
#include "kc/stage3/fp8_gemm.hpp"
#include "kc/stage3/grouped_gemm_args.hpp"
#include "kc/stage3/low_precision_ops.hpp"
#include "kc/common/compare.hpp"
#include "src/fp8_gemm_edges.hpp"
#include "src/fp8_quantize_edges.hpp"
#include "stage3_test_registry.hpp"
#include "support/refusals.hpp"

namespace kc::stage3 {
namespace {

using kc::testing::error_of;
using kc::testing::expect_refused;

Problem problem(Shape dims, ParamValues values = {}) {
  static const OpSpec op = make_fp8_gemm_op();
  return op.problem(std::move(dims), DType::f8e4m3, values);
}

TEST(Fp8GemmScales, PerTensorScalesAreOneValueEach) {
  for (const int k : {16, 128, 4096}) {
    const Fp8ScaleMap a = fp8_scale_map_a(Fp8Scaling::per_tensor, 300);
    const Fp8ScaleMap b = fp8_scale_map_b(Fp8Scaling::per_tensor, k);
    for (const long long row : {0, 1, 299})
      for (const long long col : {0LL, 127LL, static_cast<long long>(k - 1)}) {
        EXPECT_EQ(a(row, col), 0);
        EXPECT_EQ(b(row, col), 0);
      }
  }
}

// s_A[kb][m] (M contiguous) and s_B[n / 128][kb]: the indices fp8_gemm_kernel.cuh's
// load_step_scales computes, kb M + row and (n / 128) ceil(K / 128) + kb.
TEST(Fp8GemmScales, BlockScalesFollowTheDocumentedLayouts) {
  const int m = 300, n = 1000, k = 1040;  // ceil(K / 128) = 9, the last block 16 deep
  const Fp8ScaleMap a = fp8_scale_map_a(Fp8Scaling::block, m);
  const Fp8ScaleMap b = fp8_scale_map_b(Fp8Scaling::block, k);
  EXPECT_EQ(fp8_k_blocks(k), 9);
  EXPECT_EQ(fp8_n_blocks(n), 8);
  for (int row = 0; row < m; row += 37)
    for (int col = 0; col < k; col += 61) EXPECT_EQ(a(row, col), static_cast<long long>(col / 128) * m + row);
  for (int row = 0; row < n; row += 53)
    for (int col = 0; col < k; col += 61) EXPECT_EQ(b(row, col), static_cast<long long>(row / 128) * 9 + col / 128);
  // The last index of each is the last element of its operand.
  EXPECT_EQ(a(m - 1, k - 1), 9LL * m - 1);
  EXPECT_EQ(b(n - 1, k - 1), 8LL * 9 - 1);
}

// The op's byte count is every operand once: it sees the scale operands' shapes.
TEST(Fp8GemmOp, ScaleOperandsHaveTheShapesTheScalingGivesThem) {
  const OpSpec op = make_fp8_gemm_op();
  const double a_b_c = 300.0 * 1040 + 1000.0 * 1040 + 2.0 * 300 * 1000;
  EXPECT_DOUBLE_EQ(op.work(problem({300, 1000, 1040})).bytes, a_b_c + 4.0 + 4.0);
  // s_A [9, 300], s_B [8, 9] floats.
  EXPECT_DOUBLE_EQ(op.work(problem({300, 1000, 1040}, {{"scaling", 1}})).bytes, a_b_c + 4.0 * 9 * 300 + 4.0 * 8 * 9);
}

TEST(Fp8GemmOp, RefusesWhatItDoesNotDefineWithAReason) {
  EXPECT_EQ(fp8_gemm_problem_error(problem({64, 64, 64})), "");
  EXPECT_EQ(fp8_gemm_problem_error(problem({64, 64, 64}, {{"scaling", 1}})), "");
  const std::string bad_scaling = fp8_gemm_problem_error(problem({64, 64, 64}, {{"scaling", 2}}));
  EXPECT_NE(bad_scaling.find("scaling must be 0"), std::string::npos) << bad_scaling;
  EXPECT_NE(fp8_gemm_problem_error(problem({65536, 65536, 16})).find("2^31 - 1"), std::string::npos);
  const std::string odd_k = fp8_gemm_rung_shape_error(problem({64, 64, 100}));
  EXPECT_NE(odd_k.find("multiple of 16"), std::string::npos) << odd_k;
  EXPECT_NE(odd_k.find("100"), std::string::npos) << odd_k;
  EXPECT_EQ(fp8_gemm_rung_shape_error(problem({1, 1, 16})), "");
}

TEST(Fp8GemmOp, CountsFlopsAndOneByteAnFp8Value) {
  const OpSpec op = make_fp8_gemm_op();
  EXPECT_EQ(op.math, MathUnit::fp8_tensor);
  EXPECT_EQ(op.dtypes, std::vector<DType>{DType::f8e4m3});
  const Problem p = problem({4096, 4096, 4096});
  EXPECT_DOUBLE_EQ(op.work(p).flops, 2.0 * 4096 * 4096 * 4096);
  // A and B one byte a value, C two, the two scales four each.
  EXPECT_DOUBLE_EQ(op.work(p).bytes, 2.0 * 4096 * 4096 + 2.0 * 4096 * 4096 + 8.0);
}

TEST(Fp8GemmOp, BenchAndConformanceProblemsCoverBothScalingsAndTheEdges) {
  const OpSpec op = make_fp8_gemm_op();
  std::vector<std::string> bench;
  for (const Problem& p : op.bench_problems) bench.push_back(p.label());
  for (const char* expected : {"4096x4096x4096 f8e4m3", "8192x8192x8192 f8e4m3", "4096x4096x4096 f8e4m3 scaling=1",
                               "8192x8192x8192 f8e4m3 scaling=1", "8192x14336x4096 f8e4m3 scaling=1"})
    EXPECT_NE(std::find(bench.begin(), bench.end(), expected), bench.end()) << expected;
  int block = 0, odd_n = 0, k_tail = 0, long_k = 0, below_a_tile = 0;
  std::vector<std::string> refused;
  for (const Problem& p : op.conformance_problems) {
    ASSERT_EQ(fp8_gemm_problem_error(p), "") << p.label();
    if (!fp8_gemm_rung_shape_error(p).empty()) refused.push_back(p.label());
    block += p.param("scaling") == 1.0;
    odd_n += p.dims[1] % 2;
    k_tail += p.dims[2] % 128 != 0 && p.dims[2] % 16 == 0;
    long_k += p.dims[2] >= 8192;
    below_a_tile += p.dims[0] < 128 && p.dims[1] < 128;
  }
  EXPECT_GE(block, 10);
  EXPECT_GE(odd_n, 6);
  EXPECT_GE(k_tail, 8);
  EXPECT_GE(long_k, 2);
  EXPECT_GE(below_a_tile, 4);
  int with_edges[2][3] = {};  // [scaling][edges]
  for (const Problem& p : op.conformance_problems)
    ++with_edges[static_cast<int>(p.param("scaling"))][static_cast<int>(p.param("edges"))];
  for (const int scaling : {0, 1}) {
    EXPECT_GE(with_edges[scaling][1], 3) << "scaling=" << scaling;
    EXPECT_GE(with_edges[scaling][2], 1) << "scaling=" << scaling;
  }
  for (const Problem& p : op.bench_problems) EXPECT_EQ(p.param("edges"), 0.0) << p.label();
  EXPECT_EQ(refused, fp8_gemm_rung_refusals());
  EXPECT_NE(op.baseline_name.find("cuBLASLt FP8"), std::string::npos) << op.baseline_name;
}

// The edge cases of src/fp8_gemm_edges.hpp: where the NaN elements lie, and which scales are 0 or
// FP32 subnormals, per scaling and edges value.
TEST(Fp8GemmOp, EdgeCasesPutNaNsZerosAndSubnormalsWhereTheHeaderSays) {
  const auto count = [](const std::vector<float>& v, auto&& predicate) {
    return std::count_if(v.begin(), v.end(), predicate);
  };
  const auto is_zero = [](float s) { return s == 0.0f; };
  const auto is_subnormal = [](float s) { return std::fpclassify(s) == FP_SUBNORMAL; };
  const auto is_plain = [](float s) { return s >= 0.25f && s < 4.0f; };

  const Problem plain = problem({65, 129, 272}, {{"scaling", 1}});
  EXPECT_EQ(fp8_gemm_edges(plain), Fp8GemmEdges::none);
  EXPECT_FALSE(fp8_gemm_nan_element(plain, true).has_value());

  // Block scales: s_A is [3, 65] (every 7th from the 4th zero, from the 6th subnormal), s_B [2, 3].
  const Problem block = problem({65, 129, 272}, {{"scaling", 1}, {"edges", 1}});
  EXPECT_EQ(fp8_gemm_nan_element(block, true), std::make_pair(std::int64_t{32}, std::int64_t{136}));
  EXPECT_EQ(fp8_gemm_nan_element(block, false), std::make_pair(std::int64_t{64}, std::int64_t{90}));
  const std::vector<float> a = fp8_gemm_edge_scales(block, true, 7), b = fp8_gemm_edge_scales(block, false, 8);
  ASSERT_EQ(a.size(), 3u * 65);
  ASSERT_EQ(b.size(), 2u * 3);
  EXPECT_EQ(a[3], 0.0f);
  EXPECT_TRUE(is_subnormal(a[5]));
  EXPECT_EQ(count(a, is_zero), 28);
  EXPECT_EQ(count(a, is_subnormal), 28);
  EXPECT_EQ(count(a, is_plain), 195 - 56);
  EXPECT_EQ(b[2], 0.0f);
  EXPECT_TRUE(is_subnormal(b[4]));
  EXPECT_EQ(count(b, is_plain), 4);
  EXPECT_EQ(a, fp8_gemm_edge_scales(block, true, 7)) << "the same seed draws the same scales";

  // A scale per tensor: s_A an FP32 subnormal, s_B plain; with edges=2 s_B zero.
  const Problem tensor = problem({1000, 17, 656}, {{"scaling", 0}, {"edges", 1}});
  EXPECT_TRUE(is_subnormal(fp8_gemm_edge_scales(tensor, true, 1).at(0)));
  EXPECT_TRUE(is_plain(fp8_gemm_edge_scales(tensor, false, 2).at(0)));
  for (const double scaling : {0.0, 1.0}) {
    const Problem zero_b = problem({200, 300, 400}, {{"scaling", scaling}, {"edges", 2}});
    const std::vector<float> sb = fp8_gemm_edge_scales(zero_b, false, 3), sa = fp8_gemm_edge_scales(zero_b, true, 4);
    EXPECT_EQ(count(sb, is_zero), static_cast<long>(sb.size()));
    EXPECT_EQ(count(sa, is_plain), static_cast<long>(sa.size()));
  }

  // One row of C NaN needs two rows of A: a single row keeps its values.
  EXPECT_FALSE(fp8_gemm_nan_element(problem({1, 257, 144}, {{"edges", 1}}), true).has_value());
  EXPECT_TRUE(fp8_gemm_nan_element(problem({1, 257, 144}, {{"edges", 1}}), false).has_value());
  EXPECT_NE(fp8_gemm_problem_error(problem({64, 64, 64}, {{"edges", 3}})).find("edges must be"), std::string::npos);
}

TEST(Fp8GemmLadder, RegistersEveryRungForHopperOnlyInTheirOwnReport) {
  const Registry& registry = stage3_test_registry();
  EXPECT_EQ(registry.kernel("stage3/fp8_gemm/01_tma_wgmma").rung, 1);
  EXPECT_EQ(registry.kernel("stage3/fp8_gemm/02_wide_tiles").rung, 2);
  EXPECT_EQ(registry.kernel("stage3/fp8_gemm/03_tma_store").rung, 3);
  EXPECT_EQ(registry.kernel("stage3/fp8_gemm/04_promotion_window").rung, 4);
  EXPECT_EQ(registry.kernel("stage3/fp8_gemm/05_tile_per_shape").rung, 5);
  EXPECT_EQ(registry.kernel("stage3/fp8_gemm/06_scales_ahead").rung, 6);
  EXPECT_EQ(registry.kernel("stage3/fp8_gemm/07_promote_behind").rung, 7);
  EXPECT_EQ(registry.kernel("stage3/fp8_gemm/08_cluster_pairs").rung, 8);
  EXPECT_EQ(registry.kernel("stage3/fp8_gemm/09_scales_in_stage").rung, 9);
  EXPECT_EQ(registry.kernel("stage3/fp8_gemm/10_wide_scales_in_stage").rung, 10);
  EXPECT_EQ(registry.kernel("stage3/fp8_gemm/11_scales_in_stage_per_shape").rung, 11);
  EXPECT_EQ(registry.kernel("stage3/fp8_gemm/12_split_last_wave").rung, 12);
  for (const char* id : {"stage3/fp8_gemm/01_tma_wgmma", "stage3/fp8_gemm/02_wide_tiles", "stage3/fp8_gemm/03_tma_store",
                         "stage3/fp8_gemm/04_promotion_window", "stage3/fp8_gemm/05_tile_per_shape",
                         "stage3/fp8_gemm/06_scales_ahead", "stage3/fp8_gemm/07_promote_behind",
                         "stage3/fp8_gemm/08_cluster_pairs", "stage3/fp8_gemm/09_scales_in_stage",
                         "stage3/fp8_gemm/10_wide_scales_in_stage", "stage3/fp8_gemm/11_scales_in_stage_per_shape",
                         "stage3/fp8_gemm/12_split_last_wave"}) {
  const KernelEntry& rung = registry.kernel(id);
  EXPECT_EQ(rung.report_group(), kFp8GemmReport);
  EXPECT_EQ(rung.dtypes, std::vector<DType>{DType::f8e4m3});
  EXPECT_EQ(rung.min_compute_capability, 90);
  EXPECT_EQ(rung.max_compute_capability, 90);
  EXPECT_EQ(rung.constraints, "K % 16 == 0");
  EXPECT_EQ(rung.refuses, fp8_gemm_rung_refusals());
  EXPECT_NE(unsupported_reason(registry, rung, problem({64, 64, 100}), nullptr).find("multiple of 16"),
            std::string::npos);
  }
}

// Rung 12 splits with the grouped GEMM's plan, over rung 10's 128 x 192 tiles on 132 SMs and K
// steps of 128: which of the FP8 tables' shapes it splits, and how.
TEST(Fp8SplitLastWave, SplitsTheWideTilesLastWaveWhereItLeavesHalfTheGridIdle) {
  const auto wide_tiles = [](int m, int n) { return ((m + 127) / 128) * ((n + 191) / 192); };
  // 4096³: 704 tiles = 5 waves + 44; 32 K steps make two pieces of 16.
  GroupedSplitPlan plan = plan_grouped_split_last_wave(wide_tiles(4096, 4096), 132, 4096 / 128);
  EXPECT_EQ(plan.whole_tiles, 5 * 132);
  EXPECT_EQ(plan.splits, 2);
  // 8192 x 14336 x 4096: 4800 tiles = 36 waves + 48: split in two as well.
  plan = plan_grouped_split_last_wave(wide_tiles(8192, 14336), 132, 4096 / 128);
  EXPECT_EQ(plan.whole_tiles, 36 * 132);
  EXPECT_EQ(plan.splits, 2);
  // 8192³ (2752 = 20 waves + 112) and 8192 x 4096 x 14336 (1408 = 10 waves + 88): the last wave
  // fills more than half the grid, no split.
  EXPECT_EQ(plan_grouped_split_last_wave(wide_tiles(8192, 8192), 132, 8192 / 128).splits, 1);
  EXPECT_EQ(plan_grouped_split_last_wave(wide_tiles(8192, 4096), 132, 14336 / 128).splits, 1);
  // K = 1024 (8 steps): too short to split, whatever the wave.
  EXPECT_EQ(plan_grouped_split_last_wave(wide_tiles(4096, 4096), 132, 1024 / 128).splits, 1);
}

TEST(Fp8Quantize, DefinesScalesPerPieceAndRefusesKNotAMultipleOf16) {
  const OpSpec op = make_fp8_quantize_op();
  EXPECT_EQ(op.dim_names, (std::vector<std::string>{"M", "K"}));
  const Problem p = op.problem({300, 1040}, DType::bf16);
  EXPECT_EQ(fp8_quantize_shape_error(p), "");
  // x read once (2 bytes), q written once (1 byte), 9 scales a row (4 bytes).
  EXPECT_DOUBLE_EQ(op.work(p).bytes, 300.0 * 1040 * 3 + 4.0 * 9 * 300);
  const std::string odd_k = fp8_quantize_shape_error(op.problem({5, 100}, DType::bf16));
  EXPECT_NE(odd_k.find("multiple of 16"), std::string::npos) << odd_k;
  std::vector<std::string> refused;
  for (const Problem& c : op.conformance_problems)
    if (!fp8_quantize_shape_error(c).empty()) refused.push_back(c.label());
  EXPECT_EQ(refused, std::vector<std::string>{"5x100 bf16"});
  const KernelEntry& rung = stage3_test_registry().kernel("stage3/fp8_quantize/01_half_warp_per_block");
  EXPECT_EQ(rung.report_group(), kFp8GemmReport);
  EXPECT_EQ(rung.refuses, refused);
  EXPECT_EQ(rung.min_compute_capability, 80);
  EXPECT_EQ(rung.max_compute_capability, 0);
}

// The fp8_quantize op's edge-case pieces (src/fp8_quantize_edges.hpp): every conformance problem
// it runs holds them, no bench problem does, each piece's values are of its kind, and the same seed
// draws the same bits.
TEST(Fp8QuantizeEdges, ConformanceProblemsHoldEveryPieceKindAndBenchProblemsNone) {
  using Piece = Fp8QuantizePiece;
  const OpSpec op = make_fp8_quantize_op();
  for (const Problem& p : op.bench_problems) {
    EXPECT_GT(p.dims[0] * p.dims[1], std::int64_t{1} << 22) << p.label();
    EXPECT_FALSE(fp8_quantize_has_edges(p)) << p.label();
    for (std::int64_t row = 0; row < p.dims[0]; ++row)
      for (std::int64_t kb = 0; kb < fp8_k_blocks(static_cast<int>(p.dims[1])); ++kb)
        ASSERT_EQ(fp8_quantize_piece(p, row, kb), Piece::plain) << p.label();
  }
  int seen[8] = {};
  for (const Problem& p : op.conformance_problems) {
    if (!fp8_quantize_shape_error(p).empty()) continue;
    EXPECT_TRUE(fp8_quantize_has_edges(p)) << p.label();
    const std::int64_t m = p.dims[0], k = p.dims[1], k_blocks = fp8_k_blocks(static_cast<int>(k));
    const std::vector<__nv_bfloat16> x = fp8_quantize_x(p, 9);
    ASSERT_EQ(static_cast<std::int64_t>(x.size()), m * k);
    const std::vector<__nv_bfloat16> again = fp8_quantize_x(p, 9);
    EXPECT_EQ(std::memcmp(again.data(), x.data(), x.size() * sizeof(__nv_bfloat16)), 0) << p.label();
    for (std::int64_t row = 0; row < m; ++row)
      for (std::int64_t kb = 0; kb < k_blocks; ++kb) {
        const Piece kind = fp8_quantize_piece(p, row, kb);
        ++seen[static_cast<int>(kind)];
        int nans = 0, infs = 0, nonzero = 0, above_subnormal = 0;
        float amax = 0.f;
        for (std::int64_t c = kb * kFp8ScaleBlock; c < std::min(k, (kb + 1) * kFp8ScaleBlock); ++c) {
          const float v = __bfloat162float(x[static_cast<std::size_t>(row * k + c)]);
          nans += std::isnan(v);
          infs += std::isinf(v);
          nonzero += v != 0.f;
          above_subnormal += std::fabs(v) >= std::ldexp(1.f, -126);
          if (std::isfinite(v)) amax = std::max(amax, std::fabs(v));
        }
        SCOPED_TRACE(::testing::Message() << p.label() << ", row " << row << ", piece " << kb << ", kind "
                                          << static_cast<int>(kind) << ", max |x| " << amax);
        EXPECT_EQ(nans, kind == Piece::nan ? 1 : 0);
        EXPECT_EQ(infs, kind == Piece::infinite ? 1 : 0);
        if (kind == Piece::zeros) {
          EXPECT_EQ(nonzero, 0);
        }
        if (kind == Piece::lone) {
          EXPECT_LE(nonzero, 1);
        }
        if (kind == Piece::subnormal_scale) {
          EXPECT_EQ(std::fpclassify(amax / kE4m3Max), FP_SUBNORMAL);
        }
        if (kind == Piece::bf16_subnormals) {
          EXPECT_EQ(above_subnormal, 0);
        }
        if (kind == Piece::near_max) {
          EXPECT_GT(amax, std::ldexp(1.f, 120));
        }
        if (kind == Piece::plain || kind == Piece::nan || kind == Piece::infinite) {
          EXPECT_LE(amax, 8.f);
        }
      }
  }
  for (int kind = 0; kind < 8; ++kind) EXPECT_GE(seen[kind], 1) << "piece kind " << kind;
}

// The rung's arithmetic (quant/fp8/quantize_01_half_warp_per_block.cu) in FP32 on the CPU: max |x|
// by fmaxf (NaN dropped), s = amax / 448 (1 for zeros), a subnormal s taken through 2^64, q = x
// times 1 / s rounded to e4m3 with saturation to +-448 (NaN stays NaN).
HostTensors emulated_quantize(const Problem& p, const std::vector<__nv_bfloat16>& x) {
  const std::int64_t m = p.dims[0], k = p.dims[1], k_blocks = fp8_k_blocks(static_cast<int>(k));
  HostTensors out{{"q", std::vector<double>(x.size())}, {"scales", std::vector<double>(static_cast<std::size_t>(m * k_blocks))}};
  for (std::int64_t row = 0; row < m; ++row)
    for (std::int64_t kb = 0; kb < k_blocks; ++kb) {
      const std::int64_t begin = kb * kFp8ScaleBlock, end = std::min(k, begin + kFp8ScaleBlock);
      float amax = 0.f;
      for (std::int64_t c = begin; c < end; ++c)
        amax = fmaxf(amax, fabsf(__bfloat162float(x[static_cast<std::size_t>(row * k + c)])));
      const float scale = amax > 0.f ? amax / kE4m3Max : 1.f;
      const bool subnormal = scale < 0x1p-126f;
      const float inverse = subnormal ? 1.f / (scale * 0x1p64f) : 1.f / scale;
      for (std::int64_t c = begin; c < end; ++c) {
        const auto i = static_cast<std::size_t>(row * k + c);
        const float v = __bfloat162float(x[i]) * (subnormal ? 0x1p64f : 1.f);
        __nv_fp8_e4m3 q;
        q.__x = __nv_cvt_float_to_fp8(v * inverse, __NV_SATFINITE, __NV_E4M3);
        out["q"][i] = static_cast<double>(static_cast<float>(q));
      }
      out["scales"][static_cast<std::size_t>(kb * m + row)] = scale;
    }
  return out;
}

// What the op gives for a NaN and an infinite piece, and that the rung's arithmetic gives the
// reference's values (classes exactly, finite values within the tolerance) on every conformance
// problem, each piece kind included.
TEST(Fp8QuantizeEdges, TheRungsArithmeticMatchesTheReferenceOnEveryPieceKind) {
  const OpSpec op = make_fp8_quantize_op();
  int nan_pieces = 0, infinite_pieces = 0;
  for (const Problem& p : op.conformance_problems) {
    if (!fp8_quantize_shape_error(p).empty()) continue;
    const std::vector<__nv_bfloat16> x = fp8_quantize_x(p, 21);
    HostTensors in{{"x", std::vector<double>(x.size())}};
    for (std::size_t i = 0; i < x.size(); ++i) in["x"][i] = __bfloat162float(x[i]);
    const HostTensors ref = fp8_quantize_host_reference(p, in);
    const HostTensors kernel = emulated_quantize(p, x);
    for (const auto& [name, dtype] : {std::pair<std::string, DType>{"q", DType::f8e4m3}, {"scales", DType::f32}}) {
      Accuracy accuracy;  // the op's: one rounding to the output type
      accuracy.output = dtype;
      const CompareResult result =
          compare(kernel.at(name).data(), ref.at(name).data(), ref.at(name).size(), accuracy);
      EXPECT_TRUE(result.passed) << p.label() << " " << name << ": " << result.summary();
    }
    // The definition, piece by piece, on the reference.
    const std::int64_t m = p.dims[0], k = p.dims[1], k_blocks = fp8_k_blocks(static_cast<int>(k));
    for (std::int64_t row = 0; row < m; ++row)
      for (std::int64_t kb = 0; kb < k_blocks; ++kb) {
        const Fp8QuantizePiece kind = fp8_quantize_piece(p, row, kb);
        if (kind != Fp8QuantizePiece::nan && kind != Fp8QuantizePiece::infinite) continue;
        const double scale = ref.at("scales")[static_cast<std::size_t>(kb * m + row)];
        double finite_max = 0.0;
        for (std::int64_t c = kb * kFp8ScaleBlock; c < std::min(k, (kb + 1) * kFp8ScaleBlock); ++c) {
          const auto i = static_cast<std::size_t>(row * k + c);
          const double v = in["x"][i], q = ref.at("q")[i];
          if (std::isfinite(v)) finite_max = std::max(finite_max, std::fabs(v));
          if (!std::isfinite(v)) {
            EXPECT_TRUE(std::isnan(q)) << p.label() << ": x " << v << " -> q " << q;
          }
          if (std::isfinite(v) && kind == Fp8QuantizePiece::infinite) {
            EXPECT_EQ(q, 0.0) << p.label();
          }
          if (std::isfinite(v) && kind == Fp8QuantizePiece::nan) {
            EXPECT_DOUBLE_EQ(q, v / scale) << p.label();
          }
        }
        if (kind == Fp8QuantizePiece::nan) {
          EXPECT_DOUBLE_EQ(scale, finite_max / kE4m3Max) << p.label() << ": the scale of the values beside the NaN";
          ++nan_pieces;
        } else {
          EXPECT_EQ(scale, HUGE_VAL) << p.label();
          ++infinite_pieces;
        }
      }
  }
  EXPECT_GE(nan_pieces, 10);
  EXPECT_GE(infinite_pieces, 10);
}

// Every FP8 GEMM rung's launch checks its arguments first (check_fp8_gemm_args): a bad argument is a
// kc::Error naming the rule, before any CUDA call — a misaligned A used to surface only when the
// tensor map was built, as a driver error about a bf16 matrix. No GPU needed: the pointers are never
// read.
TEST(Fp8GemmArgs, LaunchChecksNameTheRuleTheArgumentsBreak) {
  alignas(16) static fp8e4m3 a[256], b[256];
  alignas(16) static bf16 c[16];
  alignas(16) static float scales[4];
  Fp8GemmArgs good;
  good.m = good.n = 4;
  good.k = 64;
  good.a = a;
  good.b = b;
  good.c = c;
  good.scale_a = good.scale_b = scales;
  EXPECT_NO_THROW(check_fp8_gemm_args(good));
  const auto refused = [](const Fp8GemmArgs& args, const std::string& rule) {
    expect_refused([&] { check_fp8_gemm_args(args); }, rule);
  };
  Fp8GemmArgs bad = good;
  bad.k = 40;
  refused(bad, "multiple of 16");
  bad = good;
  bad.n = 0;
  refused(bad, "empty problem");
  bad = good;
  bad.a = nullptr;
  refused(bad, "A, B and C must not be null");
  bad = good;
  bad.c = nullptr;
  refused(bad, "A, B and C must not be null");
  bad = good;
  bad.a = a + 8;
  refused(bad, "A and B must start 16-byte aligned");
  bad = good;
  bad.b = b + 1;
  refused(bad, "A and B must start 16-byte aligned");
  bad = good;
  bad.c = c + 1;
  refused(bad, "C must start 16-byte aligned");
  bad = good;
  bad.scale_b = nullptr;
  refused(bad, "both scales");
  // The rungs run the check before anything else (no GPU here: a later check would be a CUDA error).
  HopperLaunchCache cache;
  bad = good;
  bad.a = a + 8;
  for (const auto launch : {fp8_gemm_01_tma_wgmma, fp8_gemm_02_wide_tiles, fp8_gemm_03_tma_store,
                            fp8_gemm_04_promotion_window, fp8_gemm_05_tile_per_shape, fp8_gemm_06_scales_ahead,
                            fp8_gemm_07_promote_behind, fp8_gemm_08_cluster_pairs, fp8_gemm_09_scales_in_stage,
                            fp8_gemm_10_wide_scales_in_stage, fp8_gemm_11_scales_in_stage_per_shape})
    expect_refused([&] { launch(bad, nullptr, cache); }, "A and B must start 16-byte aligned");
  expect_refused([&] { fp8_gemm_12_split_last_wave(bad, GroupedSplitWorkspace{}, nullptr, cache); },
                 "A and B must start 16-byte aligned");
}

TEST(Fp8QuantizeArgs, LaunchChecksNameTheRuleTheArgumentsBreak) {
  alignas(16) static bf16 x[256];
  alignas(16) static fp8e4m3 q[256];
  alignas(16) static float scales[4];
  Fp8QuantizeArgs good;
  good.m = 2;
  good.k = 128;
  good.x = x;
  good.q = q;
  good.scales = scales;
  EXPECT_NO_THROW(check_fp8_quantize_args(good));
  const auto refused = [](const Fp8QuantizeArgs& args, const std::string& rule) {
    expect_refused([&] { check_fp8_quantize_args(args); }, rule);
    const std::string message = error_of([&] { check_fp8_quantize_args(args); });
    const std::string launch = error_of([&] { fp8_quantize_01_half_warp_per_block(args, nullptr); });
    EXPECT_EQ(launch, message) << "the launch checks the same, first";
  };
  Fp8QuantizeArgs bad = good;
  bad.k = 120;
  refused(bad, "multiple of 16");
  bad = good;
  bad.m = 0;
  refused(bad, "empty problem");
  bad = good;
  bad.scales = nullptr;
  refused(bad, "must not be null");
  bad = good;
  bad.x = x + 1;
  refused(bad, "x must start 16-byte aligned");
  bad = good;
  bad.q = q + 4;
  refused(bad, "x must start 16-byte aligned, q 8-byte");
}

// The public entries (low_precision_ops.hpp) check their arguments before any CUDA call — a fresh
// LowPrecisionGemm has not asked which GPU it is on yet, so a later check would surface here as a
// CUDA error — and the rungs they name are registered.
TEST(LowPrecisionEntries, CheckBeforeAnyCudaCallAndNameRegisteredRungs) {
  alignas(16) static fp8e4m3 a[256], b[256];
  alignas(16) static bf16 c[16];
  alignas(16) static float scales[4];
  Fp8GemmArgs fp8;
  fp8.m = fp8.n = 4;
  fp8.k = 64;
  fp8.a = a + 8;  // misaligned
  fp8.b = b;
  fp8.c = c;
  fp8.scale_a = fp8.scale_b = scales;
  LowPrecisionGemm entry;
  expect_refused([&] { entry.fp8_gemm(fp8, nullptr); }, "A and B must start 16-byte aligned");
  Int8GemmArgs int8;
  int8.m = int8.n = 4;
  int8.k = 40;  // not a multiple of 16
  int8.a = reinterpret_cast<const std::int8_t*>(a);
  int8.b = reinterpret_cast<const std::int8_t*>(b);
  int8.c = c;
  int8.scale_a = int8.scale_b = scales;
  expect_refused([&] { entry.int8_gemm(int8, nullptr); }, "multiple of 16");
  Fp8QuantizeArgs quantize;
  quantize.m = 2;
  quantize.k = 128;
  expect_refused([&] { fp8_quantize(quantize, nullptr); }, "must not be null");
  const Registry& registry = stage3_test_registry();
  for (const std::string_view id : {kFp8GemmEntryRung, kInt8GemmHopperRung, kInt8GemmDequantHopperRung,
                                    kInt8GemmAmpereRung, kInt8GemmDequantAmpereRung, kFp8QuantizeEntryRung})
    EXPECT_EQ(registry.kernel(std::string(id)).id, id);
}

}  // namespace
}  // namespace kc::stage3
