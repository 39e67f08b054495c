// kc-mma-sync-peak — the ceilings an mma.sync GEMM (rungs 02-03) lives under, measured.
//
// 1. mma.sync.m16n8k16 bf16 -> f32 with operands in registers and no memory traffic: each warp
//    runs `chains` independent accumulator chains (8 or 16: enough to cover the MMA latency), with
//    4, 8 or 16 warps on every SM (one block per SM). This is the tensor issue rate of mma.sync.
// 2. ldmatrix.x4 + mma.sync as rungs 02/03 run them: a warp re-reads its 64 x 64 tile's fragments
//    from a swizzled 128 x 128 x 64 shared-memory tile every k16 slice (8 ldmatrix.x4 per 32
//    MMAs), with 4 or 8 warps per SM (a 64 x 64 warp tile takes ~240 registers per thread: 16
//    warps do not fit). Twice: fragments loaded right before their MMAs (warp_mma_k_step, rung
//    02), and one slice ahead (rung 03's order). No global memory, no barriers.
// 3. cublasGemmEx bf16 (FP32 accumulation, B N x K) at 4096^3 in the same run, L2 scrubbed, and
//    every figure above as % of it. The mma.sync rungs cannot beat line 1; the gap between lines 1
//    and 2 is what feeding the tensor cores from shared memory costs before any global memory.
//
// Each figure: CUDA events around one launch, median of several after warm-up
// (kc::time_launches); every accumulator is summed into a global store, so nothing is discarded.
//
//   kc-mma-sync-peak            (any GPU with sm_80 or newer; about 2 s)
// SASS check:  cuobjdump --dump-sass kc-mma-sync-peak | grep -E "Function|HMMA|LDSM" | head
#include <cstdio>
#include <exception>
#include <string>

#include "arch/sm80/mma.cuh"
#include "arch/util.hpp"
#include "kc/common/blas.hpp"
#include "kc/common/buffer.hpp"
#include "kc/common/context.hpp"
#include "kc/common/fill.hpp"
#include "kc/common/timing.hpp"
#include "mma_sync_common.cuh"

