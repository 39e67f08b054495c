#include "kc/engine/model_config.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

#include "kc/common/error.hpp"
#include "kc/engine/gguf.hpp"
#include "kc/engine/mapped_file.hpp"
#include "strict_json.hpp"

namespace kc::engine {

namespace {

using nlohmann::json;

constexpr std::string_view kLlama = "llama";

// --- config.json ------------------------------------------------------------------------------

// The fields of one config.json, each read with its type checked and its name in any error.
class HfFields {
 public:
  HfFields(const json& config, const std::string& origin) : config_(config), origin_(origin) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw Error(fmt::format("{}: {}", origin_, what));
  }

  // Present and not null.
  bool has(const char* key) const { return config_.contains(key) && !config_.at(key).is_null(); }

  std::int64_t integer(const json& value, const std::string& what) const {
    if (value.is_number_unsigned() &&
        value.get<std::uint64_t>() >
            static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
      fail(fmt::format("{} is {}, too large", what, value.dump()));
    if (!value.is_number_integer())
      fail(fmt::format("{} is {} ({}), not an integer", what, detail::json_kind(value),
                       value.dump()));
    return value.get<std::int64_t>();
  }

  std::int64_t required_int(const char* key) const {
    if (!has(key)) fail(fmt::format("\"{}\" is missing", key));
    return integer(config_.at(key), fmt::format("\"{}\"", key));
  }

  std::int64_t int_or(const char* key, std::int64_t fallback) const {
    return has(key) ? integer(config_.at(key), fmt::format("\"{}\"", key)) : fallback;
  }

  double number(const json& value, const std::string& what) const {
    if (!value.is_number())
      fail(
          fmt::format("{} is {} ({}), not a number", what, detail::json_kind(value), value.dump()));
    return value.get<double>();
  }

  double number_or(const char* key, double fallback) const {
    return has(key) ? number(config_.at(key), fmt::format("\"{}\"", key)) : fallback;
  }

  bool bool_or(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!config_.at(key).is_boolean())
      fail(fmt::format("\"{}\" is {}, not true or false", key, detail::json_kind(config_.at(key))));
    return config_.at(key).get<bool>();
  }

  std::string string_or(const char* key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    if (!config_.at(key).is_string())
      fail(fmt::format("\"{}\" is {}, not a string", key, detail::json_kind(config_.at(key))));
    return config_.at(key).get<std::string>();
  }

  const json& at(const char* key) const { return config_.at(key); }
  const std::string& origin() const { return origin_; }

