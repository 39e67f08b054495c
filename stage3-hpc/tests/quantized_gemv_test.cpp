// The public quantized GEMV entry (kc/stage3/quantized_gemv.hpp) without a GPU: every refusal of
// check_quantized_gemv_args with the sentence it gives, before anything reaches CUDA, and the
// names it reports. Pointers are made-up addresses: nothing here is dereferenced.
//   ctest --test-dir build/ci -R QuantizedGemvEntry
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "kc/common/device.hpp"
#include "kc/stage3/quantized_gemv.hpp"
#include "support/refusals.hpp"

namespace kc::stage3 {
namespace {

using ::kc::testing::expect_refused;
using ::kc::testing::fake_pointer;

QuantizedGemvArgs decode_args(GgufBlockType type, int m, int n, int k) {
  QuantizedGemvArgs args;
  args.m = m;
  args.n = n;
  args.k = k;
  args.type = type;
  args.x = fake_pointer<const __nv_bfloat16>(2);
  args.w = fake_pointer<const std::uint8_t>(1);
  args.y = fake_pointer<__nv_bfloat16>(3);
  return args;
}

TEST(QuantizedGemvEntry, AcceptsEveryTypeAndEveryDecodeRowCount) {
  for (GgufBlockType type : {GgufBlockType::q4_0, GgufBlockType::q4_1, GgufBlockType::q8_0})
    for (int m = 1; m <= kGgufGemvMaxRows; ++m) {
      EXPECT_NO_THROW(check_quantized_gemv_args(decode_args(type, m, 4096, 4096)));
      EXPECT_NO_THROW(check_quantized_gemv_args(decode_args(type, m, 37, 32)));
    }
}

TEST(QuantizedGemvEntry, RefusesRowCountsOutsideADecodeStep) {
  for (int m : {0, -1, kGgufGemvMaxRows + 1, 64})
    expect_refused([&] { check_quantized_gemv_args(decode_args(GgufBlockType::q4_1, m, 64, 64)); },
                   {"kc::stage3::quantized_gemv", "M = " + std::to_string(m), "[1, 16]", "as a GEMM"});
}

TEST(QuantizedGemvEntry, RefusesKThatIsNotWholeBlocks) {
  for (int k : {0, 16, 33, 4095})
    expect_refused([&] { check_quantized_gemv_args(decode_args(GgufBlockType::q4_0, 1, 64, k)); },
                   {"K = " + std::to_string(k), "multiple of 32"});
  expect_refused([&] { check_quantized_gemv_args(decode_args(GgufBlockType::q8_0, 1, 0, 64)); }, "N = 0");
}

TEST(QuantizedGemvEntry, RefusesTypesItHasNoBlocksFor) {
  for (int type : {0, 1, 6, 12, 14})  // f32, f16, q5_0, q4_K, q6_K
    expect_refused(
        [&] { check_quantized_gemv_args(decode_args(static_cast<GgufBlockType>(type), 1, 64, 64)); },
        {"block type " + std::to_string(type), "q4_0 (2), q4_1 (3) or q8_0 (8)"});
}

TEST(QuantizedGemvEntry, RefusesNullAndMisalignedOperandsNamingThem) {
  QuantizedGemvArgs args = decode_args(GgufBlockType::q4_1, 1, 64, 64);
  args.w = nullptr;
  expect_refused([&] { check_quantized_gemv_args(args); }, {"either as stored (w) or prepared", "exactly one"});
  args = decode_args(GgufBlockType::q4_1, 1, 64, 64);
  args.quants = fake_pointer<const std::uint8_t>(4);
  args.scales = fake_pointer<const std::uint8_t>(5);
  expect_refused([&] { check_quantized_gemv_args(args); }, "exactly one");  // w and quants both given
  args.w = nullptr;
  args.x = fake_pointer<const __nv_bfloat16>(2);
  EXPECT_NO_THROW(check_quantized_gemv_args(args));  // a prepared weight
  args.scales = nullptr;
  expect_refused([&] { check_quantized_gemv_args(args); }, "needs both quants and scales");
  args.scales = fake_pointer<const std::uint8_t>(5, 8);
  expect_refused([&] { check_quantized_gemv_args(args); }, "must be 16-byte aligned");
  args = decode_args(GgufBlockType::q4_1, 1, 64, 64);
  args.x = nullptr;
  expect_refused([&] { check_quantized_gemv_args(args); }, "x (M x K, bf16) is a null pointer");
  args = decode_args(GgufBlockType::q4_1, 1, 64, 64);
  args.y = nullptr;
  expect_refused([&] { check_quantized_gemv_args(args); }, "y (M x N, bf16) is a null pointer");
  args = decode_args(GgufBlockType::q4_0, 1, 64, 64);
  args.w = fake_pointer<const std::uint8_t>(1, 2);
  expect_refused([&] { check_quantized_gemv_args(args); }, {"w at", "not 4-byte aligned"});
  args = decode_args(GgufBlockType::q4_0, 1, 64, 64);
  args.x = fake_pointer<const __nv_bfloat16>(2, 2);
  expect_refused([&] { check_quantized_gemv_args(args); }, {"x at", "bf16 pairs"});
  args = decode_args(GgufBlockType::q4_0, 1, 64, 64);
  args.y = fake_pointer<__nv_bfloat16>(3, 1);
  expect_refused([&] { check_quantized_gemv_args(args); }, {"y at", "2 bytes"});
  // The entry refuses before launching: no CUDA call is reached without a GPU.
  args = decode_args(GgufBlockType::q4_0, 17, 64, 64);
  expect_refused([&] { quantized_gemv(args, nullptr); }, "M = 17");
}

TEST(QuantizedGemvEntry, NamesTheRungAndTheTypes) {
  EXPECT_EQ(quantized_gemv_kernel_name(QuantizedGemvKernel::gemv_gguf_01_warp_per_column),
            "stage3/gemv_gguf/01_warp_per_column");
  EXPECT_EQ(quantized_gemv_kernel_name(QuantizedGemvKernel::gemv_gguf_03_mma), "stage3/gemv_gguf/03_mma");
  EXPECT_EQ(quantized_gemv_kernel_name(QuantizedGemvKernel::gemv_gguf_04_cp_async), "stage3/gemv_gguf/04_cp_async");
  EXPECT_EQ(quantized_gemv_kernel_name(QuantizedGemvKernel::gemv_gguf_05_weights_as_a),
            "stage3/gemv_gguf/05_weights_as_a");
  EXPECT_EQ(quantized_gemv_kernel_name(QuantizedGemvKernel::gemv_gguf_06_bulk_stream),
            "stage3/gemv_gguf/06_bulk_stream");
  EXPECT_EQ(quantized_gemv_kernel_name(QuantizedGemvKernel::gemv_gguf_07_x_resident),
            "stage3/gemv_gguf/07_x_resident");
  EXPECT_EQ(quantized_gemv_kernel_name(QuantizedGemvKernel::gemv_gguf_08_x_f16), "stage3/gemv_gguf/08_x_f16");
  EXPECT_EQ(quantized_gemv_kernel_name(QuantizedGemvKernel::gemv_gguf_11_x_in_step),
            "stage3/gemv_gguf/11_x_in_step");
  EXPECT_EQ(quantized_gemv_kernel_name(QuantizedGemvKernel::gemv_gguf_12_x_cluster_staged),
            "stage3/gemv_gguf/12_x_cluster_staged");
  // Rung 06 takes M <= 8 on a Hopper GPU; M > 8 runs rung 05 everywhere, and so does every M
  // without a GPU.
  for (const int m : {9, 16}) EXPECT_EQ(quantized_gemv_prepared_kernel(m), QuantizedGemvKernel::gemv_gguf_05_weights_as_a);
  if (!has_gpu()) {
    for (const int m : {1, 8}) EXPECT_EQ(quantized_gemv_prepared_kernel(m), QuantizedGemvKernel::gemv_gguf_05_weights_as_a);
  }
  // The prepared layout pads N to whole tiles of 16 rows and K to 128 (4 blocks): 32 bytes of
  // quants a lane (64 for q8_0), 2 or 4 bytes of scale a block-row.
  EXPECT_EQ(quantized_gemv_prepared_quant_bytes(GgufBlockType::q4_1, 4096, 4096), 4096u * 4096u / 2u);
  EXPECT_EQ(quantized_gemv_prepared_scale_bytes(GgufBlockType::q4_1, 4096, 4096), 4096u * 128u * 4u);
  EXPECT_EQ(quantized_gemv_prepared_quant_bytes(GgufBlockType::q8_0, 9, 96), 1u * 1u * 32u * 64u);
  EXPECT_EQ(quantized_gemv_prepared_scale_bytes(GgufBlockType::q4_0, 9, 96), 1u * 1u * 64u * 2u);
  EXPECT_EQ(quantized_gemv_prepared_quant_bytes(GgufBlockType::q4_0, 17, 160), 2u * 2u * 32u * 32u);
  expect_refused([&] { quantized_gemv_prepare(GgufBlockType::q4_0, nullptr, 8, 64, nullptr, nullptr, nullptr); },
                 "must be non-null");
  expect_refused([&] { quantized_gemv_prepare(GgufBlockType::q4_0, nullptr, 8, 48, nullptr, nullptr, nullptr); },
                 "multiple of 32");
  EXPECT_EQ(gguf_block_type_name(GgufBlockType::q4_0), "q4_0");
  EXPECT_EQ(gguf_block_type_name(GgufBlockType::q4_1), "q4_1");
  EXPECT_EQ(gguf_block_type_name(GgufBlockType::q8_0), "q8_0");
}

// The link (rung 07) refuses bad arguments by name before any CUDA call, and says where it cannot
// run; how much x fits next to its ring is host arithmetic.
TEST(QuantizedGemvEntry, LinkRefusesBeforeLaunching) {
  GgufGemvLinkArgs link;
  link.m = 1;
  link.k = 4096;
  link.type = GgufBlockType::q4_1;
  link.x = fake_pointer<const __nv_bfloat16>(16);
  link.weights = 2;
  link.weight[0] = {fake_pointer<const std::uint8_t>(32), fake_pointer<const void>(48),
                    fake_pointer<__nv_bfloat16>(64), 4096};
  link.weight[1] = {fake_pointer<const std::uint8_t>(80), fake_pointer<const void>(96),
                    fake_pointer<__nv_bfloat16>(112), 1024};
  GgufGemvLinkArgs bad = link;
  bad.weights = 0;
  expect_refused([&] { quantized_gemv_link(bad, nullptr); }, "weights = 0");
  bad = link;
  bad.weights = kGgufGemvLinkMaxWeights + 1;
  expect_refused([&] { quantized_gemv_link(bad, nullptr); }, "weights = 4");
  bad = link;
  bad.prologue = static_cast<GgufGemvPrologue>(7);
  expect_refused([&] { quantized_gemv_link(bad, nullptr); }, "prologue 7");
  bad = link;
  bad.weight[1].y = nullptr;
  expect_refused([&] { quantized_gemv_link(bad, nullptr); }, "y (M x N, bf16) is a null pointer");
  bad = link;
  bad.m = 17;
  expect_refused([&] { quantized_gemv_link(bad, nullptr); }, "M = 17");
  // M = 1 at the Llama widths fits; 16 rows of 14336 do not (rung 06 streams x instead).
  EXPECT_TRUE(gemv_gguf_07_fits(GgufBlockType::q4_1, 1, 14336));
  EXPECT_TRUE(gemv_gguf_07_fits(GgufBlockType::q8_0, 8, 4096));
  EXPECT_FALSE(gemv_gguf_07_fits(GgufBlockType::q4_1, 16, 14336));
  // Rung 08 adds 16 bytes of block sums a row and block of x: still M = 1 at every Llama width and
  // 8 rows of 4096; 9 rows of 9248 in q4_0 fit rung 07 (x alone) but not with the sums.
  EXPECT_TRUE(gemv_gguf_08_fits(GgufBlockType::q4_1, 1, 14336));
  EXPECT_TRUE(gemv_gguf_08_fits(GgufBlockType::q8_0, 8, 4096));
  EXPECT_FALSE(gemv_gguf_08_fits(GgufBlockType::q4_1, 16, 14336));
  EXPECT_FALSE(gemv_gguf_08_fits(GgufBlockType::q4_1, 1, 0));
  EXPECT_TRUE(gemv_gguf_07_fits(GgufBlockType::q4_0, 9, 9248));
  EXPECT_FALSE(gemv_gguf_08_fits(GgufBlockType::q4_0, 9, 9248));
  // Rung 11 takes rung 07's shared memory.
  EXPECT_TRUE(gemv_gguf_11_fits(GgufBlockType::q4_1, 1, 14336));
  EXPECT_TRUE(gemv_gguf_11_fits(GgufBlockType::q4_0, 9, 9248));
  EXPECT_FALSE(gemv_gguf_11_fits(GgufBlockType::q4_1, 16, 14336));
  // The rung named: only the four link rungs, checked before anything else (the same arguments'
  // refusals as the chosen rung's otherwise).
  for (const QuantizedGemvKernel not_a_link :
       {QuantizedGemvKernel::gemv_gguf_05_weights_as_a, QuantizedGemvKernel::gemv_gguf_06_bulk_stream}) {
    EXPECT_FALSE(quantized_gemv_link_runs(GgufBlockType::q4_1, 1, 4096, not_a_link));
    expect_refused([&] { quantized_gemv_link(link, not_a_link, nullptr); }, "is not a link rung");
  }
  bad = link;
  bad.weights = 0;
  expect_refused([&] { quantized_gemv_link(bad, QuantizedGemvKernel::gemv_gguf_11_x_in_step, nullptr); },
                 "weights = 0");
  if (!has_gpu()) {
    EXPECT_FALSE(quantized_gemv_link_runs(GgufBlockType::q4_1, 1, 4096));
    expect_refused([&] { quantized_gemv_link(link, nullptr); }, "cannot run");
    for (const QuantizedGemvKernel rung : {QuantizedGemvKernel::gemv_gguf_07_x_resident,
                                           QuantizedGemvKernel::gemv_gguf_08_x_f16,
                                           QuantizedGemvKernel::gemv_gguf_11_x_in_step,
                                           QuantizedGemvKernel::gemv_gguf_12_x_cluster_staged}) {
      EXPECT_FALSE(quantized_gemv_link_runs(GgufBlockType::q4_1, 1, 4096, rung));
      expect_refused([&] { quantized_gemv_link(link, rung, nullptr); }, "cannot run");
    }
  }
}

// The int4 group format's entry: every refusal of check_int4_gemv_args, before anything reaches
// CUDA, through int4_gemv itself; and its rule and names.
Int4GemvArgs int4_args(int m, int n, int k, int group_size) {
  Int4GemvArgs args;
  args.m = m;
  args.n = n;
  args.k = k;
  args.group_size = group_size;
  args.x = fake_pointer<const __nv_bfloat16>(2);
  args.quants = fake_pointer<const std::uint8_t>(1);
  args.scales = fake_pointer<const std::uint32_t>(4);
  args.y = fake_pointer<__nv_bfloat16>(3);
  return args;
}

TEST(QuantizedGemvEntry, Int4AcceptsDecodeRowsAndTheGroupSizesTheLayoutHolds) {
  for (int m = 1; m <= kInt4GemvMaxRows; ++m)
    for (int g : {32, 64, 128, 256, 4096}) EXPECT_NO_THROW(check_int4_gemv_args(int4_args(m, 24, 4096, g)));
}

TEST(QuantizedGemvEntry, Int4RefusesWhatItCannotRunNamingTheRule) {
  for (int m : {0, kInt4GemvMaxRows + 1, 64})
    expect_refused([&] { (void)int4_gemv(int4_args(m, 64, 256, 128), nullptr); },
                   {"kc::stage3::int4_gemv", "M = " + std::to_string(m), "[1, 16]", "03_batch"});
  expect_refused([&] { (void)int4_gemv(int4_args(1, 64, 192, 128), nullptr); }, {"group size 128", "K = 192"});
  expect_refused([&] { (void)int4_gemv(int4_args(1, 64, 960, 96), nullptr); }, {"group size 96", "32, 64"});
  expect_refused([&] { (void)int4_gemv(int4_args(1, 0, 256, 128), nullptr); }, "N = 0");
  Int4GemvArgs a = int4_args(1, 64, 256, 128);
  a.scales = nullptr;
  expect_refused([&] { (void)int4_gemv(a, nullptr); }, "must be non-null");
  a = int4_args(1, 64, 256, 128);
  a.quants = fake_pointer<const std::uint8_t>(1, 8);
  expect_refused([&] { (void)int4_gemv(a, nullptr); }, "16-byte aligned");
  a = int4_args(1, 64, 256, 128);
  a.y = fake_pointer<__nv_bfloat16>(3, 1);
  expect_refused([&] { (void)int4_gemv(a, nullptr); }, "2 bytes");
}

// The int4 link (rung 04) refuses bad arguments by name before any CUDA call, and says where it
// cannot run.
TEST(QuantizedGemvEntry, Int4LinkRefusesBeforeLaunching) {
  Int4GemvLinkArgs link;
  link.m = 1;
  link.k = 4096;
  link.group_size = 128;
  link.x = fake_pointer<const __nv_bfloat16>(2);
  link.weights = 2;
  link.weight[0] = {fake_pointer<const std::uint8_t>(1), fake_pointer<const std::uint32_t>(4),
                    fake_pointer<__nv_bfloat16>(3), 4096};
  link.weight[1] = {fake_pointer<const std::uint8_t>(5), fake_pointer<const std::uint32_t>(6),
                    fake_pointer<__nv_bfloat16>(7), 1024};
  Int4GemvLinkArgs bad = link;
  bad.weights = 0;
  expect_refused([&] { (void)int4_gemv_link(bad, nullptr); }, {"kc::stage3::int4_gemv_link", "weights = 0"});
  bad = link;
  bad.weights = kGgufGemvLinkMaxWeights + 1;
  expect_refused([&] { (void)int4_gemv_link(bad, nullptr); }, "weights = 4");
  bad = link;
  bad.prologue = static_cast<GgufGemvPrologue>(7);
  expect_refused([&] { (void)int4_gemv_link(bad, nullptr); }, "prologue 7");
  bad = link;
  bad.weight[1].scales = nullptr;
  expect_refused([&] { (void)int4_gemv_link(bad, nullptr); }, "must be non-null");
  bad = link;
  bad.m = 17;
  expect_refused([&] { (void)int4_gemv_link(bad, nullptr); }, "M = 17");
  bad = link;
  bad.group_size = 96;
  expect_refused([&] { (void)int4_gemv_link(bad, nullptr); }, {"group size 96", "32, 64"});
  EXPECT_FALSE(int4_gemv_link_runs(16, 14336, 128));
  EXPECT_FALSE(int4_gemv_link_runs(1, 4096, 96));
  EXPECT_FALSE(int4_gemv_link_runs(1, 4160, 128));  // the group size must divide K
  EXPECT_FALSE(int4_gemv_link_runs(1, 4096, 128, Int4GemvKernel::gemv_int4_01_group_scales));
  expect_refused([&] { (void)int4_gemv_link(link, Int4GemvKernel::gemv_int4_02_bulk_stream, nullptr); },
                 {"02_bulk_stream", "is not a link rung"});
  EXPECT_EQ(int4_gemv_link_kernel(link), Int4GemvKernel::gemv_int4_04_x_resident);
  if (!has_gpu()) {
    EXPECT_FALSE(int4_gemv_link_runs(1, 4096, 128));
    expect_refused([&] { (void)int4_gemv_link(link, nullptr); }, "cannot run");
    expect_refused([&] { (void)int4_gemv_link(link, Int4GemvKernel::gemv_int4_05_x_f16, nullptr); },
                   {"cannot run", "05_x_f16"});
  }
}

TEST(QuantizedGemvEntry, Int4NamesItsRungs) {
  EXPECT_EQ(int4_gemv_kernel_name(Int4GemvKernel::gemv_int4_01_group_scales), "stage3/gemv_int4/01_group_scales");
  EXPECT_EQ(int4_gemv_kernel_name(Int4GemvKernel::gemv_int4_02_bulk_stream), "stage3/gemv_int4/02_bulk_stream");
  EXPECT_EQ(int4_gemv_kernel_name(Int4GemvKernel::gemv_int4_04_x_resident), "stage3/gemv_int4/04_x_resident");
  EXPECT_EQ(int4_gemv_kernel_name(Int4GemvKernel::gemv_int4_05_x_f16), "stage3/gemv_int4/05_x_f16");
  // Rung 01 at every M the entry takes, on every GPU (the measured rule).
  for (const int m : {1, 2, 8, 9, 16}) EXPECT_EQ(int4_gemv_kernel(m), Int4GemvKernel::gemv_int4_01_group_scales) << m;
}

}  // namespace
}  // namespace kc::stage3
