// The GGUF GEMV's negative controls: rungs 01 to 08, 11 and 12 with each byte's nibbles read in the wrong
// order must fail the op's check on q4_0 and q4_1 (q8_0 has no nibbles), each on its layout, and rung 01
// with each block scaled by the next block's d (and m) in every type; the
// repacked operands of a layout=1 problem are repack_gguf_blocks() of its blocks; rung 06 writes
// rung 05's bits on problems long enough to go round its ring, rungs 07, 11 and 12 rung 06's (and, as
// links of the decode chain, the bits of stage 2's swiglu then rung 06, and the double reference of
// their RMSNorm prologue and beta within the stated bound). The rungs themselves are checked by the
// conformance tests on every conformance problem. Skips without a GPU.
//   ctest --test-dir build/ci -R GemvGgufGpu
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kc/common/buffer.hpp"
#include "kc/common/check.hpp"
#include "kc/common/device.hpp"
#include "kc/common/error.hpp"
#include "kc/stage2/ops.hpp"
#include "kc/stage3/gemv_gguf.hpp"
#include "kc/stage3/quantized_gemv.hpp"
#include "src/gemv_gguf_edges.hpp"
#include "src/gguf_batch_rung.hpp"
#include "support/device_bytes.hpp"
#include "support/gpu_test.hpp"
#include "support/rmsnorm_link_reference.hpp"

