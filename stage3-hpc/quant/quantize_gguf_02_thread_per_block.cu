// GGUF quantize rung 02 — bf16 rows to llama.cpp's q8_0, q4_0 or q4_1 blocks, the same bytes as
// rung 01, one thread per block of 32 and a fast path for the blocks that need none of ggml's
// special cases (sm_80 and newer).
//
// Idea: rung 01 was not short of bytes in flight, it was short of issue slots. Nsight Compute on
// the H200 (the stage-3 README has the figures) finds its schedulers busy most cycles and DRAM far
// below its bandwidth. The op moves about 3 bytes a value, so at the H200's 4.8 TB/s (its
// specification) values pass at about 1.6 x 10^12 a second, while 132 SMs x 4 schedulers x
// 1.98 GHz issue about 1.0 x 10^12 warp instructions a second, 33 x 10^12 thread instructions:
// about 20 instructions a value with every issue slot used, and rung 01 needs well over that. So
// this rung spends fewer instructions per value:
//   - one thread per block: the max/min is folded in the thread's own registers, with no
//     shuffles, and the two IEEE divisions (scale, reciprocal) run once per block instead of on
//     four lanes;
//   - a fast path: ggml's rules (NaN restarting q8_0's max, C's conversion of NaN, Inf and values
//     past int32 to int8, the sign of a zero min) cost a compare or a select per value when written
//     out, but they can change the bytes only for rare blocks that a cheap test per block finds:
//       q8_0  the max of |x| with NaN kept (one max.NaN a value) — no NaN in the block means
//             every |x| <= max, so every x / d rounds within +-127 and a plain conversion is
//             exact; a block holding a NaN takes the exact path (ggml's MAX, range-checked
//             conversion);
//       q4_0  ggml's loop already ignores NaN; every |x| <= |max|, so x / d + 8.5 stays in
//             [0, 16.5];
//       q4_1  min and max on bf16 pairs (they skip NaN as ggml's strict comparisons do) unless
//             either is a zero, where only ggml's order decides its sign;
//     and in every type a scale so small that 1 / d overflows makes every quant 0 in ggml (int8
//     of +-Inf or NaN): the reciprocal is replaced by a NaN, and the hardware conversion of a NaN
//     is 0 — the same bytes with no test per value. Out-of-range products cannot occur otherwise,
//     so the fast path converts with one F2I.TRUNC (NaN -> 0) and no range check;
//   - the folds in four independent chains, since a max or min that skips (or keeps) every NaN does
//     not depend on the order: q8_0's on the floats (max.NaN), q4_1's on the bf16 pairs as loaded,
//     two values an instruction (a max of bf16 values is the max of their exact floats; sm_90
//     merges three pairs in one VHMNMX); q4_0's max is ggml's loop — its first-of-equals rule is an
//     order — as one compare and one select a value (ggml's amax is always |max|).
// What changed from rung 01: the lane layout (a thread per block, four 16-byte loads of its own 64
// bytes — neighbouring threads' loads touch each 32-byte sector twice, the L1 serves the second
// touch), the fast path, and the staging of 256 blocks a CTA (still 2-byte stores into shared
// memory, still copied out with 16-byte stores: 256 blocks of 18, 20 or 34 bytes are multiples of
// 16 bytes). The block's code is in quantize_gguf_block.cuh.
//
// What to look for: four LDG.E.128 a thread, FMNMX.NAN (q8_0), HMNMX2/VHMNMX.BF16_V2 (q4_1),
// the FMUL then FADD per quant never fused into an FFMA, F2I.TRUNC.NTZ once per value, PRMT (bytes
// into words), STS.U16, BAR.SYNC, LDS.128 + STG.E.128; no SHFL, no local memory.
// Expected limiter: DRAM bandwidth (2 bytes read a value, 0.56 to 1.06 written), with under half
// of rung 01's instructions per value; then the latency of a CTA that loads, computes with nothing
// in flight, and stores.
//
// Run just this rung:  kc-bench --filter stage3/quantize_gguf/02
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kc/common/error.hpp"
#include "kc/core/launch.hpp"
#include "kc/stage3/quantize_gguf_args.hpp"
#include "quantize_gguf_block.cuh"

namespace kc::stage3 {
namespace {

constexpr int kThreads = 256;  // one block of 32 values a thread: a CTA quantizes 256 blocks
static_assert(kThreads * 18 % 16 == 0 && kThreads * 20 % 16 == 0 && kThreads * 34 % 16 == 0,
              "every CTA's run of blocks must start 16-byte aligned");

template <GgufBlockType kType>
__global__ void __launch_bounds__(kThreads) quantize_gguf_kernel(QuantizeGgufArgs args) {
  constexpr int kBlockBytes = gguf_block_bytes(kType);
  __shared__ alignas(16) std::uint8_t staged[kThreads * kBlockBytes];
  const long long total_blocks = args.rows * (args.k / kGgufBlockWeights);
  const long long first_block = static_cast<long long>(blockIdx.x) * kThreads;
  const long long block = first_block + threadIdx.x;

  if (block < total_blocks)
    gguf_block::quantize_gguf_block<kType>(gguf_block::load_gguf_block(args.x, block), staged + threadIdx.x * kBlockBytes);
  __syncthreads();

  // The CTA's run of blocks, contiguous in the output.
  const long long blocks_left = total_blocks - first_block;
  const int blocks_here = blocks_left < kThreads ? static_cast<int>(blocks_left) : kThreads;
  gguf_block::write_staged_run<kThreads>(staged, args.out + first_block * kBlockBytes, blocks_here * kBlockBytes);
}

}  // namespace

void quantize_gguf_02_thread_per_block(const QuantizeGgufArgs& args, cudaStream_t stream) {
  require(args.k > 0 && args.k % kGgufBlockWeights == 0,
          "GGUF quantize: K must be a positive multiple of {} (got {}): whole blocks", kGgufBlockWeights, args.k);
  const long long total_blocks = args.rows * (args.k / kGgufBlockWeights);
  const auto grid = static_cast<unsigned>(core::ceil_div(total_blocks, kThreads));
  switch (args.type) {
    case GgufBlockType::q4_0:
      quantize_gguf_kernel<GgufBlockType::q4_0><<<grid, kThreads, 0, stream>>>(args);
      break;
    case GgufBlockType::q4_1:
      quantize_gguf_kernel<GgufBlockType::q4_1><<<grid, kThreads, 0, stream>>>(args);
      break;
    case GgufBlockType::q8_0:
      quantize_gguf_kernel<GgufBlockType::q8_0><<<grid, kThreads, 0, stream>>>(args);
      break;
  }
  KC_CUDA_CHECK(cudaGetLastError());
}

}  // namespace kc::stage3
