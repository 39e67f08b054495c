// Grouped GEMM, rung 02 — every expert's tiles in one launch.
//
// Idea: a mixture-of-experts layer is G independent GEMMs of one N and K, so the output tiles of
// all of them can share one grid. The host lays the experts' tiles end to end — expert g owns
// ceil(rows_g / 128) x ceil(N / 256) tiles, an expert without rows none — and hands the kernel
// two small tables of G + 1 prefix sums: the first row of each expert and its first tile. Block b
// finds its expert by a binary search of the tile table (grouped_tile_at in
// kc/stage3/grouped_gemm_args.hpp, CPU-tested), then its tile row and column inside the expert,
// and runs rung 03's kernel body on that expert's GEMM: A at the expert's first row with M = its
// rows, B at the expert's weight, C at its first row. Nothing of the main loop is new:
// run_gemm_tile (mma_sync_common.cuh) with CpAsyncMainloop<Rung03Config> (03_cp_async.cuh), the
// 3-stage cp.async pipeline with ldmatrix + mma.sync m16n8k16 and the staged epilogue. Its edge
// handling is per expert: a tile whose rows run past the expert's last row takes the checked
// copies (kFullTiles false: the rows past it are zeros, never the next expert's tokens) and stores
// only the expert's rows.
//
// What changed from rung 01: one launch instead of one per expert. Rung 01 calls stage 3's GEMM
// entry G times; each call is a launch of its own with its own host checks, and on a small expert
// a launch that fills a handful of SMs while the next expert waits behind it. Here the tiles of
// every expert are in flight together, and the launch cost is paid once. The tables are built on
// the host from the counts (once per routing, by the registration: src/register_grouped_gemm.cpp)
// and read by each block at its start: 2 x (G + 1) ints.
//
// Expected limiter: at small experts, reading B. An expert's GEMM does M FLOPs per byte of its
// weight (2 M N K FLOPs over 2 N K bytes): about 32 at 256 tokens over 8 experts, where a Hopper
// GPU's tensor cores need some hundreds (the data-sheet ratio of bf16 peak to HBM bandwidth;
// analysis, not a measurement). Those shapes wait on HBM, and the 128-row tile multiplies 96 zero
// rows of every 128 on top; how much that costs beside the stream of B is for the GPU run to show.
// At thousands of rows per expert the kernel is rung 03 on each expert, with rung 03's limiter
// (the mma.sync issue rate) plus one partial tile row per expert. A tile sized to small experts
// is the next change.
//
// SASS to look for: rung 03's loop, unchanged — per K step 12 LDGSTS.E.BYPASS.LTC128B.128, one
// DEPBAR.LE and one BAR.SYNC, 32 LDSM.16.M88.4, 128 HMMA.16816.F32.BF16; before it, the binary
// search of the tile table: a short loop of LDG.E (the table) and ISETP; no LDL/STL.
//
// Run just this rung:  kc-bench --filter stage3/grouped_gemm/02_one_launch
#include "03_cp_async.cuh"
#include "kc/stage3/grouped_gemm_args.hpp"
#include "mma_sync_common.cuh"

namespace kc::stage3 {
namespace {

static_assert(Rung03Config::kBlockM == kGroupedTileRows && Rung03Config::kBlockN == kGroupedTileCols,
              "the host builds the tile table with kGroupedTileRows x kGroupedTileCols: keep them rung 03's tile");

template <class Config>
__global__ void __launch_bounds__(Config::kThreads, Config::kMinBlocksPerSm) grouped_cp_async_kernel(GroupedGemmArgs args) {
  const GroupedTile tile = grouped_tile_at(static_cast<int>(blockIdx.x), args.tile_starts, args.row_starts,
                                           args.groups, Config::kBlockM);
  const int first_row = args.row_starts[tile.group];
  // The expert's GEMM, as rung 03 sees a whole problem: M is the expert's rows.
  HgemmArgs expert;
  expert.m = args.row_starts[tile.group + 1] - first_row;
  expert.n = args.n;
  expert.k = args.k;
  expert.a = args.a + static_cast<std::size_t>(first_row) * args.k;
  expert.b = args.b + static_cast<std::size_t>(tile.group) * args.n * args.k;
  expert.c = args.c + static_cast<std::size_t>(first_row) * args.n;
  expert.lda = args.k;
  expert.ldb = args.k;
  expert.ldc = args.n;
  run_gemm_tile<Config, CpAsyncMainloop<Config>>(expert, tile.m * Config::kBlockM, tile.n * Config::kBlockN);
}

}  // namespace

void grouped_gemm_02_one_launch(const GroupedGemmArgs& args, cudaStream_t stream) {
  if (args.tiles == 0) return;  // no expert has rows
  constexpr auto kKernel = &grouped_cp_async_kernel<Rung03Config>;
  allow_mma_sync_smem<Rung03Config, kKernel>();
  kKernel<<<args.tiles, Rung03Config::kThreads, Rung03Config::kSmemBytes, stream>>>(args);
}

}  // namespace kc::stage3
