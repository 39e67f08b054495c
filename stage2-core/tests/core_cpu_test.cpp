// kc::core host logic: tensor views and strides, the warp/block-per-row plan, the vector-width
// and alignment decisions, dtype round trips, and the parallel loop of the references.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kc/core/dtype_traits.hpp"
#include "kc/core/launch.hpp"
#include "kc/core/tensor_view.hpp"
#include "kc/core/vector_io.hpp"
#include "kc/common/parallel.hpp"

namespace kc::core {
namespace {

TEST(TensorView, ContiguousViewHasRowMajorStrides) {
  std::vector<float> data(2 * 3 * 4);
  const auto view = contiguous_view(data.data(), 2, 3, 4);
  EXPECT_EQ(view.rank, 3);
  EXPECT_EQ(view.stride[0], 12);
  EXPECT_EQ(view.stride[1], 4);
  EXPECT_EQ(view.stride[2], 1);
  EXPECT_EQ(view.numel(), 24);
  EXPECT_TRUE(view.is_contiguous());
  EXPECT_EQ(view.offset(1, 2, 3), 12 + 8 + 3);
  view(1, 2, 3) = 7.f;
  EXPECT_EQ(data[23], 7.f);
  EXPECT_EQ(view.dtype, DType::f32);
}

TEST(TensorView, ColumnSliceIsAWindowWithTheSameRowStride) {
  std::vector<float> data(3 * 8);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i);
  const auto matrix = contiguous_view(data.data(), 3, 8);
  const auto up = column_slice(matrix, 4, 4);  // the "up" half of [gate | up]
  EXPECT_EQ(up.shape[0], 3);
  EXPECT_EQ(up.shape[1], 4);
  EXPECT_EQ(up.stride[0], 8);
  EXPECT_FALSE(up.is_contiguous());
  EXPECT_EQ(up(2, 1), 2 * 8 + 4 + 1);
}

TEST(TensorView, BroadcastRowsRepeatsOneVector) {
  std::vector<float> bias = {1.f, 2.f, 3.f};
  const auto view = broadcast_rows(bias.data(), 5, 3);
  EXPECT_EQ(view.stride[0], 0);
  EXPECT_EQ(view(0, 2), 3.f);
  EXPECT_EQ(view(4, 2), 3.f);
  EXPECT_EQ(view.offset(4, 1), 1);
}

TEST(TensorView, SizeOneDimensionsDoNotBreakContiguity) {
  std::vector<float> data(4);
  auto view = contiguous_view(data.data(), 1, 4);
  view.stride[0] = 12345;  // a single row: its stride is never used
  EXPECT_TRUE(view.is_contiguous());
  view.stride[1] = 2;
  EXPECT_FALSE(view.is_contiguous());
}

TEST(TensorView, AsConstKeepsShapeAndStrides) {
  std::vector<float> data(6);
  const auto view = column_slice(contiguous_view(data.data(), 2, 3), 1, 2).as_const();
  static_assert(std::is_same_v<decltype(view.data), const float*>);
  EXPECT_EQ(view.shape[1], 2);
  EXPECT_EQ(view.stride[0], 3);
  EXPECT_EQ(view.data, data.data() + 1);
}

TEST(TensorView, ViewOfAHarnessTensorChecksDtypeAndRank) {
  Tensor tensor;  // no storage needed: view_of only reads the description
  tensor.name = "x";
  tensor.dtype = DType::bf16;
  tensor.shape = {4, 6};
  const auto view = view_of<__nv_bfloat16, 2>(tensor);
  EXPECT_EQ(view.stride[0], 6);
  EXPECT_EQ(view.shape[1], 6);
  try {
    (void)view_of<float, 2>(tensor);
    FAIL() << "a bf16 tensor viewed as float must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("holds bf16"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)(view_of<__nv_bfloat16, 3>(tensor)), Error);
}

// ---- the warp-per-row / block-per-row decision ----

TEST(RowPlan, ShortRowsGetAWarpEach) {
  const RowPlan plan = plan_row(1000, 8);  // 125 vectors of 8 bf16: fits 32 lanes x 4
  EXPECT_EQ(plan.team, RowTeam::warp);
  EXPECT_EQ(plan.rows_per_block, kWarpRowsPerBlock);
  EXPECT_EQ(plan.threads_per_block, 32 * kWarpRowsPerBlock);
  EXPECT_TRUE(plan.fits_in_registers);
  EXPECT_EQ(plan.blocks(257), 65);  // ceil(257 / 4)
  EXPECT_EQ(plan_row(1, 1).team, RowTeam::warp);
  EXPECT_EQ(plan_row(1024, 8).team, RowTeam::warp);   // exactly 128 vectors
  EXPECT_EQ(plan_row(1032, 8).team, RowTeam::block);  // 129 vectors
}

TEST(RowPlan, LongRowsGetABlockSizedToHoldThem) {
  const RowPlan bf16_4096 = plan_row(4096, 8);  // 512 vectors / 4 per thread
  EXPECT_EQ(bf16_4096.team, RowTeam::block);
  EXPECT_EQ(bf16_4096.threads_per_block, 128);
  EXPECT_EQ(bf16_4096.rows_per_block, 1);
  EXPECT_EQ(bf16_4096.blocks(32768), 32768);
  EXPECT_EQ(plan_row(8192, 8).threads_per_block, 256);  // bf16, hidden 8192
  EXPECT_EQ(plan_row(4096, 4).threads_per_block, 256);  // f32, hidden 4096
  // Not a multiple of the warp size: rounded up, the extra lanes hold nothing.
  EXPECT_EQ(plan_row(2050, 1).threads_per_block, 544);  // ceil(2050 / 4) = 513 -> 544
}

// A plan with every slot full lets the kernel drop its bounds checks: it must hold only when each
// member's kRowVectorsPerThread slots all land inside the row.
TEST(RowPlan, EverySlotFullOnlyWhenTheRowFillsTheTeamExactly) {
  EXPECT_TRUE(plan_row(1024, 8).every_slot_full);    // warp: 128 vectors = 32 lanes x 4
  EXPECT_FALSE(plan_row(1000, 8).every_slot_full);   // warp: 125 vectors
  EXPECT_FALSE(plan_row(512, 8).every_slot_full);    // warp: 64 vectors, half the slots empty
  EXPECT_TRUE(plan_row(512, 4).every_slot_full);     // f32 warp: 128 vectors
  EXPECT_TRUE(plan_row(4096, 8).every_slot_full);    // block: 128 threads x 4 = 512 vectors
  EXPECT_TRUE(plan_row(8192, 8).every_slot_full);    // 256 threads x 4
  EXPECT_TRUE(plan_row(4096, 4).every_slot_full);    // f32: 256 threads x 4
  EXPECT_TRUE(plan_row(32768, 8).every_slot_full);   // 1024 threads x 4
  EXPECT_FALSE(plan_row(4104, 8).every_slot_full);   // 513 vectors: 160 threads, 127 slots empty
  EXPECT_FALSE(plan_row(2050, 1).every_slot_full);   // 544 threads x 4 > 2050
  EXPECT_FALSE(plan_row(40000, 8).every_slot_full);  // streams: no slots at all
  for (std::int64_t cols = 1; cols <= 9000; ++cols)
    for (int width : {1, 4, 8}) {
      if (cols % width != 0) continue;
      const RowPlan plan = plan_row(cols, width);
      if (!plan.every_slot_full) continue;
      const std::int64_t members = plan.team == RowTeam::warp ? 32 : plan.threads_per_block;
      // The last slot of the last member is the row's last vector.
      EXPECT_EQ(members * kRowVectorsPerThread, plan.vectors_per_row) << cols << " / " << width;
    }
}

TEST(RowPlan, RowsBeyondOneKiloThreadTimesFourVectorsMustStream) {
  EXPECT_TRUE(plan_row(32768, 8).fits_in_registers);    // 4096 vectors: 1024 threads x 4
  EXPECT_FALSE(plan_row(32776, 8).fits_in_registers);   // 4097 vectors
  EXPECT_FALSE(plan_row(4097, 1).fits_in_registers);    // scalar accesses, 4097 elements
  EXPECT_EQ(plan_row(40000, 8).threads_per_block, kMaxBlockThreads);
}

TEST(RowPlan, StreamingBlocksAreWarpMultiplesUpTo512) {
  EXPECT_EQ(streaming_row_threads(1, 1), 32);
  EXPECT_EQ(streaming_row_threads(31, 1), 32);
  EXPECT_EQ(streaming_row_threads(1000, 1), 512);
  EXPECT_EQ(streaming_row_threads(1000, 8), 128);  // 125 vectors -> 128
  EXPECT_EQ(streaming_row_threads(4096, 8), 512);
}

TEST(LaunchMath, CeilDivAndRoundUp) {
  EXPECT_EQ(ceil_div(0, 4), 0);
  EXPECT_EQ(ceil_div(1, 4), 1);
  EXPECT_EQ(ceil_div(8, 4), 2);
  EXPECT_EQ(ceil_div(std::int64_t{1} << 40, 3), ((std::int64_t{1} << 40) + 2) / 3);
  EXPECT_EQ(round_up(33, 32), 64);
  EXPECT_EQ(round_up(64, 32), 64);
}

// ---- vector width and alignment ----

const void* address(std::uintptr_t value) { return reinterpret_cast<const void*>(value); }

TEST(VectorWidth, SixteenBytesWhenColsAndPointersAllow) {
  EXPECT_EQ(kVectorWidth<__nv_bfloat16>, 8);
  EXPECT_EQ(kVectorWidth<float>, 4);
  EXPECT_EQ(kVectorWidth<__nv_fp8_e4m3>, 16);
  EXPECT_EQ(vector_width(4096, 2, address(0x1000), address(0x2000)), 8);
  EXPECT_EQ(vector_width(4096, 4, address(0x1000)), 4);
}

TEST(VectorWidth, NarrowsForOddColsAndMisalignedPointers) {
  EXPECT_EQ(vector_width(4097, 2, address(0x1000)), 1);      // odd row length: scalar
  EXPECT_EQ(vector_width(4098, 2, address(0x1000)), 2);      // even: 4-byte pairs
  EXPECT_EQ(vector_width(1000, 2, address(0x1000)), 8);      // 1000 = 125 x 8
  EXPECT_EQ(vector_width(4096, 2, address(0x1008)), 4);      // 8-byte aligned only
  EXPECT_EQ(vector_width(4096, 2, address(0x1000), address(0x1002)), 1);  // one pointer decides
  EXPECT_EQ(vector_width(31, 4, address(0x1000)), 1);
}

TEST(VectorWidth, CanVectorizeChecksStridesAndBase) {
  alignas(16) static float buffer[64];
  const auto dense = contiguous_view(&buffer[0], 4, 16);
  EXPECT_TRUE(can_vectorize(dense, 4));
  EXPECT_FALSE(can_vectorize(contiguous_view(&buffer[1], 4, 16), 4));   // misaligned base
  EXPECT_FALSE(can_vectorize(contiguous_view(&buffer[0], 4, 15), 4));   // row length
  EXPECT_TRUE(can_vectorize(broadcast_rows(&buffer[0], 4, 16), 4));     // stride 0 is fine
  EXPECT_TRUE(can_vectorize(column_slice(dense, 8, 8), 4));             // slice at 32 bytes
  EXPECT_FALSE(can_vectorize(column_slice(dense, 2, 8), 4));            // slice at 8 bytes
  auto strided = dense;
  strided.stride[1] = 2;
  EXPECT_FALSE(can_vectorize(strided, 4));
}

TEST(VectorIo, LoadAndStoreMoveWholeVectors) {
  alignas(16) float source[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  alignas(16) float destination[8] = {};
  store_vector<float, 8>(destination, load_vector<float, 8>(source));  // two 16-byte accesses
  for (int i = 0; i < 8; ++i) EXPECT_EQ(destination[i], source[i]);
  alignas(16) __nv_bfloat16 halves[8];
  const float values[8] = {0.5f, -1.f, 3.f, 1024.f, 1.f / 3.f, -0.f, 7.f, 65504.f};
  store_floats<__nv_bfloat16, 8>(halves, values);
  float back[8];
  load_floats<__nv_bfloat16, 8>(halves, back);
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(back[i], values[i], std::fabs(values[i]) / 256.f);
}

TEST(DTypeTraits, RoundToNearestEven) {
  EXPECT_EQ(to_float(from_float<__nv_bfloat16>(1.f + 1.f / 256.f)), 1.f);  // tie to even
  EXPECT_EQ(to_float(from_float<__nv_bfloat16>(1.f + 3.f / 256.f)), 1.f + 4.f / 256.f);
  EXPECT_EQ(to_float(from_float<__half>(1.f + 1.f / 2048.f)), 1.f);
  EXPECT_EQ(to_float(from_float<__nv_fp8_e4m3>(1.5f)), 1.5f);
  EXPECT_TRUE(std::isnan(to_float(from_float<__nv_bfloat16>(NAN))));
  EXPECT_TRUE(std::isinf(to_float(from_float<__half>(1e6f))));  // beyond fp16's 65504
  EXPECT_EQ(DTypeTraits<__nv_bfloat16>::dtype, DType::bf16);
}

TEST(ParallelFor, CoversEveryIndexExactlyOnce) {
  for (std::int64_t count : {0, 1, 7, 1000, 3000000}) {
    std::vector<std::atomic<int>> hits(static_cast<std::size_t>(count));
    parallel_for(count, 1, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t i = begin; i < end; ++i) hits[static_cast<std::size_t>(i)]++;
    });
    for (const auto& h : hits) ASSERT_EQ(h.load(), 1);
  }
}

}  // namespace
}  // namespace kc::core
