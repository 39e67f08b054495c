// kc/bench/all_stages.hpp — every stage's ops and kernels in one registry.
//
// Its own small library (kc_all_stages), so that the conformance tests and the tools can register
// everything without linking the benchmark runner.
#pragma once

#include "kc/common/registry.hpp"

namespace kc {

// Registers every stage's ops and kernels, in stage order, then the playground's templates.
void register_all_stages(Registry& registry);

}  // namespace kc
