// Rung 12, the MLP of a decode step in one launch: gate | up, a grid-wide barrier, then down.
//
// Idea: at batch 1 a small model's layer is a chain of kernels each a few microseconds long, and
// each link costs about the same whatever its bytes: the last blocks of one kernel drain, the grid
// completes and flushes, the next kernel's blocks (already resident as a programmatic dependent)
// pass their wait and ramp up to full bandwidth. The MLP is two links that only rung 12 runs at
// M <= 8 — gate_up = rmsnorm(x).[Wgate | Wup]^T (the RMSNorm prologue), then
// x += (silu(gate) . up).Wdown^T (the SwiGLU prologue, beta = 1) — and the second needs every
// column of the first, which is why they were two launches. Here they are one: a persistent grid
// (no more blocks than fit on the GPU at once) walks gate | up's blocks, meets at a grid-wide
// barrier, then walks down's blocks. The barrier replaces the kernel boundary; a CTA that finishes
// its gate | up blocks early asks the L2 for its down rows while it waits for the others, as a
// programmatic dependent does before its wait.
//
// What changed from rung 12: the two passes are rung 12's own code (small_m_gemv.cuh, the same
// group rule, loads and sums, so the result is the two launches' bit for bit); a block may do
// several of a pass's blocks one after the other (a __syncthreads() between them: the partial
// sums reuse shared memory); A is read through the L2 (ld.global.cg) instead of the read-only path,
// because down's A (gate | up) is written by this launch, and gate | up's A (x) is written by it too
// (down's residual add); the barrier is a counter and a generation word in device memory that the
// Gemm owns (kc::stage3::Gemm::run_rmsnorm_mlp).
//
// The barrier needs every CTA of the grid resident at once: the launch is made only where one CTA
// per block of the larger pass fits (the occupancy, cudaOccupancyMaxActiveBlocksPerMultiprocessor,
// times the SMs) — a small model's MLP; a larger one is left to rung 12's two launches, whose
// blocks follow each other onto the SMs and keep more rows in flight than a looping grid would —
// and a programmatic dependent of
// this kernel cannot launch before every CTA of it has started, so the CTAs that wait at the
// barrier never wait for one that has no SM. It also assumes no other work holds the SMs for
// good (another process under MPS, a kernel that waits for this one on another stream).
//
// Expected limiter: the barrier. It was expected to cost less than the kernel boundary it
// replaces (a drain, a grid completion and flush, a dependent's release); measured in the engine's
// decode step it costs more (stage-3 README, "Two links in one launch"): its fences, the atomics
// on one L2 line and every CTA's polling against what a programmatic launch does in hardware. So
// the option is off by default (RunnerOptions::one_launch_mlp).
//
// SASS to look for (cuobjdump -sass -arch sm_90a <build>/stage3-hpc/CMakeFiles/kc_stage3.dir/
// gemm/12_small_m_gemv_mlp.cu.o), in small_m_mlp_kernel<M>: rung 12's loop twice (LDG.E.NA.
// LTC256B.128.CONSTANT for B; LDG.E.128.STRONG.GPU for A, the .cg loads; FFMA), between them
// ATOMG.E.ADD (the arrival), a loop of NANOSLEEP and LDG.E.STRONG.GPU (the generation, relaxed),
// MEMBAR.SC.GPU or MEMBAR.ALL.GPU for the fences, UBLKPF.L2 for the prefetches; no LDL/STL.
//
// Refuses what rung 12 refuses on either product (M > 8, K % 8 != 0, unaligned operands), and a
// null barrier.
//
// Run it: the engine's decode step with `kc-engine-bench --one-launch-mlp on|off|both`; checked
// bit for bit against the two launches by GemmEntryGpu.TheMlpInOneLaunchIsTheTwoLaunchesBitForBit.
#include <cuda_runtime.h>

#include <cstdint>

#include "arch/util.hpp"
#include "hgemm.hpp"
#include "kc/common/device.hpp"
#include "kc/common/error.hpp"
#include "kc/core/dependent_launch.cuh"
#include "small_m_gemv.cuh"

namespace kc::stage3 {
namespace {

using namespace small_m_gemv_detail;

// The barrier's words are polled with relaxed loads and ordered by the fences around them: an
// acquire load in the spin loop would invalidate the SM's L1 on every trip (CCTL.IVALL) while the
// other CTAs on that SM still stream their rows.
__device__ __forceinline__ std::uint32_t load_relaxed(const std::uint32_t* pointer) {
  std::uint32_t value;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(value) : "l"(pointer) : "memory");
  return value;
}

__device__ __forceinline__ void store_relaxed(std::uint32_t* pointer, std::uint32_t value) {
  asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(pointer), "r"(value) : "memory");
}

// Every CTA of the grid arrives before any leaves, and what any CTA wrote before it arrived is
// visible to every CTA after it leaves. barrier[0]: arrivals (0 between launches), barrier[1]: the
// generation, which the last CTA to arrive advances after it has reset the count. A CTA reads the
// generation before it arrives, so it cannot miss the advance it waits for. The fence before the
// arrival releases the CTA's writes (ordered before thread 0's by __syncthreads); the fence after
// the wait acquires everyone else's.
__device__ __forceinline__ void grid_barrier(std::uint32_t* barrier) {
  __syncthreads();
  if (threadIdx.x == 0) {
    const std::uint32_t generation = load_relaxed(barrier + 1);
    __threadfence();
    if (atomicAdd(barrier, 1u) == gridDim.x - 1) {
      atomicExch(barrier, 0u);
      __threadfence();
      store_relaxed(barrier + 1, generation + 1);
    } else {
      while (load_relaxed(barrier + 1) == generation) __nanosleep(32);
    }
    __threadfence();
  }
  __syncthreads();
}

