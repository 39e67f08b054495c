// Test support: one registry holding every stage-2 op and kernel, built once per test program.
#pragma once

#include "kc/common/registry.hpp"
#include "kc/stage2/register.hpp"

namespace kc::stage2::testing {

inline const Registry& stage2_registry() {
  static const Registry registry = [] {
    Registry r;
    register_kernels(r);
    return r;
  }();
  return registry;
}

}  // namespace kc::stage2::testing
