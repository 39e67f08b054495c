// FP8 GEMM rung 03 — rung 02 with the epilogue through shared memory and TMA stores (sm_90a).
//
// Idea: the bf16 ladder's rung 09 lesson, again. After its last K step a tile's two consumers both
// leave the tensor cores to store their results, and rung 02 stores them straight from the
// accumulator layout: each warp store writes 8 rows x 16 bytes, half of each 32-byte sector, 48
// stores a thread for a 128 x 192 tile. That is time no WGMMA runs, once a tile: the shorter K, the
// more it weighs (a tile is 32 K steps at K = 4096, 112 at K = 14336). Written as bf16 into a
// swizzled shared-memory buffer instead, the tile leaves as TMA stores of 64 x 64 boxes (whole
// lines, clipped by TMA at the edges of C) that finish in the background while the consumers start
// the next tile.
//
// What changed from rung 02: the epilogue (store_fp8_tile_tma in fp8_gemm_kernel.cuh, built from
// the bf16 ladder's pieces in gemm/epilogue_tma_store.cuh: pack_pass, write_pass_to_buffer, the
// pass's barriers and store_pass_boxes), a 48 KiB buffer (64 x 192 bf16 per consumer: the whole
// tile in one pass), and so four stages of 40 KiB instead of five. C's rows must be 16-byte aligned for TMA (N % 8 == 0); for other N the kernel
// stores as rung 02 does.
//
// Layouts and limits: rung 01's (kc/stage3/fp8_gemm_args.hpp). Expected limiter: the tensor cores,
// less the per-step wait of the promotion. SASS to look for: UTMASTG.2D and FENCE.VIEW.ASYNC.S in
// the epilogue; the K loop as rung 02's (4 QGMMA.64x192x32.F32.E4M3.E4M3 and 96 FFMA a K step).
//
// Run just this rung:  kc-bench --filter stage3/fp8_gemm/03_tma_store
//                      kc-bench --filter 'stage3/fp8_gemm/0[23]' --shapes 8192x14336x4096
#include "fp8_gemm_kernel.cuh"

namespace kc::stage3 {

void fp8_gemm_03_tma_store(const Fp8GemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache) {
  launch_fp8_gemm_scaled<Fp8GemmConfig<192, /*promotion interval*/ 1, /*store pass columns*/ 192, /*stages*/ 4>,
                         Fp8Flaw::none>(args, stream, cache);
}

}  // namespace kc::stage3
