// epilogue_tma_store.cuh — the epilogue of rung 09 (and of rung 10's last tiles): a warpgroup's
// accumulators leave through a swizzled shared-memory buffer and TMA stores.
//
// Why: stored straight from the accumulator layout (epilogue_direct_store.cuh), each warp store
// writes 8 rows x 16 bytes, half-used 32-byte sectors, and every thread issues 64 four-byte
// stores per tile. Written into shared memory first (64 x 64 boxes in the 128-byte swizzle, so the writes are
// conflict-free), the tile leaves as one TMA store per box, whole lines, clipped by TMA at the
// edges of C; the stores complete in the background, and only the next use of the buffer waits
// until they have read it.
//
// Order of work per tile: alpha.acc + beta.C over the whole tile under one test of beta
// (apply_linear_combination), then per store pass: the activation (pack_pass), a wait for the
// buffer, the shared writes (write_pass_to_buffer), a proxy fence and a named barrier, and one
// thread's TMA stores (store_pass_boxes). The per-column operands of the activation (rung 10's
// bias) travel one pass ahead (PassColumns). store_accumulators_tma puts these together.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "arch/sm90/tma.cuh"
#include "arch/sm90/tma_descriptor.hpp"
#include "arch/sm90/warpgroup.cuh"
#include "epilogue.cuh"
#include "gemm_layout.hpp"
#include "hopper_common.cuh"

namespace kc::stage3 {

#if KC_STAGE3_SM90A

// acc = alpha.acc + beta.C over a warpgroup's 64 x 256 accumulators (rows row0.., columns
// col0..), in place. The test of beta is made once for the tile, so the common beta == 0 case is
// 128 straight multiplies; with beta != 0, C is read inside M x N only (the rest is never stored).
__device__ __forceinline__ void apply_linear_combination(float (&acc)[kAccumulators],
                                                         const LinearCombination& linear, int m,
                                                         int n, int row0, int col0) {
  if (linear.beta == 0.f) {
#pragma unroll
    for (int i = 0; i < kAccumulators; ++i) acc[i] *= linear.alpha;
    return;
  }
  const int lane = threadIdx.x % 32;
  const int row = row0 + 16 * ((threadIdx.x % kWarpgroupThreads) / 32) + lane / 4;
#pragma unroll
  for (int j = 0; j < kHopperBlockN / 8; ++j) {
    const int col = col0 + 8 * j + 2 * (lane % 4);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float* pair = &acc[4 * j + 2 * half];
      if (row + 8 * half < m && col < n) {
        const float2 value = linear(make_float2(pair[0], pair[1]), row + 8 * half, col);
        pair[0] = value.x;
        pair[1] = value.y;
      }
    }
  }
}

// What the activation needs per column (rung 10's bias) for the 16 (or 32) column pairs a thread
// writes in one store pass of the TMA epilogue. Identity needs nothing: then this is empty.
template <class Config>
struct PassColumns {
  typename Config::Activation::ColumnPair pair[Config::kStorePassColumns / 8];
};

template <class Config>
__device__ __forceinline__ PassColumns<Config> load_pass_columns(
    const typename Config::Params& params, int col0, int pass) {
  PassColumns<Config> columns;
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int slice = 0; slice < Config::kStorePassColumns / 8; ++slice)
    columns.pair[slice] = params.activation.column_pair(
        col0 + pass * Config::kStorePassColumns + 8 * slice + 2 * (lane % 4), params.n);
  return columns;
}

// A warpgroup's BF16 results of one store pass, as its threads hold them: slice j of the pass is
// an 8-column slice of the accumulator layout, [0] the upper row of the thread's pair, [1] the lower.
template <class Config>
using PassResults = __nv_bfloat162[Config::kStorePassColumns / 8][2];

// Pass `pass` of a thread's accumulators (alpha.acc + beta.C already applied), as BF16 pairs:
// finish(slice, value) maps each pair of neighbouring outputs first (the activation of rung 09's
// epilogue, or nothing when the epilogue warps apply it later).
template <class Config, class Finish, int kAccumulatorCount>
__device__ __forceinline__ void pack_pass(const float (&acc)[kAccumulatorCount], int pass,
                                          PassResults<Config>& results, Finish finish) {
  constexpr int kSlicesPerPass = Config::kStorePassColumns / 8;
#pragma unroll
  for (int slice = 0; slice < kSlicesPerPass; ++slice) {
    const int j = pass * kSlicesPerPass + slice;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const float2 value = finish(slice, make_float2(acc[4 * j + 2 * half], acc[4 * j + 2 * half + 1]));
      results[slice][half] = __floats2bfloat162_rn(value.x, value.y);
    }
  }
}

// Writes one pass of results into a consumer's buffer of 64 x 64 boxes in the 128-byte swizzle:
// a warp's column of 8 rows x 16 bytes lands on 32 distinct banks.
template <class Config>
__device__ __forceinline__ void write_pass_to_buffer(std::uint8_t* buffer,
                                                     const PassResults<Config>& results) {
  const int thread = threadIdx.x % kWarpgroupThreads;
  const int lane = threadIdx.x % 32;
  const int warp = thread / 32;
#pragma unroll
  for (int slice = 0; slice < Config::kStorePassColumns / 8; ++slice) {
    const int pass_col = 8 * slice + 2 * (lane % 4);
    const int box = pass_col / Config::kStoreBox;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = 16 * warp + lane / 4 + 8 * half;
      std::uint8_t* destination = buffer + box * Config::kStoreBoxBytes +
                                  swizzle_128b_element_offset(row, pass_col % Config::kStoreBox);
      *reinterpret_cast<__nv_bfloat162*>(destination) = results[slice][half];
    }
  }
}

