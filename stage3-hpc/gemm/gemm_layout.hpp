// gemm_layout.hpp — the index arithmetic of the stage-3 GEMM ladder, identical on host and device.
//
// Everything here is a pure function so the CPU tests can check it without a GPU: the 128-byte
// shared-memory swizzle every rung from 02 on uses (and TMA/WGMMA expect), the raster order in
// which the persistent rungs walk the output tiles, the rules a tile shape of the mma.sync rungs
// must follow, how rungs 11 and 14 split K over CTAs, and where rung 14's lanes point ldmatrix.
#pragma once

#include <cuda_runtime.h>

#include <type_traits>

namespace kc::stage3 {

// ---- 128-byte swizzle ---------------------------------------------------------------------------
// A tile whose rows are 128 bytes (64 bf16) is stored as rows of eight 16-byte chunks. Stored
// plainly, chunk c of eight consecutive rows sits in the same four banks, so an ldmatrix (8 rows x
// 16 bytes per phase) or a column of epilogue stores is an 8-way bank conflict. XOR-ing the chunk
// index with (row mod 8) spreads those eight chunks over all 32 banks. This is exactly the layout
// the TMA unit writes with CU_TENSOR_MAP_SWIZZLE_128B and WGMMA reads with the 128B swizzle mode
// (address bits [4:6] ^= bits [7:9], so the tile must start 1024-byte aligned).
inline constexpr int kSwizzleRowBytes = 128;
inline constexpr int kSwizzleChunkBytes = 16;
inline constexpr int kSwizzleRowsPerPattern = 8;  // the pattern repeats every 8 rows = 1024 bytes

__host__ __device__ constexpr int swizzle_128b_chunk(int row, int chunk) {
  return chunk ^ (row % kSwizzleRowsPerPattern);
}

// Byte offset of 16-byte chunk `chunk` (0..7) of row `row`.
__host__ __device__ constexpr int swizzle_128b_offset(int row, int chunk) {
  return row * kSwizzleRowBytes + swizzle_128b_chunk(row, chunk) * kSwizzleChunkBytes;
}

// Byte offset of 2-byte element `col` (0..63) of row `row`.
__host__ __device__ constexpr int swizzle_128b_element_offset(int row, int col) {
  return swizzle_128b_offset(row, col / 8) + (col % 8) * 2;
}

// ---- tile raster order --------------------------------------------------------------------------
struct TileCoord {
  int m = 0;  // tile row    (output rows m * tile_m ...)
  int n = 0;  // tile column (output columns n * tile_n ...)
};

// The `linear`-th tile in grouped raster order: walk down a band of `group_rows` tile rows before
// moving one tile column right, then continue with the next band. The tiles in flight at one time
// (one per SM) then cover a few A row-panels and a few B column-panels, which stay in L2, instead
// of whole tile columns -- every A row-panel -- as in plain column-major order (m fastest), the
// order a non-persistent grid uses; group_rows >= tiles_m gives that order.
__host__ __device__ constexpr TileCoord grouped_tile(int linear, int tiles_m, int tiles_n,
                                                     int group_rows) {
  const int band_rows = group_rows < tiles_m ? group_rows : tiles_m;
  const int tiles_per_band = band_rows * tiles_n;
  const int band = linear / tiles_per_band;
  const int first_row = band * band_rows;
  const int rows_left = tiles_m - first_row;
  const int rows_here = rows_left < band_rows ? rows_left : band_rows;  // the last band may be short
  const int in_band = linear - band * tiles_per_band;
  return {first_row + in_band % rows_here, in_band / rows_here};
}

// ---- the tile shape of the mma.sync rungs (02, 03) ------------------------------------------------
// A block computes a block_m x block_n tile of C, stepping through K 64 elements (one swizzled
// 128-byte row per M or N index) at a time; its warps_m x warps_n warps each own a
// (block_m / warps_m) x (block_n / warps_n) piece of it as m16n8 accumulator blocks; `stages`
// K steps of A and B tiles live in shared memory (rung 03's cp.async pipeline).
inline constexpr int kMmaSyncBlockK = 64;
inline constexpr int kMmaSyncMaxSmemPerSm = 228 * 1024;     // H100/H200, of which 1 KiB per block is reserved
inline constexpr int kMmaSyncMaxSmemPerBlock = 227 * 1024;  // H100/H200 opt-in limit (A100: 163 KiB)

struct MmaSyncShape {
  int block_m = 128, block_n = 128;
  int warps_m = 2, warps_n = 2;
  int stages = 3;
  // How the accumulators reach C: straight from the m16n8 fragments (4-byte stores), or staged as
  // bf16 through shared memory (the stages, free once the K loop is done) and stored as whole
  // 128-byte row segments (rung 03; store_warp_tile_staged in mma_sync_common.cuh).
  bool staged_epilogue = false;

