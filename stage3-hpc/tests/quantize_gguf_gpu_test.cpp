// The GGUF quantize op on the GPU: the negative control (rung 01 with the q4 nibble order swapped)
// fails the op's exact check where rung 01 passes; every rung, the public entry and the device
// reference write the host reference's bytes, bit for bit, on blocks full of the values ggml's
// comparisons and conversions treat specially (zeros of both signs, NaN anywhere, Inf, subnormals,
// ties of magnitude across lanes, roundf's halves, a huge value hidden from q8_0's max by a NaN
// after it — the cases rung 02's fast path must send down its exact path); and the GEMV reads the
// blocks as they are. The rung on random inputs is checked by the conformance tests on every conformance
// problem. Skips without a GPU.
//   ctest --test-dir build/ci -R QuantizeGgufGpu
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "kc/common/buffer.hpp"
#include "kc/common/check.hpp"
#include "kc/common/compare.hpp"
#include "kc/common/error.hpp"
#include "kc/stage3/gemv_gguf.hpp"
#include "kc/stage3/quantized_gemv.hpp"
#include "kc/stage3/quantize_gguf.hpp"
#include "support/gpu_test.hpp"

namespace kc::stage3 {
namespace {

constexpr GgufBlockType kTypes[] = {GgufBlockType::q4_0, GgufBlockType::q4_1, GgufBlockType::q8_0};

using Quantize = void (*)(const QuantizeGgufArgs&, cudaStream_t);

RunFn launch_with(Quantize quantize) {
  return [quantize](const Problem& p, Operands& o, Context& c) { quantize(quantize_gguf_args(p, o), c.stream()); };
}

TEST(QuantizeGgufGpu, SwappedNibblesFailWhereTheRungPasses) {
  KC_SKIP_WITHOUT_GPU();
  Context& context = testing::shared_context();
  const OpSpec op = make_quantize_gguf_op();
  for (const std::vector<std::int64_t>& dims : std::vector<std::vector<std::int64_t>>{{17, 4128}, {4096, 4096}})
    for (const double type : {2.0, 3.0, 8.0}) {
      const Problem problem = op.problem(dims, DType::bf16, {{"ggml_type", type}});
      const CheckOutcome rung = check_run(op, launch_with(&quantize_gguf_01_quad_per_block), problem, 5, context);
      EXPECT_TRUE(rung.passed()) << problem.label() << ": " << rung.detail;
      const CheckOutcome swapped = check_run(op, launch_with(&quantize_gguf_01_swapped_nibbles), problem, 5, context);
      if (type == 8.0)  // no nibbles: the same kernel, and it must pass
        EXPECT_TRUE(swapped.passed()) << problem.label() << ": " << swapped.detail;
      else
        EXPECT_FALSE(swapped.passed()) << problem.label() << ": the swapped nibble order went unnoticed";
    }
}

// Blocks that exercise ggml's order-dependent and non-finite rules, each pattern at random places.
constexpr int kPatterns = 14;
std::vector<__nv_bfloat16> awkward_blocks(std::size_t blocks, std::uint64_t seed) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> value(-1.f, 1.f);
  std::uniform_int_distribution<int> place(0, 31), exponent(-20, 20);
  std::vector<__nv_bfloat16> out(blocks * 32);
  for (std::size_t b = 0; b < blocks; ++b) {
    float x[32];
    const float scale = std::ldexp(1.f, exponent(rng));
    for (float& v : x) v = value(rng) * scale;
    switch (b % kPatterns) {
      case 0:  // zeros, the first of random sign, the rest mixed
        for (float& v : x) v = (rng() & 1) ? 0.f : -0.f;
        break;
      case 1:  // one NaN anywhere (q8_0 restarts its max after it)
        x[place(rng)] = nan;
        break;
      case 2:  // several NaN, one of them maybe last
        for (int i = 0; i < 3; ++i) x[place(rng)] = nan;
        if (rng() & 1) x[31] = nan;
        break;
      case 3:  // NaN only
        for (float& v : x) v = nan;
        break;
      case 4:  // an infinity of either sign, sometimes with a NaN
        x[place(rng)] = (rng() & 1) ? inf : -inf;
        if (rng() & 1) x[place(rng)] = nan;
        break;
      case 5:  // bf16 subnormals (k x 2^-133), and the range just above them
        for (float& v : x) v = std::ldexp(static_cast<float>(static_cast<int>(rng() % 255) - 127), -133 + (b % 24 == 5 ? 0 : 8));
        break;
      case 6: {  // equal magnitudes of opposite sign in different lanes: the first decides q4_0's sign
        const float big = 2.f * scale;
        const int first = place(rng), second = place(rng);
        x[first] = (rng() & 1) ? big : -big;
        if (second != first) x[second] = -x[first];
        break;
      }
      case 7:  // q8_0 halves: amax 127, values k / 2
        for (float& v : x) v = static_cast<float>(static_cast<int>(rng() % 255) - 127) / 2.f;
        x[place(rng)] = 127.f;
        break;
      case 8:  // one large value
        x[place(rng)] = 1000.f * scale;
        break;
      case 9:  // q4_1: repeated min and max, zeros of both signs among them
        for (float& v : x) {
          const unsigned pick = rng() % 4;
          v = pick == 0 ? 0.f : pick == 1 ? -0.f : pick == 2 ? scale : -scale;
        }
        break;
      case 10:  // all of one sign (q4_1's min away from zero)
        for (float& v : x) v = std::fabs(v) + scale;
        break;
      case 12: {  // q8_0: a value far above the max ggml keeps, before a NaN that restarts the max:
                  // x / d is then past int32 (C's conversion gives 0x80000000) or within it
        const int nan_at = 1 + place(rng) % 31;
        x[place(rng) % nan_at] = (rng() & 1 ? 1e30f : 3e5f) * ((rng() & 1) ? 1.f : -1.f);
        x[nan_at] = nan;
        break;
      }
      case 13:  // q4_1: non-negative values with zeros of both signs (min is a zero; its sign is the first's)
        for (float& v : x) v = std::fabs(v);
        for (int i = 0; i < 3; ++i) x[place(rng)] = (rng() & 1) ? 0.f : -0.f;
        break;
      default:  // plain random
        break;
    }
    for (int j = 0; j < 32; ++j) out[b * 32 + static_cast<std::size_t>(j)] = __float2bfloat16(x[j]);
  }
  return out;
}

TEST(QuantizeGgufGpu, RungsEntryAndDeviceReferenceWriteTheHostReferencesBytes) {
  KC_SKIP_WITHOUT_GPU();
  const std::vector<std::pair<const char*, Quantize>> writers = {
      {"rung 01", &quantize_gguf_01_quad_per_block},
      {"rung 02", &quantize_gguf_02_thread_per_block},
      {"the public entry", [](const QuantizeGgufArgs& args, cudaStream_t stream) { quantize_gguf(args, stream); }}};
  for (const GgufBlockType type : kTypes)
    for (const auto& [rows, k] : std::vector<std::pair<long long, int>>{{3, 96}, {125, 1024}, {1, 4128}}) {
      const std::size_t count = static_cast<std::size_t>(rows) * static_cast<std::size_t>(k);
      const std::vector<__nv_bfloat16> x = awkward_blocks(count / 32, 11 + static_cast<std::uint64_t>(k));
      const std::vector<std::uint8_t> expected = quantize_gguf_on_host(type, x.data(), x.size());
      DeviceBuffer<__nv_bfloat16> device_x(count);
      device_x.copy_from_host(x);
      const int size = gguf_block_bytes(type);
      const auto where = [&](std::size_t i) {
        return fmt::format("ggml type {}, {}x{}: block {} (pattern {}), byte {}", static_cast<int>(type), rows, k,
                           i / static_cast<std::size_t>(size), i / static_cast<std::size_t>(size) % kPatterns,
                           i % static_cast<std::size_t>(size));
      };

      DeviceBuffer<double> reference(expected.size());
      quantize_gguf_reference_on_device(type, device_x.data(), rows, k, reference.data(), nullptr);
      std::vector<double> device_reference(expected.size());
      KC_CUDA_CHECK(cudaMemcpy(device_reference.data(), reference.data(), reference.bytes(), cudaMemcpyDeviceToHost));
      int reported = 0;
      for (std::size_t i = 0; i < expected.size(); ++i)
        if (device_reference[i] != static_cast<double>(static_cast<std::int8_t>(expected[i])) && reported++ < 10)
          ADD_FAILURE() << where(i) << ": device reference " << device_reference[i] << ", host reference "
                        << int{expected[i]};
      EXPECT_EQ(reported, 0);

      for (const auto& [name, quantize] : writers) {
        DeviceBuffer<std::uint8_t> blocks(expected.size());
        KC_CUDA_CHECK(cudaMemset(blocks.data(), 0xA5, blocks.bytes()));  // every byte must be written
        quantize(QuantizeGgufArgs{rows, k, type, device_x.data(), blocks.data()}, nullptr);
        KC_CUDA_CHECK(cudaDeviceSynchronize());
        std::vector<std::uint8_t> got(expected.size());
        KC_CUDA_CHECK(cudaMemcpy(got.data(), blocks.data(), got.size(), cudaMemcpyDeviceToHost));
        reported = 0;
        for (std::size_t i = 0; i < expected.size(); ++i)
          if (got[i] != expected[i] && reported++ < 10)
            ADD_FAILURE() << name << ", " << where(i) << ": " << int{got[i]} << ", host reference "
                          << int{expected[i]};
        EXPECT_EQ(reported, 0) << name;
      }
    }
}

// The blocks the rung writes are a weight the GEMV reads unchanged: y = x . w^T on them matches
// the product with the blocks decoded on the host.
TEST(QuantizeGgufGpu, GemvReadsTheBlocks) {
  KC_SKIP_WITHOUT_GPU();
  constexpr int kM = 3, kN = 37, kK = 256;
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<float> value(-1.f, 1.f);
  std::vector<__nv_bfloat16> w(kN * kK), x(kM * kK);
  for (__nv_bfloat16& v : w) v = __float2bfloat16(value(rng));
  for (__nv_bfloat16& v : x) v = __float2bfloat16(value(rng));
  for (const GgufBlockType type : kTypes) {
    const std::size_t block_bytes = static_cast<std::size_t>(kN) * (kK / 32) * gguf_block_bytes(type);
    DeviceBuffer<__nv_bfloat16> device_w(w.size()), device_x(x.size()), y(kM * kN);
    device_w.copy_from_host(w);
    device_x.copy_from_host(x);
    DeviceBuffer<std::uint8_t> blocks(block_bytes);
    quantize_gguf(QuantizeGgufArgs{kN, kK, type, device_w.data(), blocks.data()}, nullptr);
    // m, n, k, type, x, w as stored (no prepared quants and scales), y.
    quantized_gemv(QuantizedGemvArgs{kM, kN, kK, type, device_x.data(), blocks.data(), nullptr, nullptr, y.data()},
                   nullptr);
    KC_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<std::uint8_t> host_blocks(block_bytes);
    KC_CUDA_CHECK(cudaMemcpy(host_blocks.data(), blocks.data(), block_bytes, cudaMemcpyDeviceToHost));
    const std::vector<double> weights = decode_gguf_blocks(type, host_blocks.data(), block_bytes / gguf_block_bytes(type));
    std::vector<double> expected(kM * kN), got(kM * kN);
    for (int m = 0; m < kM; ++m)
      for (int n = 0; n < kN; ++n) {
        double sum = 0.0;
        for (int k = 0; k < kK; ++k)
          sum += static_cast<double>(__bfloat162float(x[m * kK + k])) * weights[static_cast<std::size_t>(n) * kK + k];
        expected[static_cast<std::size_t>(m * kN + n)] = sum;
      }
    std::vector<__nv_bfloat16> y_host(kM * kN);
    KC_CUDA_CHECK(cudaMemcpy(y_host.data(), y.data(), y.bytes(), cudaMemcpyDeviceToHost));
    for (std::size_t i = 0; i < got.size(); ++i) got[i] = static_cast<double>(__bfloat162float(y_host[i]));
    Accuracy accuracy;
    accuracy.output = DType::bf16;
    accuracy.terms = kK;
    const CompareResult result = compare(got.data(), expected.data(), got.size(), accuracy);
    EXPECT_TRUE(result.passed) << "ggml type " << static_cast<int>(type) << ": " << result.summary();
  }
}

}  // namespace
}  // namespace kc::stage3
