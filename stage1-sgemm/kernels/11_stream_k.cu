// Rung 11 — stream-K for the last wave: full waves of whole tiles, then the leftover tiles cut
// along K and shared evenly by one wave of blocks.
//
// Idea: a GPU that holds S blocks at once runs the T tiles of C in waves of S. When T % S != 0,
// the last wave has only T % S tiles and S - T % S block slots sit idle for as long as a tile
// takes. Stream-K (Osama, Merrill, Cecka, Garland, Kapasi: "Stream-K: Work-centric Parallel
// Decomposition for Dense Matrix-Matrix Multiplication on the GPU", 2023), in its "data-parallel
// + one stream-K wave" form: the first T - T % S tiles (grouped raster order) are computed as in
// rung 10, one block each; the k tiles of the T % S tail tiles form one iteration space
// (tile-major), which is split into contiguous, as-even-as-possible ranges over up to S more
// blocks. Each of those walks its range tile by tile, runs the rung-09 pipeline over that tile's
// k range and adds alpha * its partial sum into C atomically; a small kernel first sets the tail
// tiles (only those) to beta * C. The partition is plan_stream_k in kc/stage1/stream_k.hpp,
// where the CPU tests check it. Blocks never wait for each other: whichever order the GPU
// dispatches them in, the result is the same sum.
//
// The wave arithmetic on the H200 (132 SMs, 2 resident blocks of the `large` class tile
// 128x128x16 per SM: S = 264), in counts of k tiles of 16 per block slot:
//   4096^3: T = 32 x 32 = 1024 = 3 x 264 + 232. Rung 10: 4 waves x 256 k tiles = 1024, the last
//     wave 232/264 = 88% full. Rung 11: 792 data-parallel tiles (3 waves x 256 = 768), then the
//     232 x 256 = 59392 tail k tiles over 264 blocks, 224 or 225 each: 768 + 225 = 993 (3.0%
//     fewer), before the fixed costs below.
//   8192^3: T = 64 x 64 = 4096 = 15 x 264 + 136. Rung 10: 16 x 512 = 8192, the last wave 52%
//     full. Rung 11: 3960 data-parallel tiles (15 x 512 = 7680), then 136 x 512 = 69632 tail k
//     tiles over 264 blocks, 263 or 264 each: 7680 + 264 = 7944 (3.0% fewer).
// Every stream-K range is shorter than a tile's 256 (512) k tiles, so it touches at most two tiles.
//
// What changed from rung 10: same configuration choice (choose_config), same kernel pieces
// (run_pipeline through run_block_work, PipelineParams, BlockWork, in 09_cp_async.cuh). One
// launch is three kernels: the tail-only beta pass; rung 10's own pipelined kernel over the
// data-parallel tiles (a grid of T - T % S blocks: the first tiles of the grouped raster); and
// the stream-K kernel, whose blocks are only stream-K blocks. On sm_90 the stream-K kernel is
// launched as a programmatic dependent of the data-parallel one (cudaLaunchKernelEx with
// cudaLaunchAttributeProgrammaticStreamSerialization; the pipelined kernel executes
// griddepcontrol.launch_dependents as it starts), so its blocks take SM slots as the last full
// wave's blocks retire, exactly as they would in one grid; on sm_80 it starts after the
// data-parallel kernel ends. Shapes where plan_stream_k finds nothing to gain (split-K, T <= S,
// T % S == 0, or tiles with too few k tiles to cut) launch exactly rung 10. Only the
// configurations of the `skinny` and `large` classes get a stream-K kernel; the other classes use
// split-K.
// Why three kernels and not one grid whose first blocks are data-parallel and the rest stream-K
// (this rung's first form): ptxas allocates registers per kernel, and in the one big kernel (six
// copies of the k-tile loop) its allocation of the data-parallel loop differed from rung 10's;
// with rung 09's one-k-ahead loop that cost more than stream-K saved (more dispatch stalls per
// issued instruction, and slower at 4096^3 than rung 10 alone). Run as separate kernels without
// the programmatic launch, the stream-K blocks waited for the slowest data-parallel block and
// did slightly worse than with it. (The figures, with their dates and builds:
// docs/notes/2026-12-01-stage1-history.md.)
//
// Results: the tail tiles are sums of atomic additions in whatever order the blocks reach them,
// so their last bits may differ from run to run (within the FP32 tolerance), as with split-K;
// the data-parallel tiles are bit-reproducible.
//
// Expected limiter: as rung 10 (instruction issue in the k-tile loop) for the full waves; for the
// tail, each segment's pipeline fill and its tile of atomic adds (RED) — a fixed cost of about
// one to two k tiles per segment, small against the ~225 k tiles of a range at 4096^3.
//
// SASS to look for (cuobjdump --dump-sass <build>/stage1-sgemm/CMakeFiles/kc_stage1.dir/kernels/
// 11_stream_k.cu.o, kernel sgemm_stream_k_kernel, then grep -E 'Function|LDGSTS|RED|ACQBULK|PREEXIT|LDL|STL'):
// the rung-09 k-tile loop four times — a stream-K block's first segment and its second, each with
// unchecked and checked copies — with 64 LDS.128 and 1024 FFMA per k tile of 16;
// REDG.E.ADD.F32x4.FTZ.RN.STRONG.GPU (sm_90a; scalar REDG.E.ADD.F32 where C rows are not 16-byte
// aligned, RED.E.ADD on sm_80) for the stream-K adds; ACQBULK (griddepcontrol.wait) before EXIT;
// no LDL/STL. In the pipelined kernel (10_autotuned.cu.o): PREEXIT (griddepcontrol.launch_dependents)
// at the top.
//
// Stream-K gains most where the last wave is nearly empty, as at 4093x2049x1031, where the 16
// tiles past two full waves are shared by one wave of blocks. Measured: stage1-sgemm/README.md
// (rung 11) and docs/benchmarks/h200/stage1.md.
//
// Run just this rung:  kc-bench --filter stage1/sgemm/11_stream_k
#include <cuda_runtime.h>

