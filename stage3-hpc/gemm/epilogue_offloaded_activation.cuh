// epilogue_offloaded_activation.cuh — the epilogue of rung 10: the activation (bias + GELU) runs
// on warps 1-3 of the producer warpgroup, the epilogue warps, beside the next tile's mainloop,
// instead of on the consumers while their tensor cores wait.
//
// The consumer end (hand_over_accumulators, hand_over_pass; the kernel calls them) writes
// alpha.acc + beta.C, rounded to BF16, into its store buffer and goes on; the epilogue warps' end
// (run_offloaded_activation) applies the activation there in place and issues the TMA stores of
// rung 09's epilogue (epilogue_tma_store.cuh).
//
// Each consumer's store buffer becomes a one-slot pipeline between the consumer and the epilogue
// warps (warps 1-3 of the producer warpgroup), with two mbarriers: epilogue_full[c] (all 128
// threads of the consumer have written their part of a pass) and epilogue_empty[c] (all 96
// epilogue threads are done with it, and TMA has finished reading it). Every thread arrives after
// its own accesses instead of one thread arriving for its warpgroup after a named barrier:
// equivalent under the PTX memory model, and each write is then ordered before the other side's
// accesses by its own thread's arrive, which is what compute-sanitizer's racecheck follows (with
// one arrival after a named barrier it reported the handoff as a race). The buffer is used once
// per store pass of every handed-over tile, in the same order on both sides; each side flips the
// parity it waits for after every use, like PipelineState for the stages (pipeline.cuh). A fresh barrier is in phase 0, so the
// consumer's first wait on epilogue_empty (parity 1) passes at once.
//
// Which tiles are handed over: those with rows inside C (tile.m < tiles_m; not so for the second
// CTA of an odd cluster strip), when TMA can store C (use_tma_store; otherwise the consumers store
// directly, activation included), except the CTA's last tile. Nothing follows the last tile whose
// mainloop could hide its activation, so the consumers, idle by then, apply it themselves as rung
// 09's epilogue does (store_accumulators_tma), after one more wait on epilogue_empty: from then on
// the buffer is theirs.
//
// Within a handed-over tile the passes go out one after the other through the one buffer, so the
// second pass would wait for the epilogue warps to finish the first. Instead the consumer keeps
// the last pass, packed to BF16 (32 registers for 128-column passes), and writes it halfway
// through the next tile's mainloop (k step k_tiles / 2, while that step's WGMMAs run); by then
// the epilogue warps have long released the buffer, and they have the second half of the
// mainloop for this pass. The next tile exists, since the last tile is never handed over.
//
// Every wait has its arrival: both sides walk the same persistent schedule (tile_scheduler.cuh:
// the same `linear` sequence) and hand over the same tiles by the same rule, computed from values every
// thread of the CTA shares (kernel parameters and the schedule), so per buffer the k-th write is
// followed by the k-th epilogue_full wait, and the k-th epilogue_empty arrival precedes the
// (k+1)-th write and the last tile's wait. A CTA without tiles, or without handed-over tiles,
// waits for nothing. No cycle can form: the epilogue warps wait only for consumer writes, in the
// order (tile, pass, consumer); a consumer waits only for uses written before its own, whose
// writers (itself, or the other consumer at an earlier point of the same schedule) need nothing
// but stages of the ring, and the ring never makes the consumer that is behind wait for the one
// ahead (a stage is refilled only after both have released it). Each consumer is at most one
// use ahead of the epilogue warps on its buffer.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "arch/sm90/mbarrier.cuh"
#include "arch/sm90/tma.cuh"
#include "arch/sm90/warpgroup.cuh"
#include "epilogue_tma_store.cuh"
#include "gemm_layout.hpp"
#include "hopper_common.cuh"
#include "tile_scheduler.cuh"

