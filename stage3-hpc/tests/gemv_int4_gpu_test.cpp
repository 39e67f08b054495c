// The int4 GEMV on the GPU beyond the conformance suite: the prepare on the GPU writes the host
// prepare's bytes (padding included); bf16 weights quantized by the GPU entry (the host
// quantizer's bytes), prepared on the GPU and multiplied by the entry kc::stage3::int4_gemv give x
// times the dequantized weight; rung 02 writes rung 01's bits; each of rung 01's flawed instances fails the op's check
// on a problem where its flaw shows while rung 01 passes it.
// Skips without a GPU.
//   ctest --test-dir build/ci -R GemvInt4Gpu
#include <gtest/gtest.h>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <random>
#include <vector>

#include "kc/common/buffer.hpp"
#include "kc/common/check.hpp"
#include "kc/common/compare.hpp"
#include "kc/common/error.hpp"
#include "kc/common/fill.hpp"
#include "kc/common/gemm.hpp"
#include "kc/stage3/gemv_gguf_args.hpp"
#include "kc/stage3/gemv_int4.hpp"
#include "kc/stage3/quantize_int4.hpp"
#include "kc/stage3/quantized_gemv.hpp"
#include "support/gpu_test.hpp"

namespace kc::stage3 {
namespace {

// A device copy of `values` (DeviceBuffer::copy_from_host, synchronous).
template <typename T>
DeviceBuffer<T> upload(const std::vector<T>& values) {
  DeviceBuffer<T> buffer(values.size());
  buffer.copy_from_host(values);
  return buffer;
}

struct DeviceWeight {
  DeviceBuffer<std::uint8_t> qweight, zeros;
  DeviceBuffer<std::uint16_t> scales;
  Int4GroupWeights view(const Int4GroupHost& host) const {
    Int4GroupWeights w = host.view();
    w.qweight = qweight.data();
    w.scales = scales.data();
    w.zeros = zeros.data();
    return w;
  }
};

DeviceWeight upload_weight(const Int4GroupHost& w) {
  return DeviceWeight{upload(w.qweight), upload(w.zeros), upload(w.scales)};
}

Int4GroupHost quantized_normal_weight(int n, int k, int group_size, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.f, 0.02f);
  std::vector<float> w(static_cast<std::size_t>(n) * static_cast<std::size_t>(k));
  for (float& v : w) v = normal(rng);
  return quantize_int4_groups_on_host(w.data(), n, k, group_size);
}

TEST(GemvInt4Gpu, DevicePrepareWritesTheHostPreparesBytes) {
  KC_SKIP_WITHOUT_GPU();
  struct Case {
    int n, k, group_size;
  };
  for (const Case c : {Case{37, 96, 32}, Case{100, 576, 64}, Case{33, 1152, 128}, Case{20, 512, 256}}) {
    const Int4GroupHost w = quantized_normal_weight(c.n, c.k, c.group_size, 11);
    const DeviceWeight device = upload_weight(w);
    DeviceBuffer<std::uint8_t> quants(int4_prepared_quant_bytes(c.n, c.k));
    DeviceBuffer<std::uint32_t> scales(int4_prepared_scale_bytes(c.n, c.k, c.group_size) / 4);
    // Poison first: a byte the prepare leaves unwritten shows.
    KC_CUDA_CHECK(cudaMemset(quants.data(), 0xA5, quants.bytes()));
    KC_CUDA_CHECK(cudaMemset(scales.data(), 0xA5, scales.bytes()));
    prepare_int4_groups_on_device(device.view(w), quants.data(), scales.data(), nullptr);
    KC_CUDA_CHECK(cudaDeviceSynchronize());
    const Int4Prepared host = prepare_int4_groups(w.view());
    EXPECT_EQ(quants.to_host(), host.quants) << c.n << "x" << c.k << " G " << c.group_size;
    EXPECT_EQ(scales.to_host(), host.scales) << c.n << "x" << c.k << " G " << c.group_size;
  }
}

// The whole path on the GPU through the public entries: bf16 weights quantized (its bytes the host
// quantizer's), prepared, then multiplied by kc::stage3::int4_gemv.
TEST(GemvInt4Gpu, QuantizedPreparedAndMultipliedMatchesTheDequantizedProduct) {
  KC_SKIP_WITHOUT_GPU();
  const int m = 3, n = 200, k = 1024;
  for (const int group_size : {32, 128}) {
    std::mt19937_64 weight_rng(5);
    std::normal_distribution<float> normal(0.f, 0.02f);
    std::vector<__nv_bfloat16> w16(static_cast<std::size_t>(n) * k);
    std::vector<float> w32(w16.size());
    for (std::size_t i = 0; i < w16.size(); ++i) {
      w16[i] = __float2bfloat16(normal(weight_rng));
      w32[i] = __bfloat162float(w16[i]);
    }
    const Int4GroupHost w = quantize_int4_groups_on_host(w32.data(), n, k, group_size);
    const DeviceBuffer<__nv_bfloat16> w_device = upload(w16);
    DeviceWeight device{DeviceBuffer<std::uint8_t>(w.qweight.size()), DeviceBuffer<std::uint8_t>(w.zeros.size()),
                        DeviceBuffer<std::uint16_t>(w.scales.size())};
    QuantizeInt4Args quantize;
    quantize.rows = n;
    quantize.k = k;
    quantize.group_size = group_size;
    quantize.x = w_device.data();
    quantize.qweight = device.qweight.data();
    quantize.scales = device.scales.data();
    quantize.zeros = device.zeros.data();
    quantize_int4_groups(quantize, nullptr);
    KC_CUDA_CHECK(cudaDeviceSynchronize());
    ASSERT_EQ(device.qweight.to_host(), w.qweight) << "G " << group_size;
    ASSERT_EQ(device.scales.to_host(), w.scales) << "G " << group_size;
    ASSERT_EQ(device.zeros.to_host(), w.zeros) << "G " << group_size;
    DeviceBuffer<std::uint8_t> quants(int4_prepared_quant_bytes(n, k));
    DeviceBuffer<std::uint32_t> scales(int4_prepared_scale_bytes(n, k, group_size) / 4);
    prepare_int4_groups_on_device(device.view(w), quants.data(), scales.data(), nullptr);
    std::mt19937_64 rng(9);
    std::uniform_real_distribution<float> uniform(-1.f, 1.f);
    std::vector<__nv_bfloat16> x(static_cast<std::size_t>(m) * k);
    for (auto& v : x) v = __float2bfloat16(uniform(rng));
    const DeviceBuffer<__nv_bfloat16> x_device = upload(x);
    DeviceBuffer<__nv_bfloat16> y(static_cast<std::size_t>(m) * n);
    Int4GemvArgs args;
    args.m = m;
    args.n = n;
    args.k = k;
    args.group_size = group_size;
    args.x = x_device.data();
    args.quants = quants.data();
    args.scales = scales.data();
    args.y = y.data();
    (void)int4_gemv(args, nullptr);
    KC_CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<double> got = to_host_double(y.data(), DType::bf16, y.size());
    const std::vector<double> weights = dequantize_int4_groups(w.view());
    const std::vector<double> x_values = to_host_double(x_device.data(), DType::bf16, x_device.size());
    std::vector<double> expected(static_cast<std::size_t>(m) * n);
    gemm_reference(GemmShape{m, n, k}, 1.0, x_values.data(), weights.data(), BLayout::n_by_k, 0.0, nullptr,
                   expected.data());
    // The op's own check (bf16 outputs of K-term sums), and a relative Frobenius error of a few
    // 2^-9 at most.
    Accuracy accuracy;
    accuracy.output = DType::bf16;
    accuracy.terms = k;
    const CompareResult result = compare(got.data(), expected.data(), expected.size(), accuracy);
    EXPECT_TRUE(result.passed) << "G " << group_size << ": " << result.summary();
    EXPECT_LT(result.rel_frobenius, 4e-3) << "G " << group_size;
  }
}

// Rung 02 takes rung 01's chunks in rung 01's order through the same arithmetic: the same bits, on
// problems long enough to go round its ring (K of 9 and 33 stages of 1024) and with a partial last
// stage and chunk, at every row-group instance and group size.
TEST(GemvInt4Gpu, BulkStreamWritesRungOnesBits) {
  KC_SKIP_WITHOUT_GPU();
  if (!gemv_gguf_06_runs_here()) GTEST_SKIP() << "rung 02 needs a Hopper GPU and a build with sm_90a code";
  Context& context = testing::shared_context();
  const OpSpec op = make_gemv_int4_op();
  struct Case {
    std::vector<std::int64_t> dims;
    double group_size;
  };
  for (const Case& c : {Case{{1, 40, 9216}, 128.0}, Case{{5, 33, 33792}, 256.0}, Case{{16, 100, 8224}, 32.0},
                        Case{{9, 17, 4160}, 64.0}}) {
    const Problem problem = op.problem(c.dims, DType::bf16, {{"group_size", c.group_size}});
    Operands operands = op.make_operands(problem, 7, context);
    const Int4GemvArgs args = gemv_int4_args(problem, operands);
    gemv_int4_01_group_scales(args, context.stream());
    KC_CUDA_CHECK(cudaStreamSynchronize(context.stream()));
    const std::vector<std::uint16_t> rung_01 = [&] {
      std::vector<std::uint16_t> bits(static_cast<std::size_t>(args.m) * args.n);
      KC_CUDA_CHECK(cudaMemcpy(bits.data(), args.y, bits.size() * 2, cudaMemcpyDeviceToHost));
      return bits;
    }();
    KC_CUDA_CHECK(cudaMemset(args.y, 0xFF, rung_01.size() * 2));  // NaN: a value rung 02 leaves unwritten shows
    gemv_int4_02_bulk_stream(args, context.stream());
    KC_CUDA_CHECK(cudaStreamSynchronize(context.stream()));
    std::vector<std::uint16_t> rung_02(rung_01.size());
    KC_CUDA_CHECK(cudaMemcpy(rung_02.data(), args.y, rung_02.size() * 2, cudaMemcpyDeviceToHost));
    EXPECT_EQ(rung_02, rung_01) << problem.label();
  }
}

TEST(GemvInt4Gpu, EachFlawFailsWhereItShows) {
  KC_SKIP_WITHOUT_GPU();
  Context& context = testing::shared_context();
  const OpSpec op = make_gemv_int4_op();
  const auto launch = [](Int4Flaw flaw) -> RunFn {
    return [flaw](const Problem& p, Operands& o, Context& c) {
      if (flaw == Int4Flaw::none)
        gemv_int4_01_group_scales(gemv_int4_args(p, o), c.stream());
      else
        gemv_int4_01_flawed(gemv_int4_args(p, o), flaw, c.stream());
    };
  };
  for (const double group_size : {32.0, 64.0, 128.0}) {
    const Problem problem = op.problem({4, 129, 512}, DType::bf16, {{"group_size", group_size}});
    EXPECT_TRUE(check_run(op, launch(Int4Flaw::none), problem, 5, context).passed()) << problem.label();
    for (const Int4Flaw flaw : {Int4Flaw::swapped_nibbles, Int4Flaw::next_group_scales, Int4Flaw::zero_point_ignored,
                                Int4Flaw::scale_applied_twice}) {
      if (flaw == Int4Flaw::next_group_scales && group_size >= 128) continue;  // one group a chunk
      EXPECT_FALSE(check_run(op, launch(flaw), problem, 5, context).passed())
          << problem.label() << ": flaw " << static_cast<int>(flaw) << " went unnoticed";
    }
  }
}

}  // namespace
}  // namespace kc::stage3
