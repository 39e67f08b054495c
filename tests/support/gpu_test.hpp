// Test support: skip cleanly without a GPU, and share one CUDA context per test process.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "kc/common/context.hpp"
#include "kc/common/device.hpp"

namespace kc::testing {

// Created on first use; creating a context and cuBLAS handles per test would dominate run time.
inline Context& shared_context() {
  static Context context;
  return context;
}

// KC_REQUIRE_GPU=1 (scripts/gpu-check.sh sets it): a machine that should have a GPU but shows
// none fails instead of skipping (kc::gpu_required, kc/common/device.hpp).
inline bool gpu_required() { return ::kc::gpu_required(); }

}  // namespace kc::testing

// GTEST_SKIP and FAIL must run in the test body itself, hence a macro.
#define KC_SKIP_WITHOUT_GPU()                                                                  \
  do {                                                                                         \
    if (!::kc::has_gpu()) {                                                                    \
      if (::kc::testing::gpu_required())                                                       \
        FAIL() << "KC_REQUIRE_GPU is set but no CUDA GPU is visible (" << ::kc::no_gpu_reason() \
               << ")";                                                                         \
      GTEST_SKIP() << "no CUDA GPU visible (" << ::kc::no_gpu_reason()                         \
                   << "); this test runs on a machine with a GPU";                            \
    }                                                                                          \
  } while (0)
