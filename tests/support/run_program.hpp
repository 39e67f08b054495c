// Test support: run kc-bench (or any command) and capture its exit code and output.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace kc::testing {

struct ProgramRun {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

inline ProgramRun run_program(const std::string& command) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed for: " + command};
  ProgramRun run;
  std::array<char, 512> buffer{};
  while (std::fgets(buffer.data(), buffer.size(), pipe) != nullptr) run.output += buffer.data();
  const int status = pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

// kc-bench from this build tree (KC_BENCH_PATH is set by tests/CMakeLists.txt).
inline ProgramRun run_kc_bench(const std::string& args) {
  return run_program(std::string("'") + KC_BENCH_PATH + "' " + args);
}

}  // namespace kc::testing
