// mma_sync_common.cuh — pieces of the sm_80 rungs (01-03): 16-byte tile chunks, the 128-byte
// swizzled shared-memory tile, ldmatrix, mma.sync m16n8k16 and the warp-level MMA over one tile.
//
// Both operands are K-contiguous (A is M x K, B is N x K), so one loader serves A and B: a tile is
// `rows` rows of the matrix, each a run of K elements moved in 16-byte chunks (8 bf16). K is a
// multiple of 8, so a chunk is either wholly inside a row or wholly past its end.
#pragma once

#include <cuda_bf16.h>

#include <cstddef>
#include <cstdint>

#include "epilogue.cuh"
#include "gemm_layout.hpp"
#include "hgemm.hpp"

namespace kc::stage3 {

inline constexpr int kChunkElements = 8;  // 16 bytes of bf16

// Where chunk (row, col) of a rows_total x k matrix lives, and whether it exists at all.
struct ChunkSource {
  const bf16* pointer;
  bool valid;
};

__device__ __forceinline__ ChunkSource chunk_source(const bf16* matrix, int rows_total, int k,
                                                   int row, int col) {
  const bool valid = row < rows_total && col < k;
  // An invalid chunk still gets a harmless in-bounds address: cp.async with src-size 0 reads
  // nothing, but the address must be a valid global one all the same.
  const std::size_t offset = valid ? static_cast<std::size_t>(row) * k + col : 0;
  return {matrix + offset, valid};
}

// The chunk's 16 bytes, or zeros past the edge of the matrix (zeros add nothing to the dot products).
__device__ __forceinline__ uint4 read_chunk(ChunkSource source) {
  return source.valid ? *reinterpret_cast<const uint4*>(source.pointer) : make_uint4(0, 0, 0, 0);
}

__device__ __forceinline__ uint4 load_chunk_or_zero(const bf16* matrix, int rows_total, int k,
                                                    int row, int col) {
  return read_chunk(chunk_source(matrix, rows_total, k, row, col));
}

__device__ __forceinline__ std::uint32_t shared_address(const void* pointer) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(pointer));
}

// ---- the 02/03 block tile: 128 x 128 outputs, K in steps of 64, four warps of 64 x 64 ------------
struct MmaSyncTile {
  static constexpr int kBlockM = 128;
  static constexpr int kBlockN = 128;
  static constexpr int kBlockK = 64;  // one 128-byte swizzled row per M (or N) index
  static constexpr int kWarpTileM = 64;
  static constexpr int kWarpTileN = 64;
  static constexpr int kWarpsN = kBlockN / kWarpTileN;
  static constexpr int kThreads = 32 * (kBlockM / kWarpTileM) * kWarpsN;  // 128
  static constexpr int kFragmentsM = kWarpTileM / 16;  // m16 blocks per warp
  static constexpr int kFragmentsN = kWarpTileN / 8;   // n8 blocks per warp
  static constexpr int kTileBytesA = kBlockM * kBlockK * 2;
  static constexpr int kTileBytesB = kBlockN * kBlockK * 2;
  static constexpr int kChunksPerRow = kBlockK / kChunkElements;  // 8
};

using WarpAccumulators = float[MmaSyncTile::kFragmentsM][MmaSyncTile::kFragmentsN][4];

// The 16-byte chunks of a 128 x 64 tile that one thread moves. Consecutive threads take
// consecutive chunks of a row: 8 threads cover one 128-byte row, so global reads are whole 128-byte
// lines and the swizzled shared stores of 8 threads hit distinct banks; the 128 threads cover 16
// rows per pass, and 8 passes the tile. The pass count is a compile-time constant, so the walk
// unrolls into straight-line code (a loop starting at threadIdx.x would have a trip count the
// compiler cannot see: a rolled loop with remainder handling, branches and serialized
// load -> store pairs).
inline constexpr int kTileRowsPerPass = MmaSyncTile::kThreads / MmaSyncTile::kChunksPerRow;  // 16
inline constexpr int kTileChunksPerThread = MmaSyncTile::kBlockM / kTileRowsPerPass;          // 8

__device__ __forceinline__ int tile_chunk_row(int pass) {
  return pass * kTileRowsPerPass + static_cast<int>(threadIdx.x) / MmaSyncTile::kChunksPerRow;
}
__device__ __forceinline__ int tile_chunk_column() {
  return static_cast<int>(threadIdx.x) % MmaSyncTile::kChunksPerRow;
}
// Byte offset in the swizzled tile of this thread's chunk of pass `pass`.
__device__ __forceinline__ int tile_chunk_offset(int pass) {
  return swizzle_128b_offset(tile_chunk_row(pass), tile_chunk_column());
}

