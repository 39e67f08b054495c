// kc-generate as a program, on the CPU: every argument it cannot take is refused with exit status 2
// and a message naming it, before the program looks for a GPU (so this runs where there is none).
// --help prints the usage and exits 0.
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "support/run_program.hpp"

#if !defined(KC_GENERATE_BINARY)
#error "KC_GENERATE_BINARY must name kc-generate"
#endif

namespace {

std::pair<int, std::string> run_generate(const std::string& args) {
  return kc::engine::test_support::run_program(KC_GENERATE_BINARY, args);
}

TEST(GenerateCli, RefusesWhatItCannotTakeBeforeLookingForAGpu) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--prompt hi", "--model is required"},
      {"--model m.gguf", "give --prompt or --ids (one of them)"},
      {"--model m.gguf --prompt hi --ids 1,2", "give --prompt or --ids (one of them)"},
      {"--model m.gguf --prompt hi --max-tokens 0", "--max-tokens must be >= 1"},
      {"--model m.gguf --prompt hi --quantize-int4 100", "--quantize-int4 100: a group size of 32, 64 or a multiple of 128"},
      {"--model m.gguf --prompt hi --quantize-int4 16", "--quantize-int4 16: a group size of 32, 64 or a multiple of 128"},
      {"--model m.gguf --prompt hi --quantize-int4", "--quantize-int4 needs a value"},
      {"--model m.gguf --prompt hi --frobnicate", "unknown flag '--frobnicate'"},
  };
  for (const auto& [args, message] : cases) {
    const auto [status, output] = run_generate(args);
    EXPECT_EQ(status, 2) << args << "\n" << output;
    EXPECT_NE(output.find(message), std::string::npos) << args << ": expected \"" << message << "\" in\n" << output;
    EXPECT_EQ(output.find("GPU"), std::string::npos) << args << ": looked for a GPU first\n" << output;
  }
}

TEST(GenerateCli, HelpPrintsTheUsage) {
  const auto [status, output] = run_generate("--help");
  EXPECT_EQ(status, 0) << output;
  EXPECT_NE(output.find("usage: kc-generate --model PATH"), std::string::npos) << output;
  EXPECT_NE(output.find("[--quantize-int4 G]"), std::string::npos) << output;
}

}  // namespace
