// Test support: a public entry must refuse bad arguments with a kc::Error a caller can act on,
// before anything reaches the CUDA runtime, and leave the CUDA context as it found it.
#pragma once

#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>
#include <string>

#include "kc/common/error.hpp"

namespace kc::testing {

// A made-up device address for checks that never dereference it: one of many slots 256 MiB apart,
// plus `offset_bytes` (a misaligned operand).
template <typename T>
T* fake_pointer(std::uintptr_t slot, std::uintptr_t offset_bytes = 0) {
  return reinterpret_cast<T*>(std::uintptr_t{0x7f0000000000} + slot * 0x10000000 + offset_bytes);
}

// Runs `call` and expects a kc::Error (not a CUDA error) whose message holds every fragment.
template <class Call>
void expect_refused(Call call, std::initializer_list<std::string> fragments) {
  try {
    call();
  } catch (const CudaError& e) {
    ADD_FAILURE() << "reached the CUDA runtime instead of refusing the arguments: " << e.what();
    return;
  } catch (const Error& e) {
    const std::string message = e.what();
    for (const std::string& fragment : fragments)
      EXPECT_NE(message.find(fragment), std::string::npos)
          << "message lacks \"" << fragment << "\": " << message;
    return;
  }
  ADD_FAILURE() << "the call was accepted";
}

template <class Call>
void expect_refused(Call call, const std::string& fragment) {
  expect_refused(call, {fragment});
}

// The message of the kc::Error `call` throws, "" when it throws none; a CUDA error fails the test
// (the call reached the runtime instead of refusing) and its message is returned as well. For
// tests that compare messages or check fragments one by one; expect_refused checks them at once.
template <class Call>
std::string error_of(Call&& call) {
  try {
    call();
  } catch (const CudaError& e) {
    ADD_FAILURE() << "reached the CUDA runtime instead of refusing the arguments: " << e.what();
    return e.what();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// After a refusal, on a GPU: nothing failed on the device and nothing is pending.
inline void expect_clean_context() {
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

}  // namespace kc::testing
