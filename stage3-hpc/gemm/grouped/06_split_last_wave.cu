// Grouped GEMM, rung 06 — the last wave's tiles split along K over the idle SMs (sm_90a).
//
// Idea: the persistent grid runs one CTA per SM, each walking the tile table. Mixtral-like at 8192
// uniform tokens is 8 experts x 8 tile rows x 56 tile columns = 3584 tiles of 128 x 256: on 132
// SMs, 27 whole waves and a 28th of 20 tiles, during which 112 SMs wait, about a 28th of the run.
// Split each of those 20 tiles along K into 4 pieces instead and 80 SMs share the last wave, each
// with a quarter of a tile; what it costs is writing the pieces' partial sums (64 KiB per consumer
// half and piece) and one consumer half per tile adding them, which is why a piece keeps at least
// 16 of the tile's K steps (kGroupedMinKTilesPerSplit). This is the data-parallel plus
// split-K form of the stream-K idea: whole tiles while they fill the grid, split tiles at the end.
//
// What changed from grouped rung 05: the configuration (GroupedSplitLastWaveConfig) and the work a
// CTA walks (work_unit in warp_specialized_gemm.cuh): whole tiles first, a multiple of the grid, then
// the pieces; the producer loads a piece's K steps only. After its piece, each consumer warpgroup
// writes its accumulators to its slot of the workspace and counts itself in its half's counter
// (split_k::reduce_in_last_cta on the warpgroup's named barrier: the producer warpgroup is already
// loading the next unit, so the CTA-wide barrier of the small-M rungs cannot be used); the half
// that counts last adds the pieces in split order — the same bits whichever finishes last, its own
// piece read back from the L2 like the others so that its 128 accumulator registers are free for
// the sums — and runs rung 05's epilogue. The plan (plan_grouped_split_last_wave, below) splits
// only when the last wave would leave half the grid or more idle.
//
// Expected limiter: as rung 05, with the last wave's idle SMs put to work; the pieces' partial sums
// go through the L2 (at most 2 x 64 KiB per SM).
//
// SASS to look for: rung 05's, plus the split's STG.E.128 of the partial sums, MEMBAR, one
// ATOMG.E.ADD per consumer half and piece, BAR.RED.OR on the named barrier, and the LDG.E.128
// (ld.global.cg) of the other pieces; no LDL/STL.
//
// Run just this rung:  kc-bench --filter stage3/grouped_gemm/06_split_last_wave
#include <algorithm>

#include "kc/common/error.hpp"
#include "kc/stage3/grouped_gemm_args.hpp"
#include "warp_specialized_gemm.cuh"

namespace kc::stage3 {

GroupedSplitPlan plan_grouped_split_last_wave(int tiles, int grid, int k_tiles) {
  require(tiles >= 0 && grid > 0 && k_tiles > 0, "grouped GEMM rung 06: tiles = {}, grid = {}, K steps = {}", tiles,
          grid, k_tiles);
  const int waves = tiles / grid;
  const int last_wave = tiles - waves * grid;
  GroupedSplitPlan plan{tiles, 1};
  if (last_wave == 0 || 2 * last_wave > grid) return plan;  // a full last wave, or one that fills half the grid
  const int splits = std::min({grid / last_wave, k_tiles / kGroupedMinKTilesPerSplit, kGroupedMaxSplits});
  if (splits < 2) return plan;
  return {waves * grid, splits};
}

std::size_t grouped_split_workspace_vectors(int sm_count) {
  return static_cast<std::size_t>(std::max(sm_count, 0)) * GroupedSplitLastWaveConfig::kConsumers *
         GroupedSplitLastWaveConfig::kSplitSlotVectors;
}

std::size_t grouped_split_workspace_counters(int sm_count) {
  return static_cast<std::size_t>(std::max(sm_count, 0)) * GroupedSplitLastWaveConfig::kConsumers;
}

void grouped_gemm_06_split_last_wave(const GroupedGemmArgs& args, const GroupedSplitWorkspace& workspace,
                                     cudaStream_t stream, HopperLaunchCache& cache) {
  launch_grouped_warp_specialized<GroupedSplitLastWaveConfig>(args, stream, cache, "rung 06", &workspace);
}

}  // namespace kc::stage3
