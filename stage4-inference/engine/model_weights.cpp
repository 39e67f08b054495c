// The weight table from GGUF or safetensors (kc/engine/model_weights.hpp says what it holds and
// why).
//
// Loading is two passes: first every tensor the config calls for is found and its shape checked,
// and every tensor in the file is accounted for, so a wrong file fails before anything is
// converted; then each tensor is converted to float, its rows reordered where it is a GGUF q or k,
// and rounded to bf16.
#include "kc/engine/model_weights.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstring>
#include <functional>
#include <optional>
#include <set>
#include <string_view>
#include <utility>

#include "kc/common/error.hpp"
#include "kc/engine/dequantize.hpp"
#include "kc/engine/gguf.hpp"
#include "kc/engine/safetensors.hpp"

namespace kc::engine {

std::int64_t HostTensor::element_count() const {
  std::int64_t count = 1;
  for (std::int64_t dim : shape) count *= dim;
  return count;
}

float HostTensor::at(std::int64_t row, std::int64_t col) const {
  if (shape.size() != 2 || row < 0 || row >= shape[0] || col < 0 || col >= shape[1])
    throw Error(fmt::format("tensor '{}': element ({}, {}) is outside its shape", name, row, col));
  return bfloat16_to_float(data[static_cast<std::size_t>(row * shape[1] + col)]);
}

std::size_t QuantizedTensor::row_bytes() const {
  const GgmlTypeInfo& info = ggml_type_info(type);
  return static_cast<std::size_t>(shape.at(1) / info.block_elements) * info.block_bytes;
}

const HostTensor& ModelWeights::output_projection() const {
  return config.tie_word_embeddings ? token_embedding : lm_head;
}

std::uint16_t float_to_bfloat16(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u)  // NaN: keep the sign, force a quiet payload bit
    return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);
  // Round to nearest even on the 16 bits dropped (an overflow carries into the exponent, which is
  // the correct rounding up to the next binade or to infinity).
  const std::uint32_t lsb = (bits >> 16) & 1u;
  bits += 0x7FFFu + lsb;
  return static_cast<std::uint16_t>(bits >> 16);
}

