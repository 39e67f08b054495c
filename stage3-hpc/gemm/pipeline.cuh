// pipeline.cuh — the ring of shared-memory stages between the producer and the consumers of the
// warp-specialized kernel (rungs 06-10, warp_specialized_gemm.cuh).
//
// Why a ring: the producer (one thread of warpgroup 0) can load K step t + 3 while the consumers
// (warpgroups 1 and 2) multiply K step t, so the tensor cores never wait for memory as long as the
// loads keep up. Neither side waits for the other as a whole, as a __syncthreads would make them:
// each stage carries its own two mbarriers (arch/sm90/mbarrier.cuh), and a side waits only for the
// stage it needs next.
//
//   full[s]   1 arrival (the producer's arrive.expect_tx) plus the stage's TMA bytes: the A and B
//             tiles of stage s have landed.
//   empty[s]  one arrival per consumer warp of every CTA that reads the stage (with clusters the
//             peer CTA's producer writes into this CTA's stage too): nobody reads stage s any more.
//
// The producer waits for empty[s], announces the bytes and issues the TMA copies into s
// (StageRing::load_tile); the consumers wait for full[s] (wait_full), run the WGMMAs, and arrive
// on empty[s] once those WGMMAs have finished reading (release; the K loop that does this is the
// consumers' mainloop in warp_specialized_gemm.cuh). Both sides walk the stages in the same
// order, and PipelineState flips the parity they wait for at each wrap-around, across K steps and
// across tiles alike.
//
// Rung 10's epilogue is a second pipeline of the same kind, with one slot per consumer: the
// consumer's store buffer (epilogue_offloaded_activation.cuh).
#pragma once

#include <cstdint>

#include "arch/sm90/mbarrier.cuh"
#include "arch/sm90/sm90a.hpp"
#include "arch/sm90/tma.cuh"
#include "arch/sm90/wgmma.cuh"
#include "arch/util.hpp"
#include "gemm_layout.hpp"
#include "hopper_common.cuh"

namespace kc::stage3 {

#if KC_STAGE3_SM90A

// Where one side of the ring is: the stage it uses next, and the parity of that stage's barrier
// phase it waits for (a fresh barrier is in phase 0).
template <int kStages>
struct PipelineState {
  int stage = 0;
  std::uint32_t phase = 0;
  __device__ void advance() {
    if (++stage == kStages) {
      stage = 0;
      phase ^= 1;
    }
  }
};

// The ring in shared memory: kStages A tiles (128 x 64), then kStages B tiles (256 x 64), all
// swizzled and 1024-byte aligned, and the full/empty barriers of every stage.
template <class Config>
struct StageRing {
  std::uint8_t* tiles;
  std::uint64_t* full;   // kStages barriers
  std::uint64_t* empty;  // kStages barriers

  __device__ std::uint8_t* tile_a(int stage) const { return tiles + stage * Config::kTileBytesA; }
  __device__ std::uint8_t* tile_b(int stage) const {
    return tiles + Config::kStages * Config::kTileBytesA + stage * Config::kTileBytesB;
  }

  // By one thread, before the CTA's (or the cluster's) first barrier.
  __device__ __forceinline__ void init_barriers() const {
    for (int stage = 0; stage < Config::kStages; ++stage) {
      sm90::mbarrier_init(&full[stage], 1);
      sm90::mbarrier_init(&empty[stage], Config::kConsumerWarps * Config::kClusterM);
    }
  }

