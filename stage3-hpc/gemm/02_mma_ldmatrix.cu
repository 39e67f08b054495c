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
// Layouts: A row-major M x K, B N x K (non-transposed ldmatrix gives the "col" B fragment). Any M,
// N; K a multiple of 8. SASS to look for: LDSM.16.M88.4 and HMMA.16816.F32.BF16.
// Expected limiter: latency — global loads, the shared stores and the MMAs still take turns,
// separated by __syncthreads; rung 03 overlaps them.
//
// Run just this rung:  kc-bench --filter stage3/hgemm_bf16/02_mma_ldmatrix
#include "hgemm.hpp"
#include "mma_sync_common.cuh"

namespace kc::stage3 {
namespace {

using Tile = MmaSyncTile;

// Copies a 128 x 64 tile into swizzled shared memory through registers, zeros past the edges.
__device__ void load_tile_through_registers(std::uint8_t* tile, const bf16* matrix, int rows_total,
                                            int k, int row0, int k0) {
  for_each_tile_chunk(matrix, rows_total, k, row0, k0, [&](int offset, ChunkSource source) {
    *reinterpret_cast<uint4*>(tile + offset) = read_chunk(source);
  });
}

__global__ void __launch_bounds__(Tile::kThreads) hgemm_mma_ldmatrix_kernel(HgemmArgs args) {
  __shared__ alignas(1024) std::uint8_t smem_a[Tile::kTileBytesA];
  __shared__ alignas(1024) std::uint8_t smem_b[Tile::kTileBytesB];

  const int block_row0 = blockIdx.x * Tile::kBlockM;
  const int block_col0 = blockIdx.y * Tile::kBlockN;
  const int warp = threadIdx.x / 32;
  const int warp_row0 = (warp / Tile::kWarpsN) * Tile::kWarpTileM;
  const int warp_col0 = (warp % Tile::kWarpsN) * Tile::kWarpTileN;

  WarpAccumulators acc = {};
  for (int k0 = 0; k0 < args.k; k0 += Tile::kBlockK) {
    load_tile_through_registers(smem_a, args.a, args.m, args.k, block_row0, k0);
    load_tile_through_registers(smem_b, args.b, args.n, args.k, block_col0, k0);
    __syncthreads();
    warp_mma_tile(shared_address(smem_a), shared_address(smem_b), warp_row0, warp_col0, acc);
    __syncthreads();  // the next iteration overwrites the tiles
  }
  store_warp_tile(args, block_row0 + warp_row0, block_col0 + warp_col0, acc);
}

}  // namespace

void hgemm_02_mma_ldmatrix(const HgemmArgs& args, cudaStream_t stream) {
  const dim3 grid(ceil_div(args.m, Tile::kBlockM), ceil_div(args.n, Tile::kBlockN));
  hgemm_mma_ldmatrix_kernel<<<grid, Tile::kThreads, 0, stream>>>(args);
}

}  // namespace kc::stage3
