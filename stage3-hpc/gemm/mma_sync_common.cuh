// mma_sync_common.cuh — pieces of the sm_80 rungs (01-03): the tile configuration as a type,
// 16-byte tile chunks and where they come from, a warp's fragments and MMAs over one K step
// (ldmatrix and mma.sync m16n8k16: arch/sm80/mma.cuh), the epilogue from the m16n8
// accumulators, and one block and its launch (rungs 02 and 03 differ only in their K loop).
//
// Both operands are K-contiguous (A is M x K, B is N x K), so one loader serves A and B: a tile is
// `rows` rows of the matrix, each a run of K elements moved in 16-byte chunks (8 bf16). K is a
// multiple of 8, so a chunk is either wholly inside a row or wholly past its end.
#pragma once

#include <cuda_bf16.h>

#include <cstddef>
#include <cstdint>

#include "arch/sm80/mma.cuh"
#include "arch/util.hpp"
#include "epilogue.cuh"
#include "gemm_layout.hpp"
#include "hgemm.hpp"
#include "kc/common/error.hpp"

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

// ---- the block tile as the compiler sees it ------------------------------------------------------
// A configuration (MmaSyncShape, gemm_layout.hpp) as a type, so tile sizes are compile-time
// constants of the kernels: MmaSyncConfig<128, 128, 2, 2, 3> is 128 x 128 outputs per block,
// 2 x 2 warps of 64 x 64, 3 pipeline stages, accumulators stored straight to C;
// MmaSyncConfig<128, 256, 2, 4, 3, true> stores them through shared memory (rung 03).
template <int kBlockM_, int kBlockN_, int kWarpsM_, int kWarpsN_, int kStages_, bool kStagedEpilogue_ = false>
struct MmaSyncConfig {
  static constexpr MmaSyncShape kShape{kBlockM_, kBlockN_, kWarpsM_, kWarpsN_, kStages_, kStagedEpilogue_};
  static_assert(is_valid(kShape), "invalid mma.sync tile shape: mma_sync_config_error() in gemm_layout.hpp says why");

  static constexpr int kBlockM = kBlockM_;
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kBlockK = kMmaSyncBlockK;
  static constexpr int kWarpsN = kWarpsN_;
  static constexpr int kStages = kStages_;
  static constexpr bool kStagedEpilogue = kStagedEpilogue_;
  static constexpr int kThreads = kShape.threads();
  static constexpr int kMinBlocksPerSm = kShape.min_blocks_per_sm();
  static constexpr int kWarpTileM = kShape.warp_tile_m();
  static constexpr int kWarpTileN = kShape.warp_tile_n();
  static constexpr int kFragmentsM = kWarpTileM / 16;  // m16 blocks per warp
  static constexpr int kFragmentsN = kWarpTileN / 8;   // n8 blocks per warp
  static constexpr int kSlices = kBlockK / 16;         // k16 steps of mma.sync per K step
  static constexpr int kTileBytesA = kShape.tile_bytes_a();
  static constexpr int kTileBytesB = kShape.tile_bytes_b();
  static constexpr int kStageBytes = kShape.stage_bytes();
  static constexpr int kSmemBytes = kShape.smem_bytes();
};

template <class Config>
using WarpAccumulators = float[Config::kFragmentsM][Config::kFragmentsN][4];
// The same warp tile of exact 32-bit integer sums, for s8 operands (the INT8 GEMM's rung 03,
// quant/int8/): the accumulator type is what picks mma_warp_fragments' s8 form below.
template <class Config>
using Int8WarpAccumulators = std::int32_t[Config::kFragmentsM][Config::kFragmentsN][4];

// Where a warp's tile sits in the block tile.
struct WarpOrigin {
  int row0, col0;
};
template <class Config>
__device__ __forceinline__ WarpOrigin warp_origin() {
  const int warp = static_cast<int>(threadIdx.x) / 32;
  return {(warp / Config::kWarpsN) * Config::kWarpTileM, (warp % Config::kWarpsN) * Config::kWarpTileN};
}

