// kc-engine-bench as a program, on the CPU: every flag it cannot take is refused with exit status 2
// and a message naming the flag and the bad value, before the program touches a GPU (so this runs
// where there is none), and a peer file that is missing or is not a peer script's output is
// refused before any model is built. --help prints the usage and exits 0.
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "support/run_program.hpp"

#if !defined(KC_ENGINE_BENCH_BINARY)
#error "KC_ENGINE_BENCH_BINARY must name kc-engine-bench"
#endif

namespace {

std::pair<int, std::string> run_bench(const std::string& args) {
  return kc::engine::test_support::run_program(KC_ENGINE_BENCH_BINARY, args);
}

TEST(EngineBenchCli, RefusesWhatItCannotTakeBeforeTouchingAGpu) {
  const std::string peers = std::string(KC_ENGINE_BENCH_TEST_DATA) + "/not_a_peer.json";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--cuda-graphs on", "give --model, --synthetic or both"},
      {"--synthetic smollm2-135m --cuda-graphs maybe", "--cuda-graphs: 'maybe' is not both, on or off"},
      {"--synthetic smollm2-135m --fuse-kernels 1", "--fuse-kernels: '1' is not both, on or off"},
      {"--synthetic smollm2-135m --programmatic-launch yes", "--programmatic-launch: 'yes' is not both, on or off"},
      {"--synthetic smollm2-135m --rope-in-attention inside", "--rope-in-attention: 'inside' is not both, on or off"},
      {"--synthetic smollm2-135m --one-launch-mlp yes", "--one-launch-mlp: 'yes' is not both, on or off"},
      {"--synthetic smollm2-135m --spread-links yes", "--spread-links: 'yes' is not both, on or off"},
      {"--synthetic smollm2-135m --gemv-first-trip early", "--gemv-first-trip: 'early' is not both, on or off"},
      {"--synthetic smollm2-135m --native-quantized auto", "--native-quantized: 'auto' is not both, on or off"},
      {"--synthetic smollm2-135m --quantized q5_k", "--quantized: 'q5_k' is not q4_0, q4_1, q8_0 or int4-gN"},
      {"--synthetic smollm2-135m --quantized int4-g100", "--quantized: 'int4-g100' is not q4_0, q4_1, q8_0 or int4-gN"},
      {"--synthetic smollm2-135m --quantized int4-g", "--quantized: 'int4-g' is not"},
      {"--synthetic smollm2-135m --decode-tokens 1", "--decode-tokens must be >= 2"},
      {"--synthetic smollm2-135m --decode-attention fast", "--decode-attention: 'fast' is not early, fused"},
      {"--synthetic smollm2-135m --decode-rope-rung 05", "--decode-rope-rung: '05' is not 11, 10, 09, 08, 07, 06 or both"},
      {"--synthetic smollm2-135m --decode-rope-rung ,07", "--decode-rope-rung: '' is not 11, 10, 09, 08, 07, 06 or both"},
      {"--synthetic smollm2-135m --l2-warm-mib -1", "--l2-warm-mib: -1 is not a budget of 0 to 1024 MiB"},
      {"--synthetic smollm2-135m --l2-warm-mib 8,2000", "--l2-warm-mib: 2000 is not a budget of 0 to 1024 MiB"},
      {"--synthetic smollm2-135m --l2-warm-mib lots", "--l2-warm-mib"},
      {"--synthetic smollm2-135m --int4-link-rung 06", "--int4-link-rung: '06' is not stage3, 04, 05 or both"},
      {"--synthetic smollm2-135m --gguf-link-rung 09", "--gguf-link-rung: '09' is not stage3, 07, 08, 11, 12 or both"},
      {"--synthetic smollm2-135m --gguf-link-rung ,11", "--gguf-link-rung: '' is not stage3, 07, 08, 11, 12 or both"},
      {"--synthetic smollm2-135m --temperature -1", "temperature -1 must be finite and >= 0"},
      {"--synthetic smollm2-135m --temperature 0.7 --top-p 1.5", "top_p 1.5 must be in (0, 1]"},
      {"--synthetic smollm2-135m --temperature 0.7 --gpu-sampler maybe", "--gpu-sampler: 'maybe' is not both, on or off"},
      {"--synthetic smollm2-135m --gpu-sampler both", "--gpu-sampler both: the sampler runs only for a temperature"},
      {"--synthetic smollm2-135m --frobnicate 1", "unknown flag '--frobnicate'"},
      {"--synthetic smollm2-135m --peers /nonexistent/peers.json", "--peers: cannot read '/nonexistent/peers.json'"},
      {"--synthetic smollm2-135m --peers " + peers, "is not the output of bench/peers/hf_engine_peers.py"},
  };
  for (const auto& [args, message] : cases) {
    const auto [status, output] = run_bench(args);
    EXPECT_EQ(status, 2) << args << "\n" << output;
    EXPECT_NE(output.find(message), std::string::npos) << args << ": expected \"" << message << "\" in\n" << output;
    // Refused before the device is queried: no device line, no CUDA error.
    EXPECT_EQ(output.find("copy bandwidth"), std::string::npos) << args << "\n" << output;
    EXPECT_EQ(output.find("CUDA error"), std::string::npos) << args << "\n" << output;
  }
  const auto [status, output] = run_bench("--help");
  EXPECT_EQ(status, 0) << output;
  EXPECT_NE(output.find("usage: kc-engine-bench"), std::string::npos) << output;
  EXPECT_NE(output.find("--one-launch-mlp"), std::string::npos) << output;
  EXPECT_NE(output.find("--decode-rope-rung"), std::string::npos) << output;
  EXPECT_NE(output.find("--int4-link-rung"), std::string::npos) << output;
  EXPECT_NE(output.find("--gguf-link-rung"), std::string::npos) << output;
  EXPECT_NE(output.find("--spread-links"), std::string::npos) << output;
  EXPECT_NE(output.find("--gemv-first-trip"), std::string::npos) << output;
  EXPECT_NE(output.find("--gpu-sampler"), std::string::npos) << output;
  EXPECT_NE(output.find("--l2-warm-mib"), std::string::npos) << output;
}

}  // namespace
