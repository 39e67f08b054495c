// FP8 GEMM rung 12 — rung 11 with the last wave's wide tiles split along K over the idle SMs (sm_90a).
//
// Idea: the persistent grid runs one CTA per SM, each walking its tiles; the last wave is as long as
// a full one however few tiles it holds. At 4096³ rung 10's 128 x 192 tiles are 704: five waves of
// 132 and a sixth of 44, during which 88 SMs wait, about a sixth of the run (rung 11 still takes
// the wide tile there: eight waves of narrow tiles weigh more). Split each of those 44 tiles along
// K into 2 pieces of 16 K steps and 88 SMs share the last wave, each with half a tile. This is the
// grouped GEMM's rung 06, on the FP8 kernel: whole tiles while they fill the grid, K pieces at the
// end. What a piece costs: writing its promoted sums (48 KiB per consumer half) and, for one
// consumer half a tile, adding the pieces in split order before the store.
//
// What changed from rung 11: where rung 11 runs rung 10's kernel, rung 12 runs the same kernel with
// Config::kSplitLastWave (fp8_gemm_kernel.cuh): the work units are whole tiles, a multiple of the
// grid, then the pieces (work_unit in tile_scheduler.cuh); the producer loads a piece's K steps
// and their scales only; after its piece each consumer writes its 96 promoted sums a thread to its
// slot of the workspace and counts itself in its half's counter (add_pieces_in_last in
// tile_scheduler.cuh, the grouped rung's: split_k::reduce_in_last_cta on the warpgroup's named
// barrier), and the half that counts last adds the pieces and runs the epilogue. The plan is the
// grouped rung's (plan_split_last_wave, plan_grouped_split_last_wave): a split only where the last
// wave would leave half the grid or more idle, pieces of at least 16 K steps. Everything else —
// rung 09's narrow tiles, one scale per tensor, M % 4 != 0 — is rung 11's launch, called as it is.
//
// Layouts and limits: rung 11's; the workspace (grouped_split_workspace_vectors / _counters for
// the GPU's SMs) is its caller's, one launch at a time. Expected limiter: as rung 10, with the last
// wave's idle SMs at work; the pieces' sums go through the L2 (at most 2 x 48 KiB an SM). SASS to
// look for: rung 10's loop (4 QGMMA.64x192x32.F32.E4M3.E4M3 a step, its LDS and SHFL, the stage
// and descriptor arithmetic in uniform registers: UIADD3, R2UR no more than rung 10's), plus the
// split's STG.E.128 of the sums, MEMBAR, one ATOMG.E.ADD per consumer half and piece, BAR.RED.OR on
// the named barrier and the LDG.E.128 of the pieces; no LDL/STL.
//
// Run just this rung:  kc-bench --filter stage3/fp8_gemm/12_split_last_wave --param scaling=1
//                      kc-bench --filter 'stage3/fp8_gemm/(11|12)_' --param scaling=1 --shapes 4096x4096x4096
#include "fp8_gemm_kernel.cuh"

namespace kc::stage3 {
namespace {

using WideSplitTiles = Fp8GemmConfig<192, /*promotion interval*/ 4, /*store pass columns*/ 192, /*stages*/ 4,
                                     Fp8BlockScaleWalk::wide_scales_in_stage, /*cluster*/ 1,
                                     /*split last wave*/ true>;  // rung 10's, split

}  // namespace

void fp8_gemm_12_split_last_wave(const Fp8GemmArgs& args, const GroupedSplitWorkspace& workspace,
                                 cudaStream_t stream, HopperLaunchCache& cache) {
  // Where rung 11 takes rung 10's wide tiles, the same kernel with its last wave split; anything
  // else is rung 11's (which makes its estimate again: cached occupancy lookups).
  if (args.scaling == Fp8Scaling::block && fp8_scale_a_rows_take_tma(args) &&
      !fp8_scales_in_stage_narrow_tiles_win(args, cache)) {
    launch_fp8_gemm<WideSplitTiles, Fp8Scaling::block, Fp8Flaw::none>(args, stream, cache, &workspace);
    return;
  }
  fp8_gemm_11_scales_in_stage_per_shape(args, stream, cache);
}

}  // namespace kc::stage3