namespace kc::stage3 {
namespace {

using Gemv = void (*)(const GgufGemvArgs&, cudaStream_t);

RunFn launch_with(Gemv gemv) {
  return [gemv](const Problem& p, Operands& o, Context& c) { gemv(gemv_gguf_args(p, o), c.stream()); };
}

TEST(GemvGgufGpu, SwappedNibblesFailTheCheck) {
  KC_SKIP_WITHOUT_GPU();
  Context& context = testing::shared_context();
  const OpSpec op = make_gemv_gguf_op();
  struct Rung {
    double layout;
    Gemv right, swapped;
  };
  std::vector<Rung> rungs = {Rung{0.0, &gemv_gguf_01_warp_per_column, &gemv_gguf_01_swapped_nibbles},
                             Rung{1.0, &gemv_gguf_02_repacked, &gemv_gguf_02_swapped_nibbles},
                             Rung{2.0, &gemv_gguf_03_mma, &gemv_gguf_03_swapped_nibbles},
                             Rung{2.0, &gemv_gguf_04_cp_async, &gemv_gguf_04_swapped_nibbles},
                             Rung{3.0, &gemv_gguf_05_weights_as_a, &gemv_gguf_05_swapped_nibbles}};
  // Rungs 06 to 08, 11 and 12 need a Hopper GPU (BulkStreamWritesRungFivesBits says so where it is missing).
  if (gemv_gguf_06_runs_here()) {
    rungs.push_back(Rung{3.0, &gemv_gguf_06_bulk_stream, &gemv_gguf_06_swapped_nibbles});
    rungs.push_back(Rung{3.0, &gemv_gguf_07_x_resident, &gemv_gguf_07_swapped_nibbles});
    rungs.push_back(Rung{3.0, &gemv_gguf_08_x_f16, &gemv_gguf_08_swapped_nibbles});
    rungs.push_back(Rung{3.0, &gemv_gguf_11_x_in_step, &gemv_gguf_11_swapped_nibbles});
    rungs.push_back(Rung{3.0, &gemv_gguf_12_x_cluster_staged, &gemv_gguf_12_swapped_nibbles});
  }
  for (const Rung& rung : rungs)
    for (const double type : {2.0, 3.0}) {
      const Problem problem = op.problem({4, 129, 256}, DType::bf16, {{"ggml_type", type}, {"layout", rung.layout}});
      EXPECT_TRUE(check_run(op, launch_with(rung.right), problem, 5, context).passed()) << problem.label();
      const CheckOutcome wrong = check_run(op, launch_with(rung.swapped), problem, 5, context);
      EXPECT_FALSE(wrong.passed()) << problem.label() << ": the swapped nibble order went unnoticed";
    }
}

// Rung 01 scaling each block with the next block's d (and m in q4_1) of its row of w, the last with
// the first's — a block index off by one — must fail the check in every type, on problems of several
// blocks a row carrying the edge cases (src/gemv_gguf_edges.hpp: the NaN-d rows stay NaN in the
// flawed kernel, which shows in the finite columns). On rows of one block it reads each block's own
// scales and must pass: the flaw is the index and nothing else.
TEST(GemvGgufGpu, NextBlockScalesFailTheCheck) {
  KC_SKIP_WITHOUT_GPU();
  Context& context = testing::shared_context();
  const OpSpec op = make_gemv_gguf_op();
  for (const double type : {2.0, 3.0, 8.0}) {
    for (const std::vector<std::int64_t>& dims :
         std::vector<std::vector<std::int64_t>>{{4, 129, 256}, {7, 100, 1024}}) {
      const Problem problem = op.problem(dims, DType::bf16, {{"ggml_type", type}, {"layout", 0.0}});
      ASSERT_TRUE(weight_only_gemv_has_edge_cases(problem)) << problem.label();
      EXPECT_TRUE(check_run(op, launch_with(&gemv_gguf_01_warp_per_column), problem, 5, context).passed())
          << problem.label();
      const CheckOutcome wrong = check_run(op, launch_with(&gemv_gguf_01_next_block_scales), problem, 5, context);
      EXPECT_FALSE(wrong.passed()) << problem.label() << ": the next block's scales went unnoticed";
    }
    const Problem one_block = op.problem({3, 37, 32}, DType::bf16, {{"ggml_type", type}, {"layout", 0.0}});
    EXPECT_TRUE(check_run(op, launch_with(&gemv_gguf_01_next_block_scales), one_block, 5, context).passed())
        << one_block.label() << ": a row of one block has no other block to read";
  }
}

// Rungs 09 and 10 the same way, on problems of more than 16 rows whose K is split over several CTAs
// (the last CTA's reduction on the path), and on one of a single split.
TEST(GemvGgufGpu, BatchSwappedNibblesFailTheCheck) {
  KC_SKIP_WITHOUT_GPU();
  Context& context = testing::shared_context();
  const OpSpec op = make_gemv_gguf_op();
  struct BatchRung {
    GgufBatchLaunch right, swapped;
    GgufBatchCtasPerSm ctas_per_sm;
  };
  std::vector<BatchRung> rungs{{&gemv_gguf_09_batch, &gemv_gguf_09_swapped_nibbles, &gemv_gguf_09_ctas_per_sm}};
  if (gemv_gguf_06_runs_here())  // rung 10 runs where rung 06 does
    rungs.push_back({&gemv_gguf_10_wgmma, &gemv_gguf_10_swapped_nibbles, &gemv_gguf_10_ctas_per_sm});
  const auto run_with = [](std::shared_ptr<GgufBatchRung> rung) -> RunFn {
    return [rung](const Problem& p, Operands& o, Context& c) { rung->run(gemv_gguf_args(p, o), c.stream()); };
  };
  for (const BatchRung& rung : rungs) {
    auto right = std::make_shared<GgufBatchRung>(rung.right, rung.ctas_per_sm);
    auto swapped = std::make_shared<GgufBatchRung>(rung.swapped, rung.ctas_per_sm);
    for (const std::vector<std::int64_t>& dims :
         std::vector<std::vector<std::int64_t>>{{33, 129, 4224}, {64, 200, 512}})
      for (const double type : {2.0, 3.0}) {
        const Problem problem = op.problem(dims, DType::bf16, {{"ggml_type", type}, {"layout", 3.0}});
        EXPECT_TRUE(check_run(op, run_with(right), problem, 5, context).passed()) << problem.label();
        const CheckOutcome wrong = check_run(op, run_with(swapped), problem, 5, context);
        EXPECT_FALSE(wrong.passed()) << problem.label() << ": the swapped nibble order went unnoticed";
      }
  }
}

using test_support::bytes_of;

// The operands rung 02 reads are the repack of the blocks the reference decodes, drawn from the
// same seed (a seed shared by the operands must not drift apart).
TEST(GemvGgufGpu, RepackedOperandsAreTheRepackOfTheBlocks) {
  KC_SKIP_WITHOUT_GPU();
  Context& context = testing::shared_context();
  const OpSpec op = make_gemv_gguf_op();
  for (const double type : {2.0, 3.0, 8.0}) {
    const Problem problem = op.problem({2, 37, 96}, DType::bf16, {{"ggml_type", type}, {"layout", 1.0}});
    for (const std::uint64_t seed : {1u, 2026u}) {
      Operands operands = op.make_operands(problem, seed, context);
      KC_CUDA_CHECK(cudaStreamSynchronize(context.stream()));
      const std::vector<std::uint8_t> blocks = bytes_of(operands["w"]);
      const GgufRepacked repacked = repack_gguf_blocks(gguf_block_type(problem), blocks.data(), blocks.size());
      EXPECT_EQ(bytes_of(operands["w_quants"]), repacked.quants) << problem.label() << ", seed " << seed;
      EXPECT_EQ(bytes_of(operands["w_scales"]), repacked.scales) << problem.label() << ", seed " << seed;
    }
  }
}

// The repacks on the GPU write the bytes of the host's repack_gguf_blocks_for_mma and
// repack_gguf_blocks_for_mma16 (what the conformance tests check rungs 03-05 on), padding included.
TEST(GemvGgufGpu, DeviceMmaRepacksMatchTheHostRepacks) {
  KC_SKIP_WITHOUT_GPU();
  for (const GgufBlockType type : {GgufBlockType::q4_0, GgufBlockType::q4_1, GgufBlockType::q8_0})
    for (const auto& [n, k] : std::vector<std::pair<int, int>>{{1, 32}, {37, 96}, {16, 576}, {300, 4096}})
      for (const bool sixteen : {false, true}) {
      const std::size_t bytes = static_cast<std::size_t>(n) * (k / kGgufBlockWeights) * gguf_block_bytes(type);
      std::vector<std::uint8_t> blocks(bytes);
      std::uint64_t state = 99 + static_cast<std::uint64_t>(n);
      for (std::uint8_t& b : blocks) b = static_cast<std::uint8_t>((state = state * 6364136223846793005ull + 1442695040888963407ull) >> 56);
      const GgufRepacked host = sixteen ? repack_gguf_blocks_for_mma16(type, blocks.data(), blocks.size(), n, k)
                                        : repack_gguf_blocks_for_mma(type, blocks.data(), blocks.size(), n, k);
      DeviceBuffer<std::uint8_t> device_blocks(bytes), quants(host.quants.size()), scales(host.scales.size());
      device_blocks.copy_from_host(blocks);
      KC_CUDA_CHECK(cudaMemset(quants.data(), 0xA5, quants.bytes()));  // poison: every byte must be written
      KC_CUDA_CHECK(cudaMemset(scales.data(), 0xA5, scales.bytes()));
      if (sixteen)
        repack_gguf_blocks_for_mma16_on_device(type, device_blocks.data(), n, k, quants.data(), scales.data(), nullptr);
      else
        repack_gguf_blocks_for_mma_on_device(type, device_blocks.data(), n, k, quants.data(), scales.data(), nullptr);
      KC_CUDA_CHECK(cudaDeviceSynchronize());
      EXPECT_EQ(bytes_of(quants), host.quants) << "ggml type " << static_cast<int>(type) << ", " << n << "x" << k << ", "
                                         << (sixteen ? "layout=3" : "layout=2");
      EXPECT_EQ(bytes_of(scales), host.scales) << "ggml type " << static_cast<int>(type) << ", " << n << "x" << k << ", "
                                         << (sixteen ? "layout=3" : "layout=2");
    }
}

// Rung 06 takes the chunks rung 05's warps take, in the same order, and adds the warps' sums in the
// same order: the same bits, on every type, M from 1 to 16 (both row groups), and K from one block
// to 10 stages of 1024 (the 4-stage ring goes round twice; K not a multiple of the 128-k chunk nor
// of the stage). y is poisoned with NaN before rung 06 runs, so an output it leaves unwritten
// fails. Two of the problems are also checked against the op's double reference.
TEST(GemvGgufGpu, BulkStreamWritesRungFivesBits) {
  KC_SKIP_WITHOUT_GPU();
  if (!gemv_gguf_06_runs_here()) GTEST_SKIP() << "rung 06 needs a Hopper GPU and a build with sm_90a code";
  Context& context = testing::shared_context();
  const OpSpec op = make_gemv_gguf_op();
  for (const double type : {2.0, 3.0, 8.0})
    for (const std::vector<std::int64_t>& dims : std::vector<std::vector<std::int64_t>>{{1, 1, 32}, {1, 300, 4128}, {3, 37, 992}, {8, 16, 4096},
                                                {9, 33, 9248}, {16, 129, 2080}, {1, 17, 10208}}) {
      const Problem problem = op.problem(dims, DType::bf16, {{"ggml_type", type}, {"layout", 3.0}});
      Operands operands = op.make_operands(problem, 7, context);
      const GgufGemvArgs args = gemv_gguf_args(problem, operands);
      Tensor& y = operands["y"];
      gemv_gguf_05_weights_as_a(args, context.stream());
      KC_CUDA_CHECK(cudaStreamSynchronize(context.stream()));
      const std::vector<std::uint8_t> expected = bytes_of(y);
      KC_CUDA_CHECK(cudaMemset(y.raw(), 0xFF, y.bytes()));  // bf16 NaN everywhere
      gemv_gguf_06_bulk_stream(args, context.stream());
      KC_CUDA_CHECK(cudaStreamSynchronize(context.stream()));
      EXPECT_EQ(bytes_of(y), expected) << problem.label();
    }
  for (const std::vector<std::int64_t>& dims : std::vector<std::vector<std::int64_t>>{{1, 300, 4128}, {9, 33, 9248}}) {
    const Problem problem = op.problem(dims, DType::bf16, {{"ggml_type", 3.0}, {"layout", 3.0}});
    EXPECT_TRUE(check_run(op, launch_with(&gemv_gguf_06_bulk_stream), problem, 11, context).passed())
        << problem.label();
  }
}

// Rung 07 without a prologue writes rung 06's bits: every type, M from 1 to 16, K past the ring
// (and not a multiple of the chunk), and N wide enough that the persistent CTAs take several tiles
// each (9000 and 7000 columns: 563 and 438 tiles). y poisoned with NaN first. Where x does not fit
// next to the ring the rung refuses with kc::Error and launches nothing.
// The problems the x-resident rungs' bit and reference tests run: every type, M 1-16, K past the
// ring and not a multiple of the chunk, N wide enough that the persistent CTAs take several tiles.
const std::vector<std::vector<std::int64_t>>& x_resident_shapes() {
  static const std::vector<std::vector<std::int64_t>> shapes = {
      {1, 1, 32}, {1, 300, 4128}, {3, 37, 992}, {8, 16, 4096}, {16, 129, 2080}, {1, 17, 10208},
      {1, 9000, 1056}, {2, 7000, 4128}, {9, 33, 9248}};
  return shapes;
}

// A rung that refuses `args` throws kc::Error and leaves y (poisoned first) as it was.
void expect_refusal_writes_nothing(Gemv gemv, const GgufGemvArgs& args, Tensor& y, Context& context,
                                   const std::string& label) {
  KC_CUDA_CHECK(cudaMemset(y.raw(), 0xFF, y.bytes()));
  const std::vector<std::uint8_t> before = bytes_of(y);
  EXPECT_THROW(gemv(args, context.stream()), Error) << label;
  KC_CUDA_CHECK(cudaStreamSynchronize(context.stream()));
  EXPECT_EQ(bytes_of(y), before) << label << ": a refused call wrote y";
}

// A rung of the x-resident frame (07, 11 or 12, which stage x differently) in its op form writes rung 06's
// bits on x_resident_shapes(), or, where x does not fit next to its ring, refuses and writes
// nothing; returns the number of shapes it ran.
int expect_rung06_bits(Gemv gemv, bool (*fits)(GgufBlockType, int, int)) {
  Context& context = testing::shared_context();
  const OpSpec op = make_gemv_gguf_op();
  int ran = 0;
  for (const double type : {2.0, 3.0, 8.0})
    for (const std::vector<std::int64_t>& dims : x_resident_shapes()) {
      const Problem problem = op.problem(dims, DType::bf16, {{"ggml_type", type}, {"layout", 3.0}});
      Operands operands = op.make_operands(problem, 7, context);
      // The operands are filled on the context's stream, which does not wait for the memset below.
      KC_CUDA_CHECK(cudaStreamSynchronize(context.stream()));
      const GgufGemvArgs args = gemv_gguf_args(problem, operands);
      Tensor& y = operands["y"];
      if (!fits(args.type, args.m, args.k)) {
        expect_refusal_writes_nothing(gemv, args, y, context, problem.label());
        continue;
      }
      gemv_gguf_06_bulk_stream(args, context.stream());
      KC_CUDA_CHECK(cudaStreamSynchronize(context.stream()));
      const std::vector<std::uint8_t> expected = bytes_of(y);
      KC_CUDA_CHECK(cudaMemset(y.raw(), 0xFF, y.bytes()));  // bf16 NaN everywhere
      gemv(args, context.stream());
      KC_CUDA_CHECK(cudaStreamSynchronize(context.stream()));
      EXPECT_EQ(bytes_of(y), expected) << problem.label();
      ++ran;
    }
  return ran;
}

TEST(GemvGgufGpu, XResidentWritesRungSixesBits) {
  KC_SKIP_WITHOUT_GPU();
  if (!gemv_gguf_06_runs_here()) GTEST_SKIP() << "rung 07 needs a Hopper GPU and a build with sm_90a code";
  // All but 9x33x9248 in q4_1 and q8_0 (q4_0's smaller ring leaves room for its 9 rows of x).
  EXPECT_EQ(expect_rung06_bits(&gemv_gguf_07_x_resident, &gemv_gguf_07_fits), 25) << "the shapes that fit";
}

// Rung 11 stages x slice by slice, each warp its own chunks', during the CTA's first tile: the same
// values in shared memory, the same products, so rung 06's bits too, on the same shapes (its x
// takes rung 07's shared memory).
TEST(GemvGgufGpu, XInStepWritesRungSixesBits) {
  KC_SKIP_WITHOUT_GPU();
  if (!gemv_gguf_06_runs_here()) GTEST_SKIP() << "rung 11 needs a Hopper GPU and a build with sm_90a code";
  EXPECT_EQ(expect_rung06_bits(&gemv_gguf_11_x_in_step, &gemv_gguf_11_fits), 25) << "the shapes that fit";
}

// Rung 12 stages x once a cluster of 4 CTAs, each CTA a quarter of every row into all four CTAs'
// shared memory: the same values where rung 07 keeps them, the same products, so rung 06's bits on
// the same shapes — among them K = 32 (one 16-byte piece of a row a CTA) and links of fewer tiles
// than a cluster has CTAs (N = 1 and 16: one tile, three CTAs of the cluster only staging).
TEST(GemvGgufGpu, XClusterStagedWritesRungSixesBits) {
  KC_SKIP_WITHOUT_GPU();
  if (!gemv_gguf_06_runs_here()) GTEST_SKIP() << "rung 12 needs a Hopper GPU and a build with sm_90a code";
  EXPECT_EQ(expect_rung06_bits(&gemv_gguf_12_x_cluster_staged, &gemv_gguf_12_fits), 25) << "the shapes that fit";
}

// Random GGUF blocks with sane scales: quants uniform, d in [2^-9, 2^-6) (and m of q4_1 in
// [-2^-5, 2^-5)), so that the double reference is exact in its inputs.
std::vector<std::uint8_t> random_blocks(GgufBlockType type, int n, int k, std::uint64_t seed) {
  const int bytes_per_block = gguf_block_bytes(type);
  std::vector<std::uint8_t> blocks(static_cast<std::size_t>(n) * (k / kGgufBlockWeights) * bytes_per_block);
  std::uint64_t state = seed * 2654435761ull + 1;
  const auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<std::uint32_t>(state >> 33);
  };
  for (std::size_t b = 0; b < blocks.size(); b += bytes_per_block) {
    for (int i = 0; i < bytes_per_block; ++i) blocks[b + i] = static_cast<std::uint8_t>(next());
    const __half d = __float2half(std::ldexp(1.f + (next() % 1024) / 1024.f, -9 + static_cast<int>(next() % 3)));
    std::memcpy(&blocks[b], &d, 2);
    if (type == GgufBlockType::q4_1) {
      const __half m = __float2half((static_cast<float>(next() % 2048) - 1024.f) / 32768.f);
      std::memcpy(&blocks[b + 2], &m, 2);
    }
  }
  return blocks;
}

std::vector<__nv_bfloat16> random_bf16(std::size_t count, float scale, std::uint64_t seed) {
  std::vector<__nv_bfloat16> values(count);
  std::uint64_t state = seed * 40503ull + 7;
  for (auto& v : values) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    v = __float2bfloat16(scale * (static_cast<float>(state >> 40) / 16777216.f * 2.f - 1.f));
  }
  return values;
}

