// Test support: one registry holding stage 3's ops and kernels (register_kernels), built on first use.
#pragma once

#include "kc/common/registry.hpp"
#include "kc/stage3/register.hpp"

namespace kc::stage3 {

inline const Registry& stage3_test_registry() {
  static const Registry registry = [] {
    Registry r;
    register_kernels(r);
    return r;
  }();
  return registry;
}

}  // namespace kc::stage3
