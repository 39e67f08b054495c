#include "kc/common/provenance.hpp"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>

namespace kc {
namespace {

std::string run_command(const std::string& command) {
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), &pclose);
  if (!pipe) return {};
  std::string output;
  std::array<char, 256> buffer{};
  while (std::fgets(buffer.data(), buffer.size(), pipe.get()) != nullptr) output += buffer.data();
  while (!output.empty() && (output.back() == '\n' || output.back() == '\r')) output.pop_back();
  return output;
}

}  // namespace

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  std::array<char, 32> text{};
  std::strftime(text.data(), text.size(), "%Y-%m-%d %H:%M UTC", &utc);
  return text.data();
}

std::string source_commit() {
  if (const char* env = std::getenv("KC_GIT_COMMIT"); env != nullptr && *env != '\0') return env;
  const std::string described = run_command(
      "git -C '" KC_SOURCE_DIR "' describe --always --dirty --abbrev=12 2>/dev/null");
  return described.empty() ? "unknown" : described;
}

bool is_dirty_commit(const std::string& commit) {
  const std::string suffix = "-dirty";
  return commit.size() >= suffix.size() && commit.compare(commit.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace kc
