// kc/stage3/grouped_gemm_args.hpp — the arguments of the grouped GEMM of a mixture-of-experts
// layer, the tile arithmetic its one-launch rung shares with the host, and one launch per rung.
// An argument header: the rung files include it and nothing of the harness
// (kc/stage3/grouped_gemm.hpp defines the op).
//
// The tokens are sorted by expert ("M-grouped contiguous"): the rows of expert g are rows
// row_starts[g] .. row_starts[g + 1] - 1 of A and of C, and an expert may have none.
//
//   A [tokens, K]        B [G, N, K]              C [tokens, N]
//   +-----------+        expert 0: N x K          +-----------+
//   | expert 0  |  . B[0]^T  ------------------>  | expert 0  |
//   +-----------+                                 +-----------+
//   | expert 1  |  . B[1]^T  ------------------>  | expert 1  |
//   +-----------+        (expert 2: no rows)      +-----------+
//   | expert 3  |  . B[3]^T  ------------------>  | expert 3  |
//   +-----------+                                 +-----------+
//
// C_g = A_g . B_g^T for every expert g, all bf16 and row-major, FP32 accumulation: stage 3's
// hgemm (hgemm.hpp) per expert, with alpha = 1 and beta = 0 (C is written, never read).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace kc::stage3 {

using bf16 = __nv_bfloat16;

// The output tile of rung 02: rung 03's block tile (Rung03Config in gemm/03_cp_async.cuh, which
// the rung checks against these at compile time). The host builds the rung's tile table with them.
inline constexpr int kGroupedTileRows = 128;
inline constexpr int kGroupedTileCols = 256;

struct GroupedGemmArgs {
  int groups = 0;                      // G, the experts
  int n = 0, k = 0;                    // every expert's weight is N x K
  const bf16* a = nullptr;             // [tokens, K]
  const bf16* b = nullptr;             // [G, N, K]
  bf16* c = nullptr;                   // [tokens, N]
  // Device arrays of G + 1 prefix sums: the first row of each expert (row_starts[G] = tokens),
  // and the first output tile of each expert in the launch's grid (tile_starts[G] = the grid).
  const int* row_starts = nullptr;
  const int* tile_starts = nullptr;
  int tiles = 0;                       // tile_starts[G], also on the host: the grid
  int tokens = 0;                      // row_starts[G], also on the host (rungs 03-07's tensor maps)
};

// Where tile `tile` of the grid lies: expert `group`, tile row `m` and tile column `n` of that
// expert's output (rows row_starts[group] + m * tile_rows ...).
struct GroupedTile {
  int group = 0;
  int m = 0;
  int n = 0;
};

// The expert whose tiles hold `tile` (0 <= tile < tile_starts[groups]): the last g with
// tile_starts[g] <= tile. An expert without rows has no tiles (tile_starts[g] == tile_starts[g + 1])
// and is never the answer. Then tile rows fastest, as rung 03's grid walks them: the CTAs that
// run together share a tile column of B_g.
__host__ __device__ inline GroupedTile grouped_tile_at(int tile, const int* tile_starts, const int* row_starts,
                                                       int groups, int tile_rows) {
  int low = 0, high = groups - 1;  // tile_starts[low] <= tile always holds
  while (low < high) {
    const int middle = (low + high + 1) / 2;
    if (tile_starts[middle] <= tile)
      low = middle;
    else
      high = middle - 1;
  }
  const int rows = row_starts[low + 1] - row_starts[low];
  const int tiles_m = (rows + tile_rows - 1) / tile_rows;
  const int in_group = tile - tile_starts[low];
  return {low, in_group % tiles_m, in_group / tiles_m};
}

// Rung 02: every expert's tiles in one launch of rung 03's cp.async kernel body; K % 8 == 0.
void grouped_gemm_02_one_launch(const GroupedGemmArgs& args, cudaStream_t stream);

class HopperLaunchCache;  // the tensor maps and launch facts of the Hopper kernels (arch/sm90)