std::vector<float> to_floats(const DeviceBuffer<__nv_bfloat16>& buffer) {
  const std::vector<__nv_bfloat16> host = buffer.to_host();
  std::vector<float> values(host.size());
  for (std::size_t i = 0; i < host.size(); ++i) values[i] = __bfloat162float(host[i]);
  return values;
}

// One weight of a link test: its blocks (host), prepared on the device, its y.
struct LinkWeight {
  int n;
  std::vector<std::uint8_t> blocks;
  DeviceBuffer<std::uint8_t> quants, scales;
  DeviceBuffer<__nv_bfloat16> y;
  LinkWeight(GgufBlockType type, int n_cols, int m, int k, std::uint64_t seed)
      : n(n_cols),
        blocks(random_blocks(type, n_cols, k, seed)),
        quants(quantized_gemv_prepared_quant_bytes(type, n_cols, k)),
        scales(quantized_gemv_prepared_scale_bytes(type, n_cols, k)),
        y(static_cast<std::size_t>(m) * n_cols) {
    DeviceBuffer<std::uint8_t> device_blocks(blocks.size());
    device_blocks.copy_from_host(blocks);
    quantized_gemv_prepare(type, device_blocks.data(), n_cols, k, quants.data(), scales.data(), nullptr);
    KC_CUDA_CHECK(cudaDeviceSynchronize());
  }
  GgufGemvArgs rung06_args(GgufBlockType type, int m, int k, const __nv_bfloat16* x) {
    GgufGemvArgs a;
    a.m = m;
    a.n = n;
    a.k = k;
    a.type = type;
    a.x = x;
    a.quants = quants.data();
    a.scales = scales.data();
    a.y = y.data();
    return a;
  }
};

