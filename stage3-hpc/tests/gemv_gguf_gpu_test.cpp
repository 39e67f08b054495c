// The GGUF GEMV's negative controls: rungs 01 to 05 with each byte's nibbles read in the wrong
// order must fail the op's check on q4_0 and q4_1 (q8_0 has no nibbles), each on its layout; and
// the repacked operands of a layout=1 problem are repack_gguf_blocks() of its blocks. The rungs
// themselves are checked by the conformance tests on every conformance problem. Skips without a
// GPU.
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
  for (const Rung& rung : {Rung{0.0, &gemv_gguf_01_warp_per_column, &gemv_gguf_01_swapped_nibbles},
                           Rung{1.0, &gemv_gguf_02_repacked, &gemv_gguf_02_swapped_nibbles},
                           Rung{2.0, &gemv_gguf_03_mma, &gemv_gguf_03_swapped_nibbles},
                           Rung{2.0, &gemv_gguf_04_cp_async, &gemv_gguf_04_swapped_nibbles},
                           Rung{3.0, &gemv_gguf_05_weights_as_a, &gemv_gguf_05_swapped_nibbles}})
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

}  // namespace
}  // namespace kc::stage3
