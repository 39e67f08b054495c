// The Llama-family config from Hugging Face config.json and from GGUF metadata, on the published
// hyperparameters of SmolLM2-135M and Llama-3.2-1B, and every refusal the validation makes.
#include "kc/engine/model_config.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "kc/engine/gguf.hpp"
#include "support/gguf_writer.hpp"
#include "support/published_configs.hpp"
#include "support/test_files.hpp"

namespace kc::engine {
namespace {

using namespace test_support;
using nlohmann::json;

// `base` (a config.json text) with the fields of `patch` replaced, added, or removed (null).
std::string patched(const char* base, const json& patch) {
  json config = json::parse(base);
  for (const auto& [key, value] : patch.items()) {
    if (value.is_null())
      config.erase(key);
    else
      config[key] = value;
  }
  return config.dump();
}

std::string config_error(const std::string& text) {
  return error_of([&] { parse_hf_config(text, "config.json"); });
}

TEST(ModelConfig, ReadsSmolLM2_135M) {
  TempDir dir;
  const ModelConfig c = read_hf_config(dir.write_text("config.json", kSmolLM2_135MConfigJson));
  expect_smollm2_135m_shape(c);
  EXPECT_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_EQ(c.bos_token_id, 0);
  EXPECT_EQ(c.eos_token_ids, std::vector<std::int64_t>{0});
  EXPECT_EQ(c.dtype, "bfloat16");
}

TEST(ModelConfig, ReadsLlama32_1BWithLlama3RopeScaling) {
  const ModelConfig c = parse_hf_config(kLlama32_1BConfigJson, "config.json");
  EXPECT_EQ(c.hidden_size, 2048);
  EXPECT_EQ(c.intermediate_size, 8192);
  EXPECT_EQ(c.num_layers, 16);
  EXPECT_EQ(c.num_heads, 32);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.vocab_size, 128256);
  EXPECT_EQ(c.max_position_embeddings, 131072);
  EXPECT_EQ(c.rope_theta, 500000.0);
  ASSERT_TRUE(c.rope_scaling.has_value());
  EXPECT_EQ(c.rope_scaling->type, "llama3");
  EXPECT_EQ(c.rope_scaling->factor, 32.0);
  EXPECT_EQ(c.rope_scaling->low_freq_factor, 1.0);
  EXPECT_EQ(c.rope_scaling->high_freq_factor, 4.0);
  EXPECT_EQ(c.rope_scaling->original_max_position_embeddings, 8192);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.bos_token_id, 128000);
  EXPECT_EQ(c.eos_token_ids, std::vector<std::int64_t>{128001});
}

TEST(ModelConfig, ReadsTheVariantsConfigsComeIn) {
  // Llama-3.2-1B-Instruct lists three end tokens.
  ModelConfig c = parse_hf_config(
      patched(kLlama32_1BConfigJson, {{"eos_token_id", {128001, 128008, 128009}}}), "config.json");
  EXPECT_EQ(c.eos_token_ids, (std::vector<std::int64_t>{128001, 128008, 128009}));
  // Newer transformers write "dtype"; older rope_scaling wrote "type".
  c = parse_hf_config(
      patched(kSmolLM2_135MConfigJson, {{"torch_dtype", nullptr}, {"dtype", "float32"}}),
      "config.json");
  EXPECT_EQ(c.dtype, "float32");
  json legacy = json::parse(kLlama32_1BConfigJson);
  legacy["rope_scaling"].erase("rope_type");
  legacy["rope_scaling"]["type"] = "llama3";
  EXPECT_EQ(parse_hf_config(legacy.dump(), "config.json").rope_scaling->factor, 32.0);
  // rope_type "default" is plain RoPE; no bos/eos is allowed.
  legacy["rope_scaling"] = {{"rope_type", "default"}};
  c = parse_hf_config(legacy.dump(), "config.json");
  EXPECT_FALSE(c.rope_scaling.has_value());
  c = parse_hf_config(
      patched(kSmolLM2_135MConfigJson, {{"bos_token_id", nullptr}, {"eos_token_id", nullptr}}),
      "config.json");
  EXPECT_FALSE(c.bos_token_id.has_value());
  EXPECT_TRUE(c.eos_token_ids.empty());
  // No model_type: the class name decides.
  EXPECT_EQ(parse_hf_config(patched(kSmolLM2_135MConfigJson, {{"model_type", nullptr}}), "c")
                .architecture,
            "llama");
}