// The check of an RMSNorm link with beta = 1 (y_old in y before), every weight's y against
// support/rmsnorm_link_reference.hpp's bound on its dequantized blocks; a reference without the
// 1 / RMS must fail that bound for most outputs.
void expect_rmsnorm_link_within_bound(GgufBlockType type, int m, int k, float eps, std::vector<LinkWeight>& weights,
                                      const std::vector<__nv_bfloat16>& rows_host,
                                      const std::vector<__nv_bfloat16>& norm_host,
                                      const std::vector<std::vector<float>>& y_old, const std::string& label) {
  link_test::RmsNormLinkCount count;
  for (std::size_t w = 0; w < weights.size(); ++w) {
    const std::vector<double> dequantized =
        decode_gguf_blocks(type, weights[w].blocks.data(), static_cast<std::size_t>(weights[w].n) * (k / 32));
    count += link_test::count_rmsnorm_link(m, weights[w].n, k, eps, dequantized, to_floats(weights[w].y), y_old[w],
                                         rows_host, norm_host);
  }
  EXPECT_EQ(count.failures, 0) << label << ": outputs outside the bound, of " << count.outputs;
  EXPECT_GT(count.control_failures, count.outputs / 2) << label << ": a reference without 1 / RMS went unnoticed";
}

// y_old for an RMSNorm link with beta = 1: random values written to each weight's y, as floats.
std::vector<std::vector<float>> fill_old_y(std::vector<LinkWeight>& weights) {
  std::vector<std::vector<float>> y_old(weights.size());
  for (std::size_t w = 0; w < weights.size(); ++w) {
    const std::vector<__nv_bfloat16> old = random_bf16(weights[w].y.size(), 2.f, 20 + w);
    weights[w].y.copy_from_host(old);
    for (const auto& v : old) y_old[w].push_back(__bfloat162float(v));
  }
  return y_old;
}

