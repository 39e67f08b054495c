// Test support: skip cleanly without a GPU, and share one CUDA context per test process.
#pragma once

#include <gtest/gtest.h>

#include "kc/common/context.hpp"
#include "kc/common/device.hpp"

namespace kc::testing {

// Created on first use; creating a context and cuBLAS handles per test would dominate run time.
inline Context& shared_context() {
  static Context context;
  return context;
}

}  // namespace kc::testing

// GTEST_SKIP must run in the test body itself, hence a macro.
#define KC_SKIP_WITHOUT_GPU()                                                        \
  do {                                                                               \
    if (!::kc::has_gpu())                                                            \
      GTEST_SKIP() << "no CUDA GPU visible (" << ::kc::no_gpu_reason()               \
                   << "); this test runs on a machine with a GPU";                  \
  } while (0)