TEST(ModelConfig, PublishedConfigurationsByName) {
  const ModelConfig c = published_model_config("llama-3.1-8b");
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.intermediate_size, 14336);
  EXPECT_EQ(c.num_layers, 32);
  EXPECT_EQ(c.num_heads, 32);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.vocab_size, 128256);
  EXPECT_FALSE(c.tie_word_embeddings);
  ASSERT_TRUE(c.rope_scaling.has_value());
  EXPECT_EQ(c.rope_scaling->factor, 8.0);
  expect_smollm2_135m_shape(published_model_config("smollm2-135m"));
  EXPECT_EQ(published_model_config("llama-3.2-1b").num_layers, 16);
  EXPECT_EQ(published_model_names().size(), 3u);
  EXPECT_NE(error_of([] { published_model_config("llama-2-7b"); }).find("known: smollm2-135m"), std::string::npos);
}

// transformers 5 writes rope_theta and the scaling inside "rope_parameters"; a file may carry
// both forms, which must then agree.
TEST(ModelConfig, ReadsTransformers5RopeParameters) {
  json config = json::parse(kLlama32_1BConfigJson);
  json parameters = config["rope_scaling"];
  parameters["rope_theta"] = 500000.0;
  config.erase("rope_scaling");
  config.erase("rope_theta");
  config["rope_parameters"] = parameters;
  ModelConfig c = parse_hf_config(config.dump(), "config.json");
  EXPECT_EQ(c.rope_theta, 500000.0);
  ASSERT_TRUE(c.rope_scaling.has_value());
  EXPECT_EQ(c.rope_scaling->factor, 32.0);
  EXPECT_EQ(c.rope_scaling->original_max_position_embeddings, 8192);
  config["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 100000.0}};
  c = parse_hf_config(config.dump(), "config.json");
  EXPECT_EQ(c.rope_theta, 100000.0);
  EXPECT_FALSE(c.rope_scaling.has_value());
  config["rope_theta"] = 10000.0;  // both forms, disagreeing
  EXPECT_NE(config_error(config.dump()).find("disagree"), std::string::npos);
  config["rope_theta"] = 100000.0;
  config["rope_scaling"] = parameters;  // llama3 here, default in rope_parameters
  EXPECT_NE(config_error(config.dump()).find("different RoPE scalings"), std::string::npos);
  config["rope_parameters"] = {{"rope_type", "yarn"}};
  EXPECT_NE(config_error(config.dump()).find("not supported"), std::string::npos);
}

TEST(ModelConfig, AppliesTransformersDefaults) {
  const ModelConfig c = parse_hf_config(R"({"model_type": "llama", "hidden_size": 64,
      "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
      "vocab_size": 100})",
                                        "config.json");
  EXPECT_EQ(c.num_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.max_position_embeddings, 2048);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_TRUE(c.dtype.empty());
}

