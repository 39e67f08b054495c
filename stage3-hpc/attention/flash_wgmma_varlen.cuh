// flash_wgmma_varlen.cuh — the Hopper attention kernel on the packed variable-length form
// (attention_fwd_varlen's rung 15, attention/varlen_15_lazy_rescale.cu, whose header tells the
// idea): rung 15's producer and consumers (flash_wgmma_kernel.cuh) on one sequence's rows, found
// from cu_seqlens_q/k, with the tiles that run past the sequence's last row or key copied by the
// producer warp with zeros instead of by TMA.
//
// Why not TMA for every tile: the tensor maps describe the packed [total, H, D] tensors, and TMA
// zero-fills only outside the whole tensor. A sequence's last K/V tile would be filled with the
// next sequence's keys and values, which the mask keeps out of S but not out of P V (0 x NaN =
// NaN where a neighbour's value is not finite), and its last Q tile of the last sequence would read
// past the tensor's end (the host does not know total_q and total_k: the offsets are on the
// device, so the maps' row counts are only the bound B x max_seqlen). So a tile wholly inside its
// sequence goes by TMA, as in the dense kernel; a partial one by the producer warp's 32 lanes with
// cp.async, 16 bytes each, src-size 0 past the sequence's end (zeros, nothing read), written in the
// 128-byte swizzle TMA would have used, then fenced for the async proxy (the WGMMAs read it there)
// and announced on the tile's full barrier with a plain arrive.
#pragma once

#include <cstdint>

#include "arch/sm80/cp_async.cuh"
#include "attention/flash_wgmma_kernel.cuh"
#include "gemm_layout.hpp"  // swizzle_128b_offset: the pattern TMA's 128-byte swizzle writes

