// gemm_layout.hpp — the index arithmetic of the stage-3 GEMM ladder, identical on host and device.
//
// Everything here is a pure function so the CPU tests can check it without a GPU: the 128-byte
// shared-memory swizzle every rung from 02 on uses (and TMA/WGMMA expect), and the raster order in
// which the persistent rungs walk the output tiles.
#pragma once

#include <cuda_runtime.h>

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
// of one A panel and every B panel of the matrix. group_rows >= tiles_m gives plain column-major
// order (m fastest), the order a non-persistent grid uses.
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

__host__ __device__ constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }

}  // namespace kc::stage3