TEST(ModelConfig, RefusesInvalidShapes) {
  EXPECT_TRUE(
      contains_all(config_error(patched(kSmolLM2_135MConfigJson, {{"num_attention_heads", 7}})),
                   {"config.json", "num_attention_heads (7) does not divide hidden_size (576)"}));
  EXPECT_TRUE(
      contains_all(config_error(patched(kSmolLM2_135MConfigJson, {{"num_key_value_heads", 2}})),
                   {"num_key_value_heads (2) does not divide num_attention_heads (9)"}));
  EXPECT_TRUE(
      contains_all(config_error(patched(kSmolLM2_135MConfigJson, {{"num_key_value_heads", 0}})),
                   {"num_key_value_heads is 0; it must be positive"}));
  EXPECT_TRUE(
      contains_all(config_error(patched(kSmolLM2_135MConfigJson, {{"num_hidden_layers", -1}})),
                   {"num_hidden_layers is -1"}));
  EXPECT_TRUE(contains_all(config_error(patched(kLlama32_1BConfigJson, {{"head_dim", 63}})),
                           {"head_dim is 63; it must be positive and even"}));
  EXPECT_TRUE(contains_all(config_error(patched(kSmolLM2_135MConfigJson, {{"rms_norm_eps", 0}})),
                           {"rms_norm_eps is 0"}));
  EXPECT_TRUE(
      contains_all(config_error(patched(kSmolLM2_135MConfigJson, {{"eos_token_id", 49152}})),
                   {"eos_token_id 49152 lies outside the vocabulary of 49152 tokens"}));
  json scaling = json::parse(kLlama32_1BConfigJson);
  scaling["rope_scaling"]["high_freq_factor"] = 0.5;
  EXPECT_TRUE(contains_all(config_error(scaling.dump()), {"high_freq_factor > low_freq_factor"}));
}

TEST(ModelConfig, RefusesUnsupportedModels) {
  EXPECT_TRUE(
      contains_all(config_error(patched(kSmolLM2_135MConfigJson, {{"model_type", "qwen2"}})),
                   {"config.json", "model_type \"qwen2\" is not supported", "Llama family"}));
  EXPECT_TRUE(contains_all(
      config_error(patched(kSmolLM2_135MConfigJson,
                           {{"model_type", nullptr}, {"architectures", {"GPT2LMHeadModel"}}})),
      {"the engine runs the Llama family only"}));
  json yarn = json::parse(kLlama32_1BConfigJson);
  yarn["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  EXPECT_TRUE(
      contains_all(config_error(yarn.dump()), {"rope_scaling type \"yarn\" is not supported"}));
  json partial = json::parse(kLlama32_1BConfigJson);
  partial["rope_scaling"].erase("factor");
  EXPECT_TRUE(contains_all(config_error(partial.dump()),
                           {"\"rope_scaling\" of type llama3 has no \"factor\""}));
}

// quantization_config as transformers writes it for GPTQ (GPTQConfig) and AWQ (AwqConfig).
json gptq_config() {
  return json::parse(R"({"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": false,
                         "sym": true, "damp_percent": 0.01, "true_sequential": true,
                         "checkpoint_format": "gptq"})");
}
json awq_config() {
  return json::parse(R"({"quant_method": "awq", "bits": 4, "group_size": 64, "zero_point": true,
                         "version": "GEMM", "modules_to_not_convert": null})");
}