// Rung 07 as a link of the decode chain, three weights (q, k and v-like widths, one of them not a
// multiple of the 16-column tile) sharing x, on every type at M = 1 and 3, K = 1056 (a partial
// chunk):
//   - no prologue: each weight's y is rung 06's, bit for bit;
//   - SwiGLU: the bits of stage 2's swiglu of [gate | up] followed by rung 06;
//   - RMSNorm (x at 3x the scale of the norm's weight, so that a 1 / RMS left out is far off) with
//     beta = 1 (y holds random values first): within the bound below of the double reference
//     sum_k w x_k g_k / rms + y_old, where the inputs are rounded once to bf16 (x . g) and the
//     output once: |error| <= 2^-8 (sum_k |w x_k g_k| / rms + |y_old|) + 1e-6;
//   - negative control: the same reference without the 1 / RMS must fail that bound;
//   - the public entry, quantized_gemv_link, runs the rung quantized_gemv_link_kernel names within
//     the same bound, and refuses what no rung takes.
using LinkFn = void (*)(const GgufGemvLinkArgs&, cudaStream_t);

// The checks above on one x-resident link rung; with `public_entry`, the public entry's too.
void check_x_resident_link(LinkFn run_link, bool public_entry) {
  constexpr int k = 1056;
  const float eps = 1e-5f;
  for (const GgufBlockType type : {GgufBlockType::q4_0, GgufBlockType::q4_1, GgufBlockType::q8_0})
    for (const int m : {1, 3}) {
      const std::string label = fmt::format("ggml type {}, M = {}", static_cast<int>(type), m);
      std::vector<LinkWeight> weights;
      weights.emplace_back(type, 80, m, k, 1);
      weights.emplace_back(type, 33, m, k, 2);
      weights.emplace_back(type, 48, m, k, 3);
      const std::vector<__nv_bfloat16> x_host = random_bf16(static_cast<std::size_t>(m) * 2 * k, 3.f, 11);
      const std::vector<__nv_bfloat16> norm_host = random_bf16(k, 1.f, 12);
      DeviceBuffer<__nv_bfloat16> x(x_host.size()), norm(norm_host.size()), act(static_cast<std::size_t>(m) * k);
      x.copy_from_host(x_host);
      norm.copy_from_host(norm_host);
      GgufGemvLinkArgs link;
      link.m = m;
      link.k = k;
      link.type = type;
      link.x = x.data();
      link.weights = 3;
      const auto point_link_at_weights = [&] {
        for (int w = 0; w < 3; ++w)
          link.weight[w] = {weights[w].quants.data(), weights[w].scales.data(), weights[w].y.data(), weights[w].n};
      };
      point_link_at_weights();
      const auto poison = [&] {
        for (LinkWeight& w : weights) KC_CUDA_CHECK(cudaMemset(w.y.data(), 0xFF, w.y.bytes()));
      };

      // No prologue, beta = 0 (x: the first K of each 2K row is not what rung 06 reads; use act).
      stage2::SwigluArgs<__nv_bfloat16> swiglu{m, k, x.data(), act.data()};
      stage2::swiglu(swiglu, nullptr);
      std::vector<std::vector<std::uint8_t>> rung06(3);
      for (int w = 0; w < 3; ++w) {
        gemv_gguf_06_bulk_stream(weights[w].rung06_args(type, m, k, act.data()), nullptr);
        KC_CUDA_CHECK(cudaDeviceSynchronize());
        rung06[w] = bytes_of(weights[w].y);
      }
      const auto expect_rung06_bits = [&](const char* how) {
        KC_CUDA_CHECK(cudaDeviceSynchronize());
        for (int w = 0; w < 3; ++w)
          EXPECT_EQ(bytes_of(weights[w].y), rung06[w]) << label << ", weight " << w << ", " << how;
      };
      poison();
      link.x = act.data();
      run_link(link, nullptr);
      expect_rung06_bits("no prologue");
      // One CTA an SM (spread_over_sms; the link's 11 tiles are fewer than the SMs): where its CTAs
      // run changes no bit.
      poison();
      link.spread_over_sms = true;
      run_link(link, nullptr);
      expect_rung06_bits("no prologue, one CTA an SM");
      link.spread_over_sms = false;

      // SwiGLU inside: the same bits from [gate | up].
      poison();
      link.x = x.data();
      link.prologue = GgufGemvPrologue::swiglu;
      run_link(link, nullptr);
      expect_rung06_bits("SwiGLU inside");

      // RMSNorm inside, beta = 1, x the rows' first K of a 2K stride: use a packed copy.
      std::vector<__nv_bfloat16> rows_host(static_cast<std::size_t>(m) * k);
      for (int r = 0; r < m; ++r)
        for (int i = 0; i < k; ++i)
          rows_host[static_cast<std::size_t>(r) * k + i] = x_host[static_cast<std::size_t>(r) * 2 * k + i];
      DeviceBuffer<__nv_bfloat16> rows(rows_host.size());
      rows.copy_from_host(rows_host);
      const std::vector<std::vector<float>> y_old = fill_old_y(weights);
      link.x = rows.data();
      link.prologue = GgufGemvPrologue::rmsnorm;
      link.norm_weight = norm.data();
      link.norm_eps = eps;
      link.beta = 1.f;
      run_link(link, nullptr);
      KC_CUDA_CHECK(cudaDeviceSynchronize());
      expect_rmsnorm_link_within_bound(type, m, k, eps, weights, rows_host, norm_host, y_old, label);

      if (!public_entry) continue;
      // The public entry: the rung quantized_gemv_link_kernel names, the same bound.
      const std::vector<std::vector<float>> y_old_again = fill_old_y(weights);
      EXPECT_EQ(quantized_gemv_link(link, nullptr), quantized_gemv_link_kernel(link)) << label;
      KC_CUDA_CHECK(cudaDeviceSynchronize());
      expect_rmsnorm_link_within_bound(type, m, k, eps, weights, rows_host, norm_host, y_old_again,
                                       label + ", quantized_gemv_link");

      // Refusals: a missing norm weight; rows that do not fit next to the ring.
      link.norm_weight = nullptr;
      EXPECT_THROW(quantized_gemv_link(link, nullptr), Error) << label;
      link.norm_weight = norm.data();
      link.k = 32 * 4096;
      EXPECT_FALSE(quantized_gemv_link_runs(type, m, link.k));
      EXPECT_THROW(quantized_gemv_link(link, nullptr), Error) << label;
    }
}

