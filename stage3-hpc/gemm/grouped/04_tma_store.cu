// Grouped GEMM, rung 04 — rung 09's TMA-store epilogue, kept inside each expert's rows (sm_90a).
//
// Idea: rung 03 runs the GEMM ladder's rung 07, whose epilogue writes C straight from the
// accumulator layout: every warp store covers 8 rows x 16 bytes, half-used 32-byte sectors, 64
// four-byte stores per thread and tile, and the consumers' tensor cores wait while they go out.
// The ladder's rung 09 writes the tile into a swizzled shared-memory buffer instead and hands it to
// TMA, which writes whole lines in the background; on the plain GEMM that was the step from rung
// 07 to parity with cuBLAS on large shapes (the README's rung 09 section). The grouped GEMM's C is
// the experts' outputs one after another, so a TMA store can only be used where it cannot write
// into the next expert's rows: TMA clips at the edges of its tensor map (C, every token), not at an
// expert's last row.
//
// What changed from grouped rung 03: the configuration (GroupedTmaStoreConfig: rung 09's epilogue,
// the same stages and buffer) and, per consumer and tile, which store runs (half_stored_by_tma in
// warp_specialized_gemm.cuh): a 64-row half whose rows all lie inside its expert, or which runs
// past the last token (where TMA clips), goes through the buffer and TMA; a half that runs past its
// expert's last row into the next expert's keeps rung 03's guarded direct stores. With every expert
// a multiple of 64 rows (Mixtral's uniform routing at 2048 and 8192 tokens), every half is stored
// by TMA; otherwise one half per expert at most stores directly. N % 8 != 0 (rows of C not 16-byte
// multiples): every half stores directly, as in rung 03.
//
// Expected limiter: the tensor cores on large experts, as the ladder's rung 09; on small experts
// (a few dozen rows each) reading B, as before: their tiles are mostly rows past the expert, which
// rung 05 stops computing.
//
// SASS to look for: rung 03's mainloop unchanged (UTMALDG, SYNCS, 4 HGMMA.64x256x16.F32.BF16 a K
// step), rung 09's UTMASTG.2D, FENCE.VIEW.ASYNC.S and UTMACMDFLUSH, and rung 03's guarded STG.E for
// the halves that straddle two experts; no LDL/STL.
//
// Run just this rung:  kc-bench --filter stage3/grouped_gemm/04_tma_store
#include "kc/stage3/grouped_gemm_args.hpp"
#include "warp_specialized_gemm.cuh"

namespace kc::stage3 {

void grouped_gemm_04_tma_store(const GroupedGemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache) {
  launch_grouped_warp_specialized<GroupedTmaStoreConfig>(args, stream, cache, "rung 04");
}

}  // namespace kc::stage3
