// kc/stage1/sgemm_tiling.hpp — the index arithmetic of the SGEMM ladder, as plain constexpr C++.
//
// Every mapping a kernel relies on (which block computes which tile of C, which thread loads which
// element of a tile, which outputs a thread owns, how K is split) lives here rather than inline
// in a kernel, for two reasons: the kernels call these functions on the device
// (--expt-relaxed-constexpr lets device code call constexpr functions), and the CPU tests in
// stage1-sgemm/tests call the very same functions to prove, without a GPU, that every tile element
// is loaded exactly once, every C element is owned by exactly one thread, shared-memory accesses
// are free of bank conflicts where a rung claims so, and every search-space configuration is
// valid.
#pragma once

#include <cstdint>

namespace kc::stage1 {

// a / b rounded up, for a >= 0 and b > 0; no overflow near INT_MAX (M = 2^31 - 1 is legal).
constexpr int ceil_div(int a, int b) { return a / b + (a % b != 0 ? 1 : 0); }

// A position inside a tile: row and column, in elements.
struct TileElement {
  int row = 0;
  int col = 0;
};

// Block `linear` of a one-dimensional grid, for C cut into tiles_m x tiles_n tiles.
// group_m == 1: row-major order, the order a 2D grid (x over columns) would give, without the
// 65535 limit of gridDim.y. group_m > 1: blocks walk down `group_m` tile rows before moving one
// tile column right, so the blocks resident at one moment share fewer, more reused rows of A and
// columns of B in the L2 ("grouped raster", the order Triton's matmul tutorial uses).
constexpr TileElement grouped_tile(int linear, int tiles_m, int tiles_n, int group_m) {
  const int blocks_per_group = group_m * tiles_n;
  const int group = linear / blocks_per_group;
  const int first_row = group * group_m;
  const int rows_in_group = tiles_m - first_row < group_m ? tiles_m - first_row : group_m;
  const int within = linear % blocks_per_group;
  return {first_row + within % rows_in_group, within / rows_in_group};
}

// Slot `slot` of a row-major tile `cols` wide that is loaded four floats (one float4) at a time:
// consecutive slots walk along a row, so consecutive threads read consecutive 16-byte pieces.
constexpr TileElement vec4_slot(int slot, int cols) {
  return {slot / (cols / 4), 4 * (slot % (cols / 4))};
}

// Slot `slot` of the rows x k_tile tile of A (k_tile a multiple of 8) loaded one float at a time
// by cp.async so that it lands transposed in shared memory. Eight consecutive slots take eight
// consecutive k of one row (one 32-byte sector of global memory); a warp's 32 slots take four
// consecutive rows. With the transposed tile stored at k * (rows + 4) + row, those 32 stores hit
// 32 different banks (bank = 4k + row mod 32): see a_scatter_bank in the tests.
constexpr TileElement a_scatter_slot(int slot, int rows) {
  const int k_in_sector = slot % 8;
  const int row = (slot / 8) % rows;
  const int sector = slot / (8 * rows);
  return {row, 8 * sector + k_in_sector};
}

// The same slots, seen from one thread: slot `first_slot + i * threads` (i = 0, 1, ...), where
// `first` is the thread's own slot. When a pass of `threads` slots covers whole rows
// (threads % (cols / 4) == 0), every pass stays in the thread's column and moves
// threads / (cols / 4) rows down; the kernels then test one column and compute no division.
constexpr TileElement vec4_slot_of_pass(TileElement first, int pass, int cols, int threads) {
  return {first.row + pass * (threads / (cols / 4)), first.col};
}

// The same for a_scatter_slot: when (8 * rows) % threads == 0, `passes` = 8 * rows / threads
// passes fill one 8-wide sector column of the tile, each threads / 8 rows below the last, and
// the next pass starts over 8 columns to the right.
constexpr TileElement a_scatter_slot_of_pass(TileElement first, int pass, int rows, int threads) {
  const int passes_per_sector = 8 * rows / threads;
  return {first.row + (pass % passes_per_sector) * (threads / 8), first.col + 8 * (pass / passes_per_sector)};
}

// Where a thread's TM x TN outputs sit inside the block tile. They form (TM/4) x (TN/4)
// sub-tiles of 4 x 4 so that each sub-tile row or column is one float4 (one LDS.128 from shared
// memory, one 16-byte store to C): rows row0 + s * row_step + i and columns
// col0 + s * col_step + j, for s < TM/4 (TN/4) and i, j < 4.
struct FragmentPlacement {
  int row0 = 0;
  int row_step = 4;
  int col0 = 0;
  int col_step = 4;
};

// Rungs 06 and 07 tile 128 x 128 outputs with 16 x 16 threads of 8 x 8 outputs each.
constexpr int kRegisterTileThreadsPerRow = 16;

// Rung 06: thread t owns one contiguous 8 x 8 block, rows 8 * (t / 16) .. + 7 and columns
// 8 * (t % 16) .. + 7 (two 4 x 4 sub-tiles side by side in each direction).
constexpr FragmentPlacement contiguous_placement(int thread) {
  return {8 * (thread / kRegisterTileThreadsPerRow), 4, 8 * (thread % kRegisterTileThreadsPerRow), 4};
}

// Rung 07: thread t's sub-tiles are 64 apart: rows {0, 64} + 4 * (t / 16) + 0..3 and columns
// {0, 64} + 4 * (t % 16) + 0..3, so 8 neighbouring lanes read 8 neighbouring float4.
constexpr FragmentPlacement spread_placement(int thread) {
  return {4 * (thread / kRegisterTileThreadsPerRow), 64, 4 * (thread % kRegisterTileThreadsPerRow), 64};
}

// The tile shape of a warptiled kernel: a block computes a bm x bn tile of C, stepping through K
// bk at a time; each warp computes a wm x wn piece of it, each thread tm x tn outputs; `stages`
// tiles of A and B are in flight in shared memory (1 = a single buffer).
struct WarpTileConfig {
  int bm = 128, bn = 128, bk = 8;
  int wm = 32, wn = 64;
  int tm = 8, tn = 8;
  int stages = 3;

