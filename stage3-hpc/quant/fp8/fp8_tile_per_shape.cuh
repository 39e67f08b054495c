// fp8_tile_per_shape.cuh — the launch of the FP8 GEMM's rungs 05 and 06: of two tile widths, the
// one whose persistent waves the launch estimates shorter for the shape (rung 05's header says why).
#pragma once

#include "fp8_gemm_kernel.cuh"

namespace kc::stage3 {

// The time of a 128 x 128 tile in units of a 128 x 192 tile's, both running whole waves
// (calibrated at 8192³, where both widths fill their waves: stage-3 README).
inline constexpr double kNarrowFp8TileTime = 0.70;

// How many waves the tiles of `Config` take on the CTAs of its kernel that fit the GPU at once.
template <class Config, Fp8Scaling kScaling>
int fp8_persistent_waves(const Fp8GemmArgs& args, HopperLaunchCache& cache) {
  const void* kernel = reinterpret_cast<const void*>(&fp8_gemm_kernel<Config, kScaling, Fp8Flaw::none>);
  cache.prepare_kernel(kernel, Config::kSmemBytes);
  const int resident = cache.resident_blocks(kernel, Config::kThreads, Config::kSmemBytes, 1);
  const long long tiles =
      static_cast<long long>(ceil_div(args.m, Config::kBlockM)) * ceil_div(args.n, Config::kBlockN);
  return static_cast<int>((tiles + resident - 1) / resident);
}

template <class WideTiles, class NarrowTiles, Fp8Scaling kScaling>
void launch_fp8_tile_per_shape(const Fp8GemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache) {
  check_fp8_gemm_args(args);  // before the occupancy queries of the estimate
  const double wide = fp8_persistent_waves<WideTiles, kScaling>(args, cache);
  const double narrow = fp8_persistent_waves<NarrowTiles, kScaling>(args, cache) * kNarrowFp8TileTime;
  if (narrow < wide)
    launch_fp8_gemm<NarrowTiles, kScaling, Fp8Flaw::none>(args, stream, cache);
  else
    launch_fp8_gemm<WideTiles, kScaling, Fp8Flaw::none>(args, stream, cache);
}

}  // namespace kc::stage3
