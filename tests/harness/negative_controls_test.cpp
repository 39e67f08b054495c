// A test of the tests: every deliberately wrong kernel must be caught by the same checks the real
// kernels pass. Skips without a GPU.
#include <gtest/gtest.h>

#include <exception>

#include "kc/common/check.hpp"
#include "kc/common/gemm.hpp"
#include "kc/stage3/attention.hpp"
#include "kc/stage3/attention_decode.hpp"
#include "kc/stage3/fp8_gemm.hpp"
#include "kc/stage3/fp8_grouped_gemm.hpp"
#include "kc/stage3/int8_gemm.hpp"
#include "kc/stage3/grouped_gemm.hpp"
#include "kc/stage3/register.hpp"
#include "kc/testing/negative_controls.hpp"
#include "support/gpu_test.hpp"

namespace kc {
namespace {

using testing::shared_context;

const Registry& registry_with_controls() {
  static const Registry registry = [] {
    Registry r;
    testing::register_negative_controls(r);
    return r;
  }();
  return registry;
}

CheckOutcome check(const std::string& name, const Problem& problem) {
  const Registry& r = registry_with_controls();
  return check_kernel(r, r.kernel("stage1/sgemm/" + name), problem, 1, shared_context());
}

const Problem kOdd = gemm_problem("sgemm", {127, 129, 131}, DType::f32);
const Problem kTileMultiple = gemm_problem("sgemm", {64, 64, 64}, DType::f32);

TEST(NegativeControls, WritesNothingIsCaught) {
  KC_SKIP_WITHOUT_GPU();
  const CheckOutcome o = check("nc_writes_nothing", kOdd);
  EXPECT_EQ(o.status, CheckOutcome::Status::failed) << o.detail;
  EXPECT_NE(o.detail.find("16383 of 16383"), std::string::npos) << "every element unwritten: " << o.detail;
}

TEST(NegativeControls, SkippedEdgeTileIsCaughtOnOddShapesOnly) {
  KC_SKIP_WITHOUT_GPU();
  EXPECT_EQ(check("nc_skips_edge_tile", kOdd).status, CheckOutcome::Status::failed);
  // The flaw hides on tile multiples: this is why conformance uses odd shapes.
  const CheckOutcome hidden = check("nc_skips_edge_tile", kTileMultiple);
  EXPECT_TRUE(hidden.passed()) << hidden.detail;
}

TEST(NegativeControls, Fp16RoundingIsCaughtByTheFrobeniusBound) {
  KC_SKIP_WITHOUT_GPU();
  const CheckOutcome o = check("nc_rounds_through_fp16", gemm_problem("sgemm", {256, 256, 1024}, DType::f32));
  EXPECT_EQ(o.status, CheckOutcome::Status::failed) << o.detail;
  EXPECT_GT(o.worst_rel_frobenius, 1e-4) << o.detail;
}

TEST(NegativeControls, ASingleNaNIsCaught) {
  KC_SKIP_WITHOUT_GPU();
  const CheckOutcome o = check("nc_returns_nan", kOdd);
  EXPECT_EQ(o.status, CheckOutcome::Status::failed) << o.detail;
  EXPECT_NE(o.detail.find("1 of 16383"), std::string::npos) << o.detail;
}

TEST(NegativeControls, DroppedKStepIsCaught) {
  KC_SKIP_WITHOUT_GPU();
  EXPECT_EQ(check("nc_drops_last_k", kOdd).status, CheckOutcome::Status::failed);
}

TEST(NegativeControls, ReadingCWhenBetaIsZeroIsCaught) {
  KC_SKIP_WITHOUT_GPU();
  EXPECT_EQ(check("nc_reads_c_when_beta_zero", kOdd).status, CheckOutcome::Status::failed);
  // With beta != 0 the same kernel is right: only the BLAS rule for beta == 0 catches it.
  const CheckOutcome with_beta = check("nc_reads_c_when_beta_zero", gemm_problem("sgemm", {127, 129, 131}, DType::f32, 1.0, 0.5));
  EXPECT_TRUE(with_beta.passed()) << with_beta.detail;
}

// A control that throws on a problem its `supports` accepts is a defect of the control (its
// launch refuses what its registration claims): named, not counted as a failure, and the other
// problems and controls still checked.
TEST(NegativeControls, EveryControlFailsSomeConformanceProblem) {
  KC_SKIP_WITHOUT_GPU();
  const Registry& r = registry_with_controls();
  for (const auto& control : testing::negative_controls()) {
    const KernelEntry& kernel = r.kernel(control.id);
    int failures = 0;
    for (const Problem& p : r.op(kernel.op).conformance_problems) {
      try {
        failures += check_kernel(r, kernel, p, 3, shared_context()).status == CheckOutcome::Status::failed;
      } catch (const std::exception& error) {
        ADD_FAILURE() << control.id << " threw on " << p.shape() << " " << p.params_text()
                      << ", a problem its supports accepts: " << error.what();
      }
    }
    EXPECT_GT(failures, 0) << control.id << " (" << control.flaw << ") slipped through every problem";
  }
}

// The bf16 bounds against the bugs they exist to catch, at the benchmark shapes (where the old,
// looser bounds let all three through): a GEMM missing one k column at K = 14336, split-K with
// bf16 partial sums at K = 4096, and a fused epilogue computing ReLU instead of GELU at every
// benchmark shape of the fused op. Each must FAIL; the real kernels pass the same checks (the
// conformance suite, and `kc-bench --check-only --seeds 3` on the benchmark shapes).
CheckOutcome check_at(const std::string& id, const Problem& problem, std::uint64_t seed) {
  const Registry& r = registry_with_controls();
  return check_kernel(r, r.kernel(id), problem, seed, shared_context());
}

const Problem* bench_problem(const std::string& op, const std::string& shape) {
  for (const Problem& p : registry_with_controls().op(op).bench_problems)
    if (p.shape() == shape) return &p;
  return nullptr;
}

TEST(NegativeControlsBf16, MissingKColumnFailsAtK14336) {
  KC_SKIP_WITHOUT_GPU();
  const Problem* p = bench_problem(stage3::kHgemmOp, "8192x4096x14336");
  ASSERT_NE(p, nullptr) << "the K = 14336 benchmark shape is gone";
  const CheckOutcome o = check_at("stage3/hgemm/nc_drops_last_k", *p, 1);
  EXPECT_EQ(o.status, CheckOutcome::Status::failed) << o.detail;
  std::printf("nc_drops_last_k at %s: %s\n", p->label().c_str(), o.detail.c_str());
}

TEST(NegativeControlsBf16, SplitKWithBf16PartialsFailsAt4096) {
  KC_SKIP_WITHOUT_GPU();
  const Problem* p = bench_problem(stage3::kHgemmOp, "4096x4096x4096");
  ASSERT_NE(p, nullptr) << "the 4096^3 benchmark shape is gone";
  const CheckOutcome o = check_at("stage3/hgemm/nc_split_k_bf16_partials", *p, 1);
  EXPECT_EQ(o.status, CheckOutcome::Status::failed) << o.detail;
  std::printf("nc_split_k_bf16_partials at %s: %s\n", p->label().c_str(), o.detail.c_str());
}

TEST(NegativeControlsBf16, ReluInsteadOfGeluFailsAtEveryBenchmarkShape) {
  KC_SKIP_WITHOUT_GPU();
  const auto& problems = registry_with_controls().op(stage3::kBiasGeluOp).bench_problems;
  ASSERT_FALSE(problems.empty());
  for (const Problem& p : problems) {
    const CheckOutcome o = check_at("stage3/gemm_bias_gelu/nc_relu_instead_of_gelu", p, 1);
    EXPECT_EQ(o.status, CheckOutcome::Status::failed) << p.label() << ": " << o.detail;
    std::printf("nc_relu_instead_of_gelu at %s: %s\n", p.label().c_str(), o.detail.c_str());
  }
}

// Rung 14's split-K reduction: the rung passes the decode benchmark shapes whose K is split over
// CTAs (1x4096x4096 and 64x4096x4096: 32 column blocks, 4 splits on 132 SMs, at least 2 on any GPU
// of 64 SMs or more) and the flawed copy of its kernel, whose last CTA adds split 0's partials
// twice, fails them. Where a column block has one split (1x28672x4096: 224 column blocks, more
// than the SMs) nothing is reduced and the same control passes, which shows the rest of it is the rung.
const Registry& registry_with_small_m_rungs() {
  static const Registry registry = [] {
    Registry r;
    stage3::register_kernels(r);
    testing::register_small_m_gemm_controls(r);
    return r;
  }();
  return registry;
}

CheckOutcome check_small_m(const std::string& name, const std::string& shape) {
  const Registry& r = registry_with_small_m_rungs();
  for (const Problem& p : r.op(stage3::kHgemmOp).bench_problems)
    if (p.shape() == shape) return check_kernel(r, r.kernel(std::string("stage3/hgemm/") + name), p, 1, shared_context());
  ADD_FAILURE() << "the benchmark shape " << shape << " is gone";
  return {};
}

TEST(NegativeControlsSmallM, AddingASplitTwiceFailsWhereTheRungPasses) {
  KC_SKIP_WITHOUT_GPU();
  for (const char* shape : {"1x4096x4096", "64x4096x4096"}) {
    const CheckOutcome rung = check_small_m("14_small_m_weights_as_a", shape);
    EXPECT_TRUE(rung.passed()) << shape << ": " << rung.detail;
    const CheckOutcome o = check_small_m("nc_split_k_partials_added_twice", shape);
    EXPECT_EQ(o.status, CheckOutcome::Status::failed) << shape << ": " << o.detail;
    std::printf("rung 14 at %s: %s\nnc_split_k_partials_added_twice at %s: %s\n", shape, rung.detail.c_str(), shape,
                o.detail.c_str());
  }
  const CheckOutcome one_split = check_small_m("nc_split_k_partials_added_twice", "1x28672x4096");
  EXPECT_TRUE(one_split.passed()) << "one split, nothing to reduce: " << one_split.detail;
}

// Rung 16 adds the splits of a column block inside a cluster: reading rank 0's partial tile in place
// of the last rank's fails where K is split (4 splits at 1x4096x4096 and 64x4096x4096), passes where
// it is not (1x28672x4096: 224 column blocks, one split). Hopper only: elsewhere both are refused.
TEST(NegativeControlsSmallM, ReadingRankZeroTwiceInTheClusterFailsWhereRung16Passes) {
  KC_SKIP_WITHOUT_GPU();
  for (const char* shape : {"1x4096x4096", "64x4096x4096"}) {
    const CheckOutcome rung = check_small_m("16_small_m_cluster_split", shape);
    if (rung.status == CheckOutcome::Status::unsupported) GTEST_SKIP() << rung.detail;
    EXPECT_TRUE(rung.passed()) << shape << ": " << rung.detail;
    const CheckOutcome o = check_small_m("nc_cluster_split_reads_rank_0_twice", shape);
    EXPECT_EQ(o.status, CheckOutcome::Status::failed) << shape << ": " << o.detail;
    std::printf("rung 16 at %s: %s\nnc_cluster_split_reads_rank_0_twice at %s: %s\n", shape, rung.detail.c_str(),
                shape, o.detail.c_str());
  }
  const CheckOutcome one_split = check_small_m("nc_cluster_split_reads_rank_0_twice", "1x28672x4096");
  EXPECT_TRUE(one_split.passed()) << "one split, nothing to reduce: " << one_split.detail;
}

// Attention: each flaw of the naive attention controls fails the check on the problems where it
// shows, in both dtypes; the off-by-one mask hides when the problem has no mask, which shows the
// rest of that kernel is right.
CheckOutcome check_attention(const std::string& name, const std::vector<std::int64_t>& dims, DType dtype,
                             const ParamValues& params) {
  const Registry& r = registry_with_controls();
  const Problem problem = r.op(stage3::kAttentionFwdOp).problem(dims, dtype, params);
  return check_kernel(r, r.kernel(std::string("stage3/attention_fwd/") + name), problem, 1, shared_context());
}

const ParamValues kCausal = {{"causal", 1.0}};

TEST(NegativeControlsAttention, WrongScaleFails) {
  KC_SKIP_WITHOUT_GPU();
  for (const DType dtype : {DType::bf16, DType::f16})
    for (const ParamValues& params : {ParamValues{}, kCausal}) {
      const CheckOutcome o = check_attention("nc_wrong_scale", {1, 8, 2, 1000, 1000, 128}, dtype, params);
      EXPECT_EQ(o.status, CheckOutcome::Status::failed) << dtype_name(dtype) << ": " << o.detail;
    }
}

TEST(NegativeControlsAttention, CausalMaskOffByOneFailsAndHidesWithoutTheMask) {
  KC_SKIP_WITHOUT_GPU();
  for (const DType dtype : {DType::bf16, DType::f16}) {
    for (const std::vector<std::int64_t>& dims :
         {std::vector<std::int64_t>{1, 2, 1, 17, 17, 64}, std::vector<std::int64_t>{2, 4, 1, 77, 1000, 64},
          std::vector<std::int64_t>{1, 8, 2, 1000, 1000, 128}}) {
      const CheckOutcome o = check_attention("nc_mask_off_by_one", dims, dtype, kCausal);
      EXPECT_EQ(o.status, CheckOutcome::Status::failed) << dtype_name(dtype) << ": " << o.detail;
    }
    const CheckOutcome hidden = check_attention("nc_mask_off_by_one", {1, 8, 2, 1000, 1000, 128}, dtype, {});
    EXPECT_TRUE(hidden.passed()) << dtype_name(dtype) << ": " << hidden.detail;
  }
}

TEST(NegativeControlsAttention, SkippedKvTileFails) {
  KC_SKIP_WITHOUT_GPU();
  for (const DType dtype : {DType::bf16, DType::f16})
    for (const ParamValues& params : {ParamValues{}, kCausal}) {
      const CheckOutcome o = check_attention("nc_skips_last_kv_tile", {3, 8, 2, 77, 77, 128}, dtype, params);
      EXPECT_EQ(o.status, CheckOutcome::Status::failed) << dtype_name(dtype) << ": " << o.detail;
    }
  // 40 of 1000 keys missing from every row.
  for (const DType dtype : {DType::bf16, DType::f16}) {
    const CheckOutcome o = check_attention("nc_skips_last_kv_tile", {2, 4, 1, 77, 1000, 64}, dtype, {});
    EXPECT_EQ(o.status, CheckOutcome::Status::failed) << dtype_name(dtype) << ": " << o.detail;
  }
}

// FP8 GEMM: rung 01 passes the long-K problems (K = 8192, and the 4096^3 benchmark shape) and
// each flawed copy of its kernel fails them: the missed FP32 promotion shows as a sum over all of
// K in the tensor cores' narrower accumulator, the doubled scale and the wrong K block's scales
// wherever the scales differ. Hopper only: elsewhere the rung and the controls are refused.
// Stage 3's real kernels and the controls in one registry: the rung is checked beside its flawed copies.
const Registry& registry_with_fp8_rungs() {
  static const Registry registry = [] {
    Registry r;
    stage3::register_kernels(r);
    testing::register_fp8_gemm_controls(r);
    return r;
  }();
  return registry;
}

CheckOutcome check_fp8(const std::string& name, const std::vector<std::int64_t>& dims, double scaling) {
  const Registry& r = registry_with_fp8_rungs();
  const Problem problem = r.op(stage3::kFp8GemmOp).problem(dims, DType::f8e4m3, {{"scaling", scaling}});
  return check_kernel(r, r.kernel(std::string("stage3/fp8_gemm/") + name), problem, 1, shared_context());
}

TEST(NegativeControlsFp8, EachFlawFailsWhereTheRungPasses) {
  KC_SKIP_WITHOUT_GPU();
  for (const std::vector<std::int64_t>& dims : {std::vector<std::int64_t>{256, 256, 8192},
                                                std::vector<std::int64_t>{4096, 4096, 4096}}) {
    for (const double scaling : {0.0, 1.0}) {
      for (const char* rung_name :
           {"01_tma_wgmma", "02_wide_tiles", "03_tma_store", "04_promotion_window", "05_tile_per_shape",
            "06_scales_ahead", "07_promote_behind", "08_cluster_pairs", "09_scales_in_stage",
            "10_wide_scales_in_stage", "11_scales_in_stage_per_shape", "12_split_last_wave"}) {
        const CheckOutcome rung = check_fp8(rung_name, dims, scaling);
        if (rung.status == CheckOutcome::Status::unsupported) GTEST_SKIP() << rung.detail;
        EXPECT_TRUE(rung.passed()) << rung_name << ": " << rung.detail;
        std::printf("fp8 rung %s at %lldx%lldx%lld scaling=%g: %s\n", rung_name, static_cast<long long>(dims[0]),
                    static_cast<long long>(dims[1]), static_cast<long long>(dims[2]), scaling, rung.detail.c_str());
      }
      std::vector<const char*> controls = {"nc_no_fp32_promotion"};
      if (scaling == 0.0) controls.push_back("nc_promotion_window_not_restarted");
      if (scaling == 1.0) {
        controls.push_back("nc_scale_applied_twice");
        controls.push_back("nc_next_blocks_scales");
        controls.push_back("nc_split_pieces_added_twice");
      }
      for (const char* control : controls) {
        const CheckOutcome o = check_fp8(control, dims, scaling);
        EXPECT_EQ(o.status, CheckOutcome::Status::failed) << control << ": " << o.detail;
        std::printf("%s at %lldx%lldx%lld scaling=%g: %s\n", control, static_cast<long long>(dims[0]),
                    static_cast<long long>(dims[1]), static_cast<long long>(dims[2]), scaling, o.detail.c_str());
      }
    }
  }
}

// FP8 grouped GEMM: rung 01 passes, and its kernel scaling each expert with the next expert's
// weight scales fails, wherever an expert other than the last has rows: the DeepSeek-like and
// Mixtral-like (14336 -> 4096, long sums) benchmark problems and six experts with an empty one in
// the middle (padded to 8, 4, 128, 4, 0 and 16 rows); with one expert (the last, its own scales)
// the control passes, which shows the rest of it is right. Hopper only: elsewhere both are refused.
const Registry& registry_with_fp8_grouped_rungs() {
  static const Registry registry = [] {
    Registry r;
    stage3::register_kernels(r);
    testing::register_fp8_grouped_gemm_controls(r);
    return r;
  }();
  return registry;
}

CheckOutcome check_fp8_grouped(const std::string& name, const std::vector<std::int64_t>& dims,
                               const ParamValues& params) {
  const Registry& r = registry_with_fp8_grouped_rungs();
  const Problem problem = r.op(stage3::kFp8GroupedGemmOp).problem(dims, DType::f8e4m3, params);
  return check_kernel(r, r.kernel(std::string("stage3/fp8_grouped_gemm/") + name), problem, 1, shared_context());
}

TEST(NegativeControlsFp8Grouped, NeighboursWeightScalesFailWhereTheRungPasses) {
  KC_SKIP_WITHOUT_GPU();
  const std::vector<std::pair<std::vector<std::int64_t>, ParamValues>> problems = {
      {{64, 1408, 2048}, {{"tokens", 1024}, {"skew", 1}, {"row_align", 4}}},
      {{8, 4096, 14336}, {{"tokens", 512}, {"row_align", 4}}},
      {{6, 264, 272}, {{"tokens", 150}, {"skew", 3}, {"routing_seed", 2}, {"row_align", 4}}}};
  for (const auto& [dims, params] : problems) {
    const CheckOutcome rung = check_fp8_grouped("01_scales_in_stage", dims, params);
    if (rung.status == CheckOutcome::Status::unsupported) GTEST_SKIP() << rung.detail;
    EXPECT_TRUE(rung.passed()) << rung.detail;
    const CheckOutcome control = check_fp8_grouped("nc_neighbours_weight_scales", dims, params);
    EXPECT_EQ(control.status, CheckOutcome::Status::failed) << control.detail;
    std::printf("fp8_grouped_gemm at %lldx%lldx%lld: rung 01 %s; nc_neighbours_weight_scales %s\n",
                static_cast<long long>(dims[0]), static_cast<long long>(dims[1]), static_cast<long long>(dims[2]),
                rung.detail.c_str(), control.detail.c_str());
  }
  const CheckOutcome one_expert = check_fp8_grouped("nc_neighbours_weight_scales", {1, 257, 144}, {{"tokens", 300}});
  EXPECT_TRUE(one_expert.passed()) << "one expert takes its own scales: " << one_expert.detail;
}

// INT8 GEMM: rung 01 passes (exactly, for the s32 op) and each flawed copy of its kernel fails, at
// a long K and at the 4096^3 benchmark shape: the dropped K step leaves out 128 products of every
// sum, the swapped scales multiply each output by two unrelated scales. Hopper only.
const Registry& registry_with_int8_rungs() {
  static const Registry registry = [] {
    Registry r;
    stage3::register_kernels(r);
    testing::register_int8_gemm_controls(r);
    return r;
  }();
  return registry;
}

CheckOutcome check_int8(const char* op, const std::string& name, const std::vector<std::int64_t>& dims) {
  const Registry& r = registry_with_int8_rungs();
  const Problem problem = r.op(op).problem(dims, DType::i8);
  return check_kernel(r, r.kernel(std::string("stage3/") + op + "/" + name), problem, 1, shared_context());
}

TEST(NegativeControlsInt8, EachFlawFailsWhereTheRungPasses) {
  KC_SKIP_WITHOUT_GPU();
  for (const std::vector<std::int64_t>& dims : {std::vector<std::int64_t>{256, 256, 8192},
                                                std::vector<std::int64_t>{4096, 4096, 4096}}) {
    for (const char* op : {stage3::kInt8GemmOp, stage3::kInt8GemmDequantOp}) {
      for (const char* rung_name : {"01_tma_wgmma", "02_tma_store", "03_mma_sync", "04_ping_pong"}) {
        const CheckOutcome rung = check_int8(op, rung_name, dims);
        if (rung.status == CheckOutcome::Status::unsupported) GTEST_SKIP() << rung.detail;
        EXPECT_TRUE(rung.passed()) << op << " " << rung_name << ": " << rung.detail;
      }
      std::vector<const char*> controls = {"nc_last_k_step_dropped"};
      if (std::string(op) == stage3::kInt8GemmDequantOp) {
        controls.push_back("nc_scales_swapped");
        controls.push_back("nc_fragment_rows_share_scale");
      }
      if (std::string(op) == stage3::kInt8GemmOp) controls.push_back("nc_s32_box_column_halved");
      for (const char* control : controls) {
        const CheckOutcome o = check_int8(op, control, dims);
        EXPECT_EQ(o.status, CheckOutcome::Status::failed) << op << " " << control << ": " << o.detail;
        std::printf("%s %s at %lldx%lldx%lld: %s\n", op, control, static_cast<long long>(dims[0]),
                    static_cast<long long>(dims[1]), static_cast<long long>(dims[2]), o.detail.c_str());
      }
    }
  }
}

// Paged decode: each flaw of the naive decode controls fails the check on the problems where it
// shows, in both dtypes, at a benchmark shape of the op (Llama-3-8B's heads, 8k keys) and at
// conformance-like ragged shapes; where a flaw cannot show (one new token, full pages, no empty
// sequence) the same control passes, which shows the rest of that kernel is right.
CheckOutcome check_decode(const std::string& name, const std::vector<std::int64_t>& dims, DType dtype,
                          const ParamValues& params) {
  const Registry& r = registry_with_controls();
  const Problem problem = r.op(stage3::kAttentionDecodeOp).problem(dims, dtype, params);
  return check_kernel(r, r.kernel(std::string("stage3/attention_decode_paged/") + name), problem, 1,
                      shared_context());
}

// Full pages, Sq = 1, eight sequences: batch 1 would not do for the contiguous-pages control, as
// the pool then holds only that sequence's blocks, and reading them in another order gives the
// same attention (a permutation of whole key/value pairs).
const std::vector<std::int64_t> kDecodeBench = {8, 32, 8, 1, 8192, 128};
const std::vector<std::int64_t> kDecodeRagged = {7, 32, 8, 4, 257, 128};     // lengths 257, 1, 15, 17, 0, 16, ...
// Four new tokens of 20 keys each (20 % 16 = 4 NaN rows in every last block). The mask among the
// new tokens moves a row by the weight of up to 3 keys: plain to see among 20 keys, within the
// tolerance among thousands, which is why the conformance problems have short sequences and Sq > 1.
const std::vector<std::int64_t> kDecodeFourTokens = {8, 32, 8, 4, 20, 128};
const ParamValues kRaggedLengths = {{"lengths", 1.0}};

TEST(NegativeControlsDecode, ContiguousPagesFail) {
  KC_SKIP_WITHOUT_GPU();
  for (const DType dtype : {DType::bf16, DType::f16}) {
    for (const auto& [dims, params] : {std::pair{kDecodeBench, ParamValues{}}, std::pair{kDecodeRagged, kRaggedLengths}}) {
      const CheckOutcome o = check_decode("nc_contiguous_pages", dims, dtype, params);
      EXPECT_EQ(o.status, CheckOutcome::Status::failed) << dtype_name(dtype) << ": " << o.detail;
    }
    const CheckOutcome blocks_of_64 =
        check_decode("nc_contiguous_pages", {9, 8, 1, 1, 1000, 64}, dtype, {{"lengths", 1.0}, {"block_size", 64.0}});
    EXPECT_EQ(blocks_of_64.status, CheckOutcome::Status::failed) << dtype_name(dtype) << ": " << blocks_of_64.detail;
  }
}

TEST(NegativeControlsDecode, ReadingTheBlockTailFailsAndHidesOnFullPages) {
  KC_SKIP_WITHOUT_GPU();
  for (const DType dtype : {DType::bf16, DType::f16}) {
    for (const auto& [dims, params] :
         {std::pair{kDecodeRagged, kRaggedLengths}, std::pair{kDecodeFourTokens, ParamValues{}}}) {
      const CheckOutcome o = check_decode("nc_reads_block_tail", dims, dtype, params);
      EXPECT_EQ(o.status, CheckOutcome::Status::failed) << dtype_name(dtype) << ": " << o.detail;
    }
    const CheckOutcome hidden = check_decode("nc_reads_block_tail", kDecodeBench, dtype, {});
    EXPECT_TRUE(hidden.passed()) << dtype_name(dtype) << ": " << hidden.detail;
  }
}

TEST(NegativeControlsDecode, NoMaskAmongNewTokensFailsAndHidesWithOneToken) {
  KC_SKIP_WITHOUT_GPU();
  for (const DType dtype : {DType::bf16, DType::f16}) {
    for (const auto& [dims, params] :
         {std::pair{kDecodeRagged, kRaggedLengths}, std::pair{kDecodeFourTokens, ParamValues{}}}) {
      const CheckOutcome o = check_decode("nc_new_tokens_see_all_keys", dims, dtype, params);
      EXPECT_EQ(o.status, CheckOutcome::Status::failed) << dtype_name(dtype) << ": " << o.detail;
    }
    const CheckOutcome hidden = check_decode("nc_new_tokens_see_all_keys", kDecodeBench, dtype, {});
    EXPECT_TRUE(hidden.passed()) << dtype_name(dtype) << ": " << hidden.detail;
  }
}

TEST(NegativeControlsDecode, DividingEmptyRowsByZeroFailsAndHidesWithoutThem) {
  KC_SKIP_WITHOUT_GPU();
  for (const DType dtype : {DType::bf16, DType::f16}) {
    const CheckOutcome o = check_decode("nc_empty_rows_divide_by_zero", kDecodeRagged, dtype, kRaggedLengths);
    EXPECT_EQ(o.status, CheckOutcome::Status::failed) << dtype_name(dtype) << ": " << o.detail;
    const CheckOutcome hidden = check_decode("nc_empty_rows_divide_by_zero", kDecodeBench, dtype, {});
    EXPECT_TRUE(hidden.passed()) << dtype_name(dtype) << ": " << hidden.detail;
  }
}

// Decode rung 04's merge in the launch: the rung passes the problems where sequences reach past
// their first split and the flawed copy of its kernel, whose merge leaves out the last used
// split, fails them; where the table is one split wide (64 keys) nothing is merged and the same
// control passes, which shows the rest of it is the rung.
const Registry& registry_with_decode_rungs() {
  static const Registry registry = [] {
    Registry r;
    stage3::register_kernels(r);
    testing::register_decode_fused_combine_controls(r);
    return r;
  }();
  return registry;
}

TEST(NegativeControlsDecode, AMergeThatDropsTheLastSplitFailsWhereRung04Passes) {
  KC_SKIP_WITHOUT_GPU();
  const Registry& r = registry_with_decode_rungs();
  const auto check_with = [&r](const char* name, const std::vector<std::int64_t>& dims, DType dtype,
                               const ParamValues& params) {
    const Problem problem = r.op(stage3::kAttentionDecodeOp).problem(dims, dtype, params);
    return check_kernel(r, r.kernel(std::string("stage3/attention_decode_paged/") + name), problem, 1,
                        shared_context());
  };
  for (const DType dtype : {DType::bf16, DType::f16}) {
    // Ragged with 4096 keys at most: sequence 0's 8 splits of 512 keys, the last 512 dropped.
    for (const auto& [dims, params] : {std::pair{kDecodeBench, ParamValues{}},
                                       std::pair{std::vector<std::int64_t>{7, 32, 8, 1, 4096, 128}, kRaggedLengths}}) {
      const CheckOutcome rung = check_with("04_fused_combine", dims, dtype, params);
      EXPECT_TRUE(rung.passed()) << dtype_name(dtype) << ": " << rung.detail;
      const CheckOutcome o = check_with("nc_merge_drops_last_split", dims, dtype, params);
      EXPECT_EQ(o.status, CheckOutcome::Status::failed) << dtype_name(dtype) << ": " << o.detail;
      std::printf("nc_merge_drops_last_split (%s): %s\n", std::string(dtype_name(dtype)).c_str(), o.detail.c_str());
    }
    const CheckOutcome one_split = check_with("nc_merge_drops_last_split", {8, 32, 8, 1, 64, 128}, dtype, {});
    EXPECT_TRUE(one_split.passed()) << "one split, nothing to merge: " << one_split.detail;
  }
}

// A rung of the RoPE decode op passes and its negative control fails on each problem, in bf16 and
// f16 (the control's outcome printed).
void expect_rope_rung_passes_and_control_fails(
    const char* rung, const char* control,
    const std::vector<std::pair<std::vector<std::int64_t>, ParamValues>>& problems) {
  const Registry& r = registry_with_decode_rungs();
  const auto check_with = [&r](const char* name, const std::vector<std::int64_t>& dims, DType dtype,
                               const ParamValues& params) {
    const Problem problem = r.op(stage3::kAttentionDecodeRopeOp).problem(dims, dtype, params);
    return check_kernel(r, r.kernel(std::string("stage3/attention_decode_paged_rope/") + name), problem, 1,
                        shared_context());
  };
  for (const DType dtype : {DType::bf16, DType::f16})
    for (const auto& [dims, params] : problems) {
      const CheckOutcome passing = check_with(rung, dims, dtype, params);
      EXPECT_TRUE(passing.passed()) << rung << " " << dtype_name(dtype) << ": " << passing.detail;
      const CheckOutcome o = check_with(control, dims, dtype, params);
      EXPECT_EQ(o.status, CheckOutcome::Status::failed) << control << " " << dtype_name(dtype) << ": " << o.detail;
      std::printf("%s (%s): %s\n", control, std::string(dtype_name(dtype)).c_str(), o.detail.c_str());
    }
}

// Decode rung 06 (RoPE and the cache write inside the attention): the rung passes, and its kernel
// rotating the new tokens by the previous position's angle fails — the cache rows it writes and O —
// at the engine's shapes (SmolLM2's heads, D = 64; Llama-3-8B's, D = 128) and a ragged batch.
TEST(NegativeControlsDecode, ARopeOneStepBehindFailsWhereRung06Passes) {
  KC_SKIP_WITHOUT_GPU();
  expect_rope_rung_passes_and_control_fails("06_rope_in", "nc_rope_position_off_by_one",
                                            {{{1, 9, 3, 1, 128, 64}, {}},
                                             {{8, 32, 8, 1, 1024, 128}, {}},
                                             {{7, 32, 8, 4, 300, 128}, kRaggedLengths}});
}

// Decode rung 07 (the first tiles' cached rows copied before the wait): the rung passes, and its
// kernel copying the new tokens' rows from their pages before the wait too — rows the op poisons,
// as an engine's kernel ahead has not written them yet — fails, at the engine's shapes and a
// ragged batch with four new tokens a sequence.
TEST(NegativeControlsDecode, NewRowsCopiedBeforeTheWaitFailWhereRung07Passes) {
  KC_SKIP_WITHOUT_GPU();
  expect_rope_rung_passes_and_control_fails("07_pages_before_wait", "nc_new_rows_copied_before_wait",
                                            {{{1, 9, 3, 1, 128, 64}, {}},
                                             {{1, 32, 8, 1, 140, 128}, {}},
                                             {{8, 32, 8, 1, 1024, 128}, {}},
                                             {{7, 32, 8, 4, 300, 128}, kRaggedLengths}});
}

// Decode rung 08 (each thread's page addresses worked out once): the rung passes, and its kernel
// reading every row of a tile from the block of the tile's first key fails wherever a tile spans
// several blocks — the engine's shapes with blocks of 16 and a ragged batch with blocks of 32 —
// and passes with blocks of 64, where a tile is one block (the flaw cannot show: the rest of the
// walk is right).
TEST(NegativeControlsDecode, OnePagePerTileFailsWhereRung08Passes) {
  KC_SKIP_WITHOUT_GPU();
  expect_rope_rung_passes_and_control_fails("08_page_walk", "nc_page_walk_one_page_per_tile",
                                            {{{1, 9, 3, 1, 128, 64}, {}},
                                             {{1, 32, 8, 1, 140, 128}, {}},
                                             {{8, 32, 8, 1, 1024, 128}, {}},
                                             {{7, 32, 8, 4, 300, 128}, {{"block_size", 32.0}, {"lengths", 1.0}}}});
  const Registry& r = registry_with_decode_rungs();
  for (const DType dtype : {DType::bf16, DType::f16}) {
    const Problem problem =
        r.op(stage3::kAttentionDecodeRopeOp).problem({2, 32, 8, 1, 300, 128}, dtype, {{"block_size", 64.0}});
    const CheckOutcome o = check_kernel(
        r, r.kernel("stage3/attention_decode_paged_rope/nc_page_walk_one_page_per_tile"), problem, 1,
        shared_context());
    EXPECT_TRUE(o.passed()) << "blocks of 64, one block a tile: " << o.detail;
  }
}

// Decode rung 09 (a grid of groups x splits, the splits past a sequence's keys leaving before the
// wait): the rung passes, and its kernel storing each split's partials in the slot of its index in
// rung 08's grid order fails wherever a sequence spans several of the control's splits — the
// engine's shapes and a ragged batch (with an empty sequence: split 0 stays to write its rows) —
// and passes at 64 keys, one split a sequence, where nothing is merged (the rest is right).
TEST(NegativeControlsDecode, PartialsInRung08sSlotsFailWhereRung09Passes) {
  KC_SKIP_WITHOUT_GPU();
  expect_rope_rung_passes_and_control_fails("09_workers_first", "nc_partials_in_rung08_slots",
                                            {{{1, 9, 3, 1, 128, 64}, {}},
                                             {{1, 32, 8, 1, 140, 128}, {}},
                                             {{8, 32, 8, 1, 1024, 128}, {}},
                                             {{7, 32, 8, 4, 300, 128}, kRaggedLengths}});
  const Registry& r = registry_with_decode_rungs();
  for (const DType dtype : {DType::bf16, DType::f16}) {
    const Problem problem = r.op(stage3::kAttentionDecodeRopeOp).problem({2, 32, 8, 1, 64, 64}, dtype, {});
    const CheckOutcome o = check_kernel(
        r, r.kernel("stage3/attention_decode_paged_rope/nc_partials_in_rung08_slots"), problem, 1, shared_context());
    EXPECT_TRUE(o.passed()) << "64 keys, one split a sequence: " << o.detail;
  }
}

// Grouped GEMM: each routing flaw fails at the skewed DeepSeek-like benchmark shape (64 experts,
// 1024 tokens by Zipf's law) and on six experts with an empty one in the middle; where a flaw
// cannot show the same control passes, which shows the rest of it is right: one expert (no
// previous or next one), and the uniform split on a uniform routing.
CheckOutcome check_grouped(const std::string& name, const std::vector<std::int64_t>& dims, const ParamValues& params) {
  const Registry& r = registry_with_controls();
  const Problem problem = r.op(stage3::kGroupedGemmOp).problem(dims, DType::bf16, params);
  return check_kernel(r, r.kernel(std::string("stage3/grouped_gemm/") + name), problem, 1, shared_context());
}

const ParamValues kDeepSeekZipf = {{"tokens", 1024}, {"skew", 1}};
const ParamValues kEmptyInTheMiddle = {{"tokens", 150}, {"skew", 3}, {"routing_seed", 2}};  // 5, 1, 126, 2, 0, 16

TEST(NegativeControlsGrouped, EveryRoutingFlawFailsOnSkewedRoutings) {
  KC_SKIP_WITHOUT_GPU();
  for (const char* name : {"nc_writes_at_previous_experts_rows", "nc_uses_next_experts_weights", "nc_assumes_uniform_routing"}) {
    const CheckOutcome bench = check_grouped(name, {64, 1408, 2048}, kDeepSeekZipf);
    EXPECT_EQ(bench.status, CheckOutcome::Status::failed) << name << ": " << bench.detail;
    const CheckOutcome middle = check_grouped(name, {6, 2049, 264}, kEmptyInTheMiddle);
    EXPECT_EQ(middle.status, CheckOutcome::Status::failed) << name << ": " << middle.detail;
  }
}

// Rung 07's split of the last wave, with piece 0 added twice: fails where the plan splits on 132
// SMs (a whole wave then 12 tiles in 2 pieces; 8 small experts' tiles in 4 pieces: two of the op's
// conformance problems, on which rung 07 itself passes), passes where it does not (DeepSeek-like at
// 8192 tokens: 384 tiles, a last wave of 120, no split). Hopper only: elsewhere it is refused.
TEST(NegativeControlsGrouped, AddingAPieceTwiceFailsWhereRung07Splits) {
  KC_SKIP_WITHOUT_GPU();
  const std::vector<std::pair<std::vector<std::int64_t>, ParamValues>> split = {
      {{2, 2048, 2048}, {{"tokens", 2176}}}, {{4, 264, 4104}, {{"tokens", 130}}}};
  for (const auto& [dims, params] : split) {
    const CheckOutcome o = check_grouped("nc_split_pieces_added_twice", dims, params);
    if (o.status == CheckOutcome::Status::unsupported) GTEST_SKIP() << o.detail;
    EXPECT_EQ(o.status, CheckOutcome::Status::failed) << o.detail;
    std::printf("nc_split_pieces_added_twice: %s\n", o.detail.c_str());
  }
  const CheckOutcome unsplit = check_grouped("nc_split_pieces_added_twice", {64, 1408, 2048}, {{"tokens", 8192}});
  EXPECT_TRUE(unsplit.passed()) << "no tile split, nothing to add: " << unsplit.detail;
}

TEST(NegativeControlsGrouped, FlawsHideWhereTheyCannotShow) {
  KC_SKIP_WITHOUT_GPU();
  for (const char* name : {"nc_writes_at_previous_experts_rows", "nc_uses_next_experts_weights"}) {
    const CheckOutcome one_expert = check_grouped(name, {1, 257, 72}, {{"tokens", 300}});
    EXPECT_TRUE(one_expert.passed()) << name << ": " << one_expert.detail;
  }
  const CheckOutcome uniform = check_grouped("nc_assumes_uniform_routing", {64, 1408, 2048}, {{"tokens", 1024}});
  EXPECT_TRUE(uniform.passed()) << uniform.detail;
}

}  // namespace
}  // namespace kc
