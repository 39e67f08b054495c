// INT8 GEMM rung 02 — rung 01 with the epilogue through shared memory and TMA stores (sm_90a).
//
// Idea: the bf16 ladder's rung 09 lesson, and the FP8 ladder's rung 03 (quant/fp8/03_tma_store.cu).
// Once a tile, both consumers leave the tensor cores to store 128 x 256 results, and rung 01 stores
// them from the accumulator layout: 64 stores a thread, s32 pairs (whole 32-byte sectors, but twice
// bf16's bytes) or bf16 pairs (half of each sector) after the dequantization. Written into a
// swizzled shared-memory buffer instead, a pass of the tile leaves as two TMA stores of 64 x 128-byte
// boxes that finish in the background; the consumers go on to the next tile after the last pass's
// shared writes.
//
// What changed from rung 01: the epilogue only (store_int8_tile_tma in int8_gemm_kernel.cuh), with
// a 16 KiB buffer per consumer beside rung 01's four stages of 48 KiB: the s32 result leaves in
// four passes of 64 columns, the bf16 one in two of 128 (gemm/epilogue_tma_store.cuh's
// write_pass_to_buffer). The s32 matrix is handed to TMA as M x 2N two-byte elements, as the
// operands are as bytes. TMA needs 16-byte rows: N % 4 == 0 (s32) or N % 8 == 0 (bf16); other N
// store as rung 01 does.
//
// Layouts and limits: rung 01's (kc/stage3/int8_gemm_args.hpp). Expected limiter: the tensor
// cores. SASS to look for: UTMASTG.2D, FENCE.VIEW.ASYNC.S and BAR.SYNC in the epilogue; rung 01's
// K loop (4 IGMMA.64x256x32.S8.S8 a K step) unchanged.
//
// Run just this rung:  kc-bench --filter 'stage3/int8_gemm(_dequant)?/02_tma_store'
//                      kc-bench --filter 'stage3/int8_gemm/0[12]' --shapes 8192x8192x8192
#include "int8_gemm_kernel.cuh"

namespace kc::stage3 {

void int8_gemm_02_tma_store(const Int8GemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache) {
  launch_int8_gemm<Int8Flaw::none, /*kTmaStore=*/true>(args, stream, cache);
}

}  // namespace kc::stage3