  // ---- producer side: one thread ----
  // Loads the K steps of output tile `tile` into the next stages, each as soon as it is free.
  __device__ __forceinline__ void load_tile(const typename Config::Params& params,
                                            PipelineState<Config::kStages>& state, TileCoord tile,
                                            std::uint32_t cta_rank, int k_tiles) const {
    // A box may hang over the edge of its matrix (the overhang reads as zeros), but it always
    // starts inside it. Only in a cluster can a start fall outside: the second CTA of the last
    // strip when the tile rows are odd (it still takes part in the B multicast and discards
    // its results), or the second B slice when N ends within the first half of the tile
    // (those rows only feed columns past N, which are never stored).
    const int a_row = min(tile.m * Config::kBlockM, params.m - 1);
    const int b_row = min(tile.n * Config::kBlockN + static_cast<int>(cta_rank) * Config::kBSliceRows,
                          params.n - 1);
    for (int k_tile = 0; k_tile < k_tiles; ++k_tile) {
      const int k0 = k_tile * kHopperBlockK;
      sm90::mbarrier_wait(&empty[state.stage], state.phase ^ 1);
      sm90::mbarrier_arrive_expect_tx(&full[state.stage], Config::kStageBytes);
      sm90::tma_load_2d(tile_a(state.stage), &params.a, &full[state.stage], k0, a_row);
      if constexpr (Config::kClusterM == 1) {
        sm90::tma_load_2d(tile_b(state.stage), &params.b, &full[state.stage], k0, b_row);
      } else {
        // Each CTA loads 1/kClusterM of the B tile into the same place in every CTA.
        constexpr std::uint16_t kAllCtas = (1u << Config::kClusterM) - 1;
        sm90::tma_load_2d_multicast(tile_b(state.stage) + cta_rank * Config::kBSliceBytes,
                                    &params.b, &full[state.stage], k0, b_row, kAllCtas);
      }
      state.advance();
    }
  }

  // The same for a tile whose A rows start at a_row and B rows at b_row, without clusters: the
  // grouped GEMM (rungs 03-07), whose tiles start at an expert's first row and its weight's first
  // row. K steps k_tile_begin .. k_tile_end - 1 (rungs 06-07 split the last wave's tiles along K);
  // A through `a_map` (rung 07: a map of 64-row boxes for a tile whose second half is empty), each
  // stage then `stage_bytes`.
  __device__ __forceinline__ void load_rows(const typename Config::Params& params,
                                            PipelineState<Config::kStages>& state, int a_row, int b_row,
                                            int k_tile_end, int k_tile_begin = 0,
                                            const CUtensorMap* a_map = nullptr,
                                            int stage_bytes = Config::kStageBytes) const {
    static_assert(Config::kClusterM == 1, "load_rows has no multicast");
    const CUtensorMap* const a = a_map != nullptr ? a_map : &params.a;
    for (int k_tile = k_tile_begin; k_tile < k_tile_end; ++k_tile) {
      const int k0 = k_tile * kHopperBlockK;
      sm90::mbarrier_wait(&empty[state.stage], state.phase ^ 1);
      sm90::mbarrier_arrive_expect_tx(&full[state.stage], stage_bytes);
      sm90::tma_load_2d(tile_a(state.stage), a, &full[state.stage], k0, a_row);
      sm90::tma_load_2d(tile_b(state.stage), &params.b, &full[state.stage], k0, b_row);
      state.advance();
    }
  }

  // ---- consumer side: a whole warpgroup, K step by K step (the kernel's mainloop) ----
  // Waits until the stage `state` points to has landed.
  __device__ __forceinline__ void wait_full(const PipelineState<Config::kStages>& state) const {
    sm90::mbarrier_wait(&full[state.stage], state.phase);
  }

  // Frees `stage` once the consumer's WGMMAs have finished reading it: lane 0 of each consumer
  // warp arrives (`lane` is the thread's lane).
  __device__ __forceinline__ void release(int stage, int lane) const {
    if (lane != 0) return;
    if constexpr (Config::kClusterM == 1) {
      sm90::mbarrier_arrive(&empty[stage]);
    } else {
      // Both CTAs' producers write into this stage (each its B slice): free it for both.
      for (int rank = 0; rank < Config::kClusterM; ++rank)
        sm90::mbarrier_arrive_cluster(&empty[stage], static_cast<std::uint32_t>(rank));
    }
  }
};

#endif  // KC_STAGE3_SM90A

}  // namespace kc::stage3