TEST(GemvGgufGpu, XResidentLinkMatchesTheUnfusedKernels) {
  KC_SKIP_WITHOUT_GPU();
  if (!gemv_gguf_06_runs_here()) GTEST_SKIP() << "rung 07 needs a Hopper GPU and a build with sm_90a code";
  check_x_resident_link(&gemv_gguf_07_link, true);
}

// Rung 11 as a link: the same bits without a prologue and with SwiGLU, the RMSNorm prologue (its
// squares summed a slice at a time) within the same bound, and the control without 1 / RMS failing it.
TEST(GemvGgufGpu, XInStepLinkMatchesTheUnfusedKernels) {
  KC_SKIP_WITHOUT_GPU();
  if (!gemv_gguf_06_runs_here()) GTEST_SKIP() << "rung 11 needs a Hopper GPU and a build with sm_90a code";
  check_x_resident_link(&gemv_gguf_11_link, false);
}

// Rung 12 as a link: the same bits without a prologue and with SwiGLU, the RMSNorm prologue (each
// CTA's share of the squares added in every CTA of the cluster) within the same bound, and the
// control without 1 / RMS failing it.
TEST(GemvGgufGpu, XClusterStagedLinkMatchesTheUnfusedKernels) {
  KC_SKIP_WITHOUT_GPU();
  if (!gemv_gguf_06_runs_here()) GTEST_SKIP() << "rung 12 needs a Hopper GPU and a build with sm_90a code";
  check_x_resident_link(&gemv_gguf_12_link, false);
}

