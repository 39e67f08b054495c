// Test support: the message of the kc::Error a call throws, for tests that check a refusal names
// its rule ("" when the call throws none; any other exception propagates and fails the test).
#pragma once

#include <string>

#include "kc/common/error.hpp"

namespace kc::testing {

template <typename Call>
std::string error_of(Call&& call) {
  try {
    call();
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace kc::testing