  __host__ __device__ constexpr int threads() const { return 32 * warps_m * warps_n; }
  __host__ __device__ constexpr int warp_tile_m() const { return block_m / warps_m; }
  __host__ __device__ constexpr int warp_tile_n() const { return block_n / warps_n; }
  // FP32 accumulators per thread: a warp's m16n8 blocks hold 4 per lane each.
  __host__ __device__ constexpr int accumulators() const { return warp_tile_m() * warp_tile_n() / 32; }
  // 16-byte chunks are copied 8 threads to a 128-byte row, so one pass of the block covers
  // threads / 8 rows.
  __host__ __device__ constexpr int rows_per_copy_pass() const { return threads() / 8; }
  __host__ __device__ constexpr int tile_bytes_a() const { return block_m * kMmaSyncBlockK * 2; }
  __host__ __device__ constexpr int tile_bytes_b() const { return block_n * kMmaSyncBlockK * 2; }
  __host__ __device__ constexpr int stage_bytes() const { return tile_bytes_a() + tile_bytes_b(); }
  // + 1 KiB: the swizzle is defined on 1024-byte blocks, so the base is aligned up by hand.
  __host__ __device__ constexpr int smem_bytes() const { return stages * stage_bytes() + 1024; }
  // The staged epilogue's buffer, carved from the stages: the block's outputs in bf16.
  __host__ __device__ constexpr int staged_epilogue_bytes() const { return block_m * block_n * 2; }
  // Threads per SM the registers are planned for. A 64 x 64 warp tile (128 accumulators, two sets
  // of fragments, addresses) needs up to 255 registers: 256 threads x 256 registers fill the 64 K
  // register file. A warp tile of at most 2048 outputs (64 accumulators) fits 128 registers, so
  // 512 threads per SM: twice the warps to hide each other's waits, for more shared-memory reads
  // per MMA (a 32 x 64 warp tile reads 1.5x the fragment bytes per FLOP of a 64 x 64 one).
  __host__ __device__ constexpr int planned_threads_per_sm() const { return accumulators() <= 64 ? 512 : 256; }
  // Blocks per SM the registers are planned for (the kernel's __launch_bounds__ minimum).
  __host__ __device__ constexpr int min_blocks_per_sm() const {
    return threads() <= planned_threads_per_sm() ? planned_threads_per_sm() / threads() : 1;
  }
};

// nullptr when `s` is a valid configuration of the mma.sync kernels, otherwise the rule it
// breaks. The kernels static_assert is_valid(); the CPU tests print the text.
__host__ __device__ constexpr const char* mma_sync_config_error(const MmaSyncShape& s) {
  if (s.block_m <= 0 || s.block_n <= 0 || s.warps_m <= 0 || s.warps_n <= 0 || s.stages <= 0)
    return "every size must be positive";
  if (s.block_m % s.warps_m != 0 || s.block_n % s.warps_n != 0)
    return "block_m must be a multiple of warps_m and block_n of warps_n";
  if (s.warp_tile_m() % 16 != 0 || s.warp_tile_n() % 16 != 0)
    return "warp tiles must be multiples of 16 in M (m16 fragments) and N (one ldmatrix.x4 gives two n8 fragments)";
  if (s.accumulators() > 128)
    return "a warp tile may hold at most 64 x 64 outputs: 128 FP32 accumulators per thread, plus fragments and "
           "addresses, is what fits 255 registers without spills";
  if (s.threads() % 64 != 0 || 256 % s.threads() != 0)
    return "64, 128 or 256 threads: copy passes of threads / 8 rows must be whole 8-row swizzle patterns, and "
           "a block's registers are planned for at most 256 threads";
  if (s.block_m % s.rows_per_copy_pass() != 0 || s.block_n % s.rows_per_copy_pass() != 0)
    return "block_m and block_n must be multiples of threads / 8: every thread copies the same number of chunks";
  if (s.stages < 2) return "at least two stages: one computed while the next one lands";
  if (s.staged_epilogue && s.warp_tile_n() != 64)
    return "the staged epilogue needs 64-column warp tiles: each output row of a warp is one 128-byte swizzled row";
  if (s.smem_bytes() > kMmaSyncMaxSmemPerBlock) return "the stages exceed 227 KiB of shared memory per block";
  if (s.min_blocks_per_sm() * (s.smem_bytes() + 1024) > kMmaSyncMaxSmemPerSm)
    return "the blocks per SM the registers are planned for do not fit 228 KiB of shared memory together";
  return nullptr;
}

__host__ __device__ constexpr bool is_valid(const MmaSyncShape& s) { return mma_sync_config_error(s) == nullptr; }

// ---- the split of rung 11 (small M, split K) ------------------------------------------------------
// Rung 11 computes C for M <= 64 rows: one CTA per 128 output columns and per slice of K. The
// rows of A are padded to m16 tiles (1..4 of them), K is walked in tiles of 64, and the K tiles
// are shared out over `splits` CTAs per column block as evenly as integer division allows. With
// one split the CTA writes C itself; with more, each writes FP32 partial sums to a workspace of
// splits x M x N floats and a second kernel adds them in split order (deterministic) and applies
// alpha and beta once.
inline constexpr int kSmallMMaxM = 64;
inline constexpr int kSmallMBlockN = 128;
inline constexpr int kSmallMBlockK = 64;
// A split shorter than this many K tiles would spend much of its time filling its pipeline.
inline constexpr int kSmallMMinKTilesPerSplit = 4;

// The grid of the small-M split-K rungs (11, 14): column blocks by splits of K.
struct SmallMSplitGrid {
  int n_blocks = 0;  // 128-column blocks of C: the grid's x
  int k_tiles = 0;   // 64-deep K tiles in all
  int splits = 0;    // CTAs per column block along K: the grid's y

