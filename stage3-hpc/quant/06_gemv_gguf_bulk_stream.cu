// Rung 06 of the GGUF GEMV — the weights streamed into shared memory by the copy engine: bytes in
// flight that hold no registers.
//
// Idea: rung 05 does few instructions a weight, yet profiled on the H200 (ncu; the stage-3 README
// has the figures) its schedulers issue on about a third of the cycles and its warps spend most of
// their time waiting for loads (long scoreboard on L1TEX). Each warp keeps one chunk of its tile in
// flight (the next chunk's quants and scales, in registers), and it reads its 16 bytes of x inside
// the block loop, right before the product that needs them. A decode GEMV has nothing but the
// stream of weights to hide the DRAM latency behind, so what sets its speed is how many bytes are
// on their way at any moment (Little's law: about the bandwidth times the loaded latency, tens of
// kilobytes an SM), and every byte a register holds in flight is a byte that limits how many
// warps fit.
//
// What changed from rung 05: the loads. Each CTA (one tile of 16 output columns, as in rung 05)
// gets a ninth warp, the producer: one of its lanes asks the copy engine (cp.async.bulk, no tensor
// map: the tile's chunks are already contiguous in layout=3) for a stage at a time — the next 8
// chunks of quants, their scales, and the x slice they meet (1024 k of each of the M rows) — into
// a ring of 4 stages in shared memory, each completing on an mbarrier (full); the 8 consumer warps
// read their chunk of a stage with LDS.128 and release the stage on a second mbarrier (empty) when
// done. Up to 4 stages (about 12 KB each for q4_1 at M = 1) are in flight per CTA and cost no
// registers; x and the scales come from shared memory too, so nothing in the block loop waits on
// global memory. The arithmetic is rung 05's (gemv_gguf_mma.cuh: the nibbles to bf16 pairs, the
// products with x and with ones, the scales in FP32), and each consumer warp takes the chunks rung
// 05's warp of the same index takes, in the same order, and the warps' sums meet in the same order:
// rung 06 writes the same bits as rung 05 (a GPU test holds it to that). At M = 1 both rungs run an
// instance that leaves out the FFMAs of the x rows a decode step of one token does not have (half
// of them: gemv_gguf_mma.cuh's kOneRow).
//
// Expected limiter: the DRAM stream on projections of megabytes; the launch, the ring's first fill
// and the drain on small ones. A grid of more tiles than fit at once keeps its bytes in flight in
// the tail too, since a CTA's ring does not depend on how many warps are resident. The x slices
// grow with M (2 KB a row a stage): at 16 rows a stage is about 42 KB and one CTA fills an SM's
// shared memory, so kc::stage3::quantized_gemv runs rung 05 above M = 8.
//
// SASS to look for (sm_90a): UBLKCP.S.G (the bulk copies) and SYNCS.* (the mbarriers) in the
// producer; LDS.128 for quants, scales and x and HMMA.16816.F32.BF16 in the consumers' loop; no
// LDG at all, no LDL/STL. The copy engine is Hopper's: the sm_80 pass compiles an empty kernel, the
// launch refuses a build without sm_90a code, and kc::stage3::quantized_gemv runs rung 05 there.
//
// Run just this rung: kc-bench --filter stage3/gemv_gguf/0[56] --param layout=3 --param ggml_type=3
#include <cuda_bf16.h>

#include <cstdint>
#include <cstring>

#include "arch/sm90/mbarrier.cuh"
#include "arch/sm90/sm90a.hpp"
#include "arch/sm90/tma.cuh"
#include "bulk_stream_ring.cuh"
#include "gemv_gguf_mma.cuh"
#include "kc/common/device.hpp"
#include "kc/common/error.hpp"
#include "kc/stage3/gemm.hpp"
#include "kc/stage3/gemv_gguf_args.hpp"

