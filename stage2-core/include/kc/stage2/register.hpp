// kc/stage2/register.hpp — the stage-2 ops and ladders for kc-bench and the conformance tests.
#pragma once

#include "kc/common/registry.hpp"

namespace kc::stage2 {

// Adds every stage-2 op, once per dtype (rmsnorm_bf16, rmsnorm_f16, rmsnorm_f32, ...), and every
// rung of its ladder (stage2/<op>/<NN_name>). Calling it twice adds nothing the second time.
void register_kernels(Registry& registry);

}  // namespace kc::stage2
