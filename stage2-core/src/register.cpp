#include "kc/stage2/register.hpp"

namespace kc::stage2 {

void register_kernels(Registry& /*registry*/) {}

}  // namespace kc::stage2