 private:
  const json& config_;
  const std::string& origin_;
};

std::string hf_architecture(const HfFields& fields) {
  if (fields.has("model_type")) {
    const std::string model_type = fields.string_or("model_type", "");
    if (model_type != kLlama)
      fields.fail(
          fmt::format("model_type \"{}\" is not supported: the engine runs the Llama "
                      "family (model_type \"llama\")",
                      model_type));
    return model_type;
  }
  // Older configs name only the model class.
  if (fields.has("architectures") && fields.at("architectures").is_array())
    for (const json& name : fields.at("architectures"))
      if (name == "LlamaForCausalLM") return std::string(kLlama);
  fields.fail(
      "neither model_type \"llama\" nor architectures [\"LlamaForCausalLM\"] is given: "
      "the engine runs the Llama family only");
}

// A RoPE scaling object: config.json's "rope_scaling", or transformers 5's "rope_parameters"
// (the same keys plus rope_theta). `name` is its key, for the messages.
std::optional<RopeScaling> hf_rope_scaling(const HfFields& fields, const json& scaling, const char* name) {
  if (!scaling.is_object())
    fields.fail(fmt::format("\"{}\" is {}, not an object or null", name, detail::json_kind(scaling)));
  // transformers writes "rope_type"; older configs wrote "type".
  const char* type_key = scaling.contains("rope_type") ? "rope_type" : "type";
  if (!scaling.contains(type_key) || !scaling.at(type_key).is_string())
    fields.fail(fmt::format("\"{}\" has no \"rope_type\" string", name));
  const std::string type = scaling.at(type_key).get<std::string>();
  if (type == "default") return std::nullopt;
  if (type != "llama3")
    fields.fail(
        fmt::format("{} type \"{}\" is not supported; the engine implements "
                    "\"llama3\" (and plain RoPE)",
                    name, type));
  RopeScaling rope;
  rope.type = type;
  const auto member = [&](const char* key) -> const json& {
    if (!scaling.contains(key) || scaling.at(key).is_null())
      fields.fail(fmt::format("\"{}\" of type llama3 has no \"{}\"", name, key));
    return scaling.at(key);
  };
  rope.factor = fields.number(member("factor"), fmt::format("{} \"factor\"", name));
  rope.low_freq_factor = fields.number(member("low_freq_factor"), fmt::format("{} \"low_freq_factor\"", name));
  rope.high_freq_factor = fields.number(member("high_freq_factor"), fmt::format("{} \"high_freq_factor\"", name));
  rope.original_max_position_embeddings =
      fields.integer(member("original_max_position_embeddings"),
                     fmt::format("{} \"original_max_position_embeddings\"", name));
  return rope;
}

// rope_theta and the scaling. transformers up to 4.x writes "rope_theta" and "rope_scaling"
// (null or an object); transformers 5 writes both inside "rope_parameters". A file with both
// forms must agree.
void hf_rope(const HfFields& fields, ModelConfig& model) {
  model.rope_theta = fields.number_or("rope_theta", 10000.0);
  std::optional<RopeScaling> scaling;
  if (fields.has("rope_scaling")) scaling = hf_rope_scaling(fields, fields.at("rope_scaling"), "rope_scaling");
  if (fields.has("rope_parameters")) {
    const json& parameters = fields.at("rope_parameters");
    const std::optional<RopeScaling> from_parameters = hf_rope_scaling(fields, parameters, "rope_parameters");
    if (parameters.contains("rope_theta")) {
      const double theta = fields.number(parameters.at("rope_theta"), "rope_parameters \"rope_theta\"");
      if (fields.has("rope_theta") && theta != model.rope_theta)
        fields.fail(fmt::format("rope_theta {} and rope_parameters' rope_theta {} disagree", model.rope_theta, theta));
      model.rope_theta = theta;
    }
    if (fields.has("rope_scaling")) {
      const bool same = scaling.has_value() == from_parameters.has_value() &&
                        (!scaling || (scaling->factor == from_parameters->factor &&
                                      scaling->low_freq_factor == from_parameters->low_freq_factor &&
                                      scaling->high_freq_factor == from_parameters->high_freq_factor &&
                                      scaling->original_max_position_embeddings ==
                                          from_parameters->original_max_position_embeddings));
      if (!same) fields.fail("rope_scaling and rope_parameters describe different RoPE scalings");
    }
    scaling = from_parameters;
  }
  model.rope_scaling = scaling;
}

// A 4-bit GPTQ or AWQ quantization config (kc/engine/model_config.hpp), anything else refused:
// the object `q`, named `name` in the messages; `default_method` when it has no "quant_method"
// (the separate files of AutoGPTQ and AutoAWQ may leave it out).
WeightQuantization read_quantization(const HfFields& q, const char* name, const std::string& default_method) {
  const std::string method = q.string_or("quant_method", default_method);
  if (method != "gptq" && method != "awq")
    q.fail(fmt::format("{} quant_method \"{}\" is not read: the engine reads 4-bit GPTQ (\"gptq\") and AWQ "
                       "(\"awq\") checkpoints, and unquantized ones",
                       name, method));
  WeightQuantization out;
  out.method = method;
  const std::int64_t bits = q.int_or("bits", method == "awq" ? q.int_or("w_bit", 0) : 0);
  if (bits != 4) q.fail(fmt::format("{} bits is {}: the engine reads 4-bit {} weights only", name, bits, method));
  out.group_size = q.has("group_size") ? q.required_int("group_size") : q.int_or("q_group_size", 128);
  if (out.group_size != -1 && out.group_size <= 0)
    q.fail(fmt::format("{} group_size is {}: a positive size or -1 (one group a row)", name, out.group_size));
  if (method == "gptq") {
    out.checkpoint_format = q.string_or("checkpoint_format", "gptq");
    if (out.checkpoint_format != "gptq" && out.checkpoint_format != "gptq_v2")
      q.fail(fmt::format("{} checkpoint_format \"{}\" is not read: the engine reads GPTQ's \"gptq\" (v1) and "
                         "\"gptq_v2\" packings",
                         name, out.checkpoint_format));
    out.desc_act = q.bool_or("desc_act", false);
    const std::string pack_dtype = q.string_or("pack_dtype", "int32");  // GPTQModel may pack into other words
    if (pack_dtype != "int32")
      q.fail(fmt::format("{} pack_dtype \"{}\" is not read: the engine reads GPTQ weights packed 8 to an int32 word",
                         name, pack_dtype));
  } else {
    out.checkpoint_format = "awq";
    std::string version = q.string_or("version", "gemm");
    for (char& c : version) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (version != "gemm")
      q.fail(fmt::format("{} version \"{}\" is not read: the engine reads AWQ's \"gemm\" packing (other versions "
                         "order the nibbles differently)",
                         name, q.string_or("version", "")));
    if (!q.bool_or("zero_point", true))
      q.fail(fmt::format("{} zero_point is false: the engine reads AWQ checkpoints with zero points", name));
  }
  return out;
}

// config.json's "quantization_config", when it has one.
std::optional<WeightQuantization> hf_quantization(const HfFields& fields) {
  if (!fields.has("quantization_config")) return std::nullopt;
  const json& config = fields.at("quantization_config");
  if (!config.is_object())
    fields.fail(fmt::format("\"quantization_config\" is {}, not an object or null", detail::json_kind(config)));
  return read_quantization(HfFields(config, fields.origin()), "quantization_config", "");
}

// --- GGUF metadata ----------------------------------------------------------------------------

// The metadata of one GGUF file, each key read with its type checked and named in any error.
class GgufKeys {
 public:
  explicit GgufKeys(const GgufFile& file) : file_(file) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw Error(fmt::format("{}: {}", file_.path(), what));
  }