  __host__ __device__ constexpr bool needs_workspace() const { return splits > 1; }
  // K tiles [k_tile_begin(s), k_tile_begin(s + 1)) belong to split s; every split gets
  // floor(k_tiles / splits) or one more.
  __host__ __device__ constexpr int k_tile_begin(int split) const {
    return static_cast<int>(static_cast<long long>(split) * k_tiles / splits);
  }
};

struct SmallMSplitKPlan : SmallMSplitGrid {
  int m_tiles = 0;  // m16 tiles of A: ceil(M / 16), 1..4
};

// The split rule, for a GPU with `sm_count` SMs: as many splits as keep the grid within one CTA
// per SM (each CTA keeps its own pipeline of B tiles in flight, enough for one SM's share of the
// DRAM bandwidth: the rung's header counts it), and no split shorter than
// kSmallMMinKTilesPerSplit K tiles. More CTAs would add a second, partial wave; more splits also
// add workspace traffic (2 x splits x M x N x 4 bytes) for no gain.
__host__ __device__ constexpr SmallMSplitKPlan plan_small_m_split_k(int m, int n, int k, int sm_count) {
  SmallMSplitKPlan plan;
  plan.m_tiles = (m + 15) / 16;
  plan.n_blocks = (n + kSmallMBlockN - 1) / kSmallMBlockN;
  plan.k_tiles = (k + kSmallMBlockK - 1) / kSmallMBlockK;
  int splits = sm_count / plan.n_blocks;
  const int longest = plan.k_tiles / kSmallMMinKTilesPerSplit;
  if (splits > longest) splits = longest;
  plan.splits = splits < 1 ? 1 : splits;
  return plan;
}

// The 16-byte chunk (8 consecutive k of a 64-deep tile row) that lane t (= lane % 4) of a warp
// reads in step s (0, 1) of a K tile; its four 32-bit words feed two m16n8k16 MMAs (the rung's
// header: "the fragment trick"). Rows g (= lane / 4) of a swizzled tile then put the 8 lanes of
// one LDS.128 phase in 8 different chunk columns, and step 1's offset is step 0's XOR 16.
__host__ __device__ constexpr int small_m_lane_chunk(int t, int s) { return 2 * t + s; }

// The workspace rung 11 needs for `plan` on an M x N output: splits x M x N partial sums, none
// with one split.
__host__ __device__ constexpr long long small_m_split_k_workspace_floats(const SmallMSplitKPlan& plan, int m, int n) {
  return plan.needs_workspace() ? static_cast<long long>(plan.splits) * m * n : 0;
}

// ---- the split and the fragments of rung 14 (small M, the weights as mma.sync's A) ----------------
// Rung 14 computes what rung 11 computes with the roles of the operands in the MMA swapped: 16 rows
// of B (16 output columns) are mma.sync m16n8k16's A operand and 8 rows of A (8 tokens) its B
// operand, so the product is a 16 x 8 piece of C^T and M = 1..64 takes 1..8 token tiles of 8
// (no padding to 16 rows). The column blocks (kSmallMBlockN = 128 rows of B), the 64-deep K tiles
// and the split rule are rung 11's (plan_small_m_split_k), with two CTAs an SM from three token tiles. The reduction differs: each CTA writes
// its FP32 partial tile (128 columns x 8 token_tiles tokens) to a slot of its own in a workspace
// and counts itself in its column block's counter; the CTA that arrives last adds the slots in
// split order, applies alpha and beta and resets the counter to zero. One launch.
inline constexpr int kSmallMTokensPerTile = 8;  // mma.sync's n8: the tokens of one B operand
inline constexpr int kSmallMMaxTokenTiles = kSmallMMaxM / kSmallMTokensPerTile;

struct SmallMWeightsAsAPlan : SmallMSplitGrid {
  int token_tiles = 0;  // n8 tiles of tokens: ceil(M / 8), 1..8

