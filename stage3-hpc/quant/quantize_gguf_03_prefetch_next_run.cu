// GGUF quantize rung 03 — rung 02's blocks (a thread per block of 32, the same fast path, the same
// bytes), with persistent CTAs that copy their next run of blocks into shared memory (cp.async)
// while they quantize this one (sm_80 and newer).
//
// Idea: with rung 02's instruction count the SMs have issue slots to spare and DRAM still does not
// reach the copy's bandwidth. The shape of a CTA's life is the reason: it loads its blocks, then
// computes with no load outstanding, then stores; the few CTAs of an SM start together, so for
// stretches of time an SM has nothing in flight. The cure is the one every pipeline in this
// repository uses: keep the next loads in flight during the work. A grid of as many CTAs as the
// GPU holds at once walks the runs of 128 blocks (run r, r + grid, ...); before it quantizes run r
// each thread starts the copy of its block of the run after into the other half of a two-stage
// buffer in shared memory, with cp.async, which costs no registers (holding the next block in
// registers instead took 16 more a thread and cut the CTAs an SM holds by 40%: measured slower).
// The copies are coalesced (a warp copies 512 contiguous bytes) and each thread then reads its
// own block, which other threads copied: a barrier after each thread's wait for its own copies
// (cp.async.wait_group 1). In shared memory a block takes 80 bytes (64 and 16 of padding), so the
// 16-byte reads of 8 consecutive threads fall in 8 different groups of 4 banks.
// What changed from rung 02: the persistent loop, the two-stage cp.async buffer, runs of 128
// blocks (CTAs of 128 threads: the buffers are 20 KiB a CTA, and smaller CTAs fill an SM more
// evenly), and a second barrier per run (the copies are read by other threads than their issuers).
//
// What to look for: LDGSTS.E.BYPASS.128 (four a thread and run), LDGDEPBAR, DEPBAR.LE SB0, 0x1,
// LDS.128 (four, the block back), rung 02's per-block code (F2I.TRUNC.NTZ, PRMT, STS.U16),
// BAR.SYNC twice a run, LDS.128 + STG.E.128 for the copy-out; no LDG of x, no SHFL, no local memory.
// Expected limiter: DRAM bandwidth, with copies in flight through the whole kernel.
//
// Run just this rung:  kc-bench --filter stage3/quantize_gguf/03
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "arch/sm80/cp_async.cuh"
#include "kc/common/device.hpp"
#include "kc/common/error.hpp"
#include "kc/core/launch.hpp"
#include "kc/stage3/quantize_gguf_args.hpp"
#include "quantize_gguf_block.cuh"