  std::int64_t integer(const std::string& key) const {
    const GgufValue* value = file_.find(key);
    if (value == nullptr) fail(fmt::format("the metadata key '{}' is missing", key));
    return integer_value(*value, key);
  }

  std::optional<std::int64_t> optional_integer(const std::string& key) const {
    const GgufValue* value = file_.find(key);
    if (value == nullptr) return std::nullopt;
    return integer_value(*value, key);
  }

  double number(const std::string& key, std::optional<double> fallback = std::nullopt) const {
    const GgufValue* value = file_.find(key);
    if (value == nullptr) {
      if (fallback) return *fallback;
      fail(fmt::format("the metadata key '{}' is missing", key));
    }
    if (!value->is_float() && !value->is_integer())
      fail(fmt::format("metadata '{}' is a {}, not a number", key,
                       gguf_value_type_name(value->type())));
    return value->as_double();
  }

  std::optional<std::string_view> optional_string(const std::string& key) const {
    const GgufValue* value = file_.find(key);
    if (value == nullptr) return std::nullopt;
    if (value->type() != GgufValueType::string)
      fail(fmt::format("metadata '{}' is a {}, not a string", key,
                       gguf_value_type_name(value->type())));
    return value->as_string();
  }

 private:
  std::int64_t integer_value(const GgufValue& value, const std::string& key) const {
    if (!value.is_integer())
      fail(fmt::format("metadata '{}' is a {}, not an integer", key,
                       gguf_value_type_name(value.type())));
    if (value.type() == GgufValueType::uint64 &&
        value.as_uint64() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
      fail(fmt::format("metadata '{}' is {}, too large", key, value.as_uint64()));
    return value.as_int64();
  }

  const GgufFile& file_;
};

}  // namespace

// --- config.json ------------------------------------------------------------------------------