TEST(ModelConfig, ReadsGptqAndAwqQuantizationConfigs) {
  EXPECT_FALSE(parse_hf_config(kSmolLM2_135MConfigJson, "config.json").quantization.has_value());
  EXPECT_FALSE(parse_hf_config(patched(kSmolLM2_135MConfigJson, {{"quantization_config", nullptr}}), "c")
                   .quantization.has_value());
  ModelConfig c = parse_hf_config(patched(kSmolLM2_135MConfigJson, {{"quantization_config", gptq_config()}}), "c");
  ASSERT_TRUE(c.quantization.has_value());
  EXPECT_EQ(c.quantization->method, "gptq");
  EXPECT_EQ(c.quantization->checkpoint_format, "gptq");
  EXPECT_EQ(c.quantization->group_size, 128);
  EXPECT_FALSE(c.quantization->desc_act);
  json v2 = gptq_config();
  v2["checkpoint_format"] = "gptq_v2";
  v2["group_size"] = -1;
  v2["desc_act"] = true;
  c = parse_hf_config(patched(kSmolLM2_135MConfigJson, {{"quantization_config", v2}}), "c");
  EXPECT_EQ(c.quantization->checkpoint_format, "gptq_v2");
  EXPECT_EQ(c.quantization->group_size, -1);
  EXPECT_TRUE(c.quantization->desc_act);
  json v1_default = gptq_config();
  v1_default.erase("checkpoint_format");  // older GPTQ configs: v1
  c = parse_hf_config(patched(kSmolLM2_135MConfigJson, {{"quantization_config", v1_default}}), "c");
  EXPECT_EQ(c.quantization->checkpoint_format, "gptq");
  c = parse_hf_config(patched(kSmolLM2_135MConfigJson, {{"quantization_config", awq_config()}}), "c");
  EXPECT_EQ(c.quantization->method, "awq");
  EXPECT_EQ(c.quantization->checkpoint_format, "awq");
  EXPECT_EQ(c.quantization->group_size, 64);
  json autoawq = json::parse(R"({"quant_method": "awq", "w_bit": 4, "q_group_size": 32})");  // AutoAWQ's keys
  c = parse_hf_config(patched(kSmolLM2_135MConfigJson, {{"quantization_config", autoawq}}), "c");
  EXPECT_EQ(c.quantization->group_size, 32);
}

TEST(ModelConfig, ReadsTheQuantizationFilesOfAutoGptqAndAutoAwq) {
  // AutoGPTQ's quantize_config.json, older form: no quant_method, no checkpoint_format.
  WeightQuantization q = parse_quantization_file(
      R"({"bits": 4, "group_size": 64, "damp_percent": 0.01, "desc_act": false, "static_groups": false,
          "sym": true, "true_sequential": true, "model_name_or_path": null, "model_file_base_name": null})",
      "quantize_config.json", "gptq");
  EXPECT_EQ(q.method, "gptq");
  EXPECT_EQ(q.checkpoint_format, "gptq");
  EXPECT_EQ(q.group_size, 64);
  // AutoAWQ's quant_config.json.
  q = parse_quantization_file(R"({"zero_point": true, "q_group_size": 128, "w_bit": 4, "version": "GEMM"})",
                              "quant_config.json", "awq");
  EXPECT_EQ(q.method, "awq");
  EXPECT_EQ(q.checkpoint_format, "awq");
  EXPECT_EQ(q.group_size, 128);
  EXPECT_TRUE(contains_all(error_of([] { parse_quantization_file(R"({"bits": 8, "group_size": 128})", "quantize_config.json", "gptq"); }),
                           {"quantize_config.json", "bits is 8"}));
  EXPECT_TRUE(contains_all(error_of([] { parse_quantization_file("[4]", "quant_config.json", "awq"); }),
                           {"quant_config.json", "a quantization config is a JSON object, not an array"}));
}

TEST(ModelConfig, RefusesQuantizationItCannotRead) {
  const auto error = [](const json& quantization) {
    return config_error(patched(kSmolLM2_135MConfigJson, {{"quantization_config", quantization}}));
  };
  EXPECT_TRUE(contains_all(error(json::parse(R"({"quant_method": "bitsandbytes", "load_in_4bit": true})")),
                           {"config.json", "quant_method \"bitsandbytes\" is not read", "GPTQ", "AWQ"}));
  EXPECT_TRUE(contains_all(error(json::parse(R"({"bits": 4})")), {"quant_method \"\" is not read"}));
  json eight = gptq_config();
  eight["bits"] = 8;
  EXPECT_TRUE(contains_all(error(eight), {"bits is 8", "4-bit gptq weights only"}));
  json marlin = gptq_config();
  marlin["checkpoint_format"] = "marlin";
  EXPECT_TRUE(contains_all(error(marlin), {"checkpoint_format \"marlin\" is not read"}));
  json int16_words = gptq_config();
  int16_words["pack_dtype"] = "int16";
  EXPECT_TRUE(contains_all(error(int16_words), {"pack_dtype \"int16\" is not read", "int32 word"}));
  json int32_words = gptq_config();
  int32_words["pack_dtype"] = "int32";
  EXPECT_NO_THROW(parse_hf_config(patched(kSmolLM2_135MConfigJson, {{"quantization_config", int32_words}}), "c"));
  json zero_group = gptq_config();
  zero_group["group_size"] = 0;
  EXPECT_TRUE(contains_all(error(zero_group), {"group_size is 0"}));
  json gemv = awq_config();
  gemv["version"] = "gemv";
  EXPECT_TRUE(contains_all(error(gemv), {"version \"gemv\" is not read", "\"gemm\" packing"}));
  json no_zero = awq_config();
  no_zero["zero_point"] = false;
  EXPECT_TRUE(contains_all(error(no_zero), {"zero_point is false"}));
  json mistyped = gptq_config();
  mistyped["desc_act"] = "no";
  EXPECT_TRUE(contains_all(error(mistyped), {"\"desc_act\" is a string, not true or false"}));
  EXPECT_TRUE(contains_all(error(json::array()), {"\"quantization_config\" is an array, not an object or null"}));
}