namespace kc::stage3 {

#if KC_STAGE3_SM90A

// By one thread, before the CTA's first barrier: per consumer buffer, `full` counts the
// consumer's 128 threads and `empty` the 96 epilogue threads.
template <class Config>
__device__ __forceinline__ void init_handoff_barriers(std::uint64_t* epilogue_full,
                                                      std::uint64_t* epilogue_empty) {
  for (int consumer = 0; consumer < Config::kConsumers; ++consumer) {
    sm90::mbarrier_init(&epilogue_full[consumer], kWarpgroupThreads);          // the consumer's threads
    sm90::mbarrier_init(&epilogue_empty[consumer], Config::kEpilogueThreads);  // the epilogue threads
  }
}

// One use of a consumer's buffer: wait until the epilogue warps have released it, write the
// pass, and arrive on epilogue_full — every thread, after its own writes (the barrier counts the
// warpgroup's 128 threads), so that each write is ordered before the readers' wait by its own
// thread's release-arrive, with no warpgroup barrier in between.
template <class Config>
__device__ __forceinline__ void hand_over_pass(std::uint8_t* buffer, std::uint64_t* buffer_full,
                                               std::uint64_t* buffer_empty, std::uint32_t& phase,
                                               int /*consumer*/, const PassResults<Config>& results) {
  sm90::mbarrier_wait(buffer_empty, phase ^ 1);
  write_pass_to_buffer<Config>(buffer, results);
  sm90::mbarrier_arrive(buffer_full);
  phase ^= 1;
}

// The consumer side of a handed-over tile: alpha.acc + beta.C, rounded to BF16 — the unfused
// baseline's numerics, where cuBLAS writes a BF16 C that the separate kernel reads — handed over
// pass by pass, except the last pass of several, which is packed into `held` for the next tile's
// mainloop. Returns whether it did so.
template <class Config>
__device__ __forceinline__ bool hand_over_accumulators(const typename Config::Params& params,
                                                       std::uint8_t* buffer,
                                                       std::uint64_t* buffer_full,
                                                       std::uint64_t* buffer_empty,
                                                       std::uint32_t& phase, int consumer,
                                                       int row0, int col0,
                                                       float (&acc)[kAccumulators],
                                                       PassResults<Config>& held) {
  constexpr int kPasses = kHopperBlockN / Config::kStorePassColumns;
  constexpr bool kHoldLastPass = kPasses > 1;
  const auto unchanged = [](int, float2 value) { return value; };  // the epilogue warps apply it

  apply_linear_combination(acc, params.linear, params.m, params.n, row0, col0);

#pragma unroll
  for (int pass = 0; pass < kPasses; ++pass) {
    if (kHoldLastPass && pass == kPasses - 1) {
      pack_pass<Config>(acc, pass, held, unchanged);
    } else {
      PassResults<Config> results;
      pack_pass<Config>(acc, pass, results, unchanged);
      hand_over_pass<Config>(buffer, buffer_full, buffer_empty, phase, consumer, results);
    }
  }
  return kHoldLastPass;
}

// Eight BF16 values: one 16-byte chunk of a swizzled buffer row.
union Bf16Chunk {
  uint4 raw;
  __nv_bfloat162 pairs[4];
};

// The epilogue warps' side, run by the 96 threads of warps 1-3 of the producer warpgroup under its
// 40-register cap. Per tile, per pass, per consumer buffer: wait for epilogue_full, apply the
// activation in place (16-byte shared loads and stores through the same swizzle, FP32 math,
// BF16 results), fence the generic proxy against the async proxy, meet at a named barrier of the
// 96 threads, and let one thread issue the pass's TMA stores and wait until they have read the
// buffer; every thread arrives on epilogue_empty (the storing one after that wait). Thread t owns
// the 16-byte chunk column t % 16 of a 128-column pass (its 8 columns' operands are loaded once
// per pass, before the wait) and every 6th row from t / 16: the 8 threads of a quarter warp read one 128-byte row, so the shared
// accesses are conflict-free. The row loop stays rolled: eight independent GELUs per row are
// what 40 registers allow in flight. The CTA's last tile is the consumers' (see above).
template <class Config>
__device__ __forceinline__ void run_offloaded_activation(const typename Config::Params& params,
                                                         std::uint8_t* epilogue_buffer,
                                                         std::uint64_t* epilogue_full,
                                                         std::uint64_t* epilogue_empty,
                                                         TileSchedule<Config> schedule) {
  using ColumnPair = typename Config::Activation::ColumnPair;
  constexpr int kPasses = kHopperBlockN / Config::kStorePassColumns;
  constexpr int kRowStep = Config::kEpilogueThreads / Config::kChunksPerPassRow;
  constexpr int kChunksPerBoxRow = Config::kStoreBox / 8;
  const int thread = static_cast<int>(threadIdx.x) - 32;  // 0 .. 95: warps 1-3
  const int chunk_column = thread % Config::kChunksPerPassRow;
  const int first_row = thread / Config::kChunksPerPassRow;
  const int box_offset = (chunk_column / kChunksPerBoxRow) * Config::kStoreBoxBytes;
  const int chunk_in_box_row = chunk_column % kChunksPerBoxRow;
  const bool stores = thread == 0;  // issues, and so must wait for, every bulk store group

  if (!params.use_tma_store) return;  // the consumers store directly: there is no handoff
  std::uint32_t phase = 0;  // both buffers are used once per pass, so their parities agree
  for (int linear = schedule.first; linear < schedule.count; linear += schedule.step) {
    const TileCoord tile = schedule.cta_tile(params, linear);
    const bool last_tile = schedule.is_last(linear);  // the consumers store it
    if (tile.m >= params.tiles_m || last_tile) continue;
#pragma unroll 1
    for (int pass = 0; pass < kPasses; ++pass) {
      const int pass_col0 = tile.n * Config::kBlockN + pass * Config::kStorePassColumns;
      const int col = pass_col0 + 8 * chunk_column;
      ColumnPair columns[4];
#pragma unroll
      for (int pair = 0; pair < 4; ++pair)
        columns[pair] = params.activation.column_pair(col + 2 * pair, params.n);
#pragma unroll 1
      for (int consumer = 0; consumer < Config::kConsumers; ++consumer) {
        std::uint8_t* buffer = epilogue_buffer + consumer * Config::kEpilogueBytesPerConsumer;
        sm90::mbarrier_wait(&epilogue_full[consumer], phase);
#pragma unroll 1
        for (int row = first_row; row < kWarpgroupRows; row += kRowStep) {
          auto* chunk = reinterpret_cast<uint4*>(buffer + box_offset +
                                                 swizzle_128b_offset(row, chunk_in_box_row));
          Bf16Chunk values;
          values.raw = *chunk;
#pragma unroll
          for (int pair = 0; pair < 4; ++pair) {
            const float2 value =
                params.activation(__bfloat1622float2(values.pairs[pair]), columns[pair]);
            values.pairs[pair] = __floats2bfloat162_rn(value.x, value.y);
          }
          *chunk = values.raw;
        }
        sm90::fence_proxy_async_shared();  // the TMA engine reads through the async proxy
        sm90::named_barrier_sync(Config::kEpilogueBarrierId, Config::kEpilogueThreads);
        // All 96 threads release the buffer (epilogue_empty counts them), each after its own
        // accesses; the storing thread only once TMA has finished reading the buffer, so the
        // phase completes with its arrival.
        if (stores) {
          store_pass_boxes<Config>(params, buffer,
                                   tile.m * Config::kBlockM + consumer * kWarpgroupRows, pass_col0);
          sm90::tma_store_wait_smem_read();
        }
        sm90::mbarrier_arrive(&epilogue_empty[consumer]);
      }
      phase ^= 1;
    }
  }
  if (stores) sm90::tma_store_wait_all();  // the CTA's shared memory must outlive the stores
}

#endif  // KC_STAGE3_SM90A

}  // namespace kc::stage3
