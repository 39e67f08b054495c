// kc/stage4/register.hpp — a Llama-style inference engine.
#pragma once

#include "kc/common/registry.hpp"

namespace kc::stage4 {

// Adds this stage's ops and kernels to the registry: the engine's own kernels (src/register.cpp).
void register_kernels(Registry& registry);

}  // namespace kc::stage4