TEST(ModelConfig, RefusesMistypedFieldsAndBadJson) {
  EXPECT_TRUE(
      contains_all(config_error(patched(kSmolLM2_135MConfigJson, {{"hidden_size", nullptr}})),
                   {"\"hidden_size\" is missing"}));
  EXPECT_TRUE(contains_all(config_error(patched(kSmolLM2_135MConfigJson, {{"hidden_size", "576"}})),
                           {"\"hidden_size\" is a string (\"576\"), not an integer"}));
  EXPECT_TRUE(contains_all(config_error(patched(kSmolLM2_135MConfigJson, {{"hidden_size", 576.5}})),
                           {"\"hidden_size\" is a floating-point number (576.5), not an integer"}));
  EXPECT_TRUE(contains_all(config_error(patched(kSmolLM2_135MConfigJson, {{"rope_theta", "big"}})),
                           {"\"rope_theta\" is a string (\"big\"), not a number"}));
  EXPECT_TRUE(
      contains_all(config_error(patched(kSmolLM2_135MConfigJson, {{"tie_word_embeddings", 1}})),
                   {"\"tie_word_embeddings\" is an integer, not true or false"}));
  EXPECT_TRUE(
      contains_all(config_error(patched(kSmolLM2_135MConfigJson, {{"eos_token_id", {1, "two"}}})),
                   {"an eos_token_id is a string"}));
  EXPECT_TRUE(contains_all(config_error(R"({"hidden_size": 576,})"),
                           {"config.json: at byte", "invalid JSON"}));
  EXPECT_TRUE(contains_all(config_error(R"({"hidden_size": 576, "hidden_size": 640})"),
                           {"the key \"hidden_size\" twice"}));
  EXPECT_TRUE(contains_all(config_error("[]"), {"a config.json is a JSON object, not an array"}));
  TempDir dir;
  EXPECT_TRUE(contains_all(error_of([&] { read_hf_config(dir.path("config.json")); }),
                           {"cannot open", "config.json"}));
}

// --- GGUF metadata ----------------------------------------------------------------------------

using Keys = std::vector<std::pair<std::string, Value>>;

// SmolLM2-135M's llama.* keys as llama.cpp's converter writes them: counts as uint32 (or as
// uint64, the spec's default, which a reader must take as well).
Keys smollm2_keys(bool counts_as_uint64 = false) {
  const auto count = [&](std::uint32_t n) { return counts_as_uint64 ? v_u64(n) : v_u32(n); };
  return {{"general.architecture", v_string("llama")},
          {"llama.block_count", count(30)},
          {"llama.context_length", count(8192)},
          {"llama.embedding_length", count(576)},
          {"llama.feed_forward_length", count(1536)},
          {"llama.attention.head_count", count(9)},
          {"llama.attention.head_count_kv", count(3)},
          {"llama.rope.freq_base", v_f32(100000.0f)},
          {"llama.attention.layer_norm_rms_epsilon", v_f32(1e-5f)},
          {"llama.rope.dimension_count", count(64)},
          {"llama.vocab_size", count(49152)},
          {"tokenizer.ggml.bos_token_id", count(1)},
          {"tokenizer.ggml.eos_token_id", count(2)}};
}

