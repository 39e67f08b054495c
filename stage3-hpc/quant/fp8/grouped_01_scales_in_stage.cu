// FP8 grouped GEMM, rung 01 — every expert's FP8 GEMM with block scales in one persistent launch (sm_90a).
//
// Idea: a mixture-of-experts layer quantized as DeepSeek-V3 quantizes it (1 x 128 scales for the
// activations, 128 x 128 for each expert's weights) is the bf16 grouped GEMM's problem with the FP8
// GEMM's operands. Both halves exist: the FP8 GEMM's rung 09 kernel (128 x 128 tiles, each K step's
// scales brought into its stage by the producer, two partial sets so that a step is promoted while
// the next one's WGMMAs run) and the grouped GEMM's tile table (rung 03: the prefix sums of every
// expert's tiles, tile `linear` of the walk found by a binary search). This rung walks the table with
// that kernel, so one launch computes every expert with rows and none is launched for an expert
// without.
//
// What changed from FP8 rung 09 (fp8_gemm_kernel.cuh, Config::kGrouped): only where a tile's data
// lies. The producer loads A from the expert's first token, B from its weight (the G weights seen as
// one G.N x K matrix), B's scales from its blocks, and A's scales from every token's s_A, whose rows
// are padded to 16 bytes so that TMA can bring a tile's 128 scales in. The consumers' K walk is rung
// 09's. The epilogue keeps each expert's rows: a 64-row half inside its expert leaves by TMA store
// as in rung 09; one that runs past the expert's last row stores straight from the registers with
// the expert's rows as the edge (gemm/expert_tile.cuh, shared with the bf16 grouped GEMM), so no
// store reaches the next expert's rows.
//
// Expected limiter: large experts (Mixtral-like, thousands of tokens each): the tensor cores, as
// rung 09 at the same M, N, K; small experts (DeepSeek-like, or few tokens): the weights' bytes, each
// expert's B read once per tile row, and the partial tiles at each expert's end (up to 127 rows of
// WGMMA work thrown away per expert and tile column).
//
// SASS to look for: rung 09's — 8 QGMMA.64x128x32.F32.E4M3.E4M3 and 256 FFMA in the K loop, LDS of
// the scales, UTMALDG.2D three a step (A, B, A's scales) — plus the tile table's binary search (LDG
// of tile_starts) once per tile, and both UTMASTG and the guarded STG of the direct stores; no
// LDL/STL.
//
// Run just this rung:  kc-bench --filter stage3/fp8_grouped_gemm/01_scales_in_stage
#include "fp8_gemm_kernel.cuh"

namespace kc::stage3 {

void fp8_grouped_gemm_01_scales_in_stage(const Fp8GroupedGemmArgs& args, cudaStream_t stream,
                                         HopperLaunchCache& cache) {
  launch_fp8_grouped_gemm<Fp8GroupedNarrowTiles, Fp8Flaw::none>(args, stream, cache);
}

void fp8_grouped_gemm_01_neighbours_weight_scales(const Fp8GroupedGemmArgs& args, cudaStream_t stream,
                                                  HopperLaunchCache& cache) {
  launch_fp8_grouped_gemm<Fp8GroupedNarrowTiles, Fp8Flaw::neighbours_weight_scales>(args, stream, cache);
}

}  // namespace kc::stage3
