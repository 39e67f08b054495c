// kc/stage2/register.hpp — the stage-2 ops and ladders for kc-bench and the conformance tests.
#pragma once

#include "kc/common/registry.hpp"

namespace kc::stage2 {

// Adds every stage-2 op (rmsnorm, softmax, ..., each for bf16, f16 and f32: the problem's dtype)
// and every rung of its ladder (stage2/<op>/<NN_name>). Calling it twice adds nothing the second
// time.
void register_kernels(Registry& registry);

}  // namespace kc::stage2