namespace {
// config.json's and generation_config.json's "eos_token_id": one integer or a list of them.
std::vector<std::int64_t> eos_ids(const HfFields& fields) {
  std::vector<std::int64_t> ids;
  if (!fields.has("eos_token_id")) return ids;
  const json& eos = fields.at("eos_token_id");
  if (eos.is_array()) {
    for (const json& id : eos) ids.push_back(fields.integer(id, "an eos_token_id"));
  } else {
    ids.push_back(fields.integer(eos, "\"eos_token_id\""));
  }
  return ids;
}
}  // namespace

ModelConfig parse_hf_config(std::string_view json_text, const std::string& origin) {
  const json config = detail::parse_strict_json(json_text, origin, 0);
  if (!config.is_object())
    throw Error(fmt::format("{}: a config.json is a JSON object, not {}", origin,
                            detail::json_kind(config)));
  const HfFields fields(config, origin);

  ModelConfig model;
  model.architecture = hf_architecture(fields);
  model.hidden_size = fields.required_int("hidden_size");
  model.intermediate_size = fields.required_int("intermediate_size");
  model.num_layers = fields.required_int("num_hidden_layers");
  model.num_heads = fields.required_int("num_attention_heads");
  model.num_kv_heads = fields.int_or("num_key_value_heads", model.num_heads);
  model.vocab_size = fields.required_int("vocab_size");
  model.head_dim = fields.has("head_dim") ? fields.required_int("head_dim")
                   : model.num_heads > 0  ? model.hidden_size / model.num_heads
                                          : 0;
  model.max_position_embeddings = fields.int_or("max_position_embeddings", 2048);
  model.rms_norm_eps = fields.number_or("rms_norm_eps", 1e-6);
  hf_rope(fields, model);
  model.tie_word_embeddings = fields.bool_or("tie_word_embeddings", false);
  if (fields.has("bos_token_id")) model.bos_token_id = fields.required_int("bos_token_id");
  model.eos_token_ids = eos_ids(fields);
  // transformers 4.56 renamed torch_dtype to dtype; configs carry one or the other.
  model.dtype = fields.string_or("dtype", fields.string_or("torch_dtype", ""));
  model.quantization = hf_quantization(fields);
  validate_model_config(model, origin);
  return model;
}

ModelConfig read_hf_config(const std::string& path) {
  const MappedFile file(path);
  return parse_hf_config(std::string_view(reinterpret_cast<const char*>(file.data()), file.size()),
                         path);
}

GenerationConfig parse_generation_config(std::string_view json_text, const std::string& origin) {
  const json config = detail::parse_strict_json(json_text, origin, 0);
  if (!config.is_object())
    throw Error(fmt::format("{}: a generation_config.json is a JSON object, not {}", origin, detail::json_kind(config)));
  const HfFields fields(config, origin);
  GenerationConfig generation;
  generation.eos_token_ids = eos_ids(fields);
  if (fields.has("do_sample")) generation.do_sample = fields.bool_or("do_sample", false);
  if (fields.has("temperature")) generation.temperature = fields.number_or("temperature", 1.0);
  if (fields.has("top_p")) generation.top_p = fields.number_or("top_p", 1.0);
  if (fields.has("top_k")) generation.top_k = fields.required_int("top_k");
  return generation;
}

GenerationConfig read_generation_config(const std::string& path) {
  const MappedFile file(path);
  return parse_generation_config(std::string_view(reinterpret_cast<const char*>(file.data()), file.size()), path);
}

void merge_generation_config(ModelConfig& config, const GenerationConfig& generation, const std::string& origin) {
  for (const std::int64_t id : generation.eos_token_ids)
    if (std::find(config.eos_token_ids.begin(), config.eos_token_ids.end(), id) == config.eos_token_ids.end())
      config.eos_token_ids.push_back(id);
  validate_model_config(config, origin);
}

WeightQuantization parse_quantization_file(std::string_view json_text, const std::string& origin,
                                           const std::string& default_method) {
  const json config = detail::parse_strict_json(json_text, origin, 0);
  if (!config.is_object())
    throw Error(fmt::format("{}: a quantization config is a JSON object, not {}", origin, detail::json_kind(config)));
  return read_quantization(HfFields(config, origin), "the quantization config's", default_method);
}