#include <cstddef>

#include "09_cp_async.cuh"
#include "kc/common/error.hpp"
#include "kc/stage1/sgemm_autotune.hpp"
#include "kc/stage1/stream_k.hpp"

namespace kc::stage1 {
namespace {

// C = beta * C on the tail tiles only (0 when beta == 0, without reading C: it may hold NaN),
// one block per tail tile, found through the same grouped raster as the GEMM's blocks.
__global__ void scale_tail_tiles_kernel(SgemmArgs args, PipelineParams params, int first_tail_tile,
                                        int tile_rows, int tile_cols) {
  const TileElement tile = grouped_tile(first_tail_tile + static_cast<int>(blockIdx.x), params.tiles_m,
                                        params.tiles_n, params.raster_group);
  const int row0 = tile.row * tile_rows;
  const int col0 = tile.col * tile_cols;
  const int rows = min(tile_rows, args.m - row0);
  const int cols = min(tile_cols, args.n - col0);
  for (int i = static_cast<int>(threadIdx.x); i < rows * cols; i += static_cast<int>(blockDim.x)) {
    float* c = args.c + ((row0 + i / cols) * args.ldc + col0 + i % cols);
    *c = args.beta == 0.f ? 0.f : args.beta * *c;
  }
}

// The stream-K blocks: block b walks its range of the tail's k tiles (stream_k_range), one
// segment per tile it touches, and adds alpha * each partial sum into C.
template <typename Tiles>
__global__ void __launch_bounds__(Tiles::config().threads(), Tiles::config().min_blocks_per_sm())
    sgemm_stream_k_kernel(SgemmArgs args, PipelineParams params, StreamKPlan plan) {
  constexpr int kTileK = Tiles::config().bk;
  PipelineParams accumulating = params;  // part of a tile's K: C += alpha * partial sum, atomically
  accumulating.accumulate = true;
  const auto run_segment = [&](const StreamKSegment& segment) {
    const TileElement tile = grouped_tile(plan.data_parallel_tiles + segment.tail_tile, params.tiles_m,
                                          params.tiles_n, params.raster_group);
    // run_block_work picks the copies as for any block: checked ones for edge tiles, unaligned
    // rows of B and the segment that ends with the last, partial k tile of K; unchecked ones,
    // starting at any k tile, for the rest.
    const int k_begin = segment.k_tile_begin * kTileK;
    const int k_end = min(args.k, segment.k_tile_end * kTileK);
    run_block_work<Tiles>(args, accumulating, tile_work<Tiles>(tile, k_begin, k_end));
  };
  // Two explicit segments rather than a loop over them: around a loop the compiler keeps the
  // pipeline's per-thread set-up alive from one segment to the next, which costs more registers
  // than the 128 a thread has (spills); here little more than range.end stays alive across the
  // first segment (second_segment needs nothing else).
  const IterationRange range = stream_k_range(plan, static_cast<int>(blockIdx.x));
  const bool two_tiles = spans_two_tiles(plan, range);
  run_segment(first_segment(plan, range));
  if (two_tiles) {
    __syncthreads();  // the first segment's last multiply may still read the stages about to be refilled
    run_segment(second_segment(plan, range));
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // Launched as the data-parallel kernel's programmatic dependent, this grid may run alongside
  // it; waiting for that grid before exiting keeps "this kernel is done" meaning "the GEMM is
  // done" for whatever the stream runs next. (A no-op when launched the ordinary way.)
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

// Blocks of the stream-K kernel one GPU holds at once: occupancy per SM x SMs, asked after the
// shared-memory opt-in the occupancy figure depends on.
template <typename Tiles>
int query_stream_k_resident_blocks() {
  constexpr WarpTileConfig kConfig = Tiles::config();
  allow_dynamic_smem(sgemm_stream_k_kernel<Tiles>, kConfig.smem_bytes());
  allow_dynamic_smem(sgemm_pipelined_kernel<Tiles>, kConfig.smem_bytes());  // the data-parallel blocks
  int device = 0;
  int sm_count = 0;
  int blocks_per_sm = 0;
  KC_CUDA_CHECK(cudaGetDevice(&device));
  KC_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device));
  KC_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, sgemm_stream_k_kernel<Tiles>,
                                                              kConfig.threads(), kConfig.smem_bytes()));
  require(blocks_per_sm >= 1,
          "the stream-K kernel for {} fits no SM of this GPU ({} threads, {} bytes of shared memory per block)",
          config_name(kConfig), kConfig.threads(), kConfig.smem_bytes());
  return blocks_per_sm * sm_count;
}