// `keys` with `key` dropped, or replaced by `replacement`.
Keys edited(Keys keys, const std::string& key, const Value* replacement = nullptr) {
  for (auto it = keys.begin(); it != keys.end(); ++it)
    if (it->first == key) {
      if (replacement != nullptr)
        it->second = *replacement;
      else
        keys.erase(it);
      break;
    }
  return keys;
}

// A GGUF file of those keys and a token embedding (so it has a tensor, and no output.weight).
GgufWriter gguf_of(const Keys& keys) {
  GgufWriter writer;
  for (const auto& [key, value] : keys) writer.add(key, value);
  writer.add_tensor({"token_embd.weight", {576, 1}, 0, std::vector<std::byte>(576 * 4), {}});
  return writer;
}

ModelConfig gguf_config(const GgufWriter& writer) {
  TempDir dir;
  const GgufFile file(dir.write("model.gguf", writer.build().bytes));
  return model_config_from_gguf(file);
}

std::string gguf_config_error(const GgufWriter& writer) {
  TempDir dir;
  const std::string path = dir.write("model.gguf", writer.build().bytes);
  const GgufFile file(path);
  const std::string message = error_of([&] { model_config_from_gguf(file); });
  EXPECT_TRUE(contains_all(message, {path}));
  return message;
}

// Inputs fuzz/fuzz_model_config found (minimized in fuzz/regressions/): before the fixes, the
// first escaped as nlohmann's out_of_range instead of a kc::Error, and JSON nested 200000 deep
// overflowed the stack in the error message's dump().
TEST(ModelConfig, RefusesWhatTheFuzzerFound) {
  const std::string dir = KC_FUZZ_REGRESSIONS;
  const std::string overflow = dir + "/config_number_past_double.json";
  EXPECT_TRUE(contains_all(error_of([&] { read_hf_config(overflow); }),
                           {overflow, "invalid JSON", "number overflow", "1e705"}));
  const std::string nested = dir + "/config_nested_too_deep.json";
  EXPECT_TRUE(contains_all(error_of([&] { read_hf_config(nested); }),
                           {nested, "nests objects and arrays more than 64 deep"}));
  const std::string deep = R"({"model_type": "llama", "hidden_size": )" +
                           std::string(200000, '[') + std::string(200000, ']') + "}";
  EXPECT_TRUE(contains_all(config_error(deep), {"more than 64 deep"}));
  // 64 levels are still read (the value is refused for its type, not its depth).
  const std::string deepest_allowed = R"({"model_type": "llama", "hidden_size": )" +
                                      std::string(63, '[') + std::string(63, ']') + "}";
  EXPECT_TRUE(contains_all(config_error(deepest_allowed), {"\"hidden_size\" is an array"}));
}

TEST(ModelConfig, FromGgufHasTheShapeConfigJsonGives) {
  for (bool counts_as_uint64 : {false, true}) {
    const ModelConfig c = gguf_config(gguf_of(smollm2_keys(counts_as_uint64)));
    expect_smollm2_135m_shape(c);  // the same checks ReadsSmolLM2_135M makes of config.json
    // The instruct model's GGUF names its own special tokens; config.json is the base model's.
    EXPECT_EQ(c.bos_token_id, 1);
    EXPECT_EQ(c.eos_token_ids, std::vector<std::int64_t>{2});
    EXPECT_TRUE(c.dtype.empty());
  }
  // Without llama.vocab_size, the length of the token list.
  GgufWriter tokens = gguf_of(edited(smollm2_keys(), "llama.vocab_size"));
  std::vector<std::string> vocabulary;
  for (int i = 0; i < 49152; ++i) vocabulary.push_back("t" + std::to_string(i));
  tokens.add("tokenizer.ggml.tokens", v_strings(vocabulary));
  expect_smollm2_135m_shape(gguf_config(tokens));
}

