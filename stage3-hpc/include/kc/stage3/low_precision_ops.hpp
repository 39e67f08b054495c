// kc/stage3/low_precision_ops.hpp — the public entries of stage 3's FP8 GEMM, INT8 GEMM and FP8
// quantize: what another stage calls, as it calls the bf16 GEMM through kc/stage3/gemm.hpp and
// the weight-only GEMV through kc/stage3/quantized_gemv.hpp, never a rung.
//
// The arguments and what each computes are the rungs' (kc/stage3/fp8_gemm_args.hpp,
// kc/stage3/int8_gemm_args.hpp). Each entry
//   1. checks its arguments and throws kc::Error naming the argument and the rule before any CUDA
//      call (check_fp8_gemm_args, check_int8_gemm_args, check_fp8_quantize_args);
//   2. launches the rung the committed tables measured fastest on this GPU and returns its kc-bench
//      id, so a caller can report what ran:
//        FP8 GEMM   rung 11 (rung 09's or rung 10's kernel, whichever width fills the waves
//                   better: the fastest with block scales in the stage-3 README's H100 runs; it
//                   runs rung 07 where TMA cannot read s_A's rows, M % 4 != 0 or s_A unaligned,
//                   and rung 05, the fastest of docs/benchmarks/h200/stage3-fp8-gemm.md, with one
//                   scale a tensor); it needs compute capability 9.0 and sm_90a code in the build,
//                   and refuses other GPUs with a kc::Error (no FP8 rung for them);
//        INT8 GEMM  rung 02 on compute capability 9.0 with sm_90a code (the fastest of the
//                   committed table's rungs; rung 04, the ping-pong, measured no faster), rung 03
//                   (mma.sync) on other GPUs from sm_80;
//        FP8 quantize  rung 01, any GPU from sm_80.
// Launches are asynchronous on `stream`; a launch the runtime refuses throws kc::CudaError.
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <string_view>

#include "kc/stage3/fp8_gemm_args.hpp"
#include "kc/stage3/int8_gemm_args.hpp"

namespace kc::stage3 {

class HopperLaunchCache;

// The ids the entries return (kc-bench's).
inline constexpr std::string_view kFp8GemmEntryRung = "stage3/fp8_gemm/11_scales_in_stage_per_shape";
inline constexpr std::string_view kInt8GemmHopperRung = "stage3/int8_gemm/02_tma_store";
inline constexpr std::string_view kInt8GemmDequantHopperRung = "stage3/int8_gemm_dequant/02_tma_store";
inline constexpr std::string_view kInt8GemmAmpereRung = "stage3/int8_gemm/03_mma_sync";
inline constexpr std::string_view kInt8GemmDequantAmpereRung = "stage3/int8_gemm_dequant/03_mma_sync";
inline constexpr std::string_view kFp8QuantizeEntryRung = "stage3/fp8_quantize/01_half_warp_per_block";

// Holds what the Hopper rungs keep between calls (their tensor maps and kernel attributes, a
// bounded cache) and whether the current device runs them, asked on the first call: create one per
// device and keep it. Not thread-safe.
class LowPrecisionGemm {
 public:
  LowPrecisionGemm();  // touches no GPU
  ~LowPrecisionGemm();
  LowPrecisionGemm(LowPrecisionGemm&&) noexcept;
  LowPrecisionGemm& operator=(LowPrecisionGemm&&) noexcept;

  // C = (A s_A)(B s_B)^T in bf16 (fp8_gemm_args.hpp); rung 11 (see above).
  std::string_view fp8_gemm(const Fp8GemmArgs& args, cudaStream_t stream);
  // C32 = A.B^T, or C = s_A s_B (A.B^T) in bf16 with the scales (int8_gemm_args.hpp).
  std::string_view int8_gemm(const Int8GemmArgs& args, cudaStream_t stream);

 private:
  bool runs_hopper_rungs();  // compute capability 9.0 and sm_90a code; asked once
  std::unique_ptr<HopperLaunchCache> cache_;
  int hopper_ = -1;  // -1: not asked yet
};

// X [M, K] bf16 -> Q [M, K] e4m3 and its 1 x 128 scales (fp8_gemm_args.hpp); rung 01.
std::string_view fp8_quantize(const Fp8QuantizeArgs& args, cudaStream_t stream);

}  // namespace kc::stage3
