// GGUF quantize rung 03 — rung 02's blocks (a thread per block of 32, the same fast path, the same
// bytes), with persistent CTAs that load their next run of blocks while they quantize this one
// (sm_80 and newer).
//
// Idea: with rung 02's instruction count, the SMs have issue slots to spare and DRAM still does
// not reach the copy's bandwidth. The reason is the shape of a CTA's life: it loads its 256 blocks
// (16 KiB), then computes with no load outstanding, then stores. A few CTAs share an SM and start
// together, so for stretches of time no SM has a load in flight and DRAM idles. The cure is the
// one every pipeline in this repository uses: keep the next loads in flight during the work. A
// grid of as many CTAs as the GPU holds at once walks the runs (run r, r + grid, ...); before it
// quantizes run r each thread issues the four loads of its block of the run after, into a second
// set of registers, so DRAM is busy while the quants are computed and staged.
// What changed from rung 02: the persistent loop and the prefetch into registers (16 more a
// thread, so fewer CTAs fit an SM — the grid is sized by the occupancy query for exactly this
// kernel), and a second barrier per run (the staging buffer is rewritten by the next run).
//
// What to look for: rung 02's per-block code (FMNMX, F2I.TRUNC.NTZ, PRMT, STS.U16), the four
// LDG.E.128 of the next block issued before that code in the loop body, BAR.SYNC twice a run,
// LDS.128 + STG.E.128; no SHFL, no local memory.
// Expected limiter: DRAM bandwidth, now with loads in flight through the whole kernel.
//
// Run just this rung:  kc-bench --filter stage3/quantize_gguf/03
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kc/common/device.hpp"
#include "kc/common/error.hpp"
#include "kc/core/launch.hpp"
#include "kc/stage3/quantize_gguf_args.hpp"
#include "quantize_gguf_block.cuh"

namespace kc::stage3 {
namespace {

constexpr int kThreads = 256;  // a run: 256 blocks, one a thread
static_assert(kThreads * 18 % 16 == 0 && kThreads * 20 % 16 == 0 && kThreads * 34 % 16 == 0,
              "every run of blocks must start 16-byte aligned");

template <GgufBlockType kType>
__global__ void __launch_bounds__(kThreads) quantize_gguf_kernel(QuantizeGgufArgs args) {
  constexpr int kBlockBytes = gguf_block_bytes(kType);
  __shared__ alignas(16) std::uint8_t staged[kThreads * kBlockBytes];
  const long long total_blocks = args.rows * (args.k / kGgufBlockWeights);
  const long long runs = (total_blocks + kThreads - 1) / kThreads;

  // The first run's loads; a thread past the last block loads nothing.
  long long run = blockIdx.x;
  long long block = run * kThreads + threadIdx.x;
  gguf_block::RawBlock next{};
  if (run < runs && block < total_blocks) next = gguf_block::load_gguf_block(args.x, block);

  for (; run < runs; run += gridDim.x) {
    const gguf_block::RawBlock current = next;
    const bool mine = block < total_blocks;
    const long long following = run + gridDim.x;
    const long long following_block = following * kThreads + threadIdx.x;
    // The next run's loads go out before this run's arithmetic: they are in flight while it runs.
    if (following < runs && following_block < total_blocks) next = gguf_block::load_gguf_block(args.x, following_block);
    if (mine) gguf_block::quantize_gguf_block<kType>(current, staged + threadIdx.x * kBlockBytes);
    __syncthreads();

    const long long first_block = run * kThreads;
    const long long blocks_left = total_blocks - first_block;
    const int blocks_here = blocks_left < kThreads ? static_cast<int>(blocks_left) : kThreads;
    gguf_block::write_staged_run<kThreads>(staged, args.out + first_block * kBlockBytes, blocks_here * kBlockBytes);
    __syncthreads();  // the staging buffer is the next run's
    block = following_block;
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
