// kc/stage3/register.hpp — tensor-core GEMM, FlashAttention, low precision.
#pragma once

#include "kc/common/registry.hpp"

namespace kc::stage3 {

// Adds this stage's ops and kernels to the registry (none yet: see README.md).
void register_kernels(Registry& registry);

}  // namespace kc::stage3
