// quant/gemv_bulk_stream_frame.cuh — the bulk-stream GEMV of the GGUF GEMV's rung 06 and the int4
// GEMV's rung 02: one CTA a tile of 16 output columns, a producer warp whose lane has the copy
// engine (cp.async.bulk) stream the tile's chunks of quants, their scale entries and the x slice
// they meet (1024 k of each of the M rows) into a ring of 4 stages on mbarriers, 8 consumer warps
// taking a chunk each from every stage, and the warps' sums added in warp order at the end. What
// the weights are is the kernel's Format: a chunk's bytes (kQuants, kScales), chunks(k) (how many
// chunks K takes, as the rung counts them) and multiply_stage<kRowGroups, kOneRow, kSwapped>(stage,
// warp, lane, group, chunk, k_blocks, row_valid, load_x, acc) (a consumer lane's product of its
// chunk with its rows of x, rows past M reading zeros). The rungs' headers tell their stories;
// this header is included by those two files only.
#pragma once

#include <cuda_bf16.h>

#include <cstddef>
#include <cstdint>

#include "arch/sm90/mbarrier.cuh"
#include "arch/sm90/sm90a.hpp"
#include "arch/sm90/tma.cuh"
#include "kc/common/error.hpp"
#include "quant/bulk_stream_ring.cuh"
#include "quant/gemv_gguf_mma.cuh"

namespace kc::stage3 {
namespace {

constexpr int kConsumerWarps = 8;
constexpr int kThreads = (kConsumerWarps + 1) * 32;  // the consumers and one producer warp
constexpr int kStages = 4;
constexpr int kStageK = kConsumerWarps * 128;  // 1024 k: a chunk of 128 for every consumer

// A stage of the ring: [8 chunks of quants | their scales | x rows 0 .. M-1, kStageK k each].
template <class Format>
constexpr int stage_bytes(int m_rows) {
  return kConsumerWarps * (Format::kQuants + Format::kScales) + m_rows * kStageK * 2;
}

template <class Format, int kRowGroups, bool kOneRow, bool kSwapped>
__global__ void __launch_bounds__(kThreads, 1)
    gemv_bulk_stream_kernel(int m_rows, int n_cols, int k_len, const __nv_bfloat16* __restrict__ x,
                            const std::uint8_t* __restrict__ quants, const std::uint8_t* __restrict__ scales,
                            __nv_bfloat16* __restrict__ y) {
#if KC_STAGE3_SM90A
  constexpr int kQuantArea = kConsumerWarps * Format::kQuants;
  constexpr int kXOffset = kConsumerWarps * (Format::kQuants + Format::kScales);
  extern __shared__ __align__(16) std::uint8_t ring[];
  __shared__ std::uint64_t full[kStages], empty[kStages];
  __shared__ float partial[kConsumerWarps * kRowGroups * 32 * 4];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int k_blocks = k_len / 32;
  const int chunks = Format::chunks(k_len);
  const int stages = (chunks + kConsumerWarps - 1) / kConsumerWarps;
  const int tile = blockIdx.x;
  const int ring_stage_bytes = stage_bytes<Format>(m_rows);
  bulk_ring::init<kStages, kConsumerWarps * 32>(full, empty);

  // acc[r][e]: rows (output columns) 16 tile + g (e < 2) and + 8 (e >= 2), x rows 8r + 2t + (e & 1).
  float acc[kRowGroups][4];
#pragma unroll
  for (int r = 0; r < kRowGroups; ++r)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[r][e] = 0.f;

  if (warp == kConsumerWarps) {
    // The producer: stage s into slot s % kStages once its consumers have released it.
    if (lane == 0) {
      const std::size_t tile_chunks = static_cast<std::size_t>(tile) * chunks;
      bulk_ring::produce(full, empty, stages, [&](int s, int slot, std::uint64_t* landed) {
        const int first_chunk = s * kConsumerWarps;
        const int stage_chunks = min(kConsumerWarps, chunks - first_chunk);
        const int k0 = s * kStageK, stage_k = min(kStageK, k_len - k0);
        std::uint8_t* stage = ring + static_cast<std::size_t>(slot) * ring_stage_bytes;
        sm90::mbarrier_arrive_expect_tx(
            landed, static_cast<std::uint32_t>(stage_chunks * (Format::kQuants + Format::kScales) + m_rows * stage_k * 2));
        sm90::bulk_load(stage, quants + (tile_chunks + first_chunk) * Format::kQuants,
                        static_cast<std::uint32_t>(stage_chunks * Format::kQuants), landed);
        sm90::bulk_load(stage + kQuantArea, scales + (tile_chunks + first_chunk) * Format::kScales,
                        static_cast<std::uint32_t>(stage_chunks * Format::kScales), landed);
        for (int r = 0; r < m_rows; ++r)
          sm90::bulk_load(stage + kXOffset + r * kStageK * 2, x + static_cast<std::size_t>(r) * k_len + k0,
                          static_cast<std::uint32_t>(stage_k * 2), landed);
      });
    }
  } else {
    // A consumer: chunk 8s + warp of stage s.
    const int g = lane >> 2, t = lane & 3;
    bool row_valid[kRowGroups];
#pragma unroll
    for (int r = 0; r < kRowGroups; ++r) row_valid[r] = g + 8 * r < m_rows;
    bulk_ring::consume(full, empty, stages, [&](int s, int slot) {
      const int chunk = s * kConsumerWarps + warp;
      if (chunk < chunks) {
        const std::uint8_t* stage = ring + static_cast<std::size_t>(slot) * ring_stage_bytes;
        const auto* x_stage = reinterpret_cast<const __nv_bfloat16*>(stage + kXOffset);
        Format::template multiply_stage<kRowGroups, kOneRow, kSwapped>(
            stage, warp, lane, g, chunk, k_blocks, row_valid,
            [&](int r, int j, int) {
              return *reinterpret_cast<const uint4*>(x_stage + (g + 8 * r) * kStageK + (4 * warp + j) * 32 + 8 * t);
            },
            acc);
      }
    });
  }
  gguf_mma::weights_as_a_reduce_and_store<kConsumerWarps, kRowGroups, kThreads>(acc, warp < kConsumerWarps, partial,
                                                                                m_rows, n_cols, tile, y);
#endif
}

// One launch of an instance: a CTA a tile of 16 columns, the ring sized for M rows (the instance's
// attribute allows the ring of its largest M, 8 kRowGroups, once).
template <class Format, int kRowGroups, bool kOneRow, bool kSwapped>
void launch_bulk_stream(int m, int n, int k, const __nv_bfloat16* x, const std::uint8_t* quants, const void* scales,
                        __nv_bfloat16* y, cudaStream_t stream) {
  const auto kernel = &gemv_bulk_stream_kernel<Format, kRowGroups, kOneRow, kSwapped>;
  static const bool prepared = [kernel] {
    KC_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       kStages * stage_bytes<Format>(8 * kRowGroups)));
    return true;
  }();
  (void)prepared;
  const dim3 grid(static_cast<unsigned>((n + 15) / 16));
  const int smem = kStages * stage_bytes<Format>(m);
  kernel<<<grid, kThreads, smem, stream>>>(m, n, k, x, quants, static_cast<const std::uint8_t*>(scales), y);
}

}  // namespace
}  // namespace kc::stage3