namespace kc::stage3 {
namespace {

using Tile = MmaSyncConfig<128, 128, 2, 2, 2>;  // 64 x 64 warp tiles on a 128 x 128 x 64 tile
constexpr long long kMmasPerSm = 1LL << 21;    // per launch: ~8.6 GFLOP per SM
constexpr int kMmaFlops = 2 * 16 * 8 * 16;

// Two small bf16 (2^-8 times 1.mantissa) per word, varied by lane and seed: finite sums that the
// compiler cannot know.
__device__ std::uint32_t operand_bits(std::uint32_t seed, std::uint32_t salt) {
  return 0x3B803B80u ^ ((seed * 2654435761u + salt) & 0x007F007Fu);
}

__device__ void write_sum(float* sink, const float* values, int count) {
  float total = 0.f;
  for (int i = 0; i < count; ++i) total += values[i];
  sink[blockIdx.x * blockDim.x + threadIdx.x] = total;
}

template <int kChains>
__global__ void __launch_bounds__(512, 1) mma_registers_kernel(float* sink, long long iterations, std::uint32_t seed) {
  const std::uint32_t a[4] = {operand_bits(seed, threadIdx.x), operand_bits(seed, threadIdx.x + 1),
                              operand_bits(seed, threadIdx.x + 2), operand_bits(seed, threadIdx.x + 3)};
  const std::uint32_t b0 = operand_bits(seed, threadIdx.x + 4), b1 = operand_bits(seed, threadIdx.x + 5);
  float acc[kChains][4] = {};
  for (long long it = 0; it < iterations; ++it)
#pragma unroll
    for (int chain = 0; chain < kChains; ++chain) sm80::mma_m16n8k16_bf16(acc[chain], a, b0, b1);
  write_sum(sink, &acc[0][0], kChains * 4);
}

template <bool kSliceAhead>
__global__ void __launch_bounds__(256, 1) ldmatrix_mma_kernel(float* sink, long long iterations, std::uint32_t seed) {
  extern __shared__ std::uint8_t smem_raw[];
  std::uint8_t* const tiles = aligned_dynamic_smem(smem_raw);  // swizzle blocks: 1024-aligned
  const std::uint32_t tile_a = smem_u32(tiles);
  const std::uint32_t tile_b = tile_a + Tile::kTileBytesA;
  auto* words = reinterpret_cast<std::uint32_t*>(tiles);
  for (int i = threadIdx.x; i < Tile::kStageBytes / 4; i += blockDim.x) words[i] = operand_bits(seed, i);
  __syncthreads();

  // Warps 0-3 take the 2 x 2 positions of a 128 x 128 block tile; warps 4-7 take them again, as
  // the second block of a 128 x 128 configuration would (the bank pattern of every ldmatrix is
  // the same at any warp position).
  const int position = static_cast<int>(threadIdx.x / 32) % 4;
  const FragmentLaneOffsets lane = fragment_lane_offsets<Tile>({(position / 2) * 64, (position % 2) * 64});
  WarpAccumulators<Tile> acc = {};
  if constexpr (kSliceAhead) {
    WarpFragments<Tile> fragments[2];
    load_warp_fragments<Tile>(fragments[0], tile_a + lane.a, tile_b + lane.b, 0);
    for (long long it = 0; it < iterations; ++it)
#pragma unroll
      for (int slice = 0; slice < Tile::kSlices; ++slice) {
        load_warp_fragments<Tile>(fragments[(slice + 1) % 2], tile_a + lane.a, tile_b + lane.b,
                                  (slice + 1) % Tile::kSlices);
        mma_warp_fragments<Tile>(acc, fragments[slice % 2]);
      }
  } else {
    for (long long it = 0; it < iterations; ++it) warp_mma_k_step<Tile>(tile_a + lane.a, tile_b + lane.b, acc);
  }
  write_sum(sink, &acc[0][0][0], Tile::kFragmentsM * Tile::kFragmentsN * 4);
}

using PeakKernel = void (*)(float*, long long, std::uint32_t);

struct Measurement {
  std::string what;
  int warps, mmas_per_warp_iteration;
  PeakKernel kernel;
};

int run() {
  if (!gpu_visible_or_explain("kc-mma-sync-peak", "; it measures a GPU.")) return 2;
  Context context;
  const DeviceInfo& device = context.device();
  std::printf("%s\n", device.summary().c_str());
  require(device.compute_capability() >= 80, "mma.sync bf16 needs compute capability 8.0 or newer (this GPU: {}.{})",
          device.cc_major, device.cc_minor);

  TimingConfig timing;
  timing.min_samples = 5;
  timing.max_samples = 15;
  timing.target_total_ms = 60.0;

  constexpr std::int64_t kSide = 4096;
  DeviceBuffer<bf16> a(kSide * kSide), b(kSide * kSide), c(kSide * kSide);
  fill_random(a, 1, {}, context.stream());
  fill_random(b, 2, {}, context.stream());
  const GemmShape shape{kSide, kSide, kSide};
  const TimingStats cublas = time_launches(
      [&](cudaStream_t stream) {
        cublas_gemm_ex(context.cublas(), stream, shape, DType::bf16, DType::bf16, 1.f, a.data(), b.data(),
                       BLayout::n_by_k, 0.f, c.data());
      },
      context.stream(), &context.scrubber(), timing, "stage3/mma_sync_peak/cublas");
  const double cublas_tflops = 2.0 * kSide * kSide * kSide / (cublas.median_ms * 1e9);

  const Measurement measurements[] = {
      {"mma.sync, registers, 8 chains", 4, 8, &mma_registers_kernel<8>},
      {"mma.sync, registers, 8 chains", 8, 8, &mma_registers_kernel<8>},
      {"mma.sync, registers, 8 chains", 16, 8, &mma_registers_kernel<8>},
      {"mma.sync, registers, 16 chains", 4, 16, &mma_registers_kernel<16>},
      {"mma.sync, registers, 16 chains", 8, 16, &mma_registers_kernel<16>},
      {"mma.sync, registers, 16 chains", 16, 16, &mma_registers_kernel<16>},
      {"ldmatrix + mma, 64x64 warp tile", 4, 128, &ldmatrix_mma_kernel<false>},
      {"ldmatrix + mma, 64x64 warp tile", 8, 128, &ldmatrix_mma_kernel<false>},
      {"ldmatrix + mma, slice ahead", 4, 128, &ldmatrix_mma_kernel<true>},
      {"ldmatrix + mma, slice ahead", 8, 128, &ldmatrix_mma_kernel<true>},
  };
  // One block per SM, every SM busy: each block asks for (nearly) all of an SM's shared memory.
  const int smem_bytes = static_cast<int>(device.smem_per_block_optin);
  DeviceBuffer<float> sink(static_cast<std::size_t>(device.sm_count) * 512);
  std::printf("\ncuBLAS GemmEx bf16 4096^3: %.1f TFLOPS (L2 scrubbed)\n\n", cublas_tflops);
  std::printf("%-34s %9s %9s %9s %14s\n", "what", "warps/SM", "TFLOPS", "% cuBLAS", "FLOP/clk/SM");
  for (const Measurement& m : measurements) {
    KC_CUDA_CHECK(cudaFuncSetAttribute(m.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes));
    const long long iterations = kMmasPerSm / (static_cast<long long>(m.warps) * m.mmas_per_warp_iteration);
    const TimingStats stats = time_launches(
        [&](cudaStream_t stream) {
          m.kernel<<<device.sm_count, 32 * m.warps, smem_bytes, stream>>>(sink.data(), iterations, 7u);
        },
        context.stream(), nullptr, timing, "stage3/mma_sync_peak/" + m.what);
    KC_CHECK_LAUNCH();
    const double flops = static_cast<double>(device.sm_count) * kMmasPerSm * kMmaFlops;
    const double tflops = flops / (stats.median_ms * 1e9);
    // At the reported maximum clock; a lower clock under load means more per clock.
    const double per_clock = tflops * 1e12 / (device.sm_count * device.max_sm_clock_khz * 1e3);
    std::printf("%-34s %9d %9.1f %8.1f%% %14.0f\n", m.what.c_str(), m.warps, tflops, 100.0 * tflops / cublas_tflops,
                per_clock);
  }
  return 0;
}

}  // namespace
}  // namespace kc::stage3

int main() {
  try {
    return kc::stage3::run();
  } catch (const std::exception& error) {
    std::fprintf(stderr, "kc-mma-sync-peak: %s\n", error.what());
    return 1;
  }
}