// ---- copying a tile: 16-byte chunks of rows of 64 K-elements --------------------------------------
// The chunks of a tile of kRows rows that one thread of kThreads moves. Consecutive threads take
// consecutive chunks of a row: 8 threads cover one 128-byte row, so global reads are whole
// 128-byte lines and the swizzled shared stores of 8 threads hit distinct banks; a pass of the
// block covers kThreads / 8 rows, kPasses passes the tile. The pass count is a compile-time
// constant, so the walk unrolls into straight-line code (a loop starting at threadIdx.x would
// have a trip count the compiler cannot see: a rolled loop with remainder handling, branches and
// serialized load -> store pairs). kThreads / 8 is a multiple of 8 (mma_sync_config_error), so
// every pass of a thread has the same row mod 8, hence the same swizzled chunk column: its
// shared-memory offset is the first pass's plus a compile-time kPassBytes.
template <int kThreads, int kRows>
struct TileChunks {
  static constexpr int kChunksPerRow = kMmaSyncBlockK / kChunkElements;  // 8
  static constexpr int kRowsPerPass = kThreads / kChunksPerRow;
  static constexpr int kPasses = kRows / kRowsPerPass;
  static constexpr int kPassBytes = kRowsPerPass * kSwizzleRowBytes;
  static_assert(kPasses * kRowsPerPass == kRows, "the passes cover the tile exactly");
  static_assert(kRowsPerPass % kSwizzleRowsPerPattern == 0, "each pass moves whole swizzle patterns");

  __device__ static int row(int pass) {
    return pass * kRowsPerPass + static_cast<int>(threadIdx.x) / kChunksPerRow;
  }
  __device__ static int column() { return static_cast<int>(threadIdx.x) % kChunksPerRow; }
  // Byte offset of this thread's chunk of pass `pass` in the swizzled tile.
  __device__ static int offset(int pass) { return swizzle_128b_offset(row(0), column()) + pass * kPassBytes; }
};

template <class Config>
using TileChunksA = TileChunks<Config::kThreads, Config::kBlockM>;
template <class Config>
using TileChunksB = TileChunks<Config::kThreads, Config::kBlockN>;

// Where this thread's chunks of one operand come from, K step by K step. kFullTiles: the
// block's rows lie inside the matrix and K is a whole number of K steps, so every chunk exists;
// the thread then walks one pointer (its first chunk of K step 0), and chunk `pass` of K step
// `k_tile` is that pointer plus pass * (rows per pass) * K plus 64 k_tile, with no test and no
// select. Otherwise each chunk is checked (chunk_source), and the ones past an edge are marked
// invalid: zeros.
template <class Chunks, bool kFullTiles>
class TileChunkSources {
 public:
  __device__ TileChunkSources(const bf16* matrix, int rows_total, int k, int row0)
      : matrix_(matrix), rows_total_(rows_total), k_(k), row0_(row0) {
    if constexpr (kFullTiles) {
      first_chunk_ = matrix + static_cast<std::size_t>(row0 + Chunks::row(0)) * k + Chunks::column() * kChunkElements;
      pass_stride_ = static_cast<std::size_t>(Chunks::kRowsPerPass) * k;
    }
  }

  __device__ ChunkSource operator()(int pass, int k_tile) const {
    if constexpr (kFullTiles)
      return {first_chunk_ + k_tile * kMmaSyncBlockK + pass * pass_stride_, true};
    else
      return chunk_source(matrix_, rows_total_, k_, row0_ + Chunks::row(pass),
                          k_tile * kMmaSyncBlockK + Chunks::column() * kChunkElements);
  }

 private:
  const bf16* matrix_;
  int rows_total_, k_, row0_;
  const bf16* first_chunk_ = nullptr;
  std::size_t pass_stride_ = 0;
};

