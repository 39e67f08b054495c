// The int4 GEMV's links, rungs 04 (quant/int4/04_x_resident.cu) and 05 (05_x_f16.cu: x in fp16),
// on the GPU beyond the conformance suite:
//   - as the op (one weight, no prologue, beta = 0) it writes rung 02's bits (and so rung 01's), at
//     every group size and row-group instance, on K long enough to go round its ring; where x does
//     not fit next to the ring it refuses with kc::Error and writes nothing;
//   - as a link of three weights sharing x: SwiGLU inside gives the bits of stage 2's swiglu
//     followed by rung 02, and RMSNorm inside with beta = 1 stays within a stated bound of the
//     double reference, which a reference without the norm's 1 / RMS must break;
//   - its swapped-nibble instance (the negative control) writes other values;
//   - rung 05 as the op passes the op's check (kc::check_run: fresh inputs, y poisoned, guard
//     bytes) on the same shapes and refuses where x and its sums do not fit, its swapped-nibble
//     instance fails the check; as a link, the same as rung 04 with its own single launches as the
//     bits to match.
// Skips without a GPU, and without a Hopper GPU and sm_90a code (the rung is Hopper's only).
//   ctest --test-dir build/ci -R GemvInt4LinkGpu
#include <gtest/gtest.h>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "kc/common/buffer.hpp"
#include "kc/common/check.hpp"
#include "kc/common/error.hpp"
#include "kc/stage2/ops.hpp"
#include "kc/stage3/gemv_gguf_args.hpp"
#include "kc/stage3/gemv_int4.hpp"
#include "kc/stage3/int4_groups.hpp"
#include "support/device_bytes.hpp"
#include "support/gpu_test.hpp"
#include "support/rmsnorm_link_reference.hpp"

