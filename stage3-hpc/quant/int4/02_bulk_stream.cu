// Rung 02 of the int4 GEMV — rung 01's arithmetic with the weights streamed into shared memory by
// the copy engine (Hopper).
//
// Idea: the GGUF GEMV learned it at its rung 06 (quant/06_gemv_gguf_bulk_stream.cu, whose header
// has the argument): a decode GEMV has nothing but the weight stream to hide DRAM latency behind,
// so what sets its speed is how many bytes are on their way at any moment, and a byte in flight
// that a register holds limits how many warps fit. Rung 01 keeps one chunk a warp in flight, in
// registers. Here a ninth warp, the producer, has one lane ask the copy engine (cp.async.bulk: the
// prepared layout is already contiguous per tile, no tensor map needed) for a stage at a time —
// the next 8 chunks of quants, their scale entries, and the slice of x they meet (1024 k of each of
// the M rows) — into a ring of 4 stages, each completing on an mbarrier (full); the 8 consumer
// warps read their chunk with LDS.128 (LDS.64 for the scale entries at G >= 128) and release the
// stage on a second mbarrier (empty).
//
// What changed from rung 01: the loads only. Consumer warp w takes the chunks rung 01's warp w
// takes, in the same order, through the same arithmetic (gemv_int4_groups.cuh), and the warps'
// sums meet in the same order, so rung 02 writes rung 01's bits (a GPU test holds it to that).
// A stage is 8 x (1024 + 8 E x 4) bytes of weights (E scale entries a row group: 2 at G >= 128,
// so 10.5 KB) plus M x 2 KB of x.
//
// Expected limiter: the DRAM stream on projections of megabytes; the launch, the ring's first fill
// and the drain on small ones.
//
// SASS to look for (sm_90a): UBLKCP.S.G and SYNCS.* in the producer; LDS.128 and
// HMMA.16816.F32.BF16 in the consumers' loop; no LDG, no LDL/STL. The sm_80 pass compiles an empty
// kernel and the launch refuses to run it.
//
// Run just this rung: kc-bench --filter stage3/gemv_int4/02_bulk_stream
#include <cuda_bf16.h>

#include <cstdint>
#include <cstring>

#include "arch/sm90/sm90a.hpp"
#include "arch/sm90/tma.cuh"
#include "kc/common/error.hpp"
#include "kc/stage3/gemv_gguf_args.hpp"
#include "kc/stage3/gemv_int4_args.hpp"
#include "quant/bulk_stream_ring.cuh"
#include "quant/int4/gemv_int4_groups.cuh"