namespace kc::stage3 {

// The packed kernel's parameters: the dense kernel's (the maps now over the packed [total, H, D]
// tensors, the lengths the longest ones) and the offsets.
template <typename T>
struct FlashWgmmaVarlenParams : FlashWgmmaParams<T> {
  const std::int32_t* cu_seqlens_q = nullptr;
  const std::int32_t* cu_seqlens_k = nullptr;
};

// The negative control's flaw (attention/varlen_15_lazy_rescale_flawed.cu): every tile by TMA,
// the partial ones included, so that a sequence's last K/V tile holds its neighbour's keys.
enum class VarlenTileFlaw { none, whole_tiles_by_tma };

#if KC_STAGE3_SM90A

// The producer warp's copy of one tile of kRows rows (D = kHeadDim) whose first `valid` rows exist:
// rows from `first_row` on, `row_stride` elements apart, into `tile` in the layout TMA writes with
// the 128-byte swizzle (kHeadDim / 64 boxes of kRows rows of 128 bytes, each laid out as
// swizzle_128b_offset says: the 16-byte chunk c of row r at chunk position c ^ (r % 8)); rows past
// `valid` zeros. Returns once this lane's copies have landed and are ordered before the async
// proxy's reads; the warp then agrees.
template <int kRows, int kHeadDim, typename T>
__device__ __forceinline__ void copy_partial_tile(std::uint8_t* tile, const T* first_row, std::int64_t row_stride,
                                                  int valid, int lane) {
  constexpr int kChunksPerRow = kHeadDim / 8;  // 16 bytes of 2-byte elements
  const std::uint32_t base = smem_u32(tile);
#pragma unroll 4
  for (int i = lane; i < kRows * kChunksPerRow; i += 32) {
    const int row = i / kChunksPerRow;
    const int chunk = i % kChunksPerRow;
    const int box = chunk / 8, in_box = chunk % 8;
    const std::uint32_t destination =
        base + static_cast<std::uint32_t>(box * kRows * kSwizzleRowBytes + swizzle_128b_offset(row, in_box));
    const bool exists = row < valid;
    // src-size 0 reads nothing, but the address must still be a valid one: row 0's.
    sm80::cp_async_16(destination, first_row + (exists ? row : 0) * row_stride + chunk * 8, exists);
  }
  sm80::cp_async_commit_group();
  sm80::cp_async_wait_group<0>();
  sm90::fence_proxy_async_shared();
  __syncwarp();
}

#endif  // KC_STAGE3_SM90A

namespace {

// One CTA: kBlockRows query rows of one (sequence, query head). blockIdx.z is the sequence,
// blockIdx.y the query head, x the query tile, heaviest first (the grid covers the longest
// sequence; a CTA past its own sequence's rows leaves at once).
template <typename T, int kHeadDim, int kConsumers, VarlenTileFlaw kFlaw>
__global__ void __launch_bounds__(FlashWgmmaShape<kHeadDim, kConsumers>::kThreads, 1)
    flash_wgmma_varlen_kernel(const __grid_constant__ FlashWgmmaVarlenParams<T> params) {
#if KC_STAGE3_SM90A
  using Shape = FlashWgmmaShape<kHeadDim, kConsumers>;
  using Smem = FlashWgmmaSmem<Shape>;
  const int b = static_cast<int>(blockIdx.z);
  const int head = static_cast<int>(blockIdx.y);
  const int q_start = params.cu_seqlens_q[b];
  const int kv_start = params.cu_seqlens_k[b];
  const VarlenSequence sequence{q_start, params.cu_seqlens_q[b + 1] - q_start, kv_start,
                                params.cu_seqlens_k[b + 1] - kv_start};
  const int block_row0 = static_cast<int>(gridDim.x - 1 - blockIdx.x) * Shape::kBlockRows;
  if (block_row0 >= sequence.q_len) return;  // past this sequence's rows: the whole CTA, before any barrier

  // The sequence as a dense problem of one batch: what the consumers' mask, tiles and stores read.
  AttentionParams<T> args = params.args;
  args.q_len = sequence.q_len;
  args.kv_len = sequence.kv_len;
  const int kv_head = head / (args.q_heads / args.kv_heads);
  const int key_end = block_key_end(args, block_row0, Shape::kBlockRows);
  const int tiles = ceil_div(key_end, Shape::kBlockKeys);
  const int rows = args.q_len - block_row0;
  const int working = rows >= Shape::kBlockRows ? kConsumers : ceil_div(rows, Shape::kWarpgroupRows);

  extern __shared__ std::uint8_t smem_raw[];
  const Smem smem{aligned_dynamic_smem(smem_raw)};
  if (threadIdx.x == 0) smem.template init_barriers<false>(working);
  __syncthreads();

  const int warpgroup = static_cast<int>(threadIdx.x) / 128;
  if (warpgroup == 0) {
    // ---- producer: lane 0 of warp 0 issues the TMA copies, the whole warp the partial tiles ----
    sm90::setmaxnreg_decrease<Shape::kProducerRegisters>();
    if (threadIdx.x < 32 && tiles > 0) {
      const int lane = static_cast<int>(threadIdx.x);
      constexpr bool kAlwaysTma = kFlaw == VarlenTileFlaw::whole_tiles_by_tma;
      if (kAlwaysTma || block_row0 + Shape::kBlockRows <= args.q_len) {
        if (lane == 0) smem.load_q(params, q_start + block_row0, head, 0);
      } else {
        copy_partial_tile<Shape::kBlockRows, kHeadDim>(
            smem.q_tile(), args.q + (std::int64_t{q_start} + block_row0) * args.q_row_stride + head * args.q_head_stride,
            args.q_row_stride, rows, lane);
        if (lane == 0) sm90::mbarrier_arrive(smem.q_full());
      }
      for (int tile = 0; tile < tiles; ++tile) {
        const int stage = Smem::stage_of(tile);
        sm90::mbarrier_wait_asleep(smem.empty(stage), Smem::phase_of(tile) ^ 1);  // the first pass finds it free
        const int key0 = tile * Shape::kBlockKeys;
        if (kAlwaysTma || key0 + Shape::kBlockKeys <= args.kv_len) {
          if (lane == 0) smem.load_kv(params, stage, kv_start + key0, kv_head, 0);
        } else {
          const std::int64_t first = (std::int64_t{kv_start} + key0) * args.kv_row_stride + kv_head * args.kv_head_stride;
          copy_partial_tile<Shape::kBlockKeys, kHeadDim>(smem.k_tile(stage), args.k + first, args.kv_row_stride,
                                                         args.kv_len - key0, lane);
          if (lane == 0) sm90::mbarrier_arrive(smem.k_full(stage));  // S may start before V lands
          copy_partial_tile<Shape::kBlockKeys, kHeadDim>(smem.v_tile(stage), args.v + first, args.kv_row_stride,
                                                         args.kv_len - key0, lane);
          if (lane == 0) sm90::mbarrier_arrive(smem.v_full(stage));
        }
      }
    }
    return;
  }

  // ---- consumers: rung 15's, on the sequence's rows ----
  if (warpgroup - 1 >= working) return;  // no rows: nothing to compute or store
  sm90::setmaxnreg_increase<Shape::kConsumerRegisters>();
  FlashWgmmaConsumer<T, Shape, /*kDescriptorsAdded=*/true, /*kScaleInExponent=*/true, /*kRowlessConsumersLeave=*/true,
                     /*kLazyRescale=*/true>
      consumer(smem, args, warpgroup - 1, tiles, block_row0);
  consumer.working = working;
  consumer.run_overlapped();
  store_tile_rows(consumer.o, consumer.rows, consumer.row_ends, HeadView<T>(args, sequence, head), args,
                  consumer.warp_row0);
#else
  (void)params;
#endif
}

}  // namespace

// The packed kernel's parameters: the dense kernels' tensor maps (flash_wgmma_params) over the packed
// Q [total_q, Hq, D] and K, V [total_k, Hkv, D] seen as one batch of B x max_seqlen rows — the bound
// the host knows (it does not know the totals; at most 2^31 - 1, as the totals are) — and the
// offsets. The kernel reads by TMA only the tiles that lie wholly inside a sequence, so never past
// the tensors' ends.
template <typename T, int kHeadDim, int kConsumers>
FlashWgmmaVarlenParams<T> flash_wgmma_varlen_params(const AttentionArgs<T>& args, HopperLaunchCache& cache) {
  const auto bound = [&](int max_len) {
    const std::int64_t rows = std::int64_t{args.batch} * max_len;
    return static_cast<int>(rows < INT32_MAX ? rows : INT32_MAX);
  };
  AttentionArgs<T> one_batch = args;
  one_batch.batch = 1;
  one_batch.q_len = bound(args.q_len);
  one_batch.kv_len = bound(args.kv_len);
  one_batch.q_batch_stride = args.q_row_stride;  // one batch: any legal stride
  one_batch.kv_batch_stride = args.kv_row_stride;
  FlashWgmmaVarlenParams<T> params;
  static_cast<FlashWgmmaParams<T>&>(params) = flash_wgmma_params<T, kHeadDim, kConsumers>(one_batch, cache);
  params.args = args;  // the longest lengths: the kernel puts each sequence's own in their place
  params.cu_seqlens_q = args.cu_seqlens_q;
  params.cu_seqlens_k = args.cu_seqlens_k;
  return params;
}

// Launches the packed kernel for D (three consumers at D = 64, two at D = 128, as rung 15): a CTA
// per query tile of the longest sequence, per query head and per sequence. The caller has checked
// the arguments (require_flash_args with packed = true) and that the scale is positive.
template <typename T, int kHeadDim, int kConsumers, VarlenTileFlaw kFlaw = VarlenTileFlaw::none>
void launch_flash_wgmma_varlen(const AttentionArgs<T>& args, cudaStream_t stream, HopperLaunchCache& cache) {
  using Shape = FlashWgmmaShape<kHeadDim, kConsumers>;
  const auto kernel = &flash_wgmma_varlen_kernel<T, kHeadDim, kConsumers, kFlaw>;
  cache.prepare_kernel(reinterpret_cast<const void*>(kernel), Shape::kSmemBytes);
  const FlashWgmmaVarlenParams<T> params = flash_wgmma_varlen_params<T, kHeadDim, kConsumers>(args, cache);
  kernel<<<flash_grid(args, Shape::kBlockRows), Shape::kThreads, Shape::kSmemBytes, stream>>>(params);
  KC_CUDA_CHECK(cudaGetLastError());
}

}  // namespace kc::stage3
