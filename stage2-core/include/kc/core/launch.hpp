// kc/core/launch.hpp — launch arithmetic and the warp-per-row / block-per-row decision.
//
// Row kernels (norms, softmax, row reductions) give each row to a team of threads that reduces
// across it. Who the team is depends on the row length:
//
//   short rows   a warp per row, several rows per block: the reduction is five shuffles, no
//                shared memory and no __syncthreads, and a block still has 128 threads.
//   long rows    a block per row, sized so that each thread holds a few 16-byte vectors in
//                registers; warps combine through one shared-memory exchange.
//   very long    more than 1024 threads x kRowVectorsPerThread vectors: the row cannot stay in
//                registers and the kernel must stream it (read it again for the second pass).
//
// plan_row() makes that choice on the host (and is unit-tested there); the kernels receive the
// plan's numbers as launch dimensions. Host-safe.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace kc::core {

__host__ __device__ constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

__host__ __device__ constexpr std::int64_t round_up(std::int64_t value, std::int64_t multiple) {
  return ceil_div(value, multiple) * multiple;
}

inline constexpr int kRowVectorsPerThread = 4;  // vectors a thread keeps in registers
inline constexpr int kWarpRowsPerBlock = 4;     // rows (one per warp) in a warp-per-row block
inline constexpr int kMaxBlockThreads = 1024;

enum class RowTeam { warp, block };

struct RowPlan {
  RowTeam team = RowTeam::block;
  bool fits_in_registers = true;  // false: the row is too long to hold; stream it instead
  // Every member of the team holds exactly vectors_per_thread vectors: the row splits into the
  // team's slots with none left empty (bf16 rows of 1024 or a multiple of 1024 elements), so a
  // kernel compiled for this case needs no per-slot bounds check.
  bool every_slot_full = false;
  int threads_per_block = 0;
  int rows_per_block = 1;
  std::int64_t vectors_per_row = 0;

  std::int64_t blocks(std::int64_t rows) const { return ceil_div(rows, rows_per_block); }
};

// The team for rows of `cols` elements accessed `vector_width` elements at a time, each thread
// holding at most `vectors_per_thread` vectors.
inline RowPlan plan_row(std::int64_t cols, int vector_width,
                        int vectors_per_thread = kRowVectorsPerThread) {
  RowPlan plan;
  plan.vectors_per_row = ceil_div(cols, vector_width);
  if (plan.vectors_per_row <= std::int64_t{32} * vectors_per_thread) {
    plan.team = RowTeam::warp;
    plan.rows_per_block = kWarpRowsPerBlock;
    plan.threads_per_block = 32 * kWarpRowsPerBlock;
    plan.every_slot_full = plan.vectors_per_row == std::int64_t{32} * vectors_per_thread;
    return plan;
  }
  const std::int64_t threads = round_up(ceil_div(plan.vectors_per_row, vectors_per_thread), 32);
  plan.team = RowTeam::block;
  plan.fits_in_registers = threads <= kMaxBlockThreads;
  plan.threads_per_block = static_cast<int>(std::min<std::int64_t>(threads, kMaxBlockThreads));
  plan.every_slot_full = plan.fits_in_registers && plan.vectors_per_row == threads * vectors_per_thread;
  return plan;
}

// Threads for a block that streams one row (each thread loops over vectors): enough to give every
// thread a vector of a short row, never more than 512.
inline int streaming_row_threads(std::int64_t cols, int vector_width) {
  const std::int64_t vectors = ceil_div(cols, vector_width);
  return static_cast<int>(std::clamp<std::int64_t>(round_up(vectors, 32), 32, 512));
}

// Calls launch(width) with std::integral_constant<int, kFullWidth> (16-byte accesses) when
// `vectorized`, else with std::integral_constant<int, 1>: the two instantiations a kernel
// templated on its access width needs.
template <int kFullWidth, class Launch>
void dispatch_vector_width(bool vectorized, const Launch& launch) {
  if (vectorized)
    launch(std::integral_constant<int, kFullWidth>{});
  else
    launch(std::integral_constant<int, 1>{});
}

}  // namespace kc::core