  constexpr int warps_m() const { return bm / wm; }
  constexpr int warps_n() const { return bn / wn; }
  constexpr int threads() const { return 32 * warps_m() * warps_n(); }
  // A warp's 32 lanes form a lanes_m x lanes_n grid over its wm x wn tile.
  constexpr int lanes_m() const { return wm / tm; }
  constexpr int lanes_n() const { return wn / tn; }
  // Row length of the transposed A tile in shared memory. The 4 extra floats shift each k row by
  // 4 banks, which makes the transposed stores conflict-free and keeps rows 16-byte aligned.
  constexpr int a_stride() const { return bm + 4; }
  constexpr int stage_floats() const { return bk * a_stride() + bk * bn; }
  constexpr int smem_bytes() const { return stages * stage_floats() * 4; }
  // Register budget: blocks per SM the compiler must leave room for, so that a thread gets at
  // most 128 registers (65536 per SM) and no configuration is starved into spilling.
  constexpr int min_blocks_per_sm() const { return threads() >= 512 ? 1 : 512 / threads(); }
};

// Shared memory a block may have on every GPU kc targets (sm_80: 163 KiB, sm_90: 227 KiB).
constexpr int kMaxSmemBytesPerBlock = 163 * 1024;

// nullptr when `c` is a valid configuration of the cp.async pipelined kernel (rungs 09 and 10),
// otherwise which rule it breaks. The kernel static_asserts is_valid(); the tests print the text.
constexpr const char* config_error(const WarpTileConfig& c) {
  if (c.bm <= 0 || c.bn <= 0 || c.bk <= 0 || c.wm <= 0 || c.wn <= 0 || c.tm <= 0 || c.tn <= 0)
    return "every tile size must be positive";
  if (c.tm % 4 != 0 || c.tn % 4 != 0)
    return "tm and tn must be multiples of 4: outputs come in 4 x 4 sub-tiles (float4 loads and stores)";
  if (c.tm * c.tn > 64)
    return "tm * tn must be at most 64: more accumulators do not fit 128 registers without spills";
  if (c.wm % c.tm != 0 || c.wn % c.tn != 0) return "wm must be a multiple of tm and wn of tn";
  if (c.lanes_m() * c.lanes_n() != 32) return "(wm / tm) * (wn / tn) must be 32, one thread per lane";
  if (c.bm % c.wm != 0 || c.bn % c.wn != 0) return "bm must be a multiple of wm and bn of wn";
  if (c.threads() > 512) return "at most 512 threads (16 warps) per block";
  if (c.bk % 8 != 0) return "bk must be a multiple of 8: A is fetched in 32-byte sectors of 8 floats";
  if (c.bn % 4 != 0 || c.bm % 4 != 0) return "bm and bn must be multiples of 4";
  if ((c.bm * c.bk) % c.threads() != 0)
    return "bm * bk must be a multiple of the thread count: every thread copies the same number of A elements";
  if ((c.bk * c.bn / 4) % c.threads() != 0)
    return "bk * bn / 4 must be a multiple of the thread count: every thread copies the same number of B float4s";
  if ((8 * c.bm) % c.threads() != 0)
    return "8 * bm must be a multiple of the thread count: each pass of A copies stays in one 8-wide sector column";
  if (c.threads() % (c.bn / 4) != 0)
    return "the thread count must be a multiple of bn / 4: each thread copies B in one column of float4";
  if (c.stages < 1 || c.stages > 8) return "stages must be between 1 and 8";
  if (c.smem_bytes() > kMaxSmemBytesPerBlock) return "the stages do not fit 163 KiB of shared memory";
  return nullptr;
}

constexpr bool is_valid(const WarpTileConfig& c) { return config_error(c) == nullptr; }

// The warptiled placement (rungs 08-10): warp w owns the wm x wn piece at
// (w / warps_n, w % warps_n); inside it, lane l sits at (l / lanes_n, l % lanes_n) of a
// lanes_m x lanes_n grid, and its 4 x 4 sub-tiles repeat every lanes_m * 4 rows and
// lanes_n * 4 columns. In one k step the 8 lanes of each quarter-warp read 8 consecutive float4
// of B (one 128-byte row: no bank conflict) and at most lanes_m distinct float4 of A (broadcast).
constexpr FragmentPlacement warptile_placement(const WarpTileConfig& c, int thread) {
  const int warp = thread / 32;
  const int lane = thread % 32;
  const int warp_m = warp / c.warps_n();
  const int warp_n = warp % c.warps_n();
  const int lane_m = lane / c.lanes_n();
  const int lane_n = lane % c.lanes_n();
  return {warp_m * c.wm + lane_m * 4, c.lanes_m() * 4, warp_n * c.wn + lane_n * 4, c.lanes_n() * 4};
}

// Split-K: `splits` blocks share one tile of C, each reducing over k_per_split consecutive k
// (a multiple of the k tile), the last one over what remains. No split is ever empty.
struct SplitK {
  int splits = 1;
  int k_per_split = 0;
};

constexpr SplitK plan_split_k(int k, int k_tile, int requested_splits) {
  const int k_tiles = ceil_div(k, k_tile);
  const int wanted = requested_splits < 1 ? 1 : (requested_splits > k_tiles ? k_tiles : requested_splits);
  const int tiles_per_split = ceil_div(k_tiles, wanted);
  return {ceil_div(k_tiles, tiles_per_split), tiles_per_split * k_tile};
}

}  // namespace kc::stage1
