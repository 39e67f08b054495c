// Rung 02 — mma.sync m16n8k16 with ldmatrix from 128-byte-swizzled shared memory.
//
// Idea: drop the opaque WMMA API and drive the tensor cores with the PTX the compiler would emit
// anyway, so that the register layout of every fragment is ours to choose. A block of 4 warps owns
// a 128 x 128 tile; each warp owns 64 x 64 = 4 x 8 m16n8 accumulator blocks (128 FP32 registers).
// Per K step of 64, A and B tiles (128 rows x 128 bytes each) are copied to shared memory; per
// k16 slice a warp issues 4 ldmatrix.x4 for A, 4 for B and 32 mma.sync.
//
// What changed from rung 01: 4x the work per block (128 x 128 instead of 64 x 64) and 4x per warp,
// so each byte brought into shared memory feeds twice as many multiply-adds; fragments come from
// ldmatrix (one instruction, four 8 x 8 matrices, laid out exactly as mma.sync wants them); the
// shared tiles have no padding but a 128-byte XOR swizzle (gemm_layout.hpp), which makes both the
// 16-byte stores and the ldmatrix row reads conflict-free; accumulators go straight from registers
// to C, since the m16n8 fragment layout is documented.
//
// Loads: each thread moves 8 16-byte chunks of each tile, a compile-time count (mma_sync_common.cuh,
// for_each_tile_chunk), and issues all 16 global loads of a K step into registers before it stores
// the first to shared memory, so a K step waits for global memory once, and that wait overlaps
// the barrier that waits for the slowest warp to finish the previous tiles. A loop starting at
// threadIdx.x (trip count unknown to the compiler) came out rolled in groups of four
// load -> store pairs: four round trips to global memory per K step, with branches.
// Occupancy: 236 registers per thread (128 accumulators, 64 for the staged chunks, fragments), so
// 2 blocks of 128 threads per SM (__launch_bounds__(128, 2)): 8 warps, 2 per scheduler.
//
// Layouts: A row-major M x K, B N x K (non-transposed ldmatrix gives the "col" B fragment). Any M,
// N; K a multiple of 8. SASS to look for: 16 LDG.E.128 in a row, then 16 STS.128 between two
// BAR.SYNC; LDSM.16.M88.4 and HMMA.16816.F32.BF16, the next k16 slice's LDSMs interleaved with
// this slice's HMMAs.
// Expected limiter: latency — global loads, the shared stores and the MMAs still take turns,
// separated by __syncthreads; rung 03 overlaps them. Expected effect of loading all chunks first
// (not yet measured): one global round trip per K step instead of four, about 1.5-2x over the
// rolled loop at 4096^3.
//
// Run just this rung:  kc-bench --filter stage3/hgemm_bf16/02_mma_ldmatrix
#include "hgemm.hpp"
#include "mma_sync_common.cuh"

namespace kc::stage3 {
namespace {

using Tile = MmaSyncTile;

// Global -> registers: this thread's chunks of one 128 x 64 tile, zeros past the edges.
using StagedChunks = uint4[kTileChunksPerThread];

__device__ __forceinline__ void load_tile_chunks(StagedChunks& staged, const bf16* matrix,
                                                 int rows_total, int k, int row0, int k0) {
  for_each_tile_chunk(matrix, rows_total, k, row0, k0,
                      [&](int pass, int, ChunkSource source) { staged[pass] = read_chunk(source); });
}

// Registers -> swizzled shared memory.
__device__ __forceinline__ void store_tile_chunks(std::uint8_t* tile, const StagedChunks& staged) {
#pragma unroll
  for (int pass = 0; pass < kTileChunksPerThread; ++pass)
    *reinterpret_cast<uint4*>(tile + tile_chunk_offset(pass)) = staged[pass];
}

__global__ void __launch_bounds__(Tile::kThreads, 2) hgemm_mma_ldmatrix_kernel(HgemmArgs args) {
  __shared__ alignas(1024) std::uint8_t smem_a[Tile::kTileBytesA];
  __shared__ alignas(1024) std::uint8_t smem_b[Tile::kTileBytesB];

  const int block_row0 = blockIdx.x * Tile::kBlockM;
  const int block_col0 = blockIdx.y * Tile::kBlockN;
  const int warp = threadIdx.x / 32;
  const int warp_row0 = (warp / Tile::kWarpsN) * Tile::kWarpTileM;
  const int warp_col0 = (warp % Tile::kWarpsN) * Tile::kWarpTileN;

  WarpAccumulators acc = {};
  StagedChunks staged_a, staged_b;
  for (int k0 = 0; k0 < args.k; k0 += Tile::kBlockK) {
    // All 16 loads of both tiles are issued before the first is used, so the thread waits for
    // global memory once per K step; their latency also overlaps the barrier wait below.
    load_tile_chunks(staged_a, args.a, args.m, args.k, block_row0, k0);
    load_tile_chunks(staged_b, args.b, args.n, args.k, block_col0, k0);
    __syncthreads();  // every warp has finished reading the previous tiles
    store_tile_chunks(smem_a, staged_a);
    store_tile_chunks(smem_b, staged_b);
    __syncthreads();  // the tiles are complete
    warp_mma_tile(shared_address(smem_a), shared_address(smem_b), warp_row0, warp_col0, acc);
  }
  store_warp_tile(args, block_row0 + warp_row0, block_col0 + warp_col0, acc);
}

}  // namespace

void hgemm_02_mma_ldmatrix(const HgemmArgs& args, cudaStream_t stream) {
  const dim3 grid(ceil_div(args.m, Tile::kBlockM), ceil_div(args.n, Tile::kBlockN));
  hgemm_mma_ldmatrix_kernel<<<grid, Tile::kThreads, 0, stream>>>(args);
}

}  // namespace kc::stage3
