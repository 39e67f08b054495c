// register_attention_decode.hpp — the paged decode ladder's registration
// (src/register_attention_decode.cpp), called from register_kernels(), and the arguments a rung
// gets from a problem's operands (the GPU tests launch rung 02 with plans of their own).
#pragma once

#include <string>
#include <vector>

#include "kc/stage3/decode_args.hpp"
#include "kc/common/registry.hpp"

namespace kc::stage3 {

// Files the attention_decode_paged rungs (01 naive, 02 split-KV, 03 split-KV on mma.sync, 04 its
// splits merged in the same launch, 05 its first pages asked for early) with
// the registry; the op must be registered first.
void register_attention_decode_kernels(Registry& registry);

// Files rung 06 with the attention_decode_paged_rope op (registered first).
void register_attention_decode_rope_kernels(Registry& registry);

// The conformance problems the decode rungs refuse, by label: head dimensions other than 64 and 128.
const std::vector<std::string>& decode_rung_refusals();
// "" when a decode rung runs `problem`, otherwise why not.
std::string decode_rung_shape_error(const Problem& problem);

// The arguments of `problem` on its operands (T: __nv_bfloat16 or __half, as problem.dtype).
template <typename T>
DecodeArgs<T> decode_args(const Problem& problem, Operands& operands);
// Rung 06's rope arguments on an attention_decode_paged_rope problem's operands (with decode_args
// for the rest: that op names Q, the caches and the bookkeeping as attention_decode_paged does).
template <typename T>
DecodeRopeArgs<T> decode_rope_args(const Problem& problem, Operands& operands);

}  // namespace kc::stage3
