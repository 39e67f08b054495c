#include "kc/bench/all_stages.hpp"

#include "kc/playground/register.hpp"
#include "kc/stage1/register.hpp"
#include "kc/stage2/register.hpp"
#include "kc/stage3/register.hpp"
#include "kc/stage4/register.hpp"

namespace kc {

void register_all_stages(Registry& registry) {
  stage1::register_kernels(registry);
  stage2::register_kernels(registry);
  stage3::register_kernels(registry);
  stage4::register_kernels(registry);
  playground::register_kernels(registry);
}

}  // namespace kc
