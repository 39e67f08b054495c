// Rung 02 — mma.sync m16n8k16 with ldmatrix from 128-byte-swizzled shared memory.
//
// Idea: drop the opaque WMMA API and drive the tensor cores with the PTX the compiler would emit
// anyway, so that the register layout of every fragment is ours to choose. Each warp owns a
// 64 x 64 tile = 4 x 8 m16n8 accumulator blocks (128 FP32 registers); per k16 slice it issues
// 4 ldmatrix.x4 for A, 4 for B and 32 mma.sync. A block of 2 x 4 warps owns 128 x 256 outputs.
//
// What changed from rung 01: 4x the work per warp (64 x 64 instead of 32 x 32) and 8x per block
// (128 x 256 instead of 64 x 64), so each byte brought into shared memory feeds 2.7x as many
// multiply-adds and each byte a warp reads from it twice as many; fragments come from ldmatrix
// (one instruction, four 8 x 8 matrices, laid out exactly as mma.sync wants them); the shared
// tiles have no padding but a 128-byte XOR swizzle (gemm_layout.hpp), which makes both the
// 16-byte stores and the ldmatrix row reads conflict-free; accumulators go straight from
// registers to C, since the m16n8 fragment layout is documented.
//
// Loads: the pipeline that predates cp.async. Two shared-memory buffers; while the warps
// multiply K step t out of one, each thread's global loads of step t + 1 (12 chunks of 16 bytes:
// 4 of A, 8 of B) are in flight into registers, and after the MMAs it stores them into the other
// buffer. One barrier per K step (it both publishes the new buffer and frees the old one), where
// loading, storing and multiplying one buffer took two barriers and a full global round trip per
// step with nothing to overlap it. The chunk walk has a compile-time count (TileChunks in
// mma_sync_common.cuh), so the 12 loads are straight-line code issued back to back. Blocks whose
// chunks all exist (block_tiles_are_full: most blocks of a large problem) load from a walked
// pointer without checks: per thread and K step 12 LDG.E.128, 12 STS.128 and 50 other
// instructions next to 32 LDSM and 128 HMMA per warp (edge blocks, checking every chunk: ~200).
// Why 128 x 256 with 8 warps and not 128 x 128 with 4: the staged chunks stay in registers for
// the whole MMA phase, next to the 128 accumulators and a slice of fragments. At 128 threads a
// thread stages 16 chunks (64 registers) and ptxas spilled 24 bytes at 255 registers; at 256
// threads it stages 12 (48 registers): 243 registers (sm_90a; 242 on sm_80), no spills, 1 block
// of 8 warps per SM (2 x 48 KiB of shared memory). The larger tile also moves a quarter fewer global
// bytes per FLOP.
//
// The measured rows (this rung, and rung 03 above it) are in docs/benchmarks/h200/stage3-gemm.md.
// Why this is not rung 03 and stays below it: the prefetch keeps one K step in flight, not two,
// and its 48 staged registers leave no room for a second set of fragments, so after each barrier
// the first slice's 8 ldmatrix are waited for with no other block on the SM to fill the gap; and
// the 24 loads and stores per thread and K step take issue slots and registers that cp.async
// does not. Rung 03 removes all three (cp.async, two steps in flight, fragments one slice ahead
// across the barrier).
//
// Layouts: A row-major M x K, B N x K (non-transposed ldmatrix gives the "col" B fragment). Any M,
// N; K a multiple of 8. SASS to look for in the K loop: 12 LDG.E.128 before the first HMMA, then
// LDSM.16.M88.4 and HMMA.16816.F32.BF16 interleaved, then 12 STS.128 and one BAR.SYNC; no
// LDL/STL.
// Expected limiter: latency — one K step of prefetch and an exposed ldmatrix wait after every
// barrier, under the mma.sync issue ceiling that kc-mma-sync-peak measures.
//
// Run just this rung:  kc-bench --filter stage3/hgemm/02_mma_ldmatrix
#include "hgemm.hpp"
#include "mma_sync_common.cuh"