  // One CTA's FP32 partial sums: 128 output columns x 8 token_tiles tokens.
  __host__ __device__ constexpr int partial_tile_floats() const {
    return kSmallMBlockN * kSmallMTokensPerTile * token_tiles;
  }
};

// From this many token tiles (M > 16) rung 14 aims at two CTAs an SM, not one, where every split
// still gets at least kSmallMTwoCtasMinKTilesPerSplit K tiles. A CTA has four warps, one per
// scheduler; with 3 to 8 token tiles a warp's K tile is a long dependent stream of ldmatrix and
// mma.sync, and the profile of one CTA an SM (ncu at 64 x 4096 x 4096) showed most scheduler
// cycles with no warp ready to issue. A second CTA (registers and shared memory allow it) gives
// every scheduler a second warp, at the price of twice the splits and partial tiles, and of
// shorter splits: measured, two CTAs an SM helped where K is long (K = 8192 and 14336) and lost
// where it halved 16 K tiles a split to 8 (K = 4096 over 32 column blocks), whose pipeline fill
// and reduction then weigh twice as much (stage-3 README, rung 14).
inline constexpr int kSmallMTwoCtasFromTokenTiles = 3;
inline constexpr int kSmallMTwoCtasMinKTilesPerSplit = 16;

// Rung 11's split rule (no split shorter than kSmallMMinKTilesPerSplit K tiles), the rows of A
// counted in n8 token tiles, and one CTA an SM up to two token tiles, two from three where the
// splits stay long enough.
__host__ __device__ constexpr SmallMWeightsAsAPlan plan_small_m_weights_as_a(int m, int n, int k, int sm_count) {
  const int token_tiles = (m + kSmallMTokensPerTile - 1) / kSmallMTokensPerTile;
  SmallMSplitKPlan split = plan_small_m_split_k(m, n, k, sm_count);
  if (token_tiles >= kSmallMTwoCtasFromTokenTiles) {
    const SmallMSplitKPlan two = plan_small_m_split_k(m, n, k, 2 * sm_count);
    if (two.k_tiles / two.splits >= kSmallMTwoCtasMinKTilesPerSplit) split = two;
  }
  SmallMWeightsAsAPlan plan;
  static_cast<SmallMSplitGrid&>(plan) = split;
  plan.token_tiles = token_tiles;
  return plan;
}

// Rung 15's plan (hgemm rung 15, WGMMA): rung 11's split rule with one CTA an SM at every token
// count. Rung 14's second CTA gave each scheduler a second warp to issue mma.sync chains from; a
// WGMMA CTA issues 8 instructions a K tile whatever M is, and more splits only add partial tiles
// for the last CTA to add (measured: the stage-3 README, rung 15). The same tiles, token tiles and
// workspace as rung 14 (small_m_weights_as_a_partial_floats and _counters apply).
__host__ __device__ constexpr SmallMWeightsAsAPlan plan_small_m_tma_wgmma(int m, int n, int k, int sm_count) {
  SmallMWeightsAsAPlan plan;
  static_cast<SmallMSplitGrid&>(plan) = plan_small_m_split_k(m, n, k, sm_count);
  plan.token_tiles = (m + kSmallMTokensPerTile - 1) / kSmallMTokensPerTile;
  return plan;
}

// Rung 16's plan (hgemm rung 16: the splits of a column block are one cluster, added through
// distributed shared memory): rung 15's, with at most kSmallMMaxClusterSplits splits — the largest
// cluster every sm_90 GPU runs (the portable limit).
inline constexpr int kSmallMMaxClusterSplits = 8;
__host__ __device__ constexpr SmallMWeightsAsAPlan plan_small_m_cluster_split(int m, int n, int k, int sm_count) {
  SmallMWeightsAsAPlan plan = plan_small_m_tma_wgmma(m, n, k, sm_count);
  if (plan.splits > kSmallMMaxClusterSplits) plan.splits = kSmallMMaxClusterSplits;
  return plan;
}

// Calls launch(std::integral_constant<int, T>) with the token tiles of M rows, T = ceil(M / 8) in
// 1..8: the small-M rungs that hold the rows of A as n8 token tiles have an instance for each
// (hgemm 15 and 16; the GGUF GEMV's batch rungs 09 and 10). Host code.
template <class Launch>
void dispatch_token_tiles(int m, Launch&& launch) {
  switch ((m + kSmallMTokensPerTile - 1) / kSmallMTokensPerTile) {
    case 1: launch(std::integral_constant<int, 1>{}); break;
    case 2: launch(std::integral_constant<int, 2>{}); break;
    case 3: launch(std::integral_constant<int, 3>{}); break;
    case 4: launch(std::integral_constant<int, 4>{}); break;
    case 5: launch(std::integral_constant<int, 5>{}); break;
    case 6: launch(std::integral_constant<int, 6>{}); break;
    case 7: launch(std::integral_constant<int, 7>{}); break;
    default: launch(std::integral_constant<int, 8>{}); break;
  }
}

// The workspace of rung 14: one partial tile per CTA (n_blocks x splits of them, slot
// (block, split) at block x splits + split), and one arrival counter per column block; none with
// one split.
__host__ __device__ constexpr long long small_m_weights_as_a_partial_floats(const SmallMWeightsAsAPlan& plan) {
  return plan.needs_workspace() ? static_cast<long long>(plan.n_blocks) * plan.splits * plan.partial_tile_floats() : 0;
}
__host__ __device__ constexpr int small_m_weights_as_a_counters(const SmallMWeightsAsAPlan& plan) {
  return plan.needs_workspace() ? plan.n_blocks : 0;
}

// Where lane `lane` of a warp points ldmatrix.x4 in a 128-byte-swizzled tile (byte offsets from
// the warp's first row), for the two operands of rung 14's MMAs:
//  - the weights (mma.sync's A, 16 rows x 16 k): matrices (rows 0-7, k 0-7), (rows 8-15, k 0-7),
//    (rows 0-7, k 8-15), (rows 8-15, k 8-15) are the A registers a0..a3, so lane l addresses row
//    l % 16, chunk l / 16. k16 slice s (chunks 2s, 2s + 1) is that offset XOR 32 s; the next m16
//    tile 16 rows (2048 bytes) further.
//  - the tokens (mma.sync's B, 8 tokens x 16 k, K-contiguous as A is stored): matrices = chunks
//    0..3 of the tile's 8 rows are b0, b1 of slice 0 and b0, b1 of slice 1, so lane l addresses
//    row l % 8, chunk l / 8; slices 2, 3 (chunks 4..7) are that offset XOR 64; the next token tile
//    8 rows (1024 bytes) further.
// CPU-tested against the fragment layouts of mma.sync m16n8k16 (gemm_layout_test.cpp).
__host__ __device__ constexpr int small_m_weight_lane_offset(int lane) { return swizzle_128b_offset(lane % 16, lane / 16); }
__host__ __device__ constexpr int small_m_token_lane_offset(int lane) { return swizzle_128b_offset(lane % 8, lane / 8); }

// ---- the groups of rung 12 (M <= 8, a GEMV on the CUDA cores) ------------------------------------
// Rung 12 computes C for M <= 8 rows with blocks of 256 threads cut into groups of 32, 64, 128 or
// 256; a group owns small_m_gemv_rows(M) consecutive columns of C (rows of B) and its threads
// share the row's K in 16-byte pieces (8 bf16), lane after lane.
inline constexpr int kSmallMGemvMaxM = 8;
inline constexpr int kSmallMGemvThreads = 256;
// Weights one launch takes when they share A (Q, K and V): hgemm_12_small_m_gemv_shared_a.
inline constexpr int kSmallMGemvMaxWeights = 3;
// Columns of C per group: 4 at M <= 2 (few sums per thread, so more rows of B in flight), else 2.
__host__ __device__ constexpr int small_m_gemv_rows(int m) { return m <= 2 ? 4 : 2; }

struct SmallMGemvGroup {
  int threads = 0;  // threads per group: 32, 64, 128 or 256
  int blocks = 0;   // the grid: ceil(N / (groups per block x columns per group))
};

// The group rule, for a GPU with `sm_count` SMs: the smallest group that leaves each thread at
// most 4 pieces of its row (so a long K gets more threads per column, and each thread's loads are
// few and all in flight together), then wider groups while the grid has fewer than 4 blocks per SM
// and every thread would still have a piece (narrow outputs: the K and V projections of a GQA
// model, N = 512-1024, would otherwise run a grid that leaves SMs with too few bytes in flight).
__host__ __device__ constexpr SmallMGemvGroup choose_small_m_gemv_group(int m, int n, int k, int sm_count) {
  const int pieces = k / 8;
  const int rows = small_m_gemv_rows(m);
  int threads = 32;
  while (threads < kSmallMGemvThreads && threads * 4 < pieces) threads *= 2;
  const auto blocks_for = [&](int t) {
    const long long columns_per_block = static_cast<long long>(kSmallMGemvThreads / t) * rows;
    return static_cast<int>((n + columns_per_block - 1) / columns_per_block);
  };
  while (threads < kSmallMGemvThreads && blocks_for(threads) < 4 * sm_count && threads * 2 <= pieces) threads *= 2;
  return {threads, blocks_for(threads)};
}

}  // namespace kc::stage3
