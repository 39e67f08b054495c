// kc/playground/register.hpp — files the playground's templates with the registry.
#pragma once

#include "kc/common/registry.hpp"

namespace kc::playground {

// Adds playground/<op>/my_<op> for sgemm, softmax, row_sum and hgemm. Their ops come from stages
// 1-3: register those first (kc::register_all_stages does, in that order).
void register_kernels(Registry& registry);

}  // namespace kc::playground