// Hands a buffer holding one pass (rows row0.., columns pass_col0..) to TMA, one store per 64 x 64
// box, as one bulk group. Boxes wholly past M or N are not issued; TMA clips the others.
template <class Config>
__device__ __forceinline__ void store_pass_boxes(const typename Config::Params& params,
                                                 const std::uint8_t* buffer, int row0,
                                                 int pass_col0) {
  if (row0 >= params.m) return;
#pragma unroll
  for (int box = 0; box < Config::kStorePassColumns / Config::kStoreBox; ++box) {
    const int box_col0 = pass_col0 + box * Config::kStoreBox;
    if (box_col0 < params.n)
      sm90::tma_store_2d(&params.c, buffer + box * Config::kStoreBoxBytes, box_col0, row0);
  }
  sm90::tma_store_commit_group();
}

// The two halves of one pass of a warpgroup's epilogue through its buffer (named barrier
// `barrier_id`, the warpgroup's 128 threads), around the pass's writes into the buffer:
//   begin_buffer_pass: wait until the stores of the last pass have read the buffer;
//   end_buffer_pass:   make the writes visible to the TMA engine (which reads through the async
//                      proxy) and wait for every thread's; true for the one thread that then
//                      issues the pass's TMA stores.
__device__ __forceinline__ void begin_buffer_pass(int barrier_id) {
  if (threadIdx.x % kWarpgroupThreads == 0) sm90::tma_store_wait_smem_read();
  sm90::named_barrier_sync(barrier_id, kWarpgroupThreads);
}
__device__ __forceinline__ bool end_buffer_pass(int barrier_id) {
  sm90::fence_proxy_async_shared();
  sm90::named_barrier_sync(barrier_id, kWarpgroupThreads);
  return threadIdx.x % kWarpgroupThreads == 0;
}

// Epilogue through shared memory (rung 09): every thread writes its fragment pairs, as BF16, into
// the consumer's buffer, then one thread stores each box with TMA, which writes whole lines and
// clips at the edges of C. The 64 x 256 result goes out in passes of kStorePassColumns columns;
// before writing into the buffer, a pass waits until the stores issued from it last time have
// finished reading it.
// The values: alpha.acc + beta.C first, for the whole tile (one uniform test of beta), then the
// activation per element pair as straight-line code — no bounds test either, since whatever lies
// outside C is clipped by TMA, and an activation reads no memory — so the compiler can overlap
// one element's MUFU latency with the next elements' work, and all of it with the barrier wait
// before the shared stores. The per-column operands arrive one pass ahead: the first pass's were
// loaded before the tile's mainloop (`columns`), and each pass loads the next pass's while its
// own results wait for the barrier, so no load latency is exposed. (All 32 pairs at once would
// add 16 registers to the 128 accumulators and the elements in flight, and spill.)
template <class Config>
__device__ __forceinline__ void store_accumulators_tma(const typename Config::Params& params,
                                                       std::uint8_t* buffer, int consumer,
                                                       int row0, int col0,
                                                       float (&acc)[kAccumulators],
                                                       PassColumns<Config> columns) {
  constexpr int kPasses = kHopperBlockN / Config::kStorePassColumns;
  const int barrier_id = 1 + consumer;  // one named barrier per consumer warpgroup

  apply_linear_combination(acc, params.linear, params.m, params.n, row0, col0);

#pragma unroll
  for (int pass = 0; pass < kPasses; ++pass) {
    PassResults<Config> results;
    pack_pass<Config>(acc, pass, results, [&](int slice, float2 value) {
      return params.activation(value, columns.pair[slice]);
    });
    if (pass + 1 < kPasses) columns = load_pass_columns<Config>(params, col0, pass + 1);

    begin_buffer_pass(barrier_id);
    write_pass_to_buffer<Config>(buffer, results);
    if (end_buffer_pass(barrier_id))
      store_pass_boxes<Config>(params, buffer, row0, col0 + pass * Config::kStorePassColumns);
  }
}

#endif  // KC_STAGE3_SM90A

// The tensor map the TMA stores write through: C (m x n bf16, row-major, dense) in the epilogue's
// swizzled box x box boxes. TMA needs 16-byte row strides: n % 8 == 0, checked by the callers.
inline TmaMatrix2d tma_store_map(void* c, int m, int n, int box) {
  TmaMatrix2d map;
  map.base = c;
  map.rows = static_cast<std::uint64_t>(m);
  map.cols = static_cast<std::uint64_t>(n);
  map.box_rows = static_cast<std::uint32_t>(box);
  map.box_cols = static_cast<std::uint32_t>(box);
  map.swizzle_128b = true;
  return map;
}

}  // namespace kc::stage3