// The same, asked once and kept for the process (kc runs on one GPU per process); the first call
// also does the shared-memory opt-ins every launch needs (both kernels of the launch).
template <typename Tiles>
int stream_k_resident_blocks() {
  static const int resident_blocks = query_stream_k_resident_blocks<Tiles>();
  return resident_blocks;
}

// Whether this GPU runs programmatic dependent launches (compute capability 9.0 and up); asked
// once per process.
bool programmatic_launch_supported() {
  static const bool supported = [] {
    int device = 0, major = 0;
    KC_CUDA_CHECK(cudaGetDevice(&device));
    KC_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    return major >= 9;
  }();
  return supported;
}

// The launch: the tail tiles set to beta * C, rung 10's kernel over the data-parallel tiles
// (the first data_parallel_tiles of the grouped raster: a grid of that many blocks), then the
// stream-K kernel. On sm_90 the stream-K kernel is the data-parallel kernel's programmatic
// dependent: its blocks are scheduled as soon as every data-parallel block has started
// (griddepcontrol.launch_dependents at the top of the pipelined kernel) and take the SMs the
// last full wave frees, block by block, instead of waiting for the slowest one. The stream-K
// blocks read nothing the data-parallel blocks write (other tiles of C), and the beta pass
// finished before the data-parallel kernel began.
template <typename Tiles>
void launch_stream_k(const SgemmArgs& args, const StreamKPlan& plan, cudaStream_t stream) {
  constexpr WarpTileConfig kConfig = Tiles::config();
  require(plan.uses_stream_k() && plan.longest_range() <= plan.k_tiles,
          "the stream-K kernel takes ranges of at most one tile's {} k tiles, in at most two tiles; "
          "this plan has {} stream-K blocks and ranges of up to {} k tiles (make plans with plan_stream_k)",
          plan.k_tiles, plan.stream_k_blocks, plan.longest_range());
  (void)stream_k_resident_blocks<Tiles>();  // makes sure the shared-memory opt-ins are done
  const PipelineParams params = pipeline_params<Tiles>(args, kRasterGroup);
  if (args.beta != 1.f) {  // beta == 1 leaves C as it is
    constexpr int kScaleThreads = 256;
    scale_tail_tiles_kernel<<<plan.tail_tiles, kScaleThreads, 0, stream>>>(args, params, plan.data_parallel_tiles,
                                                                            kConfig.bm, kConfig.bn);
    KC_CHECK_LAUNCH();
  }
  if (plan.data_parallel_tiles > 0) {
    sgemm_pipelined_kernel<Tiles>
        <<<plan.data_parallel_tiles, kConfig.threads(), kConfig.smem_bytes(), stream>>>(args, params);
    KC_CHECK_LAUNCH();
  }
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(plan.stream_k_blocks));
  config.blockDim = dim3(static_cast<unsigned>(kConfig.threads()));
  config.dynamicSmemBytes = static_cast<std::size_t>(kConfig.smem_bytes());
  config.stream = stream;
  cudaLaunchAttribute programmatic{};
  programmatic.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  programmatic.val.programmaticStreamSerializationAllowed = 1;
  if (programmatic_launch_supported()) {
    config.attrs = &programmatic;
    config.numAttrs = 1;
  }
  KC_CUDA_CHECK(cudaLaunchKernelEx(&config, sgemm_stream_k_kernel<Tiles>, args, params, plan));
}