WeightQuantization read_quantization_file(const std::string& path, const std::string& default_method) {
  const MappedFile file(path);
  return parse_quantization_file(std::string_view(reinterpret_cast<const char*>(file.data()), file.size()), path,
                                 default_method);
}

// --- GGUF -------------------------------------------------------------------------------------

ModelConfig model_config_from_gguf(const GgufFile& file) {
  const GgufKeys keys(file);
  ModelConfig model;
  const std::optional<std::string_view> architecture = keys.optional_string("general.architecture");
  if (!architecture) keys.fail("the metadata key 'general.architecture' is missing");
  if (*architecture != kLlama)
    keys.fail(
        fmt::format("general.architecture is \"{}\", which is not supported: the engine "
                    "runs the Llama family (\"llama\")",
                    *architecture));
  model.architecture = std::string(*architecture);
  const std::string prefix = model.architecture + ".";

  model.hidden_size = keys.integer(prefix + "embedding_length");
  model.intermediate_size = keys.integer(prefix + "feed_forward_length");
  model.num_layers = keys.integer(prefix + "block_count");
  model.num_heads = keys.integer(prefix + "attention.head_count");
  model.num_kv_heads =
      keys.optional_integer(prefix + "attention.head_count_kv").value_or(model.num_heads);
  model.max_position_embeddings = keys.integer(prefix + "context_length");
  model.rms_norm_eps = keys.number(prefix + "attention.layer_norm_rms_epsilon");
  model.rope_theta = keys.number(prefix + "rope.freq_base", 10000.0);  // llama.cpp's default

  // The vocabulary: llama.vocab_size when written, else the length of the token list.
  if (const auto vocab = keys.optional_integer(prefix + "vocab_size")) {
    model.vocab_size = *vocab;
  } else if (const GgufValue* tokens = file.find("tokenizer.ggml.tokens")) {
    if (tokens->type() != GgufValueType::array)
      keys.fail(fmt::format("metadata 'tokenizer.ggml.tokens' is a {}, not an array",
                            gguf_value_type_name(tokens->type())));
    model.vocab_size = static_cast<std::int64_t>(tokens->as_array().size());
  } else {
    keys.fail(
        fmt::format("neither '{}vocab_size' nor 'tokenizer.ggml.tokens' gives the "
                    "vocabulary size",
                    prefix));
  }

  // Head size: attention.key_length when written, else hidden / heads (validated below).
  const auto key_length = keys.optional_integer(prefix + "attention.key_length");
  const auto value_length = keys.optional_integer(prefix + "attention.value_length");
  if (key_length && value_length && *key_length != *value_length)
    keys.fail(
        fmt::format("key heads of {} and value heads of {} dimensions: the engine needs "
                    "them equal",
                    *key_length, *value_length));
  model.head_dim = key_length            ? *key_length
                   : value_length        ? *value_length
                   : model.num_heads > 0 ? model.hidden_size / model.num_heads
                                         : 0;
  // RoPE scaling: llama.cpp's converter stores Llama 3's scaling as a tensor of frequency
  // factors (rope_freqs.weight), not as metadata; metadata scaling of other kinds is refused.
  if (const auto scaling = keys.optional_string(prefix + "rope.scaling.type");
      scaling && *scaling != "none")
    keys.fail(
        fmt::format("RoPE scaling \"{}\" is not supported; the engine implements Llama 3's "
                    "(stored as rope_freqs.weight) and plain RoPE",
                    *scaling));
  if (file.find(prefix + "rope.scale_linear") != nullptr &&
      keys.number(prefix + "rope.scale_linear") != 1.0)
    keys.fail("linear RoPE scaling (rope.scale_linear) is not supported");
  if (file.find_tensor("rope_freqs.weight") != nullptr)
    model.rope_freqs_tensor = "rope_freqs.weight";

  model.tie_word_embeddings = file.find_tensor("output.weight") == nullptr;
  model.bos_token_id = keys.optional_integer("tokenizer.ggml.bos_token_id");
  if (const auto eos = keys.optional_integer("tokenizer.ggml.eos_token_id"))
    model.eos_token_ids.push_back(*eos);
  // llama.cpp also stops on the end-of-turn token of chat models.
  if (const auto eot = keys.optional_integer("tokenizer.ggml.eot_token_id");
      eot && (model.eos_token_ids.empty() || model.eos_token_ids.front() != *eot))
    model.eos_token_ids.push_back(*eot);
  validate_model_config(model, file.path());
  // Checked once the head size is known to be sound: GGUF can say that RoPE turns only part of a
  // head (partial rotary embeddings), which the engine does not implement.
  if (const auto rotated = keys.optional_integer(prefix + "rope.dimension_count");
      rotated && *rotated != model.head_dim)
    keys.fail(
        fmt::format("RoPE turns {} of the {} dimensions of a head; the engine rotates "
                    "whole heads only",
                    *rotated, model.head_dim));
  return model;
}