namespace kc::stage3 {
namespace {

constexpr int kConsumerWarps = 8;
constexpr int kThreads = (kConsumerWarps + 1) * 32;  // the consumers and one producer warp
constexpr int kStages = 4;
constexpr int kStageK = kConsumerWarps * kInt4ChunkWeights;  // 1024 k: a chunk for every consumer
constexpr int kChunkQuantBytes = 32 * 32;                    // 32 lanes x 32 bytes

template <int kBlocksPerScale>
constexpr int chunk_scale_bytes() {
  return 8 * int4_groups::kEntries<kBlocksPerScale> * 4;  // 8 row groups x E entries of 4 bytes
}

// A stage of the ring: [8 chunks of quants | their scale entries | x rows 0 .. M-1, kStageK k each].
template <int kBlocksPerScale>
constexpr int stage_bytes(int m_rows) {
  return kConsumerWarps * (kChunkQuantBytes + chunk_scale_bytes<kBlocksPerScale>()) + m_rows * kStageK * 2;
}

template <int kBlocksPerScale, int kRowGroups, bool kOneRow>
__global__ void __launch_bounds__(kThreads, 1)
    gemv_int4_bulk_stream_kernel(int m_rows, int n_cols, int k_len, const __nv_bfloat16* __restrict__ x,
                                 const std::uint8_t* __restrict__ quants, const std::uint8_t* __restrict__ scales,
                                 __nv_bfloat16* __restrict__ y) {
#if KC_STAGE3_SM90A
  constexpr int kScaleBytes = chunk_scale_bytes<kBlocksPerScale>();
  constexpr int kQuantArea = kConsumerWarps * kChunkQuantBytes;
  constexpr int kXOffset = kConsumerWarps * (kChunkQuantBytes + kScaleBytes);
  extern __shared__ __align__(16) std::uint8_t ring[];
  __shared__ std::uint64_t full[kStages], empty[kStages];
  __shared__ float partial[kConsumerWarps * kRowGroups * 32 * 4];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int k_blocks = k_len / 32;
  const int chunks = (k_len + kInt4ChunkWeights - 1) / kInt4ChunkWeights;
  const int stages = (chunks + kConsumerWarps - 1) / kConsumerWarps;
  const int tile = blockIdx.x;
  const int ring_stage_bytes = stage_bytes<kBlocksPerScale>(m_rows);
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
            landed, static_cast<std::uint32_t>(stage_chunks * (kChunkQuantBytes + kScaleBytes) + m_rows * stage_k * 2));
        sm90::bulk_load(stage, quants + (tile_chunks + first_chunk) * kChunkQuantBytes,
                        static_cast<std::uint32_t>(stage_chunks * kChunkQuantBytes), landed);
        sm90::bulk_load(stage + kQuantArea, scales + (tile_chunks + first_chunk) * kScaleBytes,
                        static_cast<std::uint32_t>(stage_chunks * kScaleBytes), landed);
        for (int r = 0; r < m_rows; ++r)
          sm90::bulk_load(stage + kXOffset + r * kStageK * 2, x + static_cast<std::size_t>(r) * k_len + k0,
                          static_cast<std::uint32_t>(stage_k * 2), landed);
      });
    }
  } else {
    // A consumer: chunk 8s + warp of stage s, rung 01's arithmetic on shared memory.
    const int g = lane >> 2, t = lane & 3;
    bool row_valid[kRowGroups];
#pragma unroll
    for (int r = 0; r < kRowGroups; ++r) row_valid[r] = g + 8 * r < m_rows;
    bulk_ring::consume(full, empty, stages, [&](int s, int slot) {
      const int chunk = s * kConsumerWarps + warp;
      if (chunk < chunks) {
        const std::uint8_t* stage = ring + static_cast<std::size_t>(slot) * ring_stage_bytes;
        const auto lane_chunk = int4_groups::read_stage_chunk<kBlocksPerScale, kConsumerWarps>(stage, warp, lane, g);
        const auto* x_stage = reinterpret_cast<const __nv_bfloat16*>(stage + kXOffset);
        int4_groups::chunk_product<kBlocksPerScale, kRowGroups, kOneRow, Int4Flaw::none>(
            lane_chunk.words, lane_chunk.entries, chunk, k_blocks,
            [&](int r, int j, int) {
              return row_valid[r]
                         ? *reinterpret_cast<const uint4*>(x_stage + (g + 8 * r) * kStageK + (4 * warp + j) * 32 + 8 * t)
                         : make_uint4(0, 0, 0, 0);
            },
            acc);
      }
    });
  }
  gguf_mma::weights_as_a_reduce_and_store<kConsumerWarps, kRowGroups, kThreads>(acc, warp < kConsumerWarps, partial,
                                                                                m_rows, n_cols, tile, y);
#endif
}

template <int kBlocksPerScale, int kRowGroups, bool kOneRow>
void launch_instance(const Int4GemvArgs& a, cudaStream_t stream) {
  const auto kernel = &gemv_int4_bulk_stream_kernel<kBlocksPerScale, kRowGroups, kOneRow>;
  // Once per instance: allow the ring of its largest M.
  static const bool prepared = [kernel] {
    KC_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       kStages * stage_bytes<kBlocksPerScale>(8 * kRowGroups)));
    return true;
  }();
  (void)prepared;
  const dim3 grid(static_cast<unsigned>((a.n + kInt4TileRows - 1) / kInt4TileRows));
  const int smem = kStages * stage_bytes<kBlocksPerScale>(a.m);
  kernel<<<grid, kThreads, smem, stream>>>(a.m, a.n, a.k, a.x, a.quants,
                                           reinterpret_cast<const std::uint8_t*>(a.scales), a.y);
}

// The instance for M as rung 01 chooses it (they must match to write the same bits).
template <int kBlocksPerScale>
void launch_rows(const Int4GemvArgs& a, cudaStream_t stream) {
  if (a.m > 8)
    launch_instance<kBlocksPerScale, 2, false>(a, stream);
  else if (a.m > 1)
    launch_instance<kBlocksPerScale, 1, false>(a, stream);
  else
    launch_instance<kBlocksPerScale, 1, true>(a, stream);
}

}  // namespace

void gemv_int4_02_bulk_stream(const Int4GemvArgs& a, cudaStream_t stream) {
  int4_groups::check_args(a, "rung 02");
  require(gemv_gguf_06_runs_here(),
          "int4 GEMV rung 02 (bulk stream) needs sm_90a code (the copy engine's cp.async.bulk) and a Hopper GPU; "
          "this build or GPU has none: run rung 01");
  switch (int4_blocks_per_scale(a.group_size)) {
    case 1: launch_rows<1>(a, stream); break;
    case 2: launch_rows<2>(a, stream); break;
    default: launch_rows<4>(a, stream); break;
  }
  KC_CUDA_CHECK(cudaGetLastError());
}

}  // namespace kc::stage3