// A stream-K kernel instance and what the host needs to launch it.
struct StreamKKernel {
  int config;  // search-space entry
  int (*resident_blocks)();
  void (*launch)(const SgemmArgs&, const StreamKPlan&, cudaStream_t);
};

template <int kConfig>
constexpr StreamKKernel stream_k_kernel() {
  return {kConfig, &stream_k_resident_blocks<SearchSpaceTiles<kConfig>>, &launch_stream_k<SearchSpaceTiles<kConfig>>};
}

// One instance per configuration the many-wave classes pick (one kernel when they pick the same).
constexpr StreamKKernel kStreamKKernels[] = {
    stream_k_kernel<class_choice(ShapeClass::large).config>(),
    stream_k_kernel<class_choice(ShapeClass::skinny).config>(),
};

const StreamKKernel* find_stream_k_kernel(int config) {
  for (const StreamKKernel& kernel : kStreamKKernels)
    if (kernel.config == config) return &kernel;
  return nullptr;
}

// Plans the launch with `resident_blocks` (0: the kernel's occupancy) and runs it: the stream-K
// kernel, or rung 10's launch where the plan has no stream-K tail.
void run_stream_k(const StreamKKernel& kernel, int splits, int resident_blocks, const SgemmArgs& args,
                  cudaStream_t stream) {
  const int blocks = resident_blocks > 0 ? resident_blocks : kernel.resident_blocks();
  const StreamKPlan plan = plan_stream_k_for(kSearchSpace[kernel.config], args.m, args.n, args.k, blocks, splits);
  if (plan.uses_stream_k())
    kernel.launch(args, plan, stream);
  else
    sgemm_search_space_launch(kernel.config, splits, args, stream);
}

}  // namespace

bool has_stream_k_kernel(int config) { return find_stream_k_kernel(config) != nullptr; }

void sgemm_stream_k_launch(int config, int resident_blocks, const SgemmArgs& args, cudaStream_t stream) {
  require(resident_blocks >= 0,
          "resident_blocks must be 0 (ask the occupancy API) or the number of blocks the GPU holds at once (got {})",
          resident_blocks);
  const StreamKKernel* kernel = find_stream_k_kernel(config);
  require(kernel != nullptr,
          "rung 11 has no stream-K kernel for search-space configuration {}: it instantiates only the "
          "configurations of the skinny and large shape classes (has_stream_k_kernel says which)",
          config);
  run_stream_k(*kernel, /*splits=*/1, resident_blocks, args, stream);
}

void sgemm_11_stream_k(const SgemmArgs& args, cudaStream_t stream) {
  const ShapeClassChoice choice = choose_config(args.m, args.n, args.k);
  const StreamKKernel* kernel = find_stream_k_kernel(choice.config);
  if (kernel == nullptr)
    sgemm_search_space_launch(choice.config, choice.splits, args, stream);
  else
    run_stream_k(*kernel, choice.splits, /*resident_blocks=*/0, args, stream);
}

}  // namespace kc::stage1
