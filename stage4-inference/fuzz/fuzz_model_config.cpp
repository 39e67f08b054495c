// fuzz/fuzz_model_config.cpp — ModelConfig from config.json text (engine/model_config.cpp, strict
// JSON on nlohmann/json) on arbitrary bytes. A config that parses must pass
// validate_model_config() again and keep the properties the engine relies on.
//
//   build/fuzz/stage4-inference/fuzz/fuzz_model_config stage4-inference/fuzz/corpus/fuzz_model_config
#include <string_view>

#include "fuzz_check.hpp"
#include "kc/engine/model_config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  kc::fuzz::expect_kc_errors_only([&] {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    const kc::engine::ModelConfig config = kc::engine::parse_hf_config(text, "fuzz/config.json");
    kc::engine::validate_model_config(config, "fuzz/config.json");
    KC_FUZZ_CHECK(config.num_heads > 0 && config.hidden_size % config.num_heads == 0);
    KC_FUZZ_CHECK(config.num_kv_heads > 0 && config.num_heads % config.num_kv_heads == 0);
    KC_FUZZ_CHECK(config.head_dim > 0 && config.head_dim % 2 == 0);
  });
  return 0;
}
