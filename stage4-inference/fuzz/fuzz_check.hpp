// fuzz/fuzz_check.hpp — what the stage-4 fuzz targets share.
//
// A reader given bad bytes must throw kc::Error: that is an expected outcome, and the targets
// catch it. Anything else is a finding the fuzzer records: another exception type (libFuzzer
// reports it as an uncaught exception), a crash, a sanitizer report, a timeout, or a property of
// a successful parse that does not hold (KC_FUZZ_CHECK aborts with the condition).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "kc/common/error.hpp"
#include "kc/engine/mapped_file.hpp"

#define KC_FUZZ_CHECK(condition)                                                     \
  do {                                                                               \
    if (!(condition)) {                                                              \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #condition); \
      std::abort();                                                                  \
    }                                                                                \
  } while (0)

namespace kc::fuzz {

inline engine::ByteView view_of(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const std::byte*>(data), size};
}

// Runs `body`, treating kc::Error as the expected answer to bad input.
template <typename Body>
void expect_kc_errors_only(Body&& body) {
  try {
    body();
  } catch (const kc::Error&) {
  }
}

// Reads every byte of a view, so a view that reaches outside its buffer is reported by
// AddressSanitizer; the sum keeps the reads from being optimized away.
inline unsigned touch(const void* data, std::size_t size) {
  const auto* p = static_cast<const volatile unsigned char*>(data);
  unsigned sum = 0;
  for (std::size_t i = 0; i < size; ++i) sum += p[i];
  return sum;
}

}  // namespace kc::fuzz
