// register_attention.hpp — the FlashAttention ladder's registration (src/register_attention.cpp),
// called from register_kernels().
#pragma once

#include <string>
#include <vector>

#include "kc/common/registry.hpp"

namespace kc::stage3 {

// Files the attention_fwd rungs (01 unfused ... 04 cp.async) with the registry; the op must be
// registered first.
void register_attention_kernels(Registry& registry);

// Rung 01 (attention/01_naive_unfused.cpp): the unfused cuBLAS path as a kernel entry's launch.
LaunchFn attention_01_naive_unfused();

// The conformance problems the fused rungs (02-04) refuse, by label: head dimensions other than
// 64 and 128.
const std::vector<std::string>& flash_attention_refusals();
// "" when a fused rung runs `problem`, otherwise why not.
std::string flash_attention_shape_error(const Problem& problem);

}  // namespace kc::stage3