namespace kc::stage3 {
namespace {

using test_support::bytes_of;

std::vector<__nv_bfloat16> random_bf16(std::size_t count, float scale, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uniform(-scale, scale);
  std::vector<__nv_bfloat16> values(count);
  for (auto& v : values) v = __float2bfloat16(uniform(rng));
  return values;
}

// As the op: rung 04 against rung 02, bit for bit, on the same operands; shapes going round the ring
// (K of 9 to 33 stages of 1024), partial last stages and chunks, every row-group instance (M = 1,
// 2-8, 9-16) and group size; 16 rows of K = 14336 and 5 of K = 33792 do not fit next to the ring
// and are refused.
TEST(GemvInt4LinkGpu, XResidentWritesRungTwosBits) {
  KC_SKIP_WITHOUT_GPU();
  if (!gemv_gguf_06_runs_here()) GTEST_SKIP() << "rung 04 needs a Hopper GPU and a build with sm_90a code";
  Context& context = testing::shared_context();
  const OpSpec op = make_gemv_int4_op();
  struct Case {
    std::vector<std::int64_t> dims;
    double group_size;
  };
  int ran = 0, refused = 0;
  for (const Case& c : {Case{{1, 40, 9216}, 128.0}, Case{{1, 33, 33792}, 256.0}, Case{{2, 100, 8224}, 32.0},
                        Case{{16, 17, 4160}, 64.0}, Case{{1, 4096, 4096}, 128.0}, Case{{3, 300, 1056}, 32.0},
                        Case{{16, 64, 14336}, 128.0}, Case{{5, 33, 33792}, 256.0}}) {
    const Problem problem = op.problem(c.dims, DType::bf16, {{"group_size", c.group_size}});
    Operands operands = op.make_operands(problem, 7, context);
    KC_CUDA_CHECK(cudaStreamSynchronize(context.stream()));
    const Int4GemvArgs args = gemv_int4_args(problem, operands);
    Tensor& y = operands["y"];
    KC_CUDA_CHECK(cudaMemset(y.raw(), 0xFF, y.bytes()));  // bf16 NaN everywhere
    if (!gemv_int4_04_fits(args.m, args.k, args.group_size)) {
      const std::vector<std::uint8_t> before = bytes_of(y);
      EXPECT_THROW(gemv_int4_04_x_resident(args, context.stream()), Error) << problem.label();
      KC_CUDA_CHECK(cudaStreamSynchronize(context.stream()));
      EXPECT_EQ(bytes_of(y), before) << problem.label() << ": a refusal wrote y";
      ++refused;
      continue;
    }
    gemv_int4_02_bulk_stream(args, context.stream());
    KC_CUDA_CHECK(cudaStreamSynchronize(context.stream()));
    const std::vector<std::uint8_t> expected = bytes_of(y);
    KC_CUDA_CHECK(cudaMemset(y.raw(), 0xFF, y.bytes()));
    gemv_int4_04_x_resident(args, context.stream());
    KC_CUDA_CHECK(cudaStreamSynchronize(context.stream()));
    EXPECT_EQ(bytes_of(y), expected) << problem.label();
    // The negative control: the same problem with each pair's nibbles exchanged must differ.
    KC_CUDA_CHECK(cudaMemset(y.raw(), 0xFF, y.bytes()));
    gemv_int4_04_swapped_nibbles(args, context.stream());
    KC_CUDA_CHECK(cudaStreamSynchronize(context.stream()));
    EXPECT_NE(bytes_of(y), expected) << problem.label() << ": the swapped-nibble instance went unnoticed";
    ++ran;
  }
  EXPECT_EQ(ran, 6);
  EXPECT_EQ(refused, 2) << "16 x 14336 and 5 x 33792 rows of x do not fit next to the ring";
}

// Rung 05 as the op against the double reference on rung 04's shapes (the rung is not rung 02's
// bits: x in fp16, the sums in another order); where x and its block sums do not fit it refuses
// and writes nothing. Its swapped-nibble instance must fail the same check.
TEST(GemvInt4LinkGpu, XAsF16MatchesTheReference) {
  KC_SKIP_WITHOUT_GPU();
  if (!gemv_gguf_06_runs_here()) GTEST_SKIP() << "rung 05 needs a Hopper GPU and a build with sm_90a code";
  Context& context = testing::shared_context();
  const OpSpec op = make_gemv_int4_op();
  const auto launch_with = [](void (*gemv)(const Int4GemvArgs&, cudaStream_t)) -> RunFn {
    return [gemv](const Problem& p, Operands& o, Context& c) { gemv(gemv_int4_args(p, o), c.stream()); };
  };
  int ran = 0, refused = 0;
  for (const auto& [dims, group_size] : std::vector<std::pair<std::vector<std::int64_t>, double>>{
           {{1, 40, 9216}, 128.0}, {{1, 33, 33792}, 256.0}, {{2, 100, 8224}, 32.0}, {{16, 17, 4160}, 64.0},
           {{1, 4096, 4096}, 128.0}, {{3, 300, 1056}, 32.0}, {{16, 64, 14336}, 128.0}, {{5, 33, 33792}, 256.0}}) {
    const Problem problem = op.problem(dims, DType::bf16, {{"group_size", group_size}});
    if (!gemv_int4_05_fits(static_cast<int>(dims[0]), static_cast<int>(dims[2]), static_cast<int>(group_size))) {
      Operands operands = op.make_operands(problem, 7, context);
      KC_CUDA_CHECK(cudaStreamSynchronize(context.stream()));
      Tensor& y = operands["y"];
      const std::vector<std::uint8_t> before = bytes_of(y);
      EXPECT_THROW(gemv_int4_05_x_f16(gemv_int4_args(problem, operands), context.stream()), Error) << problem.label();
      KC_CUDA_CHECK(cudaStreamSynchronize(context.stream()));
      EXPECT_EQ(bytes_of(y), before) << problem.label() << ": a refusal wrote y";
      ++refused;
      continue;
    }
    const CheckOutcome right = check_run(op, launch_with(&gemv_int4_05_x_f16), problem, 7, context);
    EXPECT_TRUE(right.passed()) << problem.label() << ": " << right.detail;
    const CheckOutcome wrong = check_run(op, launch_with(&gemv_int4_05_swapped_nibbles), problem, 7, context);
    EXPECT_EQ(wrong.status, CheckOutcome::Status::failed) << problem.label() << ": the swapped nibbles went unnoticed";
    ++ran;
  }
  EXPECT_EQ(ran, 6);
  EXPECT_EQ(refused, 2) << "16 x 14336 and 5 x 33792 rows of x do not fit next to the ring";
}

// One weight of a link test: normal weights quantized on the host (groups of G), prepared on the
// device, and its y.
struct LinkWeight {
  int n;
  Int4GroupHost host;
  DeviceBuffer<std::uint8_t> quants;
  DeviceBuffer<std::uint32_t> scales;
  DeviceBuffer<__nv_bfloat16> y;
  LinkWeight(int n_cols, int m, int k, int group_size, std::uint64_t seed)
      : n(n_cols),
        host(quantized_weight(n_cols, k, group_size, seed)),
        quants(int4_prepared_quant_bytes(n_cols, k)),
        scales(int4_prepared_scale_bytes(n_cols, k, group_size) / 4),
        y(static_cast<std::size_t>(m) * n_cols) {
    DeviceBuffer<std::uint8_t> qweight(host.qweight.size()), zeros(host.zeros.size());
    DeviceBuffer<std::uint16_t> group_scales(host.scales.size());
    qweight.copy_from_host(host.qweight);
    zeros.copy_from_host(host.zeros);
    group_scales.copy_from_host(host.scales);
    Int4GroupWeights view = host.view();
    view.qweight = qweight.data();
    view.scales = group_scales.data();
    view.zeros = zeros.data();
    prepare_int4_groups_on_device(view, quants.data(), scales.data(), nullptr);
    KC_CUDA_CHECK(cudaDeviceSynchronize());
  }
  static Int4GroupHost quantized_weight(int n_cols, int k, int group_size, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.f, 0.02f);
    std::vector<float> w(static_cast<std::size_t>(n_cols) * static_cast<std::size_t>(k));
    for (float& v : w) v = normal(rng);
    return quantize_int4_groups_on_host(w.data(), n_cols, k, group_size);
  }
  Int4GemvArgs plain_args(int m, int k, int group_size, const __nv_bfloat16* x) {
    Int4GemvArgs a;
    a.m = m;
    a.n = n;
    a.k = k;
    a.group_size = group_size;
    a.x = x;
    a.quants = quants.data();
    a.scales = scales.data();
    a.y = y.data();
    return a;
  }
};

// Three weights (q, k and v-like widths, one not a multiple of the 16-column tile) sharing x, at
// M = 1 and 3, groups of 128 (K = 1152: 9 groups, a partial last stage) and 32 (K = 1056: a partial
// last chunk):
//   - no prologue, beta = 0: each weight's y is the rung's single launch's, bit for bit (rung 02's
//     for rung 04, which writes rung 02's bits; rung 05's own for rung 05);
//   - SwiGLU inside: the bits of stage 2's swiglu of [gate | up] followed by that single launch;
//   - RMSNorm inside (x at 3x the scale of the norm's weight, so that a 1 / RMS left out is far
//     off) with beta = 1 (y holds random values first): within 2^-8 (sum_k |w x_k g_k| / rms +
//     |y_old|) + 1e-6 of the double reference sum_k w x_k g_k / rms + y_old on the bf16 inputs and
//     the dequantized weights — x . g rounded once to bf16, the output once; the same reference
//     without the 1 / RMS must break that bound for most outputs (the negative control);
//   - refusals: no norm weight, four weights, rows that do not fit next to the ring.
struct LinkRung {
  const char* name;
  void (*link)(const Int4GemvLinkArgs&, cudaStream_t);
  void (*single)(const Int4GemvArgs&, cudaStream_t);  // the launch whose bits a prologue-free link writes
  bool (*fits)(int, int, int);
};

TEST(GemvInt4LinkGpu, LinkMatchesTheUnfusedKernels) {
  KC_SKIP_WITHOUT_GPU();
  if (!gemv_gguf_06_runs_here()) GTEST_SKIP() << "rungs 04 and 05 need a Hopper GPU and a build with sm_90a code";
  const float eps = 1e-5f;
  for (const LinkRung& rung : {LinkRung{"rung 04", &gemv_int4_04_link, &gemv_int4_02_bulk_stream, &gemv_int4_04_fits},
                               LinkRung{"rung 05", &gemv_int4_05_link, &gemv_int4_05_x_f16, &gemv_int4_05_fits}})
  for (const auto& [k, group_size] : std::vector<std::pair<int, int>>{{1152, 128}, {1056, 32}})
    for (const int m : {1, 3}) {
      const std::string label = fmt::format("{}, G = {}, K = {}, M = {}", rung.name, group_size, k, m);
      std::vector<LinkWeight> weights;
      weights.emplace_back(80, m, k, group_size, 1);
      weights.emplace_back(33, m, k, group_size, 2);
      weights.emplace_back(48, m, k, group_size, 3);
      const std::vector<__nv_bfloat16> x_host = random_bf16(static_cast<std::size_t>(m) * 2 * k, 3.f, 11);
      const std::vector<__nv_bfloat16> norm_host = random_bf16(k, 1.f, 12);
      DeviceBuffer<__nv_bfloat16> x(x_host.size()), norm(norm_host.size()), act(static_cast<std::size_t>(m) * k);
      x.copy_from_host(x_host);
      norm.copy_from_host(norm_host);
      Int4GemvLinkArgs link;
      link.m = m;
      link.k = k;
      link.group_size = group_size;
      link.weights = 3;
      for (int w = 0; w < 3; ++w)
        link.weight[w] = {weights[w].quants.data(), weights[w].scales.data(), weights[w].y.data(), weights[w].n};
      const auto poison = [&] {
        for (LinkWeight& w : weights) KC_CUDA_CHECK(cudaMemset(w.y.data(), 0xFF, w.y.bytes()));
      };

      // The rung's single launches (rung 02 for rung 04; rung 05 itself) on silu(gate) . up as stage 2
      // computes it: the bits both the prologue-free and the SwiGLU links must give.
      stage2::SwigluArgs<__nv_bfloat16> swiglu{m, k, x.data(), act.data()};
      stage2::swiglu(swiglu, nullptr);
      std::vector<std::vector<std::uint8_t>> single_bits(3);
      for (int w = 0; w < 3; ++w) {
        rung.single(weights[w].plain_args(m, k, group_size, act.data()), nullptr);
        KC_CUDA_CHECK(cudaDeviceSynchronize());
        single_bits[w] = bytes_of(weights[w].y);
      }
      const auto expect_single_bits = [&](const char* how) {
        KC_CUDA_CHECK(cudaDeviceSynchronize());
        for (int w = 0; w < 3; ++w)
          EXPECT_EQ(bytes_of(weights[w].y), single_bits[w]) << label << ", weight " << w << ", " << how;
      };
      poison();
      link.x = act.data();
      rung.link(link, nullptr);
      expect_single_bits("no prologue");
      poison();
      link.x = x.data();
      link.prologue = GgufGemvPrologue::swiglu;
      rung.link(link, nullptr);
      expect_single_bits("SwiGLU inside");
      // One CTA an SM (spread_over_sms; 11 tiles, fewer than the SMs): the same bits.
      poison();
      link.spread_over_sms = true;
      rung.link(link, nullptr);
      expect_single_bits("SwiGLU inside, one CTA an SM");
      link.spread_over_sms = false;

      // RMSNorm inside, beta = 1, on the rows' first K (packed).
      std::vector<__nv_bfloat16> rows_host(static_cast<std::size_t>(m) * k);
      for (int r = 0; r < m; ++r)
        for (int i = 0; i < k; ++i)
          rows_host[static_cast<std::size_t>(r) * k + i] = x_host[static_cast<std::size_t>(r) * 2 * k + i];
      DeviceBuffer<__nv_bfloat16> rows(rows_host.size());
      rows.copy_from_host(rows_host);
      std::vector<std::vector<float>> y_old(3);
      for (int w = 0; w < 3; ++w) {
        const std::vector<__nv_bfloat16> old = random_bf16(weights[w].y.size(), 2.f, 20 + static_cast<std::uint64_t>(w));
        weights[w].y.copy_from_host(old);
        for (const auto& v : old) y_old[w].push_back(__bfloat162float(v));
      }
      link.x = rows.data();
      link.prologue = GgufGemvPrologue::rmsnorm;
      link.norm_weight = norm.data();
      link.norm_eps = eps;
      link.beta = 1.f;
      rung.link(link, nullptr);
      KC_CUDA_CHECK(cudaDeviceSynchronize());
      link_test::RmsNormLinkCount count;
      for (int w = 0; w < 3; ++w) {
        std::vector<float> got;
        for (const __nv_bfloat16& v : weights[w].y.to_host()) got.push_back(__bfloat162float(v));
        count += link_test::count_rmsnorm_link(m, weights[w].n, k, eps, dequantize_int4_groups(weights[w].host.view()),
                                             got, y_old[w], rows_host, norm_host);
      }
      EXPECT_EQ(count.failures, 0) << label << ": outputs outside the bound, of " << count.outputs;
      EXPECT_GT(count.control_failures, count.outputs / 2) << label << ": a reference without 1 / RMS went unnoticed";

      // Refusals, before any launch.
      link.norm_weight = nullptr;
      EXPECT_THROW(rung.link(link, nullptr), Error) << label;
      link.norm_weight = norm.data();
      link.weights = 4;
      EXPECT_THROW(rung.link(link, nullptr), Error) << label;
      link.weights = 3;
      link.k = 128 * 1024;  // 256 KiB a row of bf16: past the 200 KiB
      EXPECT_FALSE(rung.fits(m, link.k, group_size));
      EXPECT_THROW(rung.link(link, nullptr), Error) << label;
    }
}

}  // namespace
}  // namespace kc::stage3
