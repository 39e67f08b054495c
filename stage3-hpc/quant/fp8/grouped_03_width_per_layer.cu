// FP8 grouped GEMM, rung 03 — rung 01 or rung 02, whichever tile width fills the persistent waves better (sm_90a).
//
// Idea: FP8 rung 11's, for a layer of experts. Rung 02's 128 x 192 tiles spread each K step's fixed
// work over more columns and win wherever both widths fill their waves; but a layer whose experts
// are small can have as many waves of wide tiles as of narrow ones, and then the narrow ones, each
// shorter, finish first (eight experts of 64 rows with N = 4096: 176 wide tiles or 256 narrow ones,
// two waves of 132 CTAs either way). The waves of a grouped launch are counted from the tile
// tables the caller already built: tile_starts[G] and wide_tile_starts[G] are the two tile counts.
//
// What changed from rungs 01 and 02: only the launch. It counts the CTAs each kernel keeps resident,
// estimates each width's time as its waves x the time of one of its tiles, a narrow tile costing
// kFp8GroupedNarrowTileTime of a wide one (fp8_grouped_gemm_args.hpp), and launches rung 01's kernel
// where the narrow estimate is the lower, else rung 02's. Both kernels are the measured ones,
// unchanged (fp8_gemm_kernel.cuh).
//
// Layouts and limits: rung 01's (K % 16 == 0, each expert's rows a multiple of 4). Expected
// limiter: the chosen rung's. SASS to look for: the two kernels of rungs 01 and 02 — 8
// QGMMA.64x128x32.F32.E4M3.E4M3 and 256 FFMA in rung 01's, 4 QGMMA.64x192x32.F32.E4M3.E4M3 and 160
// FFMA in rung 02's, VOTE.ALL in both, no LDL/STL.
//
// Run just this rung:  kc-bench --filter stage3/fp8_grouped_gemm/03_width_per_layer
//                      kc-bench --filter 'stage3/fp8_grouped_gemm/0[123]_' --shapes 8x4096x14336
//                               --param tokens=512 --param row_align=4   (one line)
#include "fp8_gemm_kernel.cuh"

namespace kc::stage3 {
namespace {

// The CTAs of the configuration's kernel that fit the GPU at once (resident_blocks prepares the kernel).
template <class Config>
int grouped_resident_ctas(HopperLaunchCache& cache) {
  const void* kernel = reinterpret_cast<const void*>(&fp8_gemm_kernel<Config, Fp8Scaling::block, Fp8Flaw::none>);
  return cache.resident_blocks(kernel, Config::kThreads, Config::kSmemBytes, 1);
}

}  // namespace

bool fp8_grouped_narrow_tiles_win(int tiles, int wide_tiles, int resident_narrow, int resident_wide) {
  require(tiles >= 0 && wide_tiles >= 0 && resident_narrow > 0 && resident_wide > 0,
          "FP8 grouped GEMM rung 03: {} and {} tiles on {} and {} resident CTAs", tiles, wide_tiles, resident_narrow,
          resident_wide);
  return ceil_div(tiles, resident_narrow) * kFp8GroupedNarrowTileTime < ceil_div(wide_tiles, resident_wide);
}

void fp8_grouped_gemm_03_width_per_layer(const Fp8GroupedGemmArgs& args, cudaStream_t stream,
                                         HopperLaunchCache& cache) {
  check_fp8_grouped_gemm_args(args);  // before the occupancy queries of the estimate
  if (fp8_grouped_narrow_tiles_win(args.tiles, args.wide_tiles, grouped_resident_ctas<Fp8GroupedNarrowTiles>(cache),
                                   grouped_resident_ctas<Fp8GroupedWideTiles>(cache)))
    launch_fp8_grouped_gemm<Fp8GroupedNarrowTiles, Fp8Flaw::none>(args, stream, cache);
  else
    launch_fp8_grouped_gemm<Fp8GroupedWideTiles, Fp8Flaw::none>(args, stream, cache);
}

}  // namespace kc::stage3
