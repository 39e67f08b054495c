// kc/stage3/register.hpp — tensor-core GEMM, FlashAttention, low precision.
#pragma once

#include "kc/common/registry.hpp"

namespace kc::stage3 {

// Adds the stage-3 ops (hgemm_bf16, gemm_bias_gelu_bf16) and the tensor-core GEMM ladder
// (stage3/hgemm_bf16/01_wmma ... 09_tma_store, stage3/gemm_bias_gelu_bf16/10_fused_bias_gelu).
void register_kernels(Registry& registry);

}  // namespace kc::stage3
