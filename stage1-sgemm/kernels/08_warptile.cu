// Rung 08 — warptiling: block tile, then warp tile, then thread tile.
//
// Idea: make the hierarchy explicit. The 128 x 128 block tile is cut into eight 32 x 64 warp
// tiles (4 down, 2 across); inside its warp tile, lane l sits at (l / 8, l % 8) of a 4 x 8 grid
// and owns 2 x 2 sub-tiles of 4 x 4, repeating every 16 rows and 32 columns. In one LDS.128 the
// 32 lanes of a warp then read 4 distinct float4 of A and 8 of B (one 128-byte row, each read by
// 4 lanes); in rung 07, where a warp spans 2 thread rows and 16 thread columns, they read 2 of A
// and 16 of B (256 bytes). Fewer distinct bytes per request means fewer shared-memory wavefronts
// (ncu: l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld). A warp's working set is also a compact
// 32 x 64 piece of C, which is how tensor-core kernels (stage 3) divide work too.
//
// What changed from rung 07: placement() (warptile_placement in sgemm_tiling.hpp), and this rung
// handles every shape: whether rows of A, B and C start on 16-byte boundaries is checked at run
// time and, where they do not (K or N not a multiple of 4), the same loop loads and stores with
// scalar instructions and zero-fills past the edges.
//
// Expected limiter: latency. The loop is still single-buffered: every k tile waits for its global
// loads, and the FMAs wait for the barrier. Rung 09 overlaps the next tiles' loads with the math.
//
// Run just this rung:  kc-bench --filter stage1/sgemm/08_warptile
#include "register_tiled_kernel.cuh"

namespace kc::stage1 {
namespace {

// bm, bn, bk, wm, wn, tm, tn, stages (1: a single buffer). A function rather than a constexpr
// object: device code may call constexpr functions but not refer to a host object.
constexpr WarpTileConfig warptile_config() { return {128, 128, 8, 32, 64, 8, 8, 1}; }

struct WarptileLayout {
  static constexpr int kTileRows = warptile_config().bm;
  static constexpr int kTileCols = warptile_config().bn;
  static constexpr int kTileK = warptile_config().bk;
  static constexpr int kThreadRows = warptile_config().tm;
  static constexpr int kThreadCols = warptile_config().tn;
  static constexpr int kThreads = warptile_config().threads();   // 256
  static constexpr int kAStride = warptile_config().a_stride();  // padded, as in rung 07
  static constexpr bool kAlwaysFloat4Rows = false;
  static constexpr FragmentPlacement placement(int thread) {
    return warptile_placement(warptile_config(), thread);
  }
};

}  // namespace

void sgemm_08_warptile(const SgemmArgs& args, cudaStream_t stream) {
  launch_register_tiled<WarptileLayout>(args, stream);
}

}  // namespace kc::stage1
