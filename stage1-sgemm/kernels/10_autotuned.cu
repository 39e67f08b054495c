// Rung 10 — autotuned: the rung-09 kernel, with the tile shape chosen per class of shapes.
//
// Idea: no single tile shape is best everywhere. 128 x 128 tiles keep the FMA units busy on
// 4096^3, but a 1024^3 problem has only 64 such tiles for 132 SMs, and 128 x 8192 x 8192 has 64
// tiles each 8192 deep. So the kernel of rung 09 is a template over its tile parameters (bm, bn,
// bk, wm, wn, tm, tn, stages; threads follow), kSearchSpace in sgemm_autotune.hpp lists the
// configurations worth trying (15, each checked by config_error() at compile time), and each
// class of shapes (small, long_k, skinny, large: classify_shape) gets the configuration and the
// split-K factor that measured fastest on the H200.
//
// Split-K: when C has too few tiles to fill the GPU, `splits` blocks share a tile, each summing
// over its own range of K (plan_split_k), and add alpha * their partial sum into C with atomicAdd
// after a first pass set C to beta * C. The order of those additions varies from run to run, so
// the last bits of the result may too (within the FP32 tolerance); splits = 1 is bit-reproducible.
//
// What changed from rung 09: nothing in the kernel; the launch picks its template instance (from
// a table of function pointers built over kSearchSpace), the split-K factor and hence the grid.
//
// How the table is filled: build kc-sgemm-tune and run it on the H200,
//   kc-sgemm-tune --json sgemm_tune.json
// It checks every configuration (with and without split-K) on two odd shapes, times every
// (configuration, split) pair on representative shapes of each class in alternation with cuBLAS
// (L2 scrubbed, median), and prints the table of timings and the winners (best geometric mean of
// % of cuBLAS) as a kShapeClassChoices initializer to paste into sgemm_autotune.hpp.
//
// Expected limiter: as rung 09 on large shapes (instruction issue in the k-tile loop), plus the
// partial last wave of tiles (rung 11 fills it); on small and skinny ones, how many SMs the chosen
// tiling keeps busy.
//
// Run just this rung:  kc-bench --filter stage1/sgemm/10_autotuned
#include <array>
#include <cstddef>
#include <utility>

#include "09_cp_async.cuh"
#include "kc/stage1/sgemm_autotune.hpp"

namespace kc::stage1 {
namespace {

using TileLaunch = void (*)(const SgemmArgs&, int splits, int raster_group, cudaStream_t);

// One instance of the pipelined kernel per search-space entry, and nowhere else.
template <std::size_t... kIndices>
constexpr std::array<TileLaunch, sizeof...(kIndices)> make_launch_table(std::index_sequence<kIndices...>) {
  return {&launch_pipelined<SearchSpaceTiles<static_cast<int>(kIndices)>>...};
}
constexpr auto kLaunchTable = make_launch_table(std::make_index_sequence<kSearchSpaceSize>());

}  // namespace

void sgemm_search_space_launch(int config, int splits, const SgemmArgs& args, cudaStream_t stream) {
  require(config >= 0 && config < kSearchSpaceSize,
          "search-space configuration {} does not exist: there are {} (0 to {})", config,
          kSearchSpaceSize, kSearchSpaceSize - 1);
  require(splits >= 1, "the split-K factor must be at least 1 (got {})", splits);
  kLaunchTable[static_cast<std::size_t>(config)](args, splits, kRasterGroup, stream);
}

void sgemm_10_autotuned(const SgemmArgs& args, cudaStream_t stream) {
  const ShapeClassChoice choice = choose_config(args.m, args.n, args.k);
  sgemm_search_space_launch(choice.config, choice.splits, args, stream);
}

}  // namespace kc::stage1