// --- validation -------------------------------------------------------------------------------

void validate_model_config(const ModelConfig& c, const std::string& origin) {
  const auto fail = [&](const std::string& what) {
    throw Error(fmt::format("{}: {}", origin, what));
  };
  if (c.architecture != kLlama)
    fail(fmt::format("architecture \"{}\" is not supported: the engine runs the Llama family",
                     c.architecture));
  const std::pair<const char*, std::int64_t> sizes[] = {
      {"hidden_size", c.hidden_size},
      {"intermediate_size", c.intermediate_size},
      {"num_hidden_layers", c.num_layers},
      {"num_attention_heads", c.num_heads},
      {"num_key_value_heads", c.num_kv_heads},
      {"vocab_size", c.vocab_size},
      {"max_position_embeddings", c.max_position_embeddings},
  };
  for (const auto& [name, value] : sizes)
    if (value <= 0) fail(fmt::format("{} is {}; it must be positive", name, value));
  if (c.hidden_size % c.num_heads != 0)
    fail(
        fmt::format("num_attention_heads ({}) does not divide hidden_size ({}): every head needs "
                    "the same whole number of dimensions",
                    c.num_heads, c.hidden_size));
  if (c.num_heads % c.num_kv_heads != 0)
    fail(
        fmt::format("num_key_value_heads ({}) does not divide num_attention_heads ({}): each "
                    "key/value head must serve a whole group of query heads",
                    c.num_kv_heads, c.num_heads));
  if (c.head_dim <= 0 || c.head_dim % 2 != 0)
    fail(
        fmt::format("head_dim is {}; it must be positive and even (RoPE turns pairs of "
                    "dimensions)",
                    c.head_dim));
  if (!(c.rms_norm_eps > 0.0) || !std::isfinite(c.rms_norm_eps))
    fail(fmt::format("rms_norm_eps is {}; it must be positive and finite", c.rms_norm_eps));
  if (!(c.rope_theta > 0.0) || !std::isfinite(c.rope_theta))
    fail(fmt::format("rope_theta is {}; it must be positive and finite", c.rope_theta));
  if (c.rope_scaling) {
    const RopeScaling& r = *c.rope_scaling;
    if (!(r.factor > 0.0) || !(r.low_freq_factor > 0.0) ||
        !(r.high_freq_factor > r.low_freq_factor))
      fail(
          fmt::format("rope_scaling has factor {}, low_freq_factor {}, high_freq_factor {}: "
                      "llama3 scaling needs all positive and high_freq_factor > low_freq_factor",
                      r.factor, r.low_freq_factor, r.high_freq_factor));
    if (r.original_max_position_embeddings <= 0)
      fail(fmt::format("rope_scaling original_max_position_embeddings is {}; it must be positive",
                       r.original_max_position_embeddings));
  }
  const auto check_token = [&](const char* name, std::int64_t id) {
    if (id < 0 || id >= c.vocab_size)
      fail(fmt::format("{} {} lies outside the vocabulary of {} tokens", name, id, c.vocab_size));
  };
  if (c.bos_token_id) check_token("bos_token_id", *c.bos_token_id);
  for (std::int64_t id : c.eos_token_ids) check_token("eos_token_id", id);
}

}  // namespace kc::engine