namespace {

std::string shape_text(const std::vector<std::int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

// One tensor the table needs: where it goes, what the file calls it, its expected shape (outermost
// first), and for a GGUF q or k the number of heads whose rows llama.cpp's converter permuted.
struct Slot {
  HostTensor* destination;
  std::string name;
  std::string role;  // "layer 3 key projection", for messages
  std::vector<std::int64_t> shape;
  std::int64_t rope_permuted_heads = 0;
  // Where a projection's blocks go when they are kept (WeightLoadOptions::keep_quantized_blocks).
  std::optional<QuantizedTensor>* blocks = nullptr;
  // A projection a GPTQ/AWQ checkpoint may pack in 4-bit groups: where they go when kept.
  std::optional<stage3::Int4GroupHost>* groups = nullptr;
};

// The file-format names of the table's tensors.
struct Naming {
  std::string token_embedding, final_norm, lm_head;
  std::function<std::string(std::int64_t layer, const char* part)> layer;
  // The parts in LayerWeights' order: attn_norm, q, k, v, o, ffn_norm, gate, up, down.
  const char* parts[9];
};

const Naming kGgufNaming{"token_embd.weight",
                         "output_norm.weight",
                         "output.weight",
                         [](std::int64_t layer, const char* part) {
                           return fmt::format("blk.{}.{}.weight", layer, part);
                         },
                         {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm",
                          "ffn_gate", "ffn_up", "ffn_down"}};

const Naming kHfNaming{"model.embed_tokens.weight",
                       "model.norm.weight",
                       "lm_head.weight",
                       [](std::int64_t layer, const char* part) {
                         return fmt::format("model.layers.{}.{}.weight", layer, part);
                       },
                       {"input_layernorm", "self_attn.q_proj", "self_attn.k_proj",
                        "self_attn.v_proj", "self_attn.o_proj", "post_attention_layernorm",
                        "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"}};

// Every tensor the config calls for, in the table's order. `permute_qk`: the file is GGUF.
std::vector<Slot> plan(ModelWeights& weights, const Naming& naming, bool permute_qk) {
  const ModelConfig& c = weights.config;
  const std::int64_t q_rows = c.num_heads * c.head_dim;
  const std::int64_t kv_rows = c.num_kv_heads * c.head_dim;
  std::vector<Slot> slots;
  // A tied model's output projection is the embedding: its blocks are the output's.
  slots.push_back({&weights.token_embedding,
                   naming.token_embedding,
                   "token embedding",
                   {c.vocab_size, c.hidden_size},
                   0,
                   c.tie_word_embeddings ? &weights.output_blocks : nullptr});
  weights.layers.resize(static_cast<std::size_t>(c.num_layers));
  for (std::int64_t l = 0; l < c.num_layers; ++l) {
    LayerWeights& w = weights.layers[static_cast<std::size_t>(l)];
    const auto add = [&](HostTensor& dst, int part, const char* role,
                         std::vector<std::int64_t> shape,
                         std::optional<QuantizedTensor>* blocks = nullptr,
                         std::optional<stage3::Int4GroupHost>* groups = nullptr,
                         std::int64_t permuted_heads = 0) {
      slots.push_back({&dst, naming.layer(l, naming.parts[part]),
                       fmt::format("layer {} {}", l, role), std::move(shape),
                       permute_qk ? permuted_heads : 0, blocks, groups});
    };
    QuantizedLayer& b = w.blocks;
    Int4Layer& g = w.groups;
    add(w.attn_norm, 0, "attention RMSNorm weight", {c.hidden_size});
    add(w.q, 1, "query projection", {q_rows, c.hidden_size}, &b.q, &g.q, c.num_heads);
    add(w.k, 2, "key projection", {kv_rows, c.hidden_size}, &b.k, &g.k, c.num_kv_heads);
    add(w.v, 3, "value projection", {kv_rows, c.hidden_size}, &b.v, &g.v);
    add(w.o, 4, "attention output projection", {c.hidden_size, q_rows}, &b.o, &g.o);
    add(w.ffn_norm, 5, "MLP RMSNorm weight", {c.hidden_size});
    add(w.gate, 6, "MLP gate projection", {c.intermediate_size, c.hidden_size}, &b.gate, &g.gate);
    add(w.up, 7, "MLP up projection", {c.intermediate_size, c.hidden_size}, &b.up, &g.up);
    add(w.down, 8, "MLP down projection", {c.hidden_size, c.intermediate_size}, &b.down, &g.down);
  }
  slots.push_back(
      {&weights.final_norm, naming.final_norm, "final RMSNorm weight", {c.hidden_size}});
  if (!c.tie_word_embeddings)
    slots.push_back({&weights.lm_head,
                     naming.lm_head,
                     "output projection (untied)",
                     {c.vocab_size, c.hidden_size},
                     0,
                     &weights.output_blocks,
                     &weights.output_groups});
  return slots;
}

std::string config_text(const ModelConfig& c) {
  return fmt::format(
      "hidden {}, heads {}, kv heads {}, head_dim {}, intermediate {}, vocab {}, layers {}, "
      "tied embeddings {}",
      c.hidden_size, c.num_heads, c.num_kv_heads, c.head_dim, c.intermediate_size, c.vocab_size,
      c.num_layers, c.tie_word_embeddings ? "yes" : "no");
}

[[noreturn]] void throw_missing(const std::string& origin, const Slot& slot, const ModelConfig& c) {
  throw Error(fmt::format(
      "{}: tensor '{}' ({}, expected shape {}) is missing; a Llama checkpoint with this config "
      "({}) has one — is the file another architecture, or the config for a different model?",
      origin, slot.name, slot.role, shape_text(slot.shape), config_text(c)));
}

void check_shape(const std::string& origin, const Slot& slot,
                 const std::vector<std::int64_t>& found, const std::string& found_note,
                 const ModelConfig& c) {
  if (found == slot.shape) return;
  throw Error(fmt::format(
      "{}: tensor '{}' ({}) has shape {}{}, but the config ({}) expects {}; the file and the "
      "config describe different models",
      origin, slot.name, slot.role, shape_text(found), found_note, config_text(c),
      shape_text(slot.shape)));
}

[[noreturn]] void throw_unexpected(const std::string& origin, const std::string& name,
                                   const ModelConfig& c) {
  throw Error(fmt::format(
      "{}: unexpected tensor '{}': a Llama model with this config ({}) has no such weight, and "
      "the loader refuses tensors it would silently ignore (a different architecture, more "
      "layers than the config says, or biases the engine does not apply)",
      origin, name, config_text(c)));
}

[[noreturn]] void throw_unconvertible(const std::string& origin, const Slot& slot,
                                      const std::string& stored_as, const char* readable) {
  throw Error(
      fmt::format("{}: tensor '{}' ({}) is stored as {}, which the loader cannot convert "
                  "to bf16; it reads {}",
                  origin, slot.name, slot.role, stored_as, readable));
}

// model.layers.N.self_attn.rotary_emb.inv_freq: a buffer older transformers saved, derived from
// rope_theta.
bool is_rotary_inv_freq(const std::string& name) {
  constexpr std::string_view prefix = "model.layers.", suffix = ".self_attn.rotary_emb.inv_freq";
  return name.size() > prefix.size() + suffix.size() &&
         name.compare(0, prefix.size(), prefix) == 0 &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Reorders the rows of a GGUF q or k ([heads * head_dim] rows of `row_bytes` each: floats, or a
// row of blocks) back to Hugging Face's layout: within each head, HF row i * head_dim / 2 + j is
// GGUF row 2j + i.
template <typename T>
std::vector<T> unpermute_rope_rows(const std::vector<T>& gguf, std::int64_t heads,
                                   std::int64_t rows) {
  const std::size_t row_elements = gguf.size() / static_cast<std::size_t>(rows);
  const std::int64_t head_dim = rows / heads;
  const std::int64_t half = head_dim / 2;
  std::vector<T> hf(gguf.size());
  for (std::int64_t h = 0; h < heads; ++h)
    for (std::int64_t i = 0; i < 2; ++i)
      for (std::int64_t j = 0; j < half; ++j) {
        const std::int64_t hf_row = h * head_dim + i * half + j;
        const std::int64_t gguf_row = h * head_dim + 2 * j + i;
        std::memcpy(&hf[static_cast<std::size_t>(hf_row) * row_elements],
                    &gguf[static_cast<std::size_t>(gguf_row) * row_elements],
                    row_elements * sizeof(T));
      }
  return hf;
}

bool is_gemv_block_type(GgmlType type) {
  return type == GgmlType::q4_0 || type == GgmlType::q4_1 || type == GgmlType::q8_0;
}

// The slot's blocks as stored, rows reordered as fill() reorders the bf16 copy.
void keep_blocks(const Slot& slot, const GgufFile& file, const GgufTensorInfo& tensor) {
  const ByteView stored = file.tensor_bytes(tensor);
  QuantizedTensor blocks;
  blocks.name = slot.name;
  blocks.type = tensor.type;
  blocks.shape = slot.shape;
  blocks.bytes.resize(stored.size);
  std::memcpy(blocks.bytes.data(), stored.data, stored.size);
  if (slot.rope_permuted_heads > 0)
    blocks.bytes = unpermute_rope_rows(blocks.bytes, slot.rope_permuted_heads, slot.shape[0]);
  *slot.blocks = std::move(blocks);
}

void fill(const Slot& slot, std::vector<float> values) {
  if (slot.rope_permuted_heads > 0)
    values = unpermute_rope_rows(values, slot.rope_permuted_heads, slot.shape[0]);
  HostTensor& out = *slot.destination;
  out.name = slot.name;
  out.shape = slot.shape;
  out.data.resize(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) out.data[i] = float_to_bfloat16(values[i]);
}

std::vector<std::int64_t> gguf_shape(const GgufTensorInfo& tensor) {
  // dims[0] is innermost: reversed, they are the row-major shape.
  return std::vector<std::int64_t>(tensor.dims.rbegin(), tensor.dims.rend());
}

std::string checkpoint_origin(const SafetensorsCheckpoint& checkpoint) {
  const std::string& first = checkpoint.shards().front()->path();
  if (checkpoint.shards().size() == 1) return first;
  const std::size_t slash = first.find_last_of('/');
  return fmt::format("the checkpoint in {} ({} shards)",
                     slash == std::string::npos ? std::string(".") : first.substr(0, slash),
                     checkpoint.shards().size());
}

// A projection a GPTQ/AWQ checkpoint packs in 4-bit groups (kc/engine/model_weights.hpp): its
// tensors, found and checked.
struct PackedSource {
  const SafetensorsTensor *qweight = nullptr, *qzeros = nullptr, *scales = nullptr, *g_idx = nullptr;
  std::string file, prefix;  // the shard of its qweight; the slot's name without ".weight"
  int group_size = 0;
};

stage3::Int4CheckpointFormat checkpoint_format(const WeightQuantization& q) {
  if (q.checkpoint_format == "awq") return stage3::Int4CheckpointFormat::awq;
  return q.checkpoint_format == "gptq_v2" ? stage3::Int4CheckpointFormat::gptq_v2
                                          : stage3::Int4CheckpointFormat::gptq_v1;
}

// The slot's packed tensors when the checkpoint has <prefix>.qweight, nothing when it has not;
// kc::Error naming the tensor for what the int4 form cannot take.
std::optional<PackedSource> find_packed(const SafetensorsCheckpoint& checkpoint, const Slot& slot,
                                        const ModelConfig& c) {
  constexpr std::string_view kWeight = ".weight";
  if (slot.groups == nullptr || slot.name.size() <= kWeight.size()) return std::nullopt;
  PackedSource p;
  p.prefix = slot.name.substr(0, slot.name.size() - kWeight.size());
  p.qweight = checkpoint.find(p.prefix + ".qweight");
  if (p.qweight == nullptr) return std::nullopt;
  p.file = checkpoint.shard_of(p.prefix + ".qweight").path();
  const auto fail = [&](const std::string& what) {
    throw Error(fmt::format("{}: '{}.qweight' ({}): {}", p.file, p.prefix, slot.role, what));
  };
  if (!c.quantization)
    fail("4-bit packed weights, but config.json has no \"quantization_config\" saying how they are packed");
  const WeightQuantization& q = *c.quantization;
  const bool gptq = q.checkpoint_format != "awq";
  const std::int64_t n = slot.shape[0], k = slot.shape[1];
  const std::int64_t group = q.group_size == -1 ? k : q.group_size;
  if (n % 8 != 0 || k % 8 != 0)
    fail(fmt::format("the projection is {} x {} (out x in); the packing needs both multiples of 8 (8 weights an "
                     "int32 word)",
                     n, k));
  if (group > k || k % group != 0)
    fail(fmt::format("quantization_config group_size {} does not divide in_features {}", group, k));
  stage3::check_int4_group_shape(n, k, static_cast<int>(group),
                                 fmt::format("{}: '{}.qweight' ({})", p.file, p.prefix, slot.role).c_str());
  p.group_size = static_cast<int>(group);
  const auto part = [&](const char* suffix, SafetensorsDType dtype, std::vector<std::int64_t> shape,
                        bool required) -> const SafetensorsTensor* {
    const std::string name = p.prefix + suffix;
    const SafetensorsTensor* tensor = checkpoint.find(name);
    if (tensor == nullptr) {
      if (required)
        throw Error(fmt::format("{}: '{}' ({}) is missing: a {} projection is qweight, qzeros and scales together",
                                p.file, name, slot.role, q.method));
      return nullptr;
    }
    const std::string& file = checkpoint.shard_of(name).path();
    if (tensor->dtype != dtype)
      throw Error(fmt::format("{}: '{}' ({}) is {}; the {} packing stores it as {}", file, name, slot.role,
                              safetensors_dtype_name(tensor->dtype), q.checkpoint_format,
                              safetensors_dtype_name(dtype)));
    const std::vector<std::int64_t> found(tensor->shape.begin(), tensor->shape.end());
    if (found != shape)
      throw Error(fmt::format("{}: '{}' ({}) has shape {}; the {} packing of a {} x {} (out x in) projection in groups "
                              "of {} has {}",
                              file, name, slot.role, shape_text(found), q.checkpoint_format, n, k, group,
                              shape_text(shape)));
    return tensor;
  };
  const std::int64_t groups = k / group;
  p.qweight = part(".qweight", SafetensorsDType::i32,
                   gptq ? std::vector<std::int64_t>{k / 8, n} : std::vector<std::int64_t>{k, n / 8}, true);
  p.qzeros = part(".qzeros", SafetensorsDType::i32, {groups, n / 8}, true);
  p.scales = part(".scales", SafetensorsDType::f16, {groups, n}, true);
  if (gptq) p.g_idx = part(".g_idx", SafetensorsDType::i32, {k}, false);
  return p;
}

// The packed projection in the int4 stored form [N, K] (its words copied out of the mapping, which
// need not be 4-byte aligned).
stage3::Int4GroupHost unpack(const PackedSource& p, const Slot& slot, const ModelConfig& c) {
  const auto words = [](const SafetensorsTensor* tensor) {
    std::vector<std::int32_t> out(static_cast<std::size_t>(tensor->element_count));
    std::memcpy(out.data(), tensor->data.data, out.size() * sizeof(std::int32_t));
    return out;
  };
  const std::vector<std::int32_t> qweight = words(p.qweight), qzeros = words(p.qzeros);
  const std::vector<std::int32_t> g_idx = p.g_idx != nullptr ? words(p.g_idx) : std::vector<std::int32_t>{};
  std::vector<std::uint16_t> scales(static_cast<std::size_t>(p.scales->element_count));
  std::memcpy(scales.data(), p.scales->data.data, scales.size() * sizeof(std::uint16_t));
  stage3::Int4CheckpointTensors t;
  t.qweight = qweight.data();
  t.qzeros = qzeros.data();
  t.scales = scales.data();
  t.g_idx = p.g_idx != nullptr ? g_idx.data() : nullptr;
  t.n = static_cast<int>(slot.shape[0]);
  t.k = static_cast<int>(slot.shape[1]);
  t.group_size = p.group_size;
  return stage3::int4_groups_from_checkpoint(checkpoint_format(*c.quantization), t,
                                             fmt::format("{}: '{}' ({})", p.file, p.prefix, slot.role));
}

}  // namespace

ModelWeights load_model_weights(const GgufFile& file, const ModelConfig& config,
                                const WeightLoadOptions& options) {
  const std::string& origin = file.path();
  validate_model_config(config, origin);
  ModelWeights weights;
  weights.config = config;
  const std::vector<Slot> slots = plan(weights, kGgufNaming, /*permute_qk=*/true);

  std::vector<const GgufTensorInfo*> sources;
  std::set<std::string, std::less<>> expected;
  for (const Slot& slot : slots) {
    const GgufTensorInfo* tensor = file.find_tensor(slot.name);
    if (tensor == nullptr) throw_missing(origin, slot, config);
    check_shape(origin, slot, gguf_shape(*tensor),
                fmt::format(" (GGUF dims, innermost first: [{}])", fmt::join(tensor->dims, ", ")),
                config);
    if (!can_dequantize(tensor->type))
      throw_unconvertible(origin, slot, fmt::format("type {}", ggml_type_name(tensor->type)),
                          "f32, f16, bf16, q8_0, q4_0 and q4_1 (requantize the model to one of "
                          "those)");
    sources.push_back(tensor);
    expected.insert(slot.name);
  }
  for (const GgufTensorInfo& tensor : file.tensors()) {
    if (expected.count(tensor.name) != 0) continue;
    if (!config.rope_freqs_tensor.empty() && tensor.name == config.rope_freqs_tensor) continue;
    if (tensor.name == kGgufNaming.lm_head && config.tie_word_embeddings)
      throw Error(fmt::format(
          "{}: the file has '{}' but the config ties the output projection to the token "
          "embedding; read the config from this file (model_config_from_gguf), which unties it",
          origin, tensor.name));
    throw_unexpected(origin, tensor.name, config);
  }

  for (std::size_t i = 0; i < slots.size(); ++i) {
    fill(slots[i], file.tensor_to_float(*sources[i]));
    if (options.keep_quantized_blocks && slots[i].blocks != nullptr &&
        is_gemv_block_type(sources[i]->type))
      keep_blocks(slots[i], file, *sources[i]);
  }
  return weights;
}

ModelWeights load_model_weights(const SafetensorsCheckpoint& checkpoint, const ModelConfig& config,
                                const WeightLoadOptions& options) {
  const std::string origin = checkpoint_origin(checkpoint);
  validate_model_config(config, origin);
  ModelWeights weights;
  weights.config = config;
  const std::vector<Slot> slots = plan(weights, kHfNaming, /*permute_qk=*/false);

  const auto shape_of = [](const SafetensorsTensor& tensor) {
    return std::vector<std::int64_t>(tensor.shape.begin(), tensor.shape.end());
  };
  std::vector<const SafetensorsTensor*> sources;
  std::vector<std::optional<PackedSource>> packed;  // beside sources: a projection in 4-bit groups
  std::set<std::string, std::less<>> expected;
  for (const Slot& slot : slots) {
    const SafetensorsTensor* tensor = checkpoint.find(slot.name);
    if (std::optional<PackedSource> groups = find_packed(checkpoint, slot, config)) {
      if (tensor != nullptr)
        throw Error(fmt::format("{}: '{}' and '{}.qweight' ({}) are both present: a projection is stored either "
                                "unquantized or packed, not both",
                                checkpoint.shard_of(slot.name).path(), slot.name, groups->prefix, slot.role));
      for (const SafetensorsTensor* part : {groups->qweight, groups->qzeros, groups->scales, groups->g_idx})
        if (part != nullptr) expected.insert(part->name);
      sources.push_back(nullptr);
      packed.push_back(std::move(groups));
      continue;
    }
    packed.emplace_back();
    if (tensor == nullptr) throw_missing(origin, slot, config);
    const std::string& file = checkpoint.shard_of(slot.name).path();
    check_shape(file, slot, shape_of(*tensor), "", config);
    if (tensor->dtype != SafetensorsDType::f32 && tensor->dtype != SafetensorsDType::f16 &&
        tensor->dtype != SafetensorsDType::bf16)
      throw_unconvertible(file, slot,
                          fmt::format("dtype {}", safetensors_dtype_name(tensor->dtype)),
                          "F32, F16 and BF16");
    sources.push_back(tensor);
    expected.insert(slot.name);
  }
  for (const std::string& name : checkpoint.tensor_names()) {
    if (expected.count(name) != 0) continue;
    const std::string file = checkpoint.shard_of(name).path();
    if (is_rotary_inv_freq(name)) continue;
    if (name == kHfNaming.lm_head && config.tie_word_embeddings) {
      // Tied: transformers replaces it with the embedding; only its shape is checked.
      const Slot tied{nullptr,
                      name,
                      "output projection (tied to the embedding)",
                      {config.vocab_size, config.hidden_size}};
      check_shape(file, tied, shape_of(checkpoint.tensor(name)), "", config);
      continue;
    }
    throw_unexpected(file, name, config);
  }

  for (std::size_t i = 0; i < slots.size(); ++i) {
    if (packed[i]) {
      stage3::Int4GroupHost groups = unpack(*packed[i], slots[i], config);
      fill(slots[i], stage3::dequantize_int4_groups_to_float(groups.view()));  // exact, then rounded to bf16
      if (options.keep_quantized_blocks) *slots[i].groups = std::move(groups);
      continue;
    }
    const SafetensorsTensor& tensor = *sources[i];
    const std::size_t count = static_cast<std::size_t>(tensor.element_count);
    if (tensor.dtype == SafetensorsDType::bf16) {
      // Bit for bit: no float round trip (it would quiet signalling NaNs).
      HostTensor& out = *slots[i].destination;
      out.name = slots[i].name;
      out.shape = slots[i].shape;
      out.data.resize(count);
      std::memcpy(out.data.data(), tensor.data.data, count * sizeof(std::uint16_t));
      continue;
    }
    const GgmlType as_ggml = tensor.dtype == SafetensorsDType::f32 ? GgmlType::f32 : GgmlType::f16;
    fill(slots[i], dequantize(as_ggml, tensor.data, count));
  }
  return weights;
}

}  // namespace kc::engine
