// FP8 GEMM rung 05 — rung 04 with the tile's width chosen per shape: 128 x 192 or 128 x 128 (sm_90a).
//
// Idea: a persistent kernel runs its tiles in waves of one tile per SM (132 on an H200), and the
// last wave is as long as a full one however few tiles it holds. Rung 04's 128 x 192 tile suits the
// SM best (the widest that fits the FP8 promotion's registers: rung 02), but the tile count is what
// decides how full the waves are. At 4096³ it cuts C into 32 x 22 = 704 tiles: five full waves and
// a sixth of 44 tiles, 89% of the six waves' SM time used. 128 x 128 tiles cut it into 1024: seven
// waves and an eighth of 100, 97% used, each wave two thirds as long. Which is faster depends on
// the shape; the launch counts both before it runs.
//
// What changed from rung 04: the launch. It counts, for both tile widths, the waves its tiles take
// on the CTAs that fit the GPU, and estimates each width's time as waves x the time of one of its
// tiles, a 128-wide tile costing kNarrowTileTime of a 192-wide one (2/3 if the time were in
// proportion to the columns; it is more, because a narrower tile reads more of A from shared memory
// per multiply-add: rung 02's arithmetic). The narrow tile runs when its estimate is the lower:
// rung 04's kernel with Fp8GemmConfig<128, ...> (six stages of 32 KiB, the same promotion window
// of four K steps, the TMA-store epilogue in one pass of 128 columns), else rung 04's kernel as it
// is. Block scaling chooses the same way (its kernels promote every K step, as in rung 04).
//
// Layouts and limits: rung 01's. Expected limiter: the tensor cores, with fewer of them idle in the
// last wave. SASS to look for: both kernels' K loops — QGMMA.64x192x32.F32.E4M3.E4M3 and
// QGMMA.64x128x32.F32.E4M3.E4M3, 4 a K step — UTMASTG, no LDL/STL.
//
// Run just this rung:  kc-bench --filter stage3/fp8_gemm/05_tile_per_shape
//                      kc-bench --filter 'stage3/fp8_gemm/0[45]' --param scaling=0 --shapes 4096x4096x4096
#include "fp8_gemm_kernel.cuh"

namespace kc::stage3 {
namespace {

using WideTiles = Fp8GemmConfig<192, /*promotion interval*/ 4, /*store pass columns*/ 192, /*stages*/ 4>;  // rung 04
using NarrowTiles = Fp8GemmConfig<128, /*promotion interval*/ 4, /*store pass columns*/ 128, /*stages*/ 6>;

// The time of a 128 x 128 tile in units of a 128 x 192 tile's, both running whole waves
// (calibrated at 8192³, where both widths fill their waves: stage-3 README).
constexpr double kNarrowTileTime = 0.70;

template <Fp8Scaling kScaling>
void launch_tile_per_shape(const Fp8GemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache) {
  check_fp8_gemm_args(args);  // before the occupancy queries of the estimate
  const double wide = fp8_persistent_waves<WideTiles, kScaling>(args, cache);
  const double narrow = fp8_persistent_waves<NarrowTiles, kScaling>(args, cache) * kNarrowTileTime;
  if (narrow < wide)
    launch_fp8_gemm<NarrowTiles, kScaling, Fp8Flaw::none>(args, stream, cache);
  else
    launch_fp8_gemm<WideTiles, kScaling, Fp8Flaw::none>(args, stream, cache);
}

}  // namespace

void fp8_gemm_05_tile_per_shape(const Fp8GemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache) {
  if (args.scaling == Fp8Scaling::block)
    launch_tile_per_shape<Fp8Scaling::block>(args, stream, cache);
  else
    launch_tile_per_shape<Fp8Scaling::per_tensor>(args, stream, cache);
}

}  // namespace kc::stage3
