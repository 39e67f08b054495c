#include "kc/stage3/register.hpp"

namespace kc::stage3 {

void register_kernels(Registry& /*registry*/) {}

}  // namespace kc::stage3
