// Rung 07 — a bank-conflict-free shared-memory layout.
//
// Idea: shared memory has 32 banks of 4 bytes; a request is served in one pass only if the
// threads it serves together hit different banks (or the same address). An LDS.128 is served 8
// lanes at a time, so 8 lanes must read 8 different 16-byte pieces of one 128-byte row, or share
// pieces. Two fixes:
//   * reading: thread t of rung 06 read B at columns 8 * (t % 16): a 32-byte stride, a 2-way
//     conflict. Here its two 4-wide column groups are 64 apart, at 4 * (t % 16) and
//     64 + 4 * (t % 16): 8 neighbouring lanes read 8 neighbouring float4, one full 128-byte row.
//     Rows of A are spread the same way (4 * (t / 16) and 64 + ...). The C stores of a warp
//     become full 128-byte rows too.
//   * writing: the transposed copy of A writes float4 element j of row m to smem_a[k + j][m].
//     With rows 128 floats long, the two threads that share m (k = 0 and k = 4) hit the same bank.
//     Padding each row to 132 floats shifts row k by 4k banks: the 32 stores of a warp land in 32
//     banks, and rows stay 16-byte aligned for LDS.128. (An XOR swizzle of the column would do the
//     same without the 3% of wasted space; padding is easier to read.)
//
// What changed from rung 06: the layout only — placement() and kAStride below. The loop is the
// same (register_tiled_kernel.cuh). The CPU tests check both conflict claims bank by bank.
//
// Constraint: as rung 06, K and N multiples of 4 (float4 rows).
//
// Expected limiter: latency and shared-memory bytes per request. Shared memory now serves every
// request without conflicts; what is left is the single-buffered loop (load, wait, compute, wait)
// and warps that span 2 thread rows and 16 thread columns: one LDS.128 of a warp reads 2 distinct
// float4 of A and 16 of B (256 bytes). Rung 08 gives each warp a compact tile.
//
// SASS to look for: same instructions as rung 06; ncu's shared-memory bank-conflict counters
// (l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld/st) drop to zero.
//
// Run just this rung:  kc-bench --filter stage1/sgemm/07_bank_conflict_free
#include "register_tiled_kernel.cuh"

namespace kc::stage1 {
namespace {

struct ConflictFreeLayout : RegisterTile128 {
  static constexpr int kAStride = kTileRows + 4;  // padded: row k starts 4k banks further on
  // Thread t owns rows {0, 64} + 4 * (t / 16) + 0..3 and columns {0, 64} + 4 * (t % 16) + 0..3.
  static constexpr FragmentPlacement placement(int thread) { return spread_placement(thread); }
};

}  // namespace

void sgemm_07_bank_conflict_free(const SgemmArgs& args, cudaStream_t stream) {
  launch_register_tiled<ConflictFreeLayout>(args, stream);
}

}  // namespace kc::stage1