// True when every chunk a block copies exists: its rows of A and B lie inside the matrices and K
// is a whole number of K steps (the same for every thread of the block: no divergence). Most
// blocks of a large problem; the right and bottom edges, and any K % 64 != 0, are not.
template <class Config>
__device__ __forceinline__ bool block_tiles_are_full(const HgemmArgs& args, int block_row0, int block_col0) {
  return block_row0 + Config::kBlockM <= args.m && block_col0 + Config::kBlockN <= args.n &&
         args.k % Config::kBlockK == 0;
}

// ---- one warp's share of a K step ------------------------------------------------------------------
// The A and B fragments of one k16 slice: kFragmentsM A blocks of 16 x 16 (4 registers each) and
// kFragmentsN B blocks of 16 x 8 (2 registers each); 32 registers for a 64 x 64 warp tile.
template <class Config>
struct WarpFragments {
  std::uint32_t a[Config::kFragmentsM][4];
  std::uint32_t b[Config::kFragmentsN][2];
};

// Where this lane's ldmatrix rows start in slice 0 of the A and B tiles (byte offsets into a
// swizzled tile; see load_warp_fragments).
struct FragmentLaneOffsets {
  std::uint32_t a, b;
};

template <class Config>
__device__ __forceinline__ FragmentLaneOffsets fragment_lane_offsets(WarpOrigin warp) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  // A: matrices (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15)
  // are the registers a0..a3 of the m16n8k16 A fragment, in that order: lane l addresses row
  // l % 16, chunk l / 16.
  const int a_row = warp.row0 + lane % 16;
  const int a_chunk = lane / 16;
  // B (N x K in shared memory): one x4 gives two n8 blocks, each as its (k 0-7, k 8-15) pair:
  // lane l addresses row l % 8 + 8 (l / 16), chunk (l / 8) % 2.
  const int b_row = warp.col0 + lane % 8 + 8 * (lane / 16);
  const int b_chunk = (lane / 8) % 2;
  return {static_cast<std::uint32_t>(swizzle_128b_offset(a_row, a_chunk)),
          static_cast<std::uint32_t>(swizzle_128b_offset(b_row, b_chunk))};
}

// Loads slice `slice` (K elements 16 slice .. 16 slice + 15) of the warp's rows of the A tile and
// columns of the B tile, both swizzled in shared memory: kFragmentsM + kFragmentsN / 2
// ldmatrix.x4, 512 bytes each. a_lane / b_lane: the tile's address (1024-byte aligned) plus
// fragment_lane_offsets().
//
// The addresses come from two registers: slice s reads chunk c + 2s where slice 0 reads chunk c
// (c = 0 or 1), and swizzle_128b_offset(row, c + 2s) == swizzle_128b_offset(row, c) ^ 32s
// (the swizzle XORs the chunk index; 2s only touches chunk bits 1-2, CPU-tested); fragment i
// lies 16 i rows (2048 i bytes) further, which leaves the low bits alone. Written as
// swizzle_128b_offset per (slice, fragment), the offsets are 48 different values that the
// compiler keeps in registers across the K loop, at the cost of spills.
template <class Config>
__device__ __forceinline__ void load_warp_fragments(WarpFragments<Config>& fragments, std::uint32_t a_lane,
                                                    std::uint32_t b_lane, int slice) {
  constexpr std::uint32_t kSliceXor = 2 * kSwizzleChunkBytes;  // 16 K-elements = two 16-byte chunks
  const std::uint32_t a_slice = a_lane ^ (slice * kSliceXor);
  const std::uint32_t b_slice = b_lane ^ (slice * kSliceXor);
#pragma unroll
  for (int i = 0; i < Config::kFragmentsM; ++i)
    sm80::ldmatrix_x4(fragments.a[i], a_slice + i * 16 * kSwizzleRowBytes);
#pragma unroll
  for (int j = 0; j < Config::kFragmentsN; j += 2) {
    std::uint32_t pair[4];
    sm80::ldmatrix_x4(pair, b_slice + j * 8 * kSwizzleRowBytes);
    fragments.b[j][0] = pair[0];
    fragments.b[j][1] = pair[1];
    fragments.b[j + 1][0] = pair[2];
    fragments.b[j + 1][1] = pair[3];
  }
}

