// Rung 06 — 128-bit loads, A transposed in shared memory.
//
// Idea: move four floats per instruction. Global loads of A and B become float4 (LDG.E.128): a
// quarter of the load instructions of rung 05. In the multiply, a thread's 8 values of B at one k
// are contiguous in shared memory, so they come in as two LDS.128. Its 8 values of A are not: A
// is stored row-major, and the thread needs a piece of a *column*. So A is transposed on its way
// into shared memory (smem_a[k][m]): each float4 read from a row of A is written as four scalars
// down a column of the transposed tile, and the column piece becomes contiguous, two LDS.128 too.
// Per k: 4 shared-memory loads for 64 FMAs (rung 05's source: 16, which the compiler merged into
// LDS.128 only by holding the thread's whole 8 x 8 piece of the A tile in registers). C is
// written as float4.
//
// What changed from rung 05: float4 global loads and stores, A transposed in shared memory,
// LDS.128 in the inner loop. The loop itself is in register_tiled_kernel.cuh (shared with rungs
// 07 and 08); this rung's layout puts a thread's 8 x 8 outputs in one contiguous block.
//
// Constraint: rows of A, B and C must start on 16-byte boundaries for float4, so K and N must be
// multiples of 4 (kc-bench refuses other shapes and says so). Partial tiles are still zero-filled.
//
// Expected limiter: shared memory, now through bank conflicts rather than instruction count. In
// one LDS.128 phase, 8 lanes read B at a 32-byte stride: lanes 0 and 4 hit the same banks
// (2-way conflict); the transposed stores of A are 2-way conflicted as well. Rung 07 removes both.
//
// SASS to look for: LDG.E.128 for A and B, four STS (scalar) for the transposed A and one
// STS.128 for B per k tile, 32 LDS.128 against 512 FFMA in the loop, STG.E.128 for C:
//   cuobjdump --dump-sass <build>/stage1-sgemm/CMakeFiles/kc_stage1.dir/kernels/06_vectorized.cu.o
//
// Run just this rung:  kc-bench --filter stage1/sgemm/06_vectorized
#include "register_tiled_kernel.cuh"

namespace kc::stage1 {
namespace {

struct VectorizedLayout : RegisterTile128 {
  static constexpr int kAStride = kTileRows;  // the transposed A tile, unpadded
  // Thread t owns rows 8 * (t / 16) .. + 7 and columns 8 * (t % 16) .. + 7.
  static constexpr FragmentPlacement placement(int thread) { return contiguous_placement(thread); }
};

}  // namespace

void sgemm_06_vectorized(const SgemmArgs& args, cudaStream_t stream) {
  launch_register_tiled<VectorizedLayout>(args, stream);
}

}  // namespace kc::stage1
