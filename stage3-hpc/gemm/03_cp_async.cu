// Rung 03 — a cp.async multi-stage pipeline.
//
// Idea: keep the tensor cores fed while the next tiles are still on their way. cp.async (sm_80)
// copies 16 bytes from global straight into shared memory without passing through registers and
// without blocking the thread; copies are grouped (commit_group) and waited for by age
// (wait_group N: all but the N newest groups have landed). With kStages = 3 tile buffers, the
// copies of the next two K steps are in flight while the warps multiply the current one.
//
// What changed from rung 02: global -> shared copies are asynchronous and run two K steps ahead
// instead of one, and hold no registers; the copy of a chunk past the matrix edge is a cp.async
// with src-size 0, which writes 16 zero bytes. The kernel (03_cp_async.cuh) is a template over
// its tile configuration, MmaSyncConfig<block M, block N, warps M, warps N, stages, staged
// epilogue>; this rung runs Rung03Config, 128 x 256 outputs per block, 2 x 4 warps of 64 x 64,
// 3 stages of 48 KiB (145 KiB with the alignment slack, 1 block of 8 warps per SM), and
// kc-mma-sync-tune times it against five other configurations (tune/mma_sync_variants.cu says
// why those). Three changes inside the K loop, each from a count, and one after it:
//   * Fragments one k16 slice ahead, across K steps too. The one barrier per K step sits before
//     the last slice: by then every warp has loaded the last fragments of the current stage (so
//     the stage may be refilled) and the barrier publishes the next stage, whose first fragments
//     are then loaded while the last slice's 32 MMAs run. Before, the barrier was at the top of
//     the step and every step began with 8 ldmatrix whose latency nothing on the warp covered.
//   * Copies of interior blocks walk a pointer: every chunk of a block whose tile lies inside A
//     and B (and K % 64 == 0) exists, so each copy is one pointer plus pass * (rows per pass) * K
//     plus 64 per K step, and its shared offset the first one's plus a constant (the swizzle row
//     repeats every 8 rows; passes are 32 rows apart). SASS of the old loop, per thread and K
//     step next to 128 HMMA and 32 LDSM: 16 cp.async and 164 other instructions (checks,
//     selects, 64-bit address arithmetic, loop and barrier); now 12 cp.async and 58 others (the
//     checked path of edge blocks: 133).
//     Edge blocks keep the checked copies.
//   * ldmatrix addresses from two registers: slice s of a chunk pair is the slice-0 address XOR
//     32 s (CPU-tested in gemm_layout_test.cpp). Written as one swizzle_128b_offset per slice and
//     fragment, the compiler kept 48 offsets live across the loop and spilled at 255 registers;
//     now it does not spill (registers below).
//   * The epilogue goes through shared memory (store_warp_tile_staged, mma_sync_common.cuh). Stored
//     straight from the m16n8 fragments, each thread issues 64 4-byte stores and each warp store
//     writes 8 rows x 16 bytes: half of eight 32-byte sectors, the other halves coming from
//     another instruction. After the K loop the stages are free (one barrier), so each warp
//     writes its 64 x 64 bf16 results into 8 KiB of them (swizzled, conflict-free), reads them
//     back 16 bytes per lane and stores whole 128-byte row segments: 16 STG.128 per thread.
//     kc-mma-sync-tune times both epilogues of the same kernel (the direct-store configuration
//     is its control); what that gained when it was measured is in
//     docs/notes/2026-12-01-stage3-history.md ("Tuner runs", kc-mma-sync-tune). When N % 8 != 0
//     (rows of C not 16-byte aligned) the direct stores are kept.
//
// Counts per K step of a 128 x 256 block (4.19 MFLOP): ldmatrix reads 8 warps x 4 slices x 8 x
// 512 B = 128 KiB of shared memory and cp.async writes 48 KiB: 23.8 FLOP per shared byte, so at
// 128 B/clock an SM cannot exceed ~3050 FLOP/clock (74% of the 4096 of dense WGMMA; the 128 x 128
// tile of 4 warps: 96 KiB per 2.1 MFLOP, ~2800). From L2: 48 KiB per 4.19 MFLOP, 5.4 TB/s at
// 470 TFLOPS (the 128 x 128 tile: 7.3 TB/s). The epilogue: 64 KiB of bf16 per block through
// shared memory once, against 3 MiB of operands through it in the K loop at K = 4096.
// Occupancy: 234 registers (sm_90a; 240 on sm_80; __launch_bounds__(256, 1); cuobjdump -res-usage
// of the CUDA 13.0 build), no spills, 1 block of 8 warps per SM. The other configurations: 232-236
// (sm_90a), 238-252 (sm_80); 128 x 128 with 32 x 64 warp tiles is held to 128 registers and
// spills (STL/LDL on a 16-byte stack frame).
// Bank conflicts: none by construction (CPU-tested in gemm_layout_test.cpp): each 8-lane phase of
// an ldmatrix reads one 16-byte chunk from 8 consecutive rows, which the swizzle puts in 8
// different chunk columns; the 8 threads copying one row write its 8 chunks; the epilogue's
// 4-byte stores of a fragment row (8 rows x 4 lanes) land in 8 different chunk columns too.
//
// Layouts: A row-major M x K, B N x K. Any M, N; K a multiple of 8.
// SASS to look for (the interior-block loop): 12 LDGSTS.E.BYPASS.LTC128B.128 at one register plus
// immediate offsets, one DEPBAR.LE SB0, 0x1 (wait_group 1) and one BAR.SYNC per K step, 32
// LDSM.16.M88.4 whose addresses are LOP3 ... 0x20 / 0x40 / 0x60 (the slice XOR) of one register,
// 128 HMMA.16816.F32.BF16; no LDL/STL. After the loop: 128 STS (bf16 pairs), 16 LDS.128 and 16
// STG.E.128 per thread; the direct path's STG.E / STG.E.U16 for N % 8 != 0.
// Expected limiter: the issue rate of mma.sync itself, which on Hopper is a fraction of WGMMA's:
// kc-mma-sync-peak measures it with operands in registers and with ldmatrix feeding it, and that
// is the ceiling of this rung and rung 02; then the barrier skew of 8 warps with no second block
// to fill it, and the tile boundaries (pipeline fill, epilogue) that one block per SM cannot
// overlap. The measured rows are in docs/benchmarks/h200/stage3-gemm.md and stage3-hpc/README.md
// (rung 03); the kc-mma-sync-peak ceiling and the profiles, as measured, in
// docs/notes/2026-12-01-stage3-history.md.
//
// Run just this rung:  kc-bench --filter stage3/hgemm/03_cp_async
// Its configurations:  kc-mma-sync-tune            ceilings: kc-mma-sync-peak
#include "03_cp_async.cuh"
#include "hgemm.hpp"

namespace kc::stage3 {

void hgemm_03_cp_async(const HgemmArgs& args, cudaStream_t stream) {
  launch_hgemm_cp_async<Rung03Config>(args, stream);
}

}  // namespace kc::stage3