// kFragmentsM x kFragmentsN independent mma.sync (32 for a 64 x 64 warp tile), each adding one
// slice's 16 x 8 x 16 product to its own accumulators.
template <class Config>
__device__ __forceinline__ void mma_warp_fragments(WarpAccumulators<Config>& acc,
                                                   const WarpFragments<Config>& fragments) {
#pragma unroll
  for (int i = 0; i < Config::kFragmentsM; ++i)
#pragma unroll
    for (int j = 0; j < Config::kFragmentsN; ++j)
      sm80::mma_m16n8k16_bf16(acc[i][j], fragments.a[i], fragments.b[j][0], fragments.b[j][1]);
}

// The same for s8 operands: the fragments' bytes are loaded exactly as above (ldmatrix moves
// 16-byte rows), but a 32-byte slice now holds 32 K-values, so each slice is kFragmentsM x
// kFragmentsN mma.sync m16n8k32 into 32-bit integer sums (arch/sm80/mma.cuh).
template <class Config>
__device__ __forceinline__ void mma_warp_fragments(Int8WarpAccumulators<Config>& acc,
                                                   const WarpFragments<Config>& fragments) {
#pragma unroll
  for (int i = 0; i < Config::kFragmentsM; ++i)
#pragma unroll
    for (int j = 0; j < Config::kFragmentsN; ++j)
      sm80::mma_m16n8k32_s8(acc[i][j], fragments.a[i], fragments.b[j][0], fragments.b[j][1]);
}

// One warp multiplies its share of a K step held in swizzled shared memory (A tile rows = M, B
// tile rows = N, both 64 K-elements long), slice by slice; a_lane / b_lane as for
// load_warp_fragments. Within the step the compiler is free to load a slice's fragments while
// the previous slice's MMAs run; rung 03 also carries that overlap across K steps
// (03_cp_async.cuh).
template <class Config>
__device__ __forceinline__ void warp_mma_k_step(std::uint32_t a_lane, std::uint32_t b_lane,
                                                WarpAccumulators<Config>& acc) {
#pragma unroll
  for (int slice = 0; slice < Config::kSlices; ++slice) {
    WarpFragments<Config> fragments;
    load_warp_fragments<Config>(fragments, a_lane, b_lane, slice);
    mma_warp_fragments<Config>(acc, fragments);
  }
}

// Writes a warp's accumulators to C (guarded at the edges); row0/col0 is the warp tile's origin in C.
template <class Config>
__device__ __forceinline__ void store_warp_tile(const HgemmArgs& args, int row0, int col0,
                                                const WarpAccumulators<Config>& acc) {
  const LinearCombination linear = linear_combination(args);
#pragma unroll
  for (int i = 0; i < Config::kFragmentsM; ++i)
#pragma unroll
    for (int j = 0; j < Config::kFragmentsN; ++j)
      store_fragment_16x8(args.c, args.m, args.n, row0 + i * 16, col0 + j * 8, acc[i][j], linear,
                          Identity{});
}

// Whether the rows of C start 16-byte aligned (N % 8 == 0 and C itself 16-byte aligned): then
// an 8-column chunk of a row of C lies wholly inside or wholly outside it, and is one 16-byte store.
__device__ __forceinline__ bool c_rows_are_16_byte_aligned(const HgemmArgs& args) {
  return args.n % kChunkElements == 0 && reinterpret_cast<std::uintptr_t>(args.c) % 16 == 0;
}

