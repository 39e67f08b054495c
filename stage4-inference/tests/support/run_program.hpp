// Test support: a program run as a shell would run it, for the tests of the engine's programs'
// command lines (kc-engine-bench, kc-generate).
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>
#include <utility>

namespace kc::engine::test_support {

// Runs `binary` with `args` (a shell word list); returns its exit status (-1 when it did not exit)
// and its output, standard output and error together.
inline std::pair<int, std::string> run_program(const std::string& binary, const std::string& args) {
  const std::string command = binary + " " + args + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  std::string output;
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) output.append(buffer, n);
  const int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

}  // namespace kc::engine::test_support