TEST(ModelConfig, FromGgufReadsWhatLlamaCppWrites) {
  GgufWriter writer = gguf_of(smollm2_keys());
  writer.add("tokenizer.ggml.eot_token_id", v_u32(3))
      .add_tensor({"output.weight", {576, 1}, 0, std::vector<std::byte>(576 * 4), {}})
      .add_tensor({"rope_freqs.weight", {32}, 0, std::vector<std::byte>(32 * 4), {}});
  const ModelConfig c = gguf_config(writer);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.rope_freqs_tensor, "rope_freqs.weight");
  EXPECT_EQ(c.eos_token_ids, (std::vector<std::int64_t>{2, 3}));

  // The optional keys left out: no grouping, llama.cpp's default RoPE base, no special tokens.
  Keys minimal = smollm2_keys();
  for (const char* key :
       {"llama.attention.head_count_kv", "llama.rope.freq_base", "llama.rope.dimension_count",
        "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"})
    minimal = edited(minimal, key);
  const ModelConfig m = gguf_config(gguf_of(minimal));
  EXPECT_EQ(m.num_kv_heads, 9);
  EXPECT_EQ(m.head_dim, 64);
  EXPECT_EQ(m.rope_theta, 10000.0);
  EXPECT_FALSE(m.bos_token_id.has_value());
  EXPECT_TRUE(m.eos_token_ids.empty());
}

TEST(ModelConfig, FromGgufRefusesWhatTheEngineCannotRun) {
  const Value qwen = v_string("qwen2");
  EXPECT_TRUE(contains_all(
      gguf_config_error(gguf_of(edited(smollm2_keys(), "general.architecture", &qwen))),
      {"general.architecture is \"qwen2\", which is not supported"}));
  EXPECT_TRUE(
      contains_all(gguf_config_error(gguf_of(edited(smollm2_keys(), "general.architecture"))),
                   {"the metadata key 'general.architecture' is missing"}));
  EXPECT_TRUE(contains_all(gguf_config_error(gguf_of(edited(smollm2_keys(), "llama.block_count"))),
                           {"the metadata key 'llama.block_count' is missing"}));
  const Value text = v_string("30");
  EXPECT_TRUE(
      contains_all(gguf_config_error(gguf_of(edited(smollm2_keys(), "llama.block_count", &text))),
                   {"metadata 'llama.block_count' is a string, not an integer"}));
  const Value kv = v_u32(2);
  EXPECT_TRUE(contains_all(
      gguf_config_error(gguf_of(edited(smollm2_keys(), "llama.attention.head_count_kv", &kv))),
      {"num_key_value_heads (2) does not divide num_attention_heads (9)"}));
  const Value heads = v_u32(7);
  EXPECT_TRUE(contains_all(
      gguf_config_error(gguf_of(edited(smollm2_keys(), "llama.attention.head_count", &heads))),
      {"num_attention_heads (7) does not divide hidden_size (576)"}));
  EXPECT_TRUE(contains_all(gguf_config_error(gguf_of(edited(smollm2_keys(), "llama.vocab_size"))),
                           {"neither 'llama.vocab_size' nor 'tokenizer.ggml.tokens'"}));
  const Value partial = v_u32(32);
  EXPECT_TRUE(contains_all(
      gguf_config_error(gguf_of(edited(smollm2_keys(), "llama.rope.dimension_count", &partial))),
      {"RoPE turns 32 of the 64 dimensions"}));
  GgufWriter yarn = gguf_of(smollm2_keys());
  yarn.add("llama.rope.scaling.type", v_string("yarn"));
  EXPECT_TRUE(contains_all(gguf_config_error(yarn), {"RoPE scaling \"yarn\" is not supported"}));
}

}  // namespace
}  // namespace kc::engine
