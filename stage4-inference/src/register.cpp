#include "kc/stage4/register.hpp"

namespace kc::stage4 {

void register_kernels(Registry& /*registry*/) {}

}  // namespace kc::stage4
