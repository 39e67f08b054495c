// kc/engine/model_config.hpp — the shape of a Llama-family model, from a Hugging Face config.json
// or from a GGUF file's metadata.
//
// Both readers fill the same ModelConfig and check it with validate_model_config(), so the engine
// sees one description whichever format the weights came in. Only the Llama architecture is read
// (Llama 2/3, SmolLM2 and other models whose config says model_type "llama"); any other is
// refused by name.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kc::engine {

class GgufFile;

// Llama 3's RoPE frequency scaling (rope_type "llama3"): wavelengths longer than
// original_max_position_embeddings / low_freq_factor are divided by `factor`, those shorter than
// original_max_position_embeddings / high_freq_factor are kept, and those between are blended.
struct RopeScaling {
  std::string type;  // "llama3", the only kind read today
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 1.0;
  std::int64_t original_max_position_embeddings = 0;
};

// A checkpoint whose projections are stored as 4-bit weights in groups, each group with a half
// scale and a 4-bit zero point (config.json's "quantization_config"; GPTQ and AWQ write it). The
// tensors' packings are kc/stage3/int4_groups.hpp's Int4CheckpointFormat; the loader turns them
// into the engine's bf16 copy and, when asked, keeps them for the int4 GEMV
// (kc/engine/model_weights.hpp).
struct WeightQuantization {
  std::string method;  // "gptq" or "awq"
  // How the tensors are packed: "gptq" (GPTQ v1: zero points stored minus one), "gptq_v2" or
  // "awq" (AWQ's GEMM packing, the only one read).
  std::string checkpoint_format;
  std::int64_t group_size = 128;  // weights a group along K; -1: one group a row (G = K)
  bool desc_act = false;          // GPTQ act-order: refused at load unless g_idx is consecutive
};

struct ModelConfig {
  std::string architecture;            // "llama"
  std::int64_t hidden_size = 0;        // model width (GGUF: embedding_length)
  std::int64_t intermediate_size = 0;  // SwiGLU width (GGUF: feed_forward_length)
  std::int64_t num_layers = 0;         // decoder blocks (GGUF: block_count)
  std::int64_t num_heads = 0;          // query heads
  std::int64_t num_kv_heads = 0;       // key/value heads (grouped-query attention)
  std::int64_t head_dim = 0;           // given, else hidden_size / num_heads
  std::int64_t vocab_size = 0;
  std::int64_t max_position_embeddings = 0;  // trained context (GGUF: context_length)
  double rms_norm_eps = 0.0;
  double rope_theta = 0.0;                  // RoPE base (GGUF: rope.freq_base)
  std::optional<RopeScaling> rope_scaling;  // none: plain RoPE
  // GGUF stores Llama 3's scaled RoPE frequencies as a tensor instead of rope_scaling: its name
  // ("rope_freqs.weight") when the file has one, else empty.
  std::string rope_freqs_tensor;
  bool tie_word_embeddings = false;  // the output projection reuses the token embedding
  std::optional<std::int64_t> bos_token_id;
  std::vector<std::int64_t> eos_token_ids;  // config.json may give one id or a list
  std::string dtype;                        // config.json's torch_dtype (or dtype); "" for GGUF
  // Projections in 4-bit groups (GPTQ/AWQ); none: every weight in a float dtype (or GGUF types).
  std::optional<WeightQuantization> quantization;
};

// Reads a Hugging Face config.json. Fields config.json may omit take the defaults of
// transformers' LlamaConfig: num_key_value_heads = num_attention_heads, rms_norm_eps 1e-6,
// rope_theta 10000, max_position_embeddings 2048, tie_word_embeddings false. A
// "quantization_config" is read for 4-bit GPTQ ("quant_method" "gptq", "checkpoint_format" "gptq"
// or "gptq_v2", int32 words) and AWQ ("awq", "version" "gemm", "zero_point" true); any other
// method, bit width or packing is refused by name. Throws kc::Error naming the file and the field for bad JSON, a
// missing or mistyped field, an unsupported architecture, RoPE scaling or quantization, and
// anything validate_model_config() refuses.
ModelConfig read_hf_config(const std::string& path);
// The same from the text of a config.json; `origin` names it in errors.
ModelConfig parse_hf_config(std::string_view json_text, const std::string& origin);

// What a Hugging Face generation_config.json adds to config.json for generation: the ids that
// end a reply (Llama-3 Instruct lists <|eot_id|> here only, not in config.json) and the sampling
// the checkpoint's authors suggest (kept for the caller to report or adopt; the engine samples as
// each request says).
struct GenerationConfig {
  std::vector<std::int64_t> eos_token_ids;  // one id or a list, as in config.json
  std::optional<bool> do_sample;
  std::optional<double> temperature, top_p;
  std::optional<std::int64_t> top_k;
};
// Reads a generation_config.json: its "eos_token_id" (an integer or a list of integers) and
// "do_sample", "temperature", "top_p", "top_k" where present; every other field is ignored.
// kc::Error naming the file and the field for bad JSON or a field of the wrong type.
GenerationConfig read_generation_config(const std::string& path);
GenerationConfig parse_generation_config(std::string_view json_text, const std::string& origin);
// config.json's end ids followed by those of `generation` it lacks, in the order each file gives
// them, then validate_model_config (an id outside the vocabulary is refused, naming `origin`).
void merge_generation_config(ModelConfig& config, const GenerationConfig& generation, const std::string& origin);

// A quantization config kept in a file of its own beside config.json, as AutoGPTQ
// (quantize_config.json) and AutoAWQ (quant_config.json) write them, read by the rules of
// config.json's "quantization_config"; `default_method` ("gptq" or "awq") where the file has no
// "quant_method". kc::Error naming the file as read_hf_config's.
WeightQuantization read_quantization_file(const std::string& path, const std::string& default_method);
WeightQuantization parse_quantization_file(std::string_view json_text, const std::string& origin,
                                           const std::string& default_method);

// Reads the llama.* keys of a GGUF file (and tokenizer.ggml.* for the vocabulary and the special
// tokens). The file has no tie_word_embeddings: it is true when there is no output.weight tensor,
// as llama.cpp decides. Throws kc::Error naming the file and the key.
ModelConfig model_config_from_gguf(const GgufFile& file);

// Checks what the engine relies on: positive sizes, num_heads dividing hidden_size, num_kv_heads
// dividing num_heads, an even head_dim (RoPE turns pairs), positive eps and theta, sane llama3
// factors, special tokens inside the vocabulary. Throws kc::Error naming `origin` otherwise.
void validate_model_config(const ModelConfig& config, const std::string& origin);

}  // namespace kc::engine
