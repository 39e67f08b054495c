// flash_wgmma_kernel.cuh — the kernel of the Hopper attention rung 06: TMA fills a ring of K/V
// tiles, a producer warp issues the copies, two consumer warpgroups run S = Q K^T and O += P V on
// WGMMA with the online softmax in between. See the header comment of 06_tma_wgmma.cu.
//
// A CTA owns 128 query rows of one (batch, query head): consumer warpgroup c (warpgroups 1 and 2)
// the 64 rows 64c .. 64c + 63, warpgroup 0 the copies (one thread). Shared memory, every tile
// 1024-byte aligned and written by TMA with the 128-byte swizzle, in boxes of 64 columns of D
// (128 bytes a row), D/64 boxes side by side:
//   Q          128 rows x D, loaded once
//   K[stage]   128 keys x D, kStages of them
//   V[stage]   128 keys x D
//   barriers   q_full; k_full[stage], v_full[stage] (the producer's arrive.expect_tx + the TMA
//              bytes); empty[stage] (one arrival per consumer warp once its WGMMAs have read
//              the stage)
// K and V of a stage have separate full barriers so that S = Q K^T can start before V lands.
#pragma once

#include <cuda.h>  // CUtensorMap
#include <cuda_runtime.h>

#include <cstdint>

#include "arch/sm90/mbarrier.cuh"
#include "arch/sm90/sm90a.hpp"
#include "arch/sm90/tma.cuh"
#include "arch/sm90/tma_descriptor.hpp"
#include "arch/sm90/warpgroup.cuh"
#include "arch/sm90/wgmma.cuh"
#include "arch/sm90/wgmma_narrow.cuh"
#include "arch/util.hpp"
#include "attention/fa2_mma.cuh"
#include "attention/flash_common.cuh"
#include "kc/stage3/attention_args.hpp"