namespace kc::stage3 {
namespace {

constexpr int kThreads = 128;          // a run: 128 blocks, one a thread
constexpr int kStages = 2;             // this run's blocks and the next run's
constexpr int kBlockSlotBytes = 80;    // 64 bytes of bf16 and 16 of padding (conflict-free 16-byte access)
constexpr int kRawBytes = kGgufBlockWeights * 2;
static_assert(kThreads * 18 % 16 == 0 && kThreads * 20 % 16 == 0 && kThreads * 34 % 16 == 0,
              "every run of blocks must start 16-byte aligned");

// The copy of run `run` of x into a stage, coalesced: the run's 128 blocks are 512 consecutive
// 16-byte pieces, and thread t copies pieces t, t + 128, t + 256 and t + 384 (a warp's copies are
// 512 contiguous bytes); piece p lands in slot p / 4 at 16 x (p % 4). Pieces of blocks past the
// last are zeros.
template <int kThreadsPerRun>
__device__ __forceinline__ void copy_run_async(std::uint8_t* stage, const __nv_bfloat16* x, long long run,
                                               long long total_blocks) {
  constexpr int kPiecesPerBlock = kRawBytes / 16;
  const auto destination = static_cast<std::uint32_t>(__cvta_generic_to_shared(stage));
  const auto* run_bytes = reinterpret_cast<const std::uint8_t*>(x) + run * kThreadsPerRun * kRawBytes;
#pragma unroll
  for (int i = 0; i < kPiecesPerBlock; ++i) {
    const int piece = static_cast<int>(threadIdx.x) + i * kThreadsPerRun;
    const int slot = piece / kPiecesPerBlock;
    const bool valid = run * kThreadsPerRun + slot < total_blocks;
    const std::uint8_t* source = valid ? run_bytes + 16 * piece : reinterpret_cast<const std::uint8_t*>(x);
    sm80::cp_async_16(destination + slot * kBlockSlotBytes + 16 * (piece % kPiecesPerBlock), source, valid);
  }
}

template <GgufBlockType kType>
__global__ void __launch_bounds__(kThreads) quantize_gguf_kernel(QuantizeGgufArgs args) {
  constexpr int kBlockBytes = gguf_block_bytes(kType);
  __shared__ alignas(16) std::uint8_t raw[kStages][kThreads * kBlockSlotBytes];
  __shared__ alignas(16) std::uint8_t staged[kThreads * kBlockBytes];
  const long long total_blocks = args.rows * (args.k / kGgufBlockWeights);
  const long long runs = (total_blocks + kThreads - 1) / kThreads;
  const int my_offset = static_cast<int>(threadIdx.x) * kBlockSlotBytes;  // my block's slot in a stage

  // The first run's copy; then, each trip, the next run's copy goes out before this run's work.
  long long run = blockIdx.x;
  copy_run_async<kThreads>(raw[0], args.x, run, total_blocks);
  sm80::cp_async_commit_group();
  for (int stage = 0; run < runs; run += gridDim.x, stage ^= 1) {
    // Safe to overwrite the other stage: its last readers passed the barrier after their work.
    const long long following = run + gridDim.x;
    if (following < runs) copy_run_async<kThreads>(raw[stage ^ 1], args.x, following, total_blocks);
    sm80::cp_async_commit_group();  // an empty group on the last trip keeps the count of groups
    sm80::cp_async_wait_group<1>();  // this thread's copies of this run (all but the newest group)
    __syncthreads();  // everyone's copies of this run, and the last run's copy-out is done with `staged`

    const long long block = run * kThreads + threadIdx.x;
    if (block < total_blocks) {
      gguf_block::RawBlock current;
#pragma unroll
      for (int l = 0; l < gguf_block::kLoads; ++l)
        current.part[l] = core::load_vector<__nv_bfloat16, gguf_block::kValuesPerLoad>(
            reinterpret_cast<const __nv_bfloat16*>(raw[stage] + my_offset + 16 * l));
      gguf_block::quantize_gguf_block<kType>(current, staged + threadIdx.x * kBlockBytes);
    }
    __syncthreads();

    const long long first_block = run * kThreads;
    const long long blocks_left = total_blocks - first_block;
    const int blocks_here = blocks_left < kThreads ? static_cast<int>(blocks_left) : kThreads;
    gguf_block::write_staged_run<kThreads>(staged, args.out + first_block * kBlockBytes, blocks_here * kBlockBytes);
  }
}

// The CTAs of `kernel` the whole GPU holds at once: the persistent grid (never more than the runs).
template <GgufBlockType kType>
unsigned persistent_grid(long long runs) {
  static const int ctas_per_sm = [] {
    int ctas = 0;
    KC_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&ctas, quantize_gguf_kernel<kType>, kThreads, 0));
    return ctas > 0 ? ctas : 1;
  }();
  const long long resident = static_cast<long long>(ctas_per_sm) * current_device_sm_count();
  return static_cast<unsigned>(runs < resident ? runs : resident);
}

template <GgufBlockType kType>
void launch(const QuantizeGgufArgs& args, cudaStream_t stream) {
  const long long total_blocks = args.rows * (args.k / kGgufBlockWeights);
  const long long runs = core::ceil_div(total_blocks, kThreads);
  quantize_gguf_kernel<kType><<<persistent_grid<kType>(runs), kThreads, 0, stream>>>(args);
}

}  // namespace

void quantize_gguf_03_prefetch_next_run(const QuantizeGgufArgs& args, cudaStream_t stream) {
  require(args.k > 0 && args.k % kGgufBlockWeights == 0,
          "GGUF quantize: K must be a positive multiple of {} (got {}): whole blocks", kGgufBlockWeights, args.k);
  switch (args.type) {
    case GgufBlockType::q4_0:
      launch<GgufBlockType::q4_0>(args, stream);
      break;
    case GgufBlockType::q4_1:
      launch<GgufBlockType::q4_1>(args, stream);
      break;
    case GgufBlockType::q8_0:
      launch<GgufBlockType::q8_0>(args, stream);
      break;
  }
  KC_CUDA_CHECK(cudaGetLastError());
}

}  // namespace kc::stage3
