// Test support: a temporary directory for the files the tests write, and checks on kc::Error
// messages.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdlib>
#include <exception>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "kc/common/error.hpp"

namespace kc::engine::test_support {

// The real SmolLM2-135M-Instruct q4_1 GGUF when KC_SMOLLM2_GGUF names it ("" otherwise), and what
// a test that needs it says when it skips.
inline std::string smollm2_gguf_path() {
  const char* path = std::getenv("KC_SMOLLM2_GGUF");
  return path != nullptr ? path : "";
}
inline constexpr const char* kSmolLM2GgufMissing =
    "set KC_SMOLLM2_GGUF to the SmolLM2-135M-Instruct q4_1 GGUF (scripts/fetch_smollm2.sh fetches it) "
    "to run this test";

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& root() const { return root_; }
  std::string path(const std::string& name) const { return root_ + "/" + name; }
  // Writes the file (replacing it) and returns its path.
  std::string write(const std::string& name, const std::vector<std::byte>& bytes) const;
  std::string write_text(const std::string& name, std::string_view text) const;

 private:
  std::string root_;
};

// The message of the kc::Error that `action` throws. The test fails when it throws nothing, or
// something that is not a kc::Error (a crash-like std::bad_alloc, say).
template <typename Action>
std::string error_of(Action&& action) {
  try {
    action();
  } catch (const kc::Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw something other than kc::Error: " << e.what();
    return {};
  }
  ADD_FAILURE() << "threw nothing; a kc::Error was expected";
  return {};
}

// Writes `bytes` to a file `name` in a fresh temporary directory, opens it as a `Reader`
// (constructed from the path) and returns the message of the kc::Error that must follow. The test
// fails unless the message names the file and a byte offset ("<path>: at byte <n>: ...").
template <typename Reader>
std::string open_error_of(const std::vector<std::byte>& bytes, const std::string& name) {
  TempDir dir;
  const std::string path = dir.write(name, bytes);
  const std::string message = error_of([&] { Reader reader(path); });
  if (message.find(path + ": at byte ") == std::string::npos)
    ADD_FAILURE() << "\"" << message << "\" does not name the file and an offset";
  return message;
}

// Whether `text` contains every one of `parts` (the message says which it lacks).
inline ::testing::AssertionResult contains_all(const std::string& text,
                                               std::initializer_list<std::string_view> parts) {
  for (std::string_view part : parts)
    if (text.find(part) == std::string::npos)
      return ::testing::AssertionFailure() << "\"" << text << "\" lacks \"" << part << "\"";
  return ::testing::AssertionSuccess();
}

}  // namespace kc::engine::test_support