namespace kc::stage3 {

template <int kHeadDim_>
struct FlashWgmmaShape {
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kConsumers = 2;        // consumer warpgroups
  static constexpr int kWarpgroupRows = 64;   // query rows of a consumer (the M of one WGMMA)
  static constexpr int kBlockRows = kConsumers * kWarpgroupRows;
  static constexpr int kBlockKeys = 128;      // keys of a K/V tile (the N of S's WGMMA)
  static constexpr int kThreads = (kConsumers + 1) * 128;
  static constexpr int kBoxCols = 64;         // 128 bytes: a swizzled TMA box row
  static constexpr int kBoxes = kHeadDim / kBoxCols;
  static constexpr int kBoxRowBytes = 128;
  static constexpr int kQBoxBytes = kBlockRows * kBoxRowBytes;
  static constexpr int kKvBoxBytes = kBlockKeys * kBoxRowBytes;
  static constexpr int kQBytes = kBoxes * kQBoxBytes;
  static constexpr int kKvTileBytes = kBoxes * kKvBoxBytes;  // one K or one V tile
  static constexpr int kStages = kHeadDim == 64 ? 3 : 2;
  static constexpr int kBarriers = 1 + 3 * kStages;
  static constexpr int kSmemBytes = kSmemAlignment + kQBytes + 2 * kStages * kKvTileBytes + 8 * kBarriers;
  static constexpr int kKeyBlocks = kBlockKeys / 8;   // n8 blocks of S per warp row tile
  static constexpr int kKeySlices = kBlockKeys / 16;  // k16 steps of P V
  static constexpr int kDimBlocks = kHeadDim / 8;     // n8 blocks of O
  static constexpr int kDimSteps = kHeadDim / 16;     // k16 steps of Q K^T
  // 24 + 2 x 240 registers a thread of each warpgroup x 128 threads = 64512 <= 65536.
  static constexpr int kProducerRegisters = 24;
  static constexpr int kConsumerRegisters = 240;
  static_assert(kHeadDim == 64 || kHeadDim == 128, "rung 06 is compiled for D = 64 and 128");
};

// The kernel's parameters: the three tensor maps (Q, K, V as [D, S, H, B]) and the problem.
template <typename T>
struct FlashWgmmaParams {
  CUtensorMap q_map;
  CUtensorMap k_map;
  CUtensorMap v_map;
  AttentionArgs<T> args;
};

namespace {

template <typename T, int kHeadDim>
__global__ void __launch_bounds__(FlashWgmmaShape<kHeadDim>::kThreads, 1)
    flash_wgmma_kernel(const __grid_constant__ FlashWgmmaParams<T> params) {
#if KC_STAGE3_SM90A
  using Shape = FlashWgmmaShape<kHeadDim>;
  constexpr int kStages = Shape::kStages;
  const AttentionArgs<T>& args = params.args;
  extern __shared__ std::uint8_t smem_raw[];
  std::uint8_t* const smem = aligned_dynamic_smem(smem_raw);
  std::uint8_t* const q_tile = smem;
  const auto k_tile = [&](int stage) { return smem + Shape::kQBytes + stage * Shape::kKvTileBytes; };
  const auto v_tile = [&](int stage) { return smem + Shape::kQBytes + (kStages + stage) * Shape::kKvTileBytes; };
  auto* const q_full = reinterpret_cast<std::uint64_t*>(smem + Shape::kQBytes + 2 * kStages * Shape::kKvTileBytes);
  std::uint64_t* const k_full = q_full + 1;
  std::uint64_t* const v_full = k_full + kStages;
  std::uint64_t* const empty = v_full + kStages;

  const int batch = static_cast<int>(blockIdx.z);
  const int head = static_cast<int>(blockIdx.y);
  const int kv_head = head / (args.q_heads / args.kv_heads);
  const int query_tile = static_cast<int>(gridDim.x - 1 - blockIdx.x);  // heaviest first
  const int block_row0 = query_tile * Shape::kBlockRows;
  // Keys past key_end are seen by no row of the CTA: their tiles are not loaded.
  const int key_end = block_key_end(args, block_row0, Shape::kBlockRows);
  const int tiles = ceil_div(key_end, Shape::kBlockKeys);

  if (threadIdx.x == 0) {
    sm90::mbarrier_init(q_full, 1);
    for (int stage = 0; stage < kStages; ++stage) {
      sm90::mbarrier_init(&k_full[stage], 1);
      sm90::mbarrier_init(&v_full[stage], 1);
      sm90::mbarrier_init(&empty[stage], Shape::kConsumers * 4);
    }
    sm90::fence_barrier_init();
  }
  __syncthreads();

  const int warpgroup = static_cast<int>(threadIdx.x) / 128;
  if (warpgroup == 0) {
    // ---- producer: one thread issues every copy ----
    sm90::setmaxnreg_decrease<Shape::kProducerRegisters>();
    if (threadIdx.x == 0 && tiles > 0) {
      sm90::mbarrier_arrive_expect_tx(q_full, Shape::kQBytes);
      for (int box = 0; box < Shape::kBoxes; ++box)
        sm90::tma_load_4d(q_tile + box * Shape::kQBoxBytes, &params.q_map, q_full, box * Shape::kBoxCols,
                          block_row0, head, batch);
      for (int tile = 0; tile < tiles; ++tile) {
        const int stage = tile % kStages;
        const std::uint32_t phase = (tile / kStages) % 2;
        sm90::mbarrier_wait(&empty[stage], phase ^ 1);  // the first pass finds every stage free
        const int key0 = tile * Shape::kBlockKeys;
        sm90::mbarrier_arrive_expect_tx(&k_full[stage], Shape::kKvTileBytes);
        for (int box = 0; box < Shape::kBoxes; ++box)
          sm90::tma_load_4d(k_tile(stage) + box * Shape::kKvBoxBytes, &params.k_map, &k_full[stage],
                            box * Shape::kBoxCols, key0, kv_head, batch);
        sm90::mbarrier_arrive_expect_tx(&v_full[stage], Shape::kKvTileBytes);
        for (int box = 0; box < Shape::kBoxes; ++box)
          sm90::tma_load_4d(v_tile(stage) + box * Shape::kKvBoxBytes, &params.v_map, &v_full[stage],
                            box * Shape::kBoxCols, key0, kv_head, batch);
      }
    }
    return;
  }

  // ---- consumers: 64 query rows each ----
  sm90::setmaxnreg_increase<Shape::kConsumerRegisters>();
  const int consumer = warpgroup - 1;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  // This warp's 16 rows of the consumer's 64; this thread's rows lane/4 and lane/4 + 8 of them.
  const int warp_row0 = block_row0 + consumer * Shape::kWarpgroupRows + 16 * ((static_cast<int>(threadIdx.x) / 32) % 4);
  int row_ends[2];
  for (int h = 0; h < 2; ++h) {
    const int query = warp_row0 + lane / 4 + 8 * h;
    row_ends[h] = query < args.q_len ? visible_key_end(args, query) : 0;
  }
  // Keys below unmasked_end are seen by every row of the CTA (its first row sees the fewest).
  const int unmasked_end = visible_key_end(args, block_row0);
  const float scale_log2 = args.scale * kLog2e;

  float o[Shape::kDimBlocks][4] = {};
  float s[Shape::kKeyBlocks][4] = {};  // S, then P: written by each tile's first WGMMA (accumulate off)
  RowState rows[2];
  const std::uint32_t q_rows = smem_u32(q_tile) + consumer * Shape::kWarpgroupRows * Shape::kBoxRowBytes;
  if (tiles > 0) sm90::mbarrier_wait(q_full, 0);
  for (int tile = 0; tile < tiles; ++tile) {
    const int stage = tile % kStages;
    const std::uint32_t phase = (tile / kStages) % 2;

    // S = Q K^T: D/16 WGMMAs, each 16 columns of D further along the swizzled 128-byte box rows
    // (32 bytes a step; the next box after 4 steps).
    sm90::mbarrier_wait(&k_full[stage], phase);
    auto& s_flat = reinterpret_cast<float(&)[Shape::kKeyBlocks * 4]>(s);
    const std::uint32_t keys = smem_u32(k_tile(stage));
    sm90::wgmma_fence();
#pragma unroll
    for (int step = 0; step < Shape::kDimSteps; ++step) {
      const std::uint32_t offset = (step / 4) * Shape::kQBoxBytes + (step % 4) * 32;
      const std::uint32_t key_offset = (step / 4) * Shape::kKvBoxBytes + (step % 4) * 32;
      sm90::wgmma_m64n128k16_ss<T>(s_flat, sm90::smem_descriptor_sw128(q_rows + offset),
                                   sm90::smem_descriptor_sw128(keys + key_offset), step > 0 ? 1u : 0u);
    }
    sm90::wgmma_commit_group();
    sm90::wgmma_wait_group<0>();
    sm90::fence_accumulators(s_flat);

    // The online softmax in registers (the WGMMA accumulator layout is mma.sync's, per warp).
    const int key0 = tile * Shape::kBlockKeys;
    if (key0 + Shape::kBlockKeys > unmasked_end)
      online_softmax_tile<true>(s, o, rows, row_ends, scale_log2, key0);
    else
      online_softmax_tile<false>(s, o, rows, row_ends, scale_log2, key0);

    // O += P V: P rounded to T in registers is the A operand, 16 keys a step; V's rows of 16
    // keys are 2048 bytes apart; its second 64 columns (D = 128) are the next box.
    std::uint32_t p[Shape::kKeySlices][4];
#pragma unroll
    for (int slice = 0; slice < Shape::kKeySlices; ++slice) p_fragment<T>(s, slice, p[slice]);
    sm90::mbarrier_wait(&v_full[stage], phase);
    auto& o_flat = reinterpret_cast<float(&)[Shape::kDimBlocks * 4]>(o);
    const std::uint32_t values = smem_u32(v_tile(stage));
    sm90::wgmma_fence();
#pragma unroll
    for (int slice = 0; slice < Shape::kKeySlices; ++slice)
      sm90::wgmma_m64nNk16_rs_transposed_b<T, kHeadDim>(
          o_flat, p[slice],
          sm90::smem_descriptor_sw128_mn_major(values + slice * 16 * Shape::kBoxRowBytes, Shape::kKvBoxBytes));
    sm90::wgmma_commit_group();
    sm90::wgmma_wait_group<0>();
    sm90::fence_accumulators(o_flat);
    if (lane == 0) sm90::mbarrier_arrive(&empty[stage]);  // this warp is done with the stage
  }
  const HeadView<T> view(args);
  store_tile_rows(o, rows, row_ends, view, args, warp_row0);
#else
  (void)params;
#endif
}

}  // namespace

// Checks the arguments, builds (or finds) the tensor maps and launches the kernel for D.
template <typename T, int kHeadDim>
void launch_flash_wgmma(const AttentionArgs<T>& args, cudaStream_t stream, HopperLaunchCache& cache) {
  using Shape = FlashWgmmaShape<kHeadDim>;
  const auto kernel = &flash_wgmma_kernel<T, kHeadDim>;
  cache.prepare_kernel(reinterpret_cast<const void*>(kernel), Shape::kSmemBytes);
  const auto tensor = [&](const T* base, int rows, int heads, std::int64_t row_stride, std::int64_t head_stride,
                          std::int64_t batch_stride, int box_rows) {
    TmaTensor4d t;
    t.base = base;
    t.dims[0] = static_cast<std::uint64_t>(kHeadDim);
    t.dims[1] = static_cast<std::uint64_t>(rows);
    t.dims[2] = static_cast<std::uint64_t>(heads);
    t.dims[3] = static_cast<std::uint64_t>(args.batch);
    t.strides_bytes[0] = static_cast<std::uint64_t>(row_stride) * sizeof(T);
    t.strides_bytes[1] = static_cast<std::uint64_t>(head_stride) * sizeof(T);
    t.strides_bytes[2] = static_cast<std::uint64_t>(batch_stride) * sizeof(T);
    t.box[0] = Shape::kBoxCols;
    t.box[1] = static_cast<std::uint32_t>(box_rows);
    t.box[2] = 1;
    t.box[3] = 1;
    return cache.tensor_map(t);
  };
  FlashWgmmaParams<T> params;
  params.q_map = tensor(args.q, args.q_len, args.q_heads, args.q_row_stride, args.q_head_stride, args.q_batch_stride,
                        Shape::kBlockRows);
  params.k_map = tensor(args.k, args.kv_len, args.kv_heads, args.kv_row_stride, args.kv_head_stride,
                        args.kv_batch_stride, Shape::kBlockKeys);
  params.v_map = tensor(args.v, args.kv_len, args.kv_heads, args.kv_row_stride, args.kv_head_stride,
                        args.kv_batch_stride, Shape::kBlockKeys);
  params.args = args;
  kernel<<<flash_grid(args, Shape::kBlockRows), Shape::kThreads, Shape::kSmemBytes, stream>>>(params);
  KC_CUDA_CHECK(cudaGetLastError());
}

}  // namespace kc::stage3