// Rung 08 against the op's double reference (kc::check_run: fresh inputs, y poisoned, guard bytes)
// on the shapes rung 07's bit test runs: every type, M 1-16, K past the ring and not a multiple of
// the chunk, N wide enough that the CTAs take several tiles. Where x and its sums do not fit the
// rung refuses with kc::Error and writes nothing.
TEST(GemvGgufGpu, XAsF16MatchesTheReference) {
  KC_SKIP_WITHOUT_GPU();
  if (!gemv_gguf_06_runs_here()) GTEST_SKIP() << "rung 08 needs a Hopper GPU and a build with sm_90a code";
  Context& context = testing::shared_context();
  const OpSpec op = make_gemv_gguf_op();
  int ran = 0;
  for (const double type : {2.0, 3.0, 8.0})
    for (const std::vector<std::int64_t>& dims : x_resident_shapes()) {
      const Problem problem = op.problem(dims, DType::bf16, {{"ggml_type", type}, {"layout", 3.0}});
      if (!gemv_gguf_08_fits(gguf_block_type(problem), static_cast<int>(dims[0]), static_cast<int>(dims[2]))) {
        Operands operands = op.make_operands(problem, 7, context);
        KC_CUDA_CHECK(cudaStreamSynchronize(context.stream()));
        expect_refusal_writes_nothing(&gemv_gguf_08_x_f16, gemv_gguf_args(problem, operands), operands["y"], context,
                                      problem.label());
        continue;
      }
      EXPECT_TRUE(check_run(op, launch_with(&gemv_gguf_08_x_f16), problem, 7, context).passed()) << problem.label();
      ++ran;
    }
  EXPECT_EQ(ran, 24) << "the shapes that fit (all but 9x33x9248)";
}

// Rung 08 scales each row of x by its own power of two into fp16's range and undoes it in the
// store: three rows of x at 2^40 (past fp16's 65504), 1 and 2^-40 (below fp16's normal range)
// times values of up to 3, one weight of 300 columns (K = 1056, a partial chunk), every type.
// Each output within 2^-8 sum_k |w x_k| of the double reference on the same bf16 inputs; the
// control, a reference that leaves row 0's 2^40 out, must fail that bound. Then the SwiGLU
// prologue writes the bits of rung 08 on stage 2's swiglu output.
TEST(GemvGgufGpu, XAsF16ScalesEachRow) {
  KC_SKIP_WITHOUT_GPU();
  if (!gemv_gguf_06_runs_here()) GTEST_SKIP() << "rung 08 needs a Hopper GPU and a build with sm_90a code";
  constexpr int m = 3, k = 1056;
  const int row_exponent[m] = {40, 0, -40};
  for (const GgufBlockType type : {GgufBlockType::q4_0, GgufBlockType::q4_1, GgufBlockType::q8_0}) {
    const std::string label = fmt::format("ggml type {}", static_cast<int>(type));
    LinkWeight weight(type, 300, m, k, 5);
    std::vector<__nv_bfloat16> x_host = random_bf16(static_cast<std::size_t>(m) * k, 3.f, 13);
    for (int r = 0; r < m; ++r)
      for (int i = 0; i < k; ++i) {
        __nv_bfloat16& v = x_host[static_cast<std::size_t>(r) * k + i];
        v = __float2bfloat16(std::ldexp(__bfloat162float(v), row_exponent[r]));  // exact: a power of two
      }
    DeviceBuffer<__nv_bfloat16> x(x_host.size());
    x.copy_from_host(x_host);
    GgufGemvLinkArgs link;
    link.m = m;
    link.k = k;
    link.type = type;
    link.x = x.data();
    link.weights = 1;
    link.weight[0] = {weight.quants.data(), weight.scales.data(), weight.y.data(), weight.n};
    KC_CUDA_CHECK(cudaMemset(weight.y.data(), 0xFF, weight.y.bytes()));
    gemv_gguf_08_link(link, nullptr);
    KC_CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<float> got = to_floats(weight.y);
    const std::vector<double> dequantized =
        decode_gguf_blocks(type, weight.blocks.data(), static_cast<std::size_t>(weight.n) * (k / 32));
    int failures = 0, control_failures = 0;
    for (int r = 0; r < m; ++r)
      for (int n = 0; n < weight.n; ++n) {
        double sum = 0.0, magnitude = 0.0;
        for (int i = 0; i < k; ++i) {
          const double term = dequantized[static_cast<std::size_t>(n) * k + i] *
                              __bfloat162float(x_host[static_cast<std::size_t>(r) * k + i]);
          sum += term;
          magnitude += std::fabs(term);
        }
        const double value = got[static_cast<std::size_t>(r) * weight.n + n];
        const double bound = std::ldexp(magnitude, -8);
        failures += !(std::fabs(value - sum) <= bound);
        if (r == 0) control_failures += !(std::fabs(value - std::ldexp(sum, -40)) <= bound);
      }
    EXPECT_EQ(failures, 0) << label << ": outputs outside the bound, of " << m * weight.n;
    EXPECT_GT(control_failures, weight.n / 2) << label << ": a row's scale left in went unnoticed";

    // SwiGLU inside: the bits of rung 08 on stage 2's swiglu of [gate | up].
    const std::vector<__nv_bfloat16> gate_up = random_bf16(static_cast<std::size_t>(m) * 2 * k, 3.f, 17);
    DeviceBuffer<__nv_bfloat16> both(gate_up.size()), act(static_cast<std::size_t>(m) * k);
    both.copy_from_host(gate_up);
    stage2::SwigluArgs<__nv_bfloat16> swiglu{m, k, both.data(), act.data()};
    stage2::swiglu(swiglu, nullptr);
    link.x = act.data();
    gemv_gguf_08_link(link, nullptr);
    KC_CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<std::uint8_t> expected = bytes_of(weight.y);
    KC_CUDA_CHECK(cudaMemset(weight.y.data(), 0xFF, weight.y.bytes()));
    link.x = both.data();
    link.prologue = GgufGemvPrologue::swiglu;
    gemv_gguf_08_link(link, nullptr);
    KC_CUDA_CHECK(cudaDeviceSynchronize());
    EXPECT_EQ(bytes_of(weight.y), expected) << label << ", SwiGLU inside";
  }
}

