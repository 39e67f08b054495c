// The public entries of the FP8 GEMM, the INT8 GEMM and the FP8 quantize
// (kc/stage3/low_precision_ops.hpp): the checks, then the rung the committed tables put first.
#include "kc/stage3/low_precision_ops.hpp"

#include "arch/sm90/tma_descriptor.hpp"
#include "kc/common/error.hpp"
#include "kc/stage3/gemm.hpp"

namespace kc::stage3 {

LowPrecisionGemm::LowPrecisionGemm() : cache_(std::make_unique<HopperLaunchCache>()) {}
LowPrecisionGemm::~LowPrecisionGemm() = default;
LowPrecisionGemm::LowPrecisionGemm(LowPrecisionGemm&&) noexcept = default;
LowPrecisionGemm& LowPrecisionGemm::operator=(LowPrecisionGemm&&) noexcept = default;

bool LowPrecisionGemm::runs_hopper_rungs() {
  if (hopper_ < 0) {
    int device = 0;
    KC_CUDA_CHECK(cudaGetDevice(&device));
    hopper_ = stage3::runs_hopper_rungs(device) ? 1 : 0;
  }
  return hopper_ == 1;
}

std::string_view LowPrecisionGemm::fp8_gemm(const Fp8GemmArgs& args, cudaStream_t stream) {
  check_fp8_gemm_args(args);
  require(runs_hopper_rungs(),
          "kc::stage3::LowPrecisionGemm::fp8_gemm: the FP8 GEMM runs on FP8 WGMMA, which needs a GPU of compute "
          "capability 9.0 (H100/H200) and sm_90a code in the build; this GPU or build has none");
  fp8_gemm_11_scales_in_stage_per_shape(args, stream, *cache_);
  return kFp8GemmEntryRung;
}

std::string_view LowPrecisionGemm::int8_gemm(const Int8GemmArgs& args, cudaStream_t stream) {
  check_int8_gemm_args(args);
  const bool dequantize = args.c != nullptr;
  if (runs_hopper_rungs()) {
    int8_gemm_02_tma_store(args, stream, *cache_);
    return dequantize ? kInt8GemmDequantHopperRung : kInt8GemmHopperRung;
  }
  int8_gemm_03_mma_sync(args, stream);
  return dequantize ? kInt8GemmDequantAmpereRung : kInt8GemmAmpereRung;
}

std::string_view fp8_quantize(const Fp8QuantizeArgs& args, cudaStream_t stream) {
  fp8_quantize_01_half_warp_per_block(args, stream);  // checks before its launch
  return kFp8QuantizeEntryRung;
}

}  // namespace kc::stage3
