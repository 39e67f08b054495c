// Files every stage-2 op and rung with the registry. One op per dtype (rmsnorm_bf16,
// rmsnorm_f16, rmsnorm_f32, ...): a kc::Problem carries no dtype, so the op name does.
#include "kc/stage2/register.hpp"

#include <memory>

#include "register_helpers.hpp"

namespace kc::stage2 {

void register_kernels(Registry& registry) {
  if (registry.has_op("rmsnorm_bf16")) return;  // already registered
  // One copy scratch for every op's baseline: only the largest copy's buffers are ever held.
  const auto scratch = std::make_shared<CopyScratch>();
  detail::register_norm_ops(registry, scratch);
  detail::register_softmax_and_reduction_ops(registry, scratch);
  detail::register_elementwise_ops(registry, scratch);
  detail::register_rope_and_embedding_ops(registry, scratch);
}

}  // namespace kc::stage2