namespace kc::stage3 {
namespace {

constexpr int kConsumerWarps = 8;
constexpr int kThreads = (kConsumerWarps + 1) * 32;  // the consumers and one producer warp
constexpr int kStages = 4;
constexpr int kStageK = kConsumerWarps * 4 * kGgufBlockWeights;  // 1024 k: a chunk for every consumer

// A stage of the ring: [8 chunks of quants | their scales | x rows 0 .. M-1, kStageK k each].
template <GgufBlockType kType>
constexpr int stage_bytes(int m_rows) {
  using Bytes = gguf_mma::ChunkBytes<kType>;
  return kConsumerWarps * (Bytes::kQuants + Bytes::kScales) + m_rows * kStageK * 2;
}

template <GgufBlockType kType, int kRowGroups, bool kOneRow, bool kSwapped>
__global__ void __launch_bounds__(kThreads, 1)
    gemv_bulk_stream_kernel(int m_rows, int n_cols, int k_len, const __nv_bfloat16* __restrict__ x,
                            const std::uint8_t* __restrict__ quants, const std::uint8_t* __restrict__ scales,
                            __nv_bfloat16* __restrict__ y) {
#if KC_STAGE3_SM90A
  using Bytes = gguf_mma::ChunkBytes<kType>;
  constexpr int kQuantArea = kConsumerWarps * Bytes::kQuants;
  constexpr int kXOffset = kConsumerWarps * (Bytes::kQuants + Bytes::kScales);
  extern __shared__ __align__(16) std::uint8_t ring[];
  __shared__ std::uint64_t full[kStages], empty[kStages];
  __shared__ float partial[kConsumerWarps * kRowGroups * 32 * 4];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int k_blocks = k_len / kGgufBlockWeights;
  const int chunks = (k_blocks + 3) / 4;
  const int stages = (chunks + kConsumerWarps - 1) / kConsumerWarps;
  const int tile = blockIdx.x;
  const int ring_stage_bytes = stage_bytes<kType>(m_rows);
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
            landed, static_cast<std::uint32_t>(stage_chunks * (Bytes::kQuants + Bytes::kScales) + m_rows * stage_k * 2));
        sm90::bulk_load(stage, quants + (tile_chunks + first_chunk) * Bytes::kQuants,
                        static_cast<std::uint32_t>(stage_chunks * Bytes::kQuants), landed);
        sm90::bulk_load(stage + kQuantArea, scales + (tile_chunks + first_chunk) * Bytes::kScales,
                        static_cast<std::uint32_t>(stage_chunks * Bytes::kScales), landed);
        for (int r = 0; r < m_rows; ++r)
          sm90::bulk_load(stage + kXOffset + r * kStageK * 2, x + static_cast<std::size_t>(r) * k_len + k0,
                          static_cast<std::uint32_t>(stage_k * 2), landed);
      });
    }
  } else {
    // A consumer: chunk 8s + warp of stage s, rung 05's arithmetic on shared memory.
    const int g = lane >> 2, t = lane & 3;
    bool row_valid[kRowGroups];
#pragma unroll
    for (int r = 0; r < kRowGroups; ++r) row_valid[r] = g + 8 * r < m_rows;
    bulk_ring::consume(full, empty, stages, [&](int s, int slot) {
      const int chunk = s * kConsumerWarps + warp;
      if (chunk < chunks) {
        const std::uint8_t* stage = ring + static_cast<std::size_t>(slot) * ring_stage_bytes;
        const auto* x_stage = reinterpret_cast<const __nv_bfloat16*>(stage + kXOffset);
        gguf_mma::weights_as_a_stage_chunk<kType, kRowGroups, kOneRow, kSwapped, kConsumerWarps>(
            stage, warp, lane, chunk, k_blocks, row_valid,
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

template <GgufBlockType kType, int kRowGroups, bool kOneRow, bool kSwapped>
void launch_instance(const GgufGemvArgs& a, cudaStream_t stream) {
  require(gemv_gguf_06_runs_here(),
          "gemv_gguf rung 06 (bulk stream) needs sm_90a code (the copy engine's cp.async.bulk) and a Hopper GPU; "
          "this build or GPU has none: run rung 05, as kc::stage3::quantized_gemv does");
  const auto kernel = &gemv_bulk_stream_kernel<kType, kRowGroups, kOneRow, kSwapped>;
  // Once per instance: allow the ring of its largest M.
  static const bool prepared = [kernel] {
    KC_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       kStages * stage_bytes<kType>(8 * kRowGroups)));
    return true;
  }();
  (void)prepared;
  const dim3 grid(static_cast<unsigned>((a.n + 15) / 16));
  const int smem = kStages * stage_bytes<kType>(a.m);
  kernel<<<grid, kThreads, smem, stream>>>(a.m, a.n, a.k, a.x, a.quants, static_cast<const std::uint8_t*>(a.scales),
                                           a.y);
}

template <bool kSwapped>
void launch(const GgufGemvArgs& a, cudaStream_t stream) {
  gguf_mma::launch_weights_as_a_rung(a, "bulk stream", [&](auto type, auto row_groups, auto one_row) {
    launch_instance<decltype(type)::value, decltype(row_groups)::value, decltype(one_row)::value, kSwapped>(a, stream);
  });
}

}  // namespace

void gemv_gguf_06_bulk_stream(const GgufGemvArgs& args, cudaStream_t stream) { launch<false>(args, stream); }

void gemv_gguf_06_swapped_nibbles(const GgufGemvArgs& args, cudaStream_t stream) { launch<true>(args, stream); }

// The rule the Hopper attention and GEMM entries use: compute capability 9.0 and a build with
// sm_90a code (on any other GPU, or in an sm_80-only build, the kernel is empty).
bool gemv_gguf_06_runs_here() {
  static const bool runs = has_gpu() && built_with_sm90a_code() && [] {
    int device = 0;
    KC_CUDA_CHECK(cudaGetDevice(&device));
    return query_device(device).compute_capability() == 90;
  }();
  return runs;
}

}  // namespace kc::stage3
