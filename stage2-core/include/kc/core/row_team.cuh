// kc/core/row_team.cuh — the threads that share a row, and the part of the row each one holds.
//
// RowTeam (launch.hpp) says whether a warp or a whole block works on one row. Team<kind> turns
// that into indices (which row, which member, how many members) and into the right reduction:
// five shuffles for a warp, shuffles plus one shared-memory exchange for a block.
//
// RowFragment is what one member holds of its row in registers: kSlots vectors of kVec floats,
// slot s at column (rank + s * team_size) * kVec, so that at every slot the team's accesses are
// adjacent 16-byte vectors (fully coalesced). A kernel that loads its fragment once can reduce
// over it and write the result without reading the row from DRAM again — the difference between
// a row kernel at two-thirds of copy bandwidth and one near it.
#pragma once

#ifndef __CUDACC__
#error "kc/core/row_team.cuh holds device code: include it from .cu files compiled by nvcc"
#endif

#include <cstdint>
#include <type_traits>
#include <utility>

#include "kc/core/launch.hpp"
#include "kc/core/reduce.cuh"
#include "kc/core/vector_io.hpp"

namespace kc::core {

template <RowTeam kTeam>
struct Team {
  static constexpr bool kIsWarp = kTeam == RowTeam::warp;
  // Threads per block a kernel for this team is launched with, at most: a bound for the compiler.
  static constexpr int kMaxThreads = kIsWarp ? kWarpSize * kWarpRowsPerBlock : kMaxBlockThreads;

  __device__ __forceinline__ static int size() {
    return kIsWarp ? kWarpSize : static_cast<int>(blockDim.x);
  }
  __device__ __forceinline__ static int rank() {
    return kIsWarp ? static_cast<int>(threadIdx.x) % kWarpSize : static_cast<int>(threadIdx.x);
  }
  __device__ __forceinline__ static std::int64_t row() {
    return kIsWarp ? static_cast<std::int64_t>(blockIdx.x) * (blockDim.x / kWarpSize) +
                         threadIdx.x / kWarpSize
                   : static_cast<std::int64_t>(blockIdx.x);
  }
  // Every member returns the team's result. `warp_partials`: __shared__ [32], used by blocks only;
  // reduce_once() when no later reduction reuses the array (one barrier instead of two).
  template <typename Value, class Op>
  __device__ __forceinline__ static Value reduce_once(Value value, Op op, Value* warp_partials) {
    if constexpr (kIsWarp) {
      (void)warp_partials;
      return warp_reduce(value, op);
    } else {
      return block_reduce_once(value, op, warp_partials);
    }
  }
  template <typename Value, class Op>
  __device__ __forceinline__ static Value reduce(Value value, Op op, Value* warp_partials) {
    value = reduce_once(value, op, warp_partials);
    if constexpr (!kIsWarp) __syncthreads();  // see block_reduce
    return value;
  }
};

// kEverySlotFull: the kernel is launched only for rows that fill every slot of every member
// (RowPlan::every_slot_full). holds() is then true at compile time and the per-slot checks, with
// the branches and predicates around them, disappear from the SASS.
template <int kVec, int kSlots, bool kEverySlotFull = false>
struct RowFragment {
  float values[kSlots][kVec];
  int rank;
  int team_size;
  int cols;

  __device__ __forceinline__ RowFragment(int rank_in_team, int size_of_team, int row_length)
      : rank(rank_in_team), team_size(size_of_team), cols(row_length) {}

  __device__ __forceinline__ int column(int slot) const { return (rank + slot * team_size) * kVec; }
  // A slot past the row's end holds nothing (cols is a multiple of kVec when kVec > 1).
  __device__ __forceinline__ bool holds(int slot) const {
    return kEverySlotFull || column(slot) < cols;
  }

  // All loads are issued before any is used: kSlots x 16 bytes in flight per thread.
  template <class Source>
  __device__ __forceinline__ void load(const Source& source, std::int64_t row_offset) {
#pragma unroll
    for (int s = 0; s < kSlots; ++s)
      if (holds(s)) source.template load<kVec>(row_offset + column(s), values[s]);
  }

  // op-reduction of f(value) over the held values, starting from `init`.
  template <class Op, class F>
  __device__ __forceinline__ float reduce(Op op, F f, float init) const {
    float result = init;
#pragma unroll
    for (int s = 0; s < kSlots; ++s)
      if (holds(s)) {
#pragma unroll
        for (int i = 0; i < kVec; ++i) result = op(result, f(values[s][i]));
      }
    return result;
  }

  // value = f(value) for every held value.
  template <class F>
  __device__ __forceinline__ void transform(F f) {
#pragma unroll
    for (int s = 0; s < kSlots; ++s)
      if (holds(s)) {
#pragma unroll
        for (int i = 0; i < kVec; ++i) values[s][i] = f(values[s][i]);
      }
  }

  // For each held vector: out = f(values, column), stored at row_out + column.
  template <typename T, class F>
  __device__ __forceinline__ void store(T* row_out, F f) const {
#pragma unroll
    for (int s = 0; s < kSlots; ++s)
      if (holds(s)) {
        float out[kVec];
        f(values[s], column(s), out);
        store_floats<T, kVec>(row_out + column(s), out);
      }
  }
};

// Calls launch(vec, team) with std::integral_constant arguments for the four kernel variants a
// plan can need: 16-byte (kFullWidth elements) or scalar accesses, a warp or a block per row.
template <int kFullWidth, class Launch>
void dispatch_row_kernel(const RowPlan& plan, bool vectorized, const Launch& launch) {
  dispatch_vector_width<kFullWidth>(vectorized, [&](auto vec) {
    if (plan.team == RowTeam::warp)
      launch(vec, std::integral_constant<RowTeam, RowTeam::warp>{});
    else
      launch(vec, std::integral_constant<RowTeam, RowTeam::block>{});
  });
}

// Launches a row-in-registers kernel for rows of `cols` elements at access width `width`
// (kFullWidth, i.e. 16 bytes, or 1): plans the team and calls launch(vec, team, full, plan)
// through dispatch_row_kernel — or stream() when the rows are too long to hold in registers.
// `full` is std::true_type when every slot holds data (RowPlan::every_slot_full), for the kernel
// to pass on to RowFragment. Only 16-byte accesses get that second kernel: the hidden sizes of
// real models are multiples of 1024, and the scalar path serves odd shapes.
template <int kFullWidth, class Launch, class Stream>
void run_row_kernel(std::int64_t cols, int width, const Launch& launch, const Stream& stream) {
  const bool vectorized = width == kFullWidth;
  const RowPlan plan = plan_row(cols, vectorized ? kFullWidth : 1);
  if (!plan.fits_in_registers) {
    stream();
    return;
  }
  dispatch_row_kernel<kFullWidth>(plan, vectorized, [&](auto vec, auto team) {
    if constexpr (decltype(vec)::value == kFullWidth) {
      if (plan.every_slot_full) {
        launch(vec, team, std::true_type{}, plan);
        return;
      }
    }
    launch(vec, team, std::false_type{}, plan);
  });
}

}  // namespace kc::core
