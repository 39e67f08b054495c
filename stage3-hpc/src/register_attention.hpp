// register_attention.hpp — the FlashAttention ladder's registration (src/register_attention.cpp),
// called from register_kernels().
#pragma once

#include <string>
#include <vector>

#include "kc/common/registry.hpp"
#include "kc/stage3/attention_args.hpp"

namespace kc::stage3 {

// Files the attention_fwd rungs (01 unfused ... 08 persistent) with the registry; the op must be
// registered first. Then the packed variable-length form: the attention_fwd_varlen op (added here
// if the registry does not have it yet) and its rung 05.
void register_attention_kernels(Registry& registry);

// The arguments of an attention_fwd_varlen problem on its operands: the packed form, q_len and
// kv_len the problem's longest lengths (T: __nv_bfloat16 or __half, as problem.dtype).
template <typename T>
AttentionArgs<T> varlen_attention_args(const Problem& problem, Operands& operands);

// The conformance problems of attention_fwd_varlen its rung refuses, by label: head dimensions
// other than 64 and 128.
const std::vector<std::string>& varlen_attention_refusals();

// An attention rung's entry: "stage3/<op>/<name>", bf16 and f16, sm_80 and later, reported in the
// stage3-attention table (the prefill and the decode ladders).
KernelEntry attention_kernel_entry(const std::string& op, const std::string& name, int rung, std::string idea);

// Rung 01 (attention/01_naive_unfused.cpp): the unfused cuBLAS path as a kernel entry's launch.
LaunchFn attention_01_naive_unfused();

// A negative control, not registered: rung 16's kernel whose softmax never moves a row's first
// finite base (attention/16_fa2_lean_softmax_flawed.cu), as a launch on an attention_fwd problem
// (positive scales). Scores that climb far enough along a row must make it fail.
LaunchFn attention_16_with_a_base_that_never_moves();

// The conformance problems the fused rungs (02-04) refuse, by label: head dimensions other than
// 64 and 128.
const std::vector<std::string>& flash_attention_refusals();
// "" when a fused rung runs `problem`, otherwise why not.
std::string flash_attention_shape_error(const Problem& problem);

}  // namespace kc::stage3