// Calls copy_chunk(pass, byte offset in the swizzled tile, source chunk) for each of this thread's
// chunks of the 128 x 64 tile with rows [row0, row0 + 128) and columns [k0, k0 + 64).
template <class CopyChunk>
__device__ __forceinline__ void for_each_tile_chunk(const bf16* matrix, int rows_total, int k,
                                                    int row0, int k0, CopyChunk copy_chunk) {
  static_assert(MmaSyncTile::kBlockM == MmaSyncTile::kBlockN, "A and B tiles share one loader");
  static_assert(kTileChunksPerThread * kTileRowsPerPass == MmaSyncTile::kBlockM,
                "the passes cover the tile exactly");
  const int col = k0 + tile_chunk_column() * kChunkElements;
#pragma unroll
  for (int pass = 0; pass < kTileChunksPerThread; ++pass)
    copy_chunk(pass, tile_chunk_offset(pass),
               chunk_source(matrix, rows_total, k, row0 + tile_chunk_row(pass), col));
}

// ---- tensor-core instructions ---------------------------------------------------------------------
// Four 8x8 b16 matrices from shared memory; lane l supplies the row address of matrix l/8, and
// receives in register i its share (row l/4, elements 2(l%4), +1) of matrix i.
__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&registers)[4], std::uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(registers[0]), "=r"(registers[1]), "=r"(registers[2]), "=r"(registers[3])
               : "r"(address));
}

// D = A.B + D for one 16 x 8 x 16 block: A row-major fragment (4 registers), B "col" fragment
// (K-contiguous, 2 registers), FP32 accumulators.
__device__ __forceinline__ void mma_m16n8k16_bf16(float (&d)[4], const std::uint32_t (&a)[4],
                                                  std::uint32_t b0, std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// One warp multiplies its 64 x 64 share of a 128 x 128 x 64 block tile held in swizzled shared
// memory (A tile rows = M, B tile rows = N, both 64 K-elements long).
__device__ __forceinline__ void warp_mma_tile(std::uint32_t smem_a, std::uint32_t smem_b,
                                              int warp_row0, int warp_col0,
                                              WarpAccumulators& acc) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int kk = 0; kk < MmaSyncTile::kBlockK / 16; ++kk) {
    // A: matrices (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15)
    // are the registers a0..a3 of the m16n8k16 A fragment, in that order.
    std::uint32_t a[MmaSyncTile::kFragmentsM][4];
#pragma unroll
    for (int i = 0; i < MmaSyncTile::kFragmentsM; ++i) {
      const int row = warp_row0 + i * 16 + lane % 16;
      const int chunk = kk * 2 + lane / 16;
      ldmatrix_x4(a[i], smem_a + swizzle_128b_offset(row, chunk));
    }
    // B (N x K in shared memory): one x4 gives two n8 blocks, each as its (k 0-7, k 8-15) pair.
    std::uint32_t b[MmaSyncTile::kFragmentsN][2];
#pragma unroll
    for (int j = 0; j < MmaSyncTile::kFragmentsN; j += 2) {
      const int row = warp_col0 + j * 8 + lane % 8 + 8 * (lane / 16);
      const int chunk = kk * 2 + (lane / 8) % 2;
      std::uint32_t pair[4];
      ldmatrix_x4(pair, smem_b + swizzle_128b_offset(row, chunk));
      b[j][0] = pair[0];
      b[j][1] = pair[1];
      b[j + 1][0] = pair[2];
      b[j + 1][1] = pair[3];
    }
#pragma unroll
    for (int i = 0; i < MmaSyncTile::kFragmentsM; ++i)
#pragma unroll
      for (int j = 0; j < MmaSyncTile::kFragmentsN; ++j) mma_m16n8k16_bf16(acc[i][j], a[i], b[j][0], b[j][1]);
  }
}

// Writes a warp's 64 x 64 accumulators to C (guarded at the edges).
__device__ __forceinline__ void store_warp_tile(const HgemmArgs& args, int row0, int col0,
                                                const WarpAccumulators& acc) {
  const LinearCombination linear = linear_combination(args);
#pragma unroll
  for (int i = 0; i < MmaSyncTile::kFragmentsM; ++i)
#pragma unroll
    for (int j = 0; j < MmaSyncTile::kFragmentsN; ++j)
      store_fragment_16x8(args.c, args.m, args.n, row0 + i * 16, col0 + j * 8, acc[i][j], linear,
                          Identity{});
}

}  // namespace kc::stage3