// The staged epilogue: a warp writes its accumulators, as bf16 results, into its own rows of a
// shared-memory buffer (64-column warp tiles: one 128-byte row per output row, chunks swizzled as
// the operand tiles are, so the 8 rows x 4 lanes of each fragment store hit 32 different banks),
// then reads them back a 16-byte chunk per lane, 8 lanes to a row, and stores whole 128-byte row
// segments of C: per thread 16 STG.128 instead of 64 STG.32 that each fill half of eight 32-byte
// sectors. Between the two a __syncwarp, not a block barrier: each warp reads back only what it
// wrote. Needs c_rows_are_16_byte_aligned(args); rows and chunks past M and N are not stored. The
// linear combination (and the read of C when beta != 0) happens in FP32 before the one rounding
// to bf16, as in store_warp_tile.
template <class Config>
__device__ __forceinline__ void store_warp_tile_staged(const HgemmArgs& args, int row0, int col0,
                                                       const WarpAccumulators<Config>& acc, std::uint8_t* buffer) {
  static_assert(Config::kWarpTileN == 64, "one 128-byte swizzled row per output row");
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const LinearCombination linear = linear_combination(args);
#pragma unroll
  for (int i = 0; i < Config::kFragmentsM; ++i)
#pragma unroll
    for (int j = 0; j < Config::kFragmentsN; ++j)
#pragma unroll
      for (int half = 0; half < 2; ++half) {  // rows lane / 4 and lane / 4 + 8 of the m16n8 block
        const int row = i * 16 + lane / 4 + 8 * half;
        const int col = j * 8 + 2 * (lane % 4);
        const bool inside = row0 + row < args.m && col0 + col < args.n;  // C is read only inside
        const float2 sum = make_float2(acc[i][j][2 * half], acc[i][j][2 * half + 1]);
        const float2 value = inside ? linear(sum, row0 + row, col0 + col) : sum;
        *reinterpret_cast<__nv_bfloat162*>(buffer + swizzle_128b_element_offset(row, col)) =
            __floats2bfloat162_rn(value.x, value.y);
      }
  __syncwarp();
  constexpr int kRowsPerPass = 32 / 8;
#pragma unroll
  for (int pass = 0; pass < Config::kWarpTileM / kRowsPerPass; ++pass) {
    const int row = pass * kRowsPerPass + lane / 8;
    const int chunk = lane % 8;
    const int c_row = row0 + row, c_col = col0 + chunk * kChunkElements;
    if (c_row < args.m && c_col < args.n)
      *reinterpret_cast<uint4*>(args.c + static_cast<std::size_t>(c_row) * args.n + c_col) =
          *reinterpret_cast<const uint4*>(buffer + swizzle_128b_offset(row, chunk));
  }
}

// A block's outputs, as its configuration stores them. The staged epilogue reuses the stages:
// after the K loop every copy has landed (the main loop's last wait), and one barrier makes sure
// no warp still reads a stage; then warp w stages its outputs in the w-th slice of (warp tile
// rows x 128) bytes of the stage memory. When the rows of C are not 16-byte aligned (N % 8 != 0)
// there are no whole chunks to store, and every configuration stores straight from the fragments.
template <class Config>
__device__ __forceinline__ void store_block_tile(const HgemmArgs& args, int block_row0, int block_col0,
                                                 WarpOrigin warp, const WarpAccumulators<Config>& acc,
                                                 std::uint8_t* smem) {
  if constexpr (Config::kStagedEpilogue) {
    static_assert(Config::kShape.staged_epilogue_bytes() <= Config::kStages * Config::kStageBytes,
                  "the stages hold the block's outputs in bf16");
    if (c_rows_are_16_byte_aligned(args)) {  // the same for every thread: the barrier is safe
      __syncthreads();
      const int warp_index = static_cast<int>(threadIdx.x) / 32;
      store_warp_tile_staged<Config>(args, block_row0 + warp.row0, block_col0 + warp.col0, acc,
                                     smem + warp_index * Config::kWarpTileM * kSwizzleRowBytes);
      return;
    }
  }
  store_warp_tile<Config>(args, block_row0 + warp.row0, block_col0 + warp.col0, acc);
}

