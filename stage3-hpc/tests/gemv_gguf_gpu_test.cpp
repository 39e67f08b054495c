// The GGUF GEMV's negative controls: rungs 01 to 06 with each byte's nibbles read in the wrong
// order must fail the op's check on q4_0 and q4_1 (q8_0 has no nibbles), each on its layout; the
// repacked operands of a layout=1 problem are repack_gguf_blocks() of its blocks; and rung 06
// writes rung 05's bits on problems long enough to go round its ring. The rungs themselves are
// checked by the conformance tests on every conformance problem. Skips without a GPU.
//   ctest --test-dir build/ci -R GemvGgufGpu
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "kc/common/buffer.hpp"
#include "kc/common/check.hpp"
#include "kc/common/error.hpp"
#include "kc/stage3/gemv_gguf.hpp"
#include "support/gpu_test.hpp"

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
  // Rung 06 needs a Hopper GPU (BulkStreamWritesRungFivesBits says so where it is missing).
  if (gemv_gguf_06_runs_here()) rungs.push_back(Rung{3.0, &gemv_gguf_06_bulk_stream, &gemv_gguf_06_swapped_nibbles});
  for (const Rung& rung : rungs)
    for (const double type : {2.0, 3.0}) {
      const Problem problem = op.problem({4, 129, 256}, DType::bf16, {{"ggml_type", type}, {"layout", rung.layout}});
      EXPECT_TRUE(check_run(op, launch_with(rung.right), problem, 5, context).passed()) << problem.label();
      const CheckOutcome wrong = check_run(op, launch_with(rung.swapped), problem, 5, context);
      EXPECT_FALSE(wrong.passed()) << problem.label() << ": the swapped nibble order went unnoticed";
    }
}

std::vector<std::uint8_t> bytes_of(const Tensor& tensor) {
  std::vector<std::uint8_t> bytes(tensor.bytes());
  KC_CUDA_CHECK(cudaMemcpy(bytes.data(), tensor.raw(), bytes.size(), cudaMemcpyDeviceToHost));
  return bytes;
}

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
      std::vector<std::uint8_t> got_quants(host.quants.size()), got_scales(host.scales.size());
      KC_CUDA_CHECK(cudaMemcpy(got_quants.data(), quants.data(), got_quants.size(), cudaMemcpyDeviceToHost));
      KC_CUDA_CHECK(cudaMemcpy(got_scales.data(), scales.data(), got_scales.size(), cudaMemcpyDeviceToHost));
      EXPECT_EQ(got_quants, host.quants) << "ggml type " << static_cast<int>(type) << ", " << n << "x" << k << ", "
                                         << (sixteen ? "layout=3" : "layout=2");
      EXPECT_EQ(got_scales, host.scales) << "ggml type " << static_cast<int>(type) << ", " << n << "x" << k << ", "
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

}  // namespace
}  // namespace kc::stage3
