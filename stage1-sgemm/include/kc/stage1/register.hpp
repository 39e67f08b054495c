// kc/stage1/register.hpp — the sgemm op and the stage-1 ladder, for kc-bench and the tests.
#pragma once

#include <string>

#include "kc/common/registry.hpp"

namespace kc::stage1 {

// The "sgemm" op: FP32 in and out, B stored K x N, FP32 CUDA cores, baseline cuBLAS SGEMM
// with pedantic FP32 math.
OpSpec make_sgemm_op();

// The constraint of rungs 06 and 07 as a kernel `supports` function: "" when K and N are
// multiples of 4, otherwise a sentence saying why the rung refuses the shape.
std::string float4_rows_constraint(const Problem& problem);

// Adds the sgemm op (if missing) and every stage-1 rung.
void register_kernels(Registry& registry);

}  // namespace kc::stage1