template <int kM>
__global__ void __launch_bounds__(kThreads, 2)
    small_m_mlp_kernel(SmallMGemvLaunch up, SmallMGemvLaunch down, int up_blocks, int down_blocks,
                       std::uint32_t* barrier) {
  const int grid = static_cast<int>(gridDim.x);
  // As rung 12: the next kernel may take free slots, the first bytes of this CTA's gate | up rows
  // go to the L2, then the wait for the kernel before (which wrote x).
  core::let_dependent_grids_start();
  if (up.prefetch_bytes != 0 && threadIdx.x == 0)
    for (int b = blockIdx.x; b < up_blocks; b += grid) {
      const SmallMGemvPlace place = small_m_gemv_place<kM>(up, [b] { return b; });
      small_m_gemv_prefetch<kM>(up, place, up.prefetch_bytes);
    }
  core::wait_for_previous_grids();

  for (int b = blockIdx.x; b < up_blocks; b += grid) {
    const SmallMGemvPlace place = small_m_gemv_place<kM>(up, [b] { return b; });
    small_m_gemv_block<kM, /*kNorm=*/true, /*kSwiglu=*/false, /*kCoherentA=*/true, /*kUnroll=*/2>(up, place);
    __syncthreads();  // partial[] is read by every thread before the next block's sums go in
  }

  // Down's rows are not written by anyone: ask for them while the slowest CTAs finish gate | up.
  if (down.prefetch_bytes != 0 && threadIdx.x == 0)
    for (int b = blockIdx.x; b < down_blocks; b += grid) {
      const SmallMGemvPlace place = small_m_gemv_place<kM>(down, [b] { return b; });
      small_m_gemv_prefetch<kM>(down, place, down.prefetch_bytes);
    }
  grid_barrier(barrier);

  for (int b = blockIdx.x; b < down_blocks; b += grid) {
    const SmallMGemvPlace place = small_m_gemv_place<kM>(down, [b] { return b; });
    small_m_gemv_block<kM, /*kNorm=*/false, /*kSwiglu=*/true, /*kCoherentA=*/true, /*kUnroll=*/2>(down, place);
    __syncthreads();
  }
}

// Launches one CTA per block of the larger pass when that many fit on the GPU at once; returns
// false, launching nothing, when they do not: a persistent grid that loops over blocks keeps fewer
// rows in flight than rung 12's own launches, whose blocks follow each other onto the SMs.
template <int kM>
bool launch_mlp(const SmallMGemvLaunch& up, const SmallMGemvLaunch& down, int up_blocks, int down_blocks,
                std::uint32_t* barrier, cudaStream_t stream) {
  const auto kernel = small_m_mlp_kernel<kM>;
  int per_sm = 0;
  KC_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, 0));
  const long long resident = static_cast<long long>(per_sm) * current_device_sm_count();
  const int grid = up_blocks > down_blocks ? up_blocks : down_blocks;
  if (grid > resident) return false;
  core::launch_dependent(kernel, dim3(grid), dim3(kThreads), 0, stream, up, down, up_blocks, down_blocks, barrier);
  return true;
}

}  // namespace

bool hgemm_12_small_m_gemv_mlp(const SmallMGemvMlp& args, cudaStream_t stream) {
  require(args.barrier != nullptr && aligned(args.barrier, 4),
          "hgemm rung 12 (MLP in one launch): the barrier must be two 4-byte aligned words of device memory");
  require(args.intermediate >= 1 && args.intermediate <= INT32_MAX / 2,
          "hgemm rung 12 (MLP in one launch): intermediate = {} must be in 1..2^30 - 1", args.intermediate);
  require(args.gate_up != args.x, "hgemm rung 12 (MLP in one launch): gate_up and x must be different buffers");
  const SmallMGemvWeight gate_up{args.gate_up_weight, args.gate_up, 2 * args.intermediate};
  const SmallMGemvWeight down{args.down_weight, args.x, args.hidden};
  int up_blocks = 0, down_blocks = 0;
  const SmallMGemvLaunch up = plan_small_m_gemv(args.m, args.hidden, 1.f, args.x, &gate_up, 1, 0.f, args.norm_weight,
                                                args.eps, false, &up_blocks);
  SmallMGemvLaunch second = plan_small_m_gemv(args.m, args.intermediate, 1.f, args.gate_up, &down, 1, 1.f, nullptr,
                                              0.f, true, &down_blocks);
  // Down's prefetch happens before the barrier whether or not the launch is a programmatic
  // dependent: the budget shared by its blocks, as rung 12 shares it.
  second.prefetch_bytes = static_cast<std::uint32_t>(small_m_gemv_prefetch_budget() / down_blocks / 16 * 16);
  switch (args.m) {
    case 1: return launch_mlp<1>(up, second, up_blocks, down_blocks, args.barrier, stream);
    case 2: return launch_mlp<2>(up, second, up_blocks, down_blocks, args.barrier, stream);
    case 3: return launch_mlp<3>(up, second, up_blocks, down_blocks, args.barrier, stream);
    case 4: return launch_mlp<4>(up, second, up_blocks, down_blocks, args.barrier, stream);
    case 5: return launch_mlp<5>(up, second, up_blocks, down_blocks, args.barrier, stream);
    case 6: return launch_mlp<6>(up, second, up_blocks, down_blocks, args.barrier, stream);
    case 7: return launch_mlp<7>(up, second, up_blocks, down_blocks, args.barrier, stream);
    default: return launch_mlp<8>(up, second, up_blocks, down_blocks, args.barrier, stream);
  }
}

}  // namespace kc::stage3