// Rung 03: every expert's tiles walked by the persistent warp-specialized TMA + WGMMA kernel of
// the GEMM ladder's rung 07 (sm_90a, compute capability 9.0); K % 8 == 0.
void grouped_gemm_03_warp_specialized(const GroupedGemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache);

// Rung 04: rung 03 with the GEMM ladder's rung 09 epilogue (shared memory + TMA store) for every
// 64-row half that lies inside its expert's rows; the others store directly, as rung 03.
void grouped_gemm_04_tma_store(const GroupedGemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache);

// Rung 05: rung 04 whose consumers issue no WGMMA for a half that lies wholly past its expert's rows.
void grouped_gemm_05_skip_empty_halves(const GroupedGemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache);

// Rung 06's split of the last wave. The persistent grid of `grid` CTAs runs `tiles` tiles of
// `k_tiles` K steps each: `tiles / grid` whole waves and a last wave of tiles % grid. When that last
// wave leaves at least half the grid idle, its tiles are split along K into `splits` pieces (as many
// as the grid holds, at most kGroupedMaxSplits, and at least kGroupedMinKTilesPerSplit K steps
// each), so every CTA has work until the end; the CTAs' work units are then the whole tiles
// (`whole_tiles`, a multiple of the grid) followed by the pieces. splits == 1: no split.
// Why 16 K steps: a piece moves 48 KiB of operands a K step and, when split, up to 2 x 64 KiB of
// partial sums out and back; at 16 steps the partials add at most a sixth to its traffic, at 4
// steps two thirds (on the memory-bound small experts, shorter pieces made the layer slower).
inline constexpr int kGroupedMaxSplits = 8;
inline constexpr int kGroupedMinKTilesPerSplit = 16;
struct GroupedSplitPlan {
  int whole_tiles = 0;
  int splits = 1;
};
GroupedSplitPlan plan_grouped_split_last_wave(int tiles, int grid, int k_tiles);

// Rung 06's scratch, owned by its caller and kept between launches: float4 slots for the pieces'
// partial sums (one slot of grouped_split_slot_vectors() per piece and consumer half) and one
// arrival counter per split tile and consumer half, zero before every launch (zero them once when
// allocated: every launch leaves them at zero). grouped_split_workspace_vectors(sm_count) and
// grouped_split_workspace_counters(sm_count) are enough for any problem on a GPU of sm_count SMs
// (the pieces never outnumber the grid). One launch at a time per workspace.
struct GroupedSplitWorkspace {
  float4* slots = nullptr;
  std::size_t slot_vectors = 0;  // capacity
  std::uint32_t* counters = nullptr;
  std::size_t counter_count = 0;  // capacity
};
std::size_t grouped_split_workspace_vectors(int sm_count);
std::size_t grouped_split_workspace_counters(int sm_count);

// Rung 06: rung 05 with the last wave's tiles split along K (plan_grouped_split_last_wave), the
// pieces added by the last consumer half to finish, in split order.
void grouped_gemm_06_split_last_wave(const GroupedGemmArgs& args, const GroupedSplitWorkspace& workspace,
                                     cudaStream_t stream, HopperLaunchCache& cache);

// Rung 07: rung 06, and a tile whose second 64-row half is empty loads only the 64 rows of A the
// first half reads. The same plan and workspace as rung 06.
void grouped_gemm_07_half_a_tiles(const GroupedGemmArgs& args, const GroupedSplitWorkspace& workspace,
                                  cudaStream_t stream, HopperLaunchCache& cache);
// The same kernel with one flaw, for the negative control stage3/grouped_gemm/nc_split_pieces_added_twice
// (tests/negative_controls): the consumer half that adds a split tile's pieces adds piece 0 twice.
void grouped_gemm_07_half_a_tiles_adds_a_piece_twice(const GroupedGemmArgs& args,
                                                     const GroupedSplitWorkspace& workspace, cudaStream_t stream,
                                                     HopperLaunchCache& cache);

}  // namespace kc::stage3
