// Rung 04 of the GGUF GEMV — rung 03's tensor-core arithmetic, its weight stream through a
// cp.async pipeline in shared memory: more bytes in flight, no more registers.
//
// Idea: a stream from DRAM runs at the copy bandwidth only when enough bytes are in flight to cover
// the latency (Little's law: 4 TB/s x ~1 us is about 4 MB over the GPU, 30 KB an SM). Rung 03
// holds its next chunk in registers: 1 KB a warp (two tiles of 512 bytes), and at 68-99 registers
// a thread three CTAs of 8 warps fit an SM, 24 KB in flight at best, and less while a warp waits
// for its first chunk. Prefetching deeper in registers would cost occupancy as fast as it adds
// bytes. cp.async copies global memory into shared memory without passing through registers and
// without blocking the thread, so each warp keeps kStages - 1 chunks in flight while it multiplies
// the oldest one.
//
// What changed from rung 03: the loads only. Each warp owns kStages slots of shared memory, one
// chunk (its tiles' 512 or 1024 bytes of quants and 64 or 128 bytes of scales) each; lane l copies
// its own 16 or 32 bytes of quants, lanes 0..3 (0..7 for q4_1) the scales, and every lane then reads
// its quants and its columns' scales from the slot (cp.async.wait_group, then __syncwarp: lanes read
// scales another lane copied). No CTA-wide barrier in the loop: the warps of a CTA run their
// pipelines independently and meet only for the final reduction. The block arithmetic (nibbles to
// bf16 with one LOP3 a pair, mma.sync, the scales once a block in FP32) is rung 03's
// (quant/gemv_gguf_mma.cuh), and so is the layout (layout=2).
//
// Expected limiter: DRAM bandwidth on large weights; on small ones (a 1B model's 2048-wide
// projections, a few MB) the launch and the ramp, as for a copy of the same bytes.
//
// SASS to look for: LDGSTS.E.BYPASS.128 (cp.async), LDGDEPBAR / DEPBAR, LDS for quants and scales,
// HMMA.16816.F32.BF16, no LDG of quants.
//
// Run just this rung: kc-bench --filter stage3/gemv_gguf/04_cp_async
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstring>

#include "arch/sm80/cp_async.cuh"
#include "gemv_gguf_mma.cuh"
#include "kc/common/error.hpp"
#include "kc/stage3/gemv_gguf_args.hpp"

