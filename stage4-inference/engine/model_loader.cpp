// A model from a path (kc/engine/model_loader.hpp).
#include "kc/engine/model_loader.hpp"

#include <filesystem>
#include <map>
#include <optional>
#include <utility>
#include <nlohmann/json.hpp>

#include "kc/common/error.hpp"
#include "kc/engine/ggml_types.hpp"
#include "kc/engine/gguf.hpp"
#include "kc/engine/mapped_file.hpp"
#include "kc/engine/safetensors.hpp"
#include "strict_json.hpp"

namespace kc::engine {
namespace {

void load_chat_template(LoadedModel& model, const std::string& text, const std::string& source) {
  if (text.empty()) return;
  try {
    model.chat_template = ChatTemplate::recognize(text, source);
  } catch (const Error& error) {
    model.notes.push_back(fmt::format("no chat format: {}", error.what()));
  }
}

// How many projections kept a piece as stored (`Layer` is QuantizedLayer or Int4Layer, the layer
// weights' `kept` member; `output` the output projection's) and their bytes (`bytes_of` a piece's).
template <typename Layer, typename Piece, typename BytesOf>
std::pair<std::size_t, double> count_kept(const ModelWeights& weights, Layer LayerWeights::*kept,
                                          const std::optional<Piece>& output, BytesOf bytes_of) {
  std::size_t count = 0, bytes = 0;
  const auto add = [&](const std::optional<Piece>& piece) {
    if (!piece) return;
    ++count;
    bytes += bytes_of(*piece);
  };
  for (const LayerWeights& layer : weights.layers) {
    const Layer& l = layer.*kept;
    for (const std::optional<Piece>* piece : {&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down}) add(*piece);
  }
  add(output);
  return {count, static_cast<double>(bytes) / (1 << 20)};
}

}  // namespace

LoadedModel load_model(const std::string& path, const WeightLoadOptions& options) {
  namespace fs = std::filesystem;
  LoadedModel model;
  model.path = path;
  require(fs::exists(path), "model '{}' does not exist (a .gguf file or a Hugging Face model directory)", path);
  if (!fs::is_directory(path)) {
    model.format = "gguf";
    const GgufFile file(path);
    const ModelConfig config = model_config_from_gguf(file);
    model.weights = load_model_weights(file, config, options);
    if (!config.rope_freqs_tensor.empty())
      model.rope_freq_factors = file.tensor_to_float(file.tensor(config.rope_freqs_tensor));
    std::map<std::string, int> quantized;
    for (const GgufTensorInfo& tensor : file.tensors())
      if (tensor.type != GgmlType::f32 && tensor.type != GgmlType::f16 && tensor.type != GgmlType::bf16)
        ++quantized[std::string(ggml_type_name(tensor.type))];
    for (const auto& [type, count] : quantized)
      model.notes.push_back(fmt::format("{} {} tensors dequantized to bf16 at load", count, type));
    if (options.keep_quantized_blocks) {
      const auto [kept, mib] = count_kept(model.weights, &LayerWeights::blocks, model.weights.output_blocks,
                                          [](const QuantizedTensor& blocks) { return blocks.bytes.size(); });
      model.notes.push_back(fmt::format("{} projections also kept as stored ({:.1f} MiB of blocks)", kept, mib));
    }
    if (file.find("tokenizer.ggml.model") == nullptr) {
      model.notes.push_back("no tokenizer in the file (tokenizer.ggml.*): token ids only");
      return model;
    }
    model.tokenizer = Tokenizer::from_gguf(file);
    load_chat_template(model, model.tokenizer->chat_template(), path);
    return model;
  }
  model.format = "safetensors";
  const fs::path dir(path);
  ModelConfig config = read_hf_config((dir / "config.json").string());
  // AutoGPTQ and AutoAWQ keep the quantization config in a file of its own, which older
  // checkpoints' config.json does not repeat.
  for (const auto& [file_name, method] : {std::pair<const char*, const char*>{"quantize_config.json", "gptq"},
                                          std::pair<const char*, const char*>{"quant_config.json", "awq"}}) {
    const fs::path file = dir / file_name;
    if (config.quantization || !fs::exists(file)) continue;
    config.quantization = read_quantization_file(file.string(), method);
    model.notes.push_back(fmt::format("the quantization config read from {}", file_name));
  }
  // generation_config.json may list end ids config.json lacks (Llama-3 Instruct's <|eot_id|>),
  // and suggests how to sample, which the notes report (each request says how it samples).
  if (const fs::path generation_file = dir / "generation_config.json"; fs::exists(generation_file)) {
    const GenerationConfig generation = read_generation_config(generation_file.string());
    const std::size_t before = config.eos_token_ids.size();
    merge_generation_config(config, generation, generation_file.string());
    if (config.eos_token_ids.size() > before)
      model.notes.push_back(fmt::format("{} end token id(s) added from generation_config.json",
                                        config.eos_token_ids.size() - before));
    if (generation.do_sample.value_or(false))
      model.notes.push_back(fmt::format(
          "generation_config.json suggests sampling (temperature {}, top_p {}, top_k {}); kc-generate samples "
          "only as its flags say",
          generation.temperature ? fmt::format("{}", *generation.temperature) : std::string("unset"),
          generation.top_p ? fmt::format("{}", *generation.top_p) : std::string("unset"),
          generation.top_k ? fmt::format("{}", *generation.top_k) : std::string("unset")));
  }
  const SafetensorsCheckpoint checkpoint(path);
  model.weights = load_model_weights(checkpoint, config, options);
  if (config.quantization) {
    int packed = 0;
    for (const std::string& name : checkpoint.tensor_names())
      if (name.size() > 8 && name.compare(name.size() - 8, 8, ".qweight") == 0) ++packed;
    const WeightQuantization& q = *config.quantization;
    const std::string group = q.group_size == -1 ? std::string("one group a row") : fmt::format("groups of {}", q.group_size);
    model.notes.push_back(fmt::format("{} projections packed in 4-bit {} ({} packing, {}) dequantized to bf16 at load",
                                      packed, q.method, q.checkpoint_format, group));
    if (options.keep_quantized_blocks) {
      const auto [kept, mib] = count_kept(model.weights, &LayerWeights::groups, model.weights.output_groups,
                                          [](const stage3::Int4GroupHost& groups) {
                                            return groups.qweight.size() + 3 * groups.scales.size();  // + zero bytes
                                          });
      model.notes.push_back(fmt::format("{} projections also kept in 4-bit groups ({:.1f} MiB as stored)", kept, mib));
    }
  }
  const fs::path tokenizer_json = dir / "tokenizer.json";
  if (fs::exists(tokenizer_json)) {
    model.tokenizer = Tokenizer::from_tokenizer_json(tokenizer_json.string());
    const fs::path tokenizer_config = dir / "tokenizer_config.json";
    if (fs::exists(tokenizer_config)) {
      const MappedFile file(tokenizer_config.string());
      const nlohmann::json json = detail::parse_strict_json(
          std::string_view(reinterpret_cast<const char*>(file.data()), file.size()), file.path(), 0);
      if (json.is_object() && json.contains("chat_template") && json["chat_template"].is_string())
        load_chat_template(model, json["chat_template"].get<std::string>(), tokenizer_config.string());
    }
  } else {
    model.notes.push_back("no tokenizer.json: token ids only");
  }
  return model;
}

}  // namespace kc::engine
