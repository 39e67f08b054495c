// Grouped GEMM, rung 07 — a small expert's tile loads the 64 rows of A it uses, not 128 (sm_90a).
//
// Idea: since rung 05, a tile whose second 64-row half lies wholly past its expert's rows (every
// expert of 64 rows or fewer: DeepSeek-like layers at up to 4096 tokens, Mixtral-like ones at up to
// 512) computes only its first half, yet its producer still loads a 128-row box of A every K step:
// 16 KiB of A beside the 32 KiB of B. Those A rows are the next experts' tokens, read from the L2,
// or zeros TMA fills in past the last token, never used. In these memory-bound layers every byte
// of a stage passes through the TMA unit into shared memory, the weights from memory and A from the
// L2, so the stage is 48 KiB where 40 would do. Here such a tile loads A through a second tensor
// map of 64-row boxes, and its stage expects 40 KiB.
//
// What changed from grouped rung 06: the configuration (GroupedHalfATilesConfig): the producer
// picks the 64-row map (params.a_half) and a stage of kTileBytesA / 2 + kTileBytesB bytes for a tile
// whose second half is empty, the 128-row one otherwise. The consumers are rung 06's: the first
// reads rows 0-63 of the A tile, the second skips an empty half and never reads rows 64-127, which
// now hold an older stage's data.
//
// Expected limiter: on small experts, the bytes into the SMs; if the TMA unit's work a stage (or
// the L2-to-SM traffic) was what held rung 06 below the copy bandwidth there, a sixth less of it
// shows as a faster layer; if it was memory, nothing changes. On large experts, rung 06's (no empty
// halves, the same loads).
//
// SASS to look for: rung 06's, with two UTMALDG.2D of A in the producer (one per map) and the
// expect-tx byte count chosen per tile; no LDL/STL.
//
// Run just this rung:  kc-bench --filter stage3/grouped_gemm/07_half_a_tiles
#include "kc/stage3/grouped_gemm_args.hpp"
#include "warp_specialized_gemm.cuh"

namespace kc::stage3 {

void grouped_gemm_07_half_a_tiles(const GroupedGemmArgs& args, const GroupedSplitWorkspace& workspace,
                                  cudaStream_t stream, HopperLaunchCache& cache) {
  launch_grouped_warp_specialized<GroupedHalfATilesConfig>(args, stream, cache, "rung 07", &workspace);
}

void grouped_gemm_07_half_a_tiles_adds_a_piece_twice(const GroupedGemmArgs& args,
                                                     const GroupedSplitWorkspace& workspace, cudaStream_t stream,
                                                     HopperLaunchCache& cache) {
  launch_grouped_warp_specialized<GroupedPieceAddedTwiceConfig>(args, stream, cache, "rung 07 (flawed)", &workspace);
}

}  // namespace kc::stage3