// ---- one block, and its launch -------------------------------------------------------------------
// The dynamic shared memory from its first 1024-byte boundary, the period of the swizzle pattern:
// the value of aligned_dynamic_smem (arch/util.hpp), with the padding computed as
// (1024 - address % 1024) % 1024. The two forms are equal, but the compiler keeps them apart:
// this one is what the mma.sync kernels (rungs 02-03 and their tuned variants) are compiled and
// measured with, and each form turns into different instructions in the other's kernels.
__device__ __forceinline__ std::uint8_t* mma_sync_dynamic_smem() {
  extern __shared__ std::uint8_t smem_raw[];
  return smem_raw + ((1024u - smem_u32(smem_raw) % 1024u) % 1024u);
}

// One block tile of an mma.sync GEMM, the one whose first output is (block_row0, block_col0): the
// warp's place in it, Mainloop::run<kFullTiles> over K (kFullTiles: block_tiles_are_full, the
// same for the whole block, so no divergence), then the accumulators stored. The grouped GEMM
// (gemm/grouped/02_one_launch.cu) runs it on the tile its table gives the block.
template <class Config, class Mainloop>
__device__ __forceinline__ void run_gemm_tile(const HgemmArgs& args, int block_row0, int block_col0) {
  std::uint8_t* const smem = mma_sync_dynamic_smem();
  const WarpOrigin warp = warp_origin<Config>();

  WarpAccumulators<Config> acc = {};
  if (block_tiles_are_full<Config>(args, block_row0, block_col0))
    Mainloop::template run<true>(args, smem, block_row0, block_col0, warp, acc);
  else
    Mainloop::template run<false>(args, smem, block_row0, block_col0, warp, acc);
  store_block_tile<Config>(args, block_row0, block_col0, warp, acc, smem);
}

// One block of an mma.sync GEMM: the tile at its place in the grid (tile rows along x).
template <class Config, class Mainloop>
__device__ __forceinline__ void run_gemm_block(const HgemmArgs& args) {
  run_gemm_tile<Config, Mainloop>(args, static_cast<int>(blockIdx.x) * Config::kBlockM,
                                  static_cast<int>(blockIdx.y) * Config::kBlockN);
}

// Opts kKernel (a kernel of Config's block tiles) into its dynamic shared memory. More than
// 48 KiB must be opted into, once per kernel (a static local: the attribute stays set), and the
// device must offer it (an A100 offers 163 KiB per block, an H100/H200 227 KiB).
template <class Config, auto kKernel>
void allow_mma_sync_smem() {
  static const bool smem_allowed = [] {
    int device = 0, optin_bytes = 0;
    KC_CUDA_CHECK(cudaGetDevice(&device));
    KC_CUDA_CHECK(cudaDeviceGetAttribute(&optin_bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    require(Config::kSmemBytes <= optin_bytes,
            "this mma.sync configuration needs {} bytes of shared memory per block and this GPU offers "
            "{}; pick a configuration with fewer stages or a smaller block tile",
            Config::kSmemBytes, optin_bytes);
    KC_CUDA_CHECK(cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Config::kSmemBytes));
    return true;
  }();
  (void)smem_allowed;
}

// Launches kKernel (a kernel made of run_gemm_block<Config, ...>) over the tiles of C.
template <class Config, void (*kKernel)(HgemmArgs)>
void launch_mma_sync_kernel(const HgemmArgs& args, cudaStream_t stream) {
  allow_mma_sync_smem<Config, kKernel>();
  const dim3 grid(ceil_div(args.m, Config::kBlockM), ceil_div(args.n, Config::kBlockN));
  kKernel<<<grid, Config::kThreads, Config::kSmemBytes, stream>>>(args);
}

}  // namespace kc::stage3