namespace kc::stage3 {
namespace {

// 128 x 256 outputs per block, 2 x 4 warps of 64 x 64, two shared-memory buffers (stages).
using Rung02Config = MmaSyncConfig</*kBlockM=*/128, /*kBlockN=*/256, /*kWarpsM=*/2, /*kWarpsN=*/4, /*buffers=*/2>;
static_assert(Rung02Config::kStages == 2, "rung 02 fills one buffer while it computes from the other");

// This thread's chunks of one operand's tile, held in registers between the global load and the
// shared store.
template <class Chunks>
struct StagedTile {
  uint4 chunks[Chunks::kPasses];

  // Global -> registers, zeros past the edges.
  template <bool kFullTiles>
  __device__ void load(const TileChunkSources<Chunks, kFullTiles>& sources, int k_tile) {
#pragma unroll
    for (int pass = 0; pass < Chunks::kPasses; ++pass) chunks[pass] = read_chunk(sources(pass, k_tile));
  }
  // Registers -> the swizzled tile at `tile` (shared memory).
  __device__ void store(std::uint8_t* tile) const {
#pragma unroll
    for (int pass = 0; pass < Chunks::kPasses; ++pass)
      *reinterpret_cast<uint4*>(tile + Chunks::offset(pass)) = chunks[pass];
  }
};

// The K loop of one block. kFullTiles: every chunk exists (block_tiles_are_full), so the loads
// are plain 16-byte loads from a walked pointer; otherwise each is checked.
template <class Config>
struct RegisterStagedMainloop {
  template <bool kFullTiles>
  __device__ static void run(const HgemmArgs& args, std::uint8_t* smem, int block_row0, int block_col0,
                             WarpOrigin warp, WarpAccumulators<Config>& acc) {
    // Tiles as generic pointers (for the stores) and as shared addresses (for ldmatrix).
    const auto tile_a = [&](int buffer) { return smem + buffer * Config::kStageBytes; };
    const auto tile_b = [&](int buffer) { return smem + buffer * Config::kStageBytes + Config::kTileBytesA; };
    const FragmentLaneOffsets lane = fragment_lane_offsets<Config>(warp);
    const int k_tiles = ceil_div(args.k, Config::kBlockK);

    const TileChunkSources<TileChunksA<Config>, kFullTiles> sources_a(args.a, args.m, args.k, block_row0);
    const TileChunkSources<TileChunksB<Config>, kFullTiles> sources_b(args.b, args.n, args.k, block_col0);
    StagedTile<TileChunksA<Config>> staged_a;
    StagedTile<TileChunksB<Config>> staged_b;
    if (k_tiles > 0) {  // K = 0 is a valid (empty) product: C = beta.C
      staged_a.load(sources_a, 0);
      staged_b.load(sources_b, 0);
      staged_a.store(tile_a(0));
      staged_b.store(tile_b(0));
    }
    __syncthreads();

    for (int k_tile = 0; k_tile < k_tiles; ++k_tile) {
      const int buffer = k_tile % 2;
      const bool has_next = k_tile + 1 < k_tiles;
      // The next K step's loads are in flight while this step's MMAs run; the thread waits for
      // them only at the shared stores below.
      if (has_next) {
        staged_a.load(sources_a, k_tile + 1);
        staged_b.load(sources_b, k_tile + 1);
      }
      warp_mma_k_step<Config>(smem_u32(tile_a(buffer)) + lane.a, smem_u32(tile_b(buffer)) + lane.b, acc);
      // The other buffer was last read in the previous K step, before the barrier that ended it.
      if (has_next) {
        staged_a.store(tile_a(1 - buffer));
        staged_b.store(tile_b(1 - buffer));
      }
      __syncthreads();  // the next step's tiles are complete, and every warp is done with this one's
    }
  }
};

template <class Config>
__global__ void __launch_bounds__(Config::kThreads, Config::kMinBlocksPerSm) hgemm_mma_ldmatrix_kernel(HgemmArgs args) {
  run_gemm_block<Config, RegisterStagedMainloop<Config>>(args);
}

}  // namespace

void hgemm_02_mma_ldmatrix(const HgemmArgs& args, cudaStream_t stream) {
  launch_mma_sync_kernel<Rung02Config, hgemm_mma_ldmatrix_kernel<Rung02Config>>(args, stream);
}

}  // namespace kc::stage3
