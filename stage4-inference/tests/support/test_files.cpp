#include "support/test_files.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace kc::engine::test_support {

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern =
      std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/kc-engine-test-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr)
    throw kc::Error("cannot create a temporary directory from " + pattern);
  root_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(root_, ignored);
}

std::string TempDir::write(const std::string& name, const std::vector<std::byte>& bytes) const {
  const std::string file = path(name);
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  if (!out) throw kc::Error("cannot write the test file " + file);
  return file;
}

std::string TempDir::write_text(const std::string& name, std::string_view text) const {
  const auto* begin = reinterpret_cast<const std::byte*>(text.data());
  return write(name, std::vector<std::byte>(begin, begin + text.size()));
}

}  // namespace kc::engine::test_support
