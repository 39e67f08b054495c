// Grouped GEMM, rung 05 — an empty half (a consumer's 64 rows all past its expert's) issues no
// WGMMA (sm_90a).
//
// Idea: a tile is 128 rows, two consumer warpgroups of 64. An expert with a few dozen rows
// (DeepSeek-like layers: 64 experts, 1024 tokens, 16 rows each on average; Mixtral's 8 experts at
// 256 tokens, 32 each) fills only the first consumer's half of its tile row; the second consumer
// computes 64 rows that are never stored, on the same four tensor cores of the SM as the first.
// Count it for the DeepSeek-like layer at 1024 uniform tokens: 64 experts x 6 tiles of 256 columns,
// each 128 x 256 x 2048, is 51.5 GFLOP issued for 5.9 GFLOP of results, while its B is 369 MB:
// 48 us of tensor-core work at the dense peak (1070 TFLOPS), more at the rate a kernel reaches,
// against about 90 us to read B at 4 TB/s (of the order of the H200's copy bandwidth): the two
// are of the same order and contend. Skipping the idle half halves the tensor-core work of such tiles and leaves reading B
// as the limit.
//
// What changed from grouped rung 04: the configuration (GroupedSkipHalvesConfig); a consumer whose
// first row (in its expert) is at or past the expert's last row still waits for each stage and
// releases it (the producer's ring counts both consumers' arrivals), but issues no WGMMA, and its
// epilogue stores nothing. Its accumulators stay zero. The producer loads the same A tile of 128
// rows as before (the rows past the expert come from the L2).
//
// Expected limiter: on small experts, reading B (the weights) from memory; on large experts, as
// rung 04 (no half lies wholly past its expert there, so the kernel's work is rung 04's).
//
// SASS to look for: rung 04's, with the K loop's HGMMAs behind a branch on a uniform predicate
// (the loop still waits on SYNCS.PHASECHK and arrives on SYNCS.ARRIVE in either case); no LDL/STL.
//
// Run just this rung:  kc-bench --filter stage3/grouped_gemm/05_skip_empty_halves
#include "kc/stage3/grouped_gemm_args.hpp"
#include "warp_specialized_gemm.cuh"

namespace kc::stage3 {

void grouped_gemm_05_skip_empty_halves(const GroupedGemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache) {
  launch_grouped_warp_specialized<GroupedSkipHalvesConfig>(args, stream, cache, "rung 05");
}

}  // namespace kc::stage3