namespace kc::stage3 {
namespace {

constexpr int kWarps = 8;
constexpr int kStages = 4;

// One warp's slot: kTiles x (32 lanes of quants), then kTiles x the tile's scales.
template <GgufBlockType kType, int kTiles>
constexpr int kSlotBytes = kTiles * (32 * gguf_mma::kLaneQuantBytes<kType> + gguf_mma::kTileScaleBytes<kType>);

template <GgufBlockType kType, int kTiles>
constexpr int kSharedBytes = kWarps * kStages * kSlotBytes<kType, kTiles>;

// Lane `lane`'s copies of chunk `chunk` of the CTA's tiles into `slot` (a shared address): its
// quants, and one 16-byte piece of each tile's scales for the first lanes. Out of range: zeros.
template <GgufBlockType kType, int kTiles>
__device__ __forceinline__ void issue_chunk(std::uint32_t slot, const std::uint8_t* quants, const std::uint8_t* scales,
                                            int first_tile, int n_tiles, int chunk, int chunks, int lane) {
  constexpr int kLane = gguf_mma::kLaneQuantBytes<kType>, kScales = gguf_mma::kTileScaleBytes<kType>;
#pragma unroll
  for (int i = 0; i < kTiles; ++i) {
    const bool valid = chunk < chunks && first_tile + i < n_tiles;
    const std::size_t tile_chunk = valid ? static_cast<std::size_t>(first_tile + i) * chunks + chunk : 0;
#pragma unroll
    for (int v = 0; v < kLane / 16; ++v)
      sm80::cp_async_16(slot + (i * 32 + lane) * kLane + 16 * v, quants + (tile_chunk * 32 + lane) * kLane + 16 * v,
                        valid);
    if (lane < kScales / 16)
      sm80::cp_async_16(slot + kTiles * 32 * kLane + i * kScales + 16 * lane, scales + tile_chunk * kScales + 16 * lane,
                        valid);
  }
}

template <GgufBlockType kType, int kTiles, bool kUpperRows, bool kSwapped>
__global__ void __launch_bounds__(kWarps * 32)
    gemv_cp_async_kernel(int m_rows, int n_cols, int k_len, const __nv_bfloat16* __restrict__ x,
                         const std::uint8_t* __restrict__ quants, const std::uint8_t* __restrict__ scales,
                         __nv_bfloat16* __restrict__ y) {
  constexpr bool kBiased = kType != GgufBlockType::q8_0;
  constexpr int kLane = gguf_mma::kLaneQuantBytes<kType>, kScales = gguf_mma::kTileScaleBytes<kType>;
  constexpr int kSlot = kSlotBytes<kType, kTiles>;
  extern __shared__ __align__(16) std::uint8_t shared[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int n_tiles = (n_cols + 7) / 8;
  const int k_blocks = k_len / kGgufBlockWeights;
  const int chunks = (k_blocks + 3) / 4;
  const int first_tile = blockIdx.x * kTiles;
  std::uint8_t* warp_slots = shared + warp * kStages * kSlot;
  const auto slot_address = [&](int stage) {
    return static_cast<std::uint32_t>(__cvta_generic_to_shared(warp_slots + stage * kSlot));
  };

  float acc[kTiles][4];
#pragma unroll
  for (int i = 0; i < kTiles; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[i][e] = 0.f;
  const bool row_low = g < m_rows, row_high = kUpperRows && g + 8 < m_rows;
  const __nv_bfloat16* x_low = x + static_cast<std::size_t>(g) * k_len + 8 * t;
  const __nv_bfloat16* x_high = x + static_cast<std::size_t>(g + 8) * k_len + 8 * t;

  // The warp's chunks are warp, warp + kWarps, ...: step n is chunk warp + n kWarps, in slot n % kStages.
  const int steps = chunks > warp ? (chunks - warp + kWarps - 1) / kWarps : 0;
#pragma unroll
  for (int n = 0; n < kStages - 1; ++n) {
    issue_chunk<kType, kTiles>(slot_address(n), quants, scales, first_tile, n_tiles, warp + n * kWarps, chunks, lane);
    sm80::cp_async_commit_group();
  }
  for (int n = 0; n < steps; ++n) {
    // Refill the slot step n - 1 used (every lane is past it: the __syncwarp at the end of the last
    // step), then wait for step n's copies; a group is committed every step, empty past the end.
    const int ahead = n + kStages - 1;
    issue_chunk<kType, kTiles>(slot_address(ahead % kStages), quants, scales, first_tile, n_tiles,
                               warp + ahead * kWarps, chunks, lane);
    sm80::cp_async_commit_group();
    sm80::cp_async_wait_group<kStages - 1>();
    __syncwarp();
    const std::uint8_t* slot = warp_slots + (n % kStages) * kSlot;
    const int chunk = warp + n * kWarps;
    std::uint32_t lane_quants[kTiles][kLane / 4];
#pragma unroll
    for (int i = 0; i < kTiles; ++i) std::memcpy(lane_quants[i], slot + (i * 32 + lane) * kLane, kLane);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int block = 4 * chunk + j;
      if (block >= k_blocks) break;
      const gguf_mma::BlockA a = gguf_mma::load_block_a(x_low, x_high, row_low, row_high, block);
      float s[4] = {0.f, 0.f, 0.f, 0.f};
      if constexpr (kBiased) gguf_mma::block_sums(a, s);
#pragma unroll
      for (int i = 0; i < kTiles; ++i) {
        std::uint32_t b[4];
        gguf_mma::b_fragments<kType, kSwapped>(lane_quants[i], j, b);
        // Entries (t, 2j) and (t, 2j + 1): the scales of columns 2t and 2t + 1 for block j.
        const auto* entries = reinterpret_cast<const std::uint32_t*>(slot + kTiles * 32 * kLane + i * kScales +
                                                                      t * 8 * gguf_scale_bytes(kType));
        float2 f0, f1;
        gguf_mma::block_factors<kType>(entries, j, f0, f1);
        gguf_mma::block_product<kUpperRows>(a, b, s, f0, f1, acc[i]);
      }
    }
    __syncwarp();
  }
  sm80::cp_async_wait_group<0>();
  __syncthreads();  // the slots are reused as the reduction's scratch
  gguf_mma::reduce_and_store<kWarps, kTiles>(acc, reinterpret_cast<float*>(shared), m_rows, n_cols, first_tile, y);
}

template <GgufBlockType kType, int kTiles, bool kUpperRows, bool kSwapped>
void launch_instance(const GgufGemvArgs& a, int tiles, cudaStream_t stream) {
  constexpr int kBytes = kSharedBytes<kType, kTiles>;
  static_assert(kBytes >= kWarps * kTiles * 32 * 4 * static_cast<int>(sizeof(float)),
                "the slots hold the reduction's partial sums");
  auto* kernel = &gemv_cp_async_kernel<kType, kTiles, kUpperRows, kSwapped>;
  static const bool configured = [&] {
    KC_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes));
    return true;
  }();
  (void)configured;
  const dim3 grid(static_cast<unsigned>((tiles + kTiles - 1) / kTiles)), block(kWarps * 32);
  kernel<<<grid, block, kBytes, stream>>>(a.m, a.n, a.k, a.x, a.quants, static_cast<const std::uint8_t*>(a.scales), a.y);
}

template <bool kSwapped>
void launch(const GgufGemvArgs& a, cudaStream_t stream) {
  gguf_mma::launch_tile_rung(a, "cp.async", [&](auto type, auto tiles_per_cta, auto upper_rows, int tiles) {
    launch_instance<decltype(type)::value, decltype(tiles_per_cta)::value, decltype(upper_rows)::value, kSwapped>(
        a, tiles, stream);
  });
}

}  // namespace

void gemv_gguf_04_cp_async(const GgufGemvArgs& args, cudaStream_t stream) { launch<false>(args, stream); }

void gemv_gguf_04_swapped_nibbles(const GgufGemvArgs& args, cudaStream_t stream) { launch<true>(args, stream); }

}  // namespace kc::stage3
