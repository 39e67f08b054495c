// kc/stage2/register.hpp — kc::core library and memory-bound LLM kernels.
#pragma once

#include "kc/common/registry.hpp"

namespace kc::stage2 {

// Adds this stage's ops and kernels to the registry (none yet: see README.md).
void register_kernels(Registry& registry);

}  // namespace kc::stage2