// An RMSNorm link with beta = 1 (y_old in y first) of weights `widths` columns wide sharing x (M
// rows of K = 1056, x at 3x the scale of the norm's weight) on `type`: `run(link)` launches it;
// each weight's y within the bound of expect_rmsnorm_link_within_bound, whose control without the
// 1 / RMS must fail.
template <class Run>
void expect_rmsnorm_link(GgufBlockType type, int m, const std::vector<int>& widths, const std::string& label,
                         Run&& run) {
  constexpr int k = 1056;
  const float eps = 1e-5f;
  std::vector<LinkWeight> weights;
  for (std::size_t w = 0; w < widths.size(); ++w) weights.emplace_back(type, widths[w], m, k, 1 + w);
  const std::vector<__nv_bfloat16> rows_host = random_bf16(static_cast<std::size_t>(m) * k, 3.f, 11);
  const std::vector<__nv_bfloat16> norm_host = random_bf16(k, 1.f, 12);
  DeviceBuffer<__nv_bfloat16> rows(rows_host.size()), norm(norm_host.size());
  rows.copy_from_host(rows_host);
  norm.copy_from_host(norm_host);
  const std::vector<std::vector<float>> y_old = fill_old_y(weights);
  GgufGemvLinkArgs link;
  link.m = m;
  link.k = k;
  link.type = type;
  link.x = rows.data();
  link.weights = static_cast<int>(weights.size());
  for (int w = 0; w < link.weights; ++w)
    link.weight[w] = {weights[w].quants.data(), weights[w].scales.data(), weights[w].y.data(), weights[w].n};
  link.prologue = GgufGemvPrologue::rmsnorm;
  link.norm_weight = norm.data();
  link.norm_eps = eps;
  link.beta = 1.f;
  run(link);
  KC_CUDA_CHECK(cudaDeviceSynchronize());
  expect_rmsnorm_link_within_bound(type, m, k, eps, weights, rows_host, norm_host, y_old, label);
}

// Rung 08's RMSNorm prologue, three weights sharing x (as rung 07's link test, every type, M = 1
// and 3, K = 1056), and a missing norm weight refused.
TEST(GemvGgufGpu, XAsF16RmsNormLinkMatchesTheReference) {
  KC_SKIP_WITHOUT_GPU();
  if (!gemv_gguf_06_runs_here()) GTEST_SKIP() << "rung 08 needs a Hopper GPU and a build with sm_90a code";
  for (const GgufBlockType type : {GgufBlockType::q4_0, GgufBlockType::q4_1, GgufBlockType::q8_0})
    for (const int m : {1, 3}) {
      const std::string label = fmt::format("rung 08, ggml type {}, M = {}", static_cast<int>(type), m);
      expect_rmsnorm_link(type, m, {80, 33, 48}, label, [&](GgufGemvLinkArgs& link) {
        const __nv_bfloat16* norm_weight = link.norm_weight;
        link.norm_weight = nullptr;
        EXPECT_THROW(gemv_gguf_08_link(link, nullptr), Error) << label;
        link.norm_weight = norm_weight;
        gemv_gguf_08_link(link, nullptr);
      });
    }
}

// The public link's choice of rung (quantized_gemv_link_kernel): rung 08 for one row of q4_0 or
// q4_1 in a link with more tiles of 16 columns than rung 08 runs CTAs at once (8 tiles an SM here:
// more CTAs of 288 threads than fit on one), rung 07 for two rows of it, for one row of a link of
// few tiles and for q8_0; quantized_gemv_link runs the rung named, within the RMSNorm link's bound.
TEST(GemvGgufGpu, LinkTakesRungEightWhereItsCtasRunSeveralTiles) {
  KC_SKIP_WITHOUT_GPU();
  if (!gemv_gguf_06_runs_here()) GTEST_SKIP() << "the link needs a Hopper GPU and a build with sm_90a code";
  const int wide = 8 * current_device_sm_count() * 16 / 2;  // columns of each of two weights
  for (const GgufBlockType type : {GgufBlockType::q4_0, GgufBlockType::q4_1, GgufBlockType::q8_0})
    for (const int m : {1, 2})
      for (const bool many_tiles : {true, false}) {
        const std::string label = fmt::format("ggml type {}, M = {}, {} tiles", static_cast<int>(type), m,
                                              many_tiles ? "many" : "few");
        const bool rung08 = m == 1 && many_tiles && type != GgufBlockType::q8_0;
        const QuantizedGemvKernel expected =
            rung08 ? QuantizedGemvKernel::gemv_gguf_08_x_f16 : QuantizedGemvKernel::gemv_gguf_07_x_resident;
        const std::vector<int> widths = many_tiles ? std::vector<int>{wide, wide + 5} : std::vector<int>{80, 33};
        expect_rmsnorm_link(type, m, widths, label, [&](GgufGemvLinkArgs& link) {
          EXPECT_EQ(quantized_gemv_link_kernel(link), expected) << label;
          EXPECT_EQ(quantized_gemv_link(link, nullptr), expected) << label;
        });
      }
}

}  // namespace
}  // namespace kc::stage3
