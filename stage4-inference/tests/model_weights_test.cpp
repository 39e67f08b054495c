// The weight table loader: a tiny random Llama (2 layers, 4 query / 2 key-value heads, a
// vocabulary of 100) written by the test writers as safetensors (F32, F16, BF16) and as GGUF
// (F32, F16, BF16, q8_0, q4_0, with q and k permuted as llama.cpp's converter does), loaded, and
// compared value by value; the RoPE layout the loader promises, checked through attention scores;
// and every refusal. With KC_SMOLLM2_GGUF set, the real SmolLM2 GGUF loads with the right shapes.
#include "kc/engine/model_weights.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "kc/engine/dequantize.hpp"
#include "kc/engine/gguf.hpp"
#include "kc/engine/model_loader.hpp"
#include "kc/engine/safetensors.hpp"
#include "support/gguf_writer.hpp"
#include "support/safetensors_writer.hpp"
#include "support/int4_checkpoint_packing.hpp"
#include "support/test_files.hpp"

namespace kc::engine {
namespace {

using test_support::contains_all;
using test_support::error_of;
using test_support::GgufWriter;
using test_support::StTensor;
using test_support::TempDir;

ModelConfig tiny_config(bool tied) {
  ModelConfig c;
  c.architecture = "llama";
  c.hidden_size = 64;
  c.intermediate_size = 96;  // gate/up/down are not square
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 16;
  c.vocab_size = 100;  // not a multiple of 64
  c.max_position_embeddings = 128;
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 10000.0;
  c.tie_word_embeddings = tied;
  return c;
}

// One weight: its HF name, shape (outermost first) and values.
struct Weight {
  std::string hf_name, gguf_name;
  std::vector<std::int64_t> shape;
  std::vector<float> values;
  std::int64_t rope_heads = 0;  // q or k: the heads llama.cpp's converter permutes
};

// Values code * scale with integer codes in [lo, hi]: exact in bf16 (and f16) when the codes fit
// in 8 significant bits, and exact in q8_0 (scale 1/64, codes within +-127) or q4_0 (scale 1/8,
// codes in [-8, 7]) when every block's stored scale is `scale` itself.
struct Codes {
  int lo, hi;
  float scale;
};
constexpr Codes kQ8Codes{-127, 127, 1.0f / 64};
constexpr Codes kQ4Codes{-8, 7, 1.0f / 8};

std::vector<Weight> tiny_model(const ModelConfig& c, Codes codes, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> code(codes.lo, codes.hi);
  std::vector<Weight> model;
  const auto add = [&](std::string hf, std::string gguf, std::vector<std::int64_t> shape,
                       std::int64_t rope_heads = 0) {
    Weight w{std::move(hf), std::move(gguf), std::move(shape), {}, rope_heads};
    std::int64_t n = 1;
    for (std::int64_t d : w.shape) n *= d;
    for (std::int64_t i = 0; i < n; ++i)
      w.values.push_back(static_cast<float>(code(rng)) * codes.scale);
    model.push_back(std::move(w));
  };
  const std::int64_t h = c.hidden_size, q = c.num_heads * c.head_dim,
                     kv = c.num_kv_heads * c.head_dim, f = c.intermediate_size;
  add("model.embed_tokens.weight", "token_embd.weight", {c.vocab_size, h});
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string hf = "model.layers." + std::to_string(l) + ".";
    const std::string gg = "blk." + std::to_string(l) + ".";
    add(hf + "input_layernorm.weight", gg + "attn_norm.weight", {h});
    add(hf + "self_attn.q_proj.weight", gg + "attn_q.weight", {q, h}, c.num_heads);
    add(hf + "self_attn.k_proj.weight", gg + "attn_k.weight", {kv, h}, c.num_kv_heads);
    add(hf + "self_attn.v_proj.weight", gg + "attn_v.weight", {kv, h});
    add(hf + "self_attn.o_proj.weight", gg + "attn_output.weight", {h, q});
    add(hf + "post_attention_layernorm.weight", gg + "ffn_norm.weight", {h});
    add(hf + "mlp.gate_proj.weight", gg + "ffn_gate.weight", {f, h});
    add(hf + "mlp.up_proj.weight", gg + "ffn_up.weight", {f, h});
    add(hf + "mlp.down_proj.weight", gg + "ffn_down.weight", {h, f});
  }
  add("model.norm.weight", "output_norm.weight", {h});
  if (!c.tie_word_embeddings) add("lm_head.weight", "output.weight", {c.vocab_size, h});
  return model;
}

// llama.cpp's LlamaModel.permute, written as its numpy: w.reshape(heads, 2, rows / heads / 2,
// cols).swapaxes(1, 2).reshape(rows, cols) — destination (h, j, i) takes source (h, i, j).
std::vector<float> llama_cpp_permute(const std::vector<float>& w, std::int64_t heads,
                                     std::int64_t rows, std::int64_t cols) {
  const std::int64_t half = rows / heads / 2;
  std::vector<float> out(w.size());
  for (std::int64_t h = 0; h < heads; ++h)
    for (std::int64_t j = 0; j < half; ++j)
      for (std::int64_t i = 0; i < 2; ++i)
        for (std::int64_t col = 0; col < cols; ++col) {
          const std::int64_t dst_row = (h * half + j) * 2 + i;  // index in [heads, half, 2]
          const std::int64_t src_row = (h * 2 + i) * half + j;  // index in [heads, 2, half]
          out[dst_row * cols + col] = w[src_row * cols + col];
        }
  return out;
}

std::uint16_t half_bits(float v) {
  const __half h = __float2half_rn(v);
  std::uint16_t bits;
  std::memcpy(&bits, &h, sizeof bits);
  return bits;
}

// Exact: the test's values are bf16 numbers, whose low 16 bits are zero.
std::uint16_t bf16_bits(float v) {
  std::uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return static_cast<std::uint16_t>(bits >> 16);
}

void put_u16(std::vector<std::byte>& out, std::uint16_t v) {
  out.push_back(static_cast<std::byte>(v & 0xFF));
  out.push_back(static_cast<std::byte>(v >> 8));
}

// The values' bytes as `type` (ggml id or safetensors name below), with every block's scale
// `codes.scale` for the block types.
std::vector<std::byte> encode(GgmlType type, const std::vector<float>& values, Codes codes) {
  std::vector<std::byte> out;
  switch (type) {
    case GgmlType::f32:
      return test_support::f32_bytes(values);
    case GgmlType::f16:
      for (float v : values) put_u16(out, half_bits(v));
      return out;
    case GgmlType::bf16:
      for (float v : values) put_u16(out, bf16_bits(v));
      return out;
    case GgmlType::q8_0:
      for (std::size_t b = 0; b < values.size(); b += 32) {
        put_u16(out, half_bits(codes.scale));
        for (std::size_t i = 0; i < 32; ++i)
          out.push_back(static_cast<std::byte>(
              static_cast<std::int8_t>(std::lround(values[b + i] / codes.scale))));
      }
      return out;
    case GgmlType::q4_0:
      for (std::size_t b = 0; b < values.size(); b += 32) {
        put_u16(out, half_bits(codes.scale));
        for (std::size_t j = 0; j < 16; ++j) {
          const long lo = std::lround(values[b + j] / codes.scale) + 8;
          const long hi = std::lround(values[b + j + 16] / codes.scale) + 8;
          out.push_back(static_cast<std::byte>(lo | (hi << 4)));
        }
      }
      return out;
    case GgmlType::q4_1:  // d = scale, m = lo x scale: nibble = code - lo
      for (std::size_t b = 0; b < values.size(); b += 32) {
        put_u16(out, half_bits(codes.scale));
        put_u16(out, half_bits(static_cast<float>(codes.lo) * codes.scale));
        for (std::size_t j = 0; j < 16; ++j) {
          const long lo = std::lround(values[b + j] / codes.scale) - codes.lo;
          const long hi = std::lround(values[b + j + 16] / codes.scale) - codes.lo;
          out.push_back(static_cast<std::byte>(lo | (hi << 4)));
        }
      }
      return out;
    default:
      ADD_FAILURE() << "the test cannot encode " << ggml_type_name(type);
      return out;
  }
}

std::vector<std::byte> encode_st(const std::string& dtype, const std::vector<float>& values) {
  if (dtype == "F32") return encode(GgmlType::f32, values, {});
  if (dtype == "F16") return encode(GgmlType::f16, values, {});
  return encode(GgmlType::bf16, values, {});
}

std::vector<std::uint64_t> u64_shape(const std::vector<std::int64_t>& shape) {
  return std::vector<std::uint64_t>(shape.begin(), shape.end());
}

std::vector<StTensor> st_tensors(const std::vector<Weight>& model, const std::string& dtype) {
  std::vector<StTensor> tensors;
  for (const Weight& w : model)
    tensors.push_back({w.hf_name, dtype, u64_shape(w.shape), encode_st(dtype, w.values)});
  return tensors;
}

// The GGUF way: names, dims innermost first, q and k rows permuted, norms in f32 (as llama.cpp
// keeps 1-D tensors) and matrices in `type`.
GgufWriter gguf_writer(const std::vector<Weight>& model, GgmlType type, Codes codes) {
  GgufWriter writer;
  for (const Weight& w : model) {
    std::vector<float> values = w.values;
    if (w.rope_heads > 0) values = llama_cpp_permute(values, w.rope_heads, w.shape[0], w.shape[1]);
    const GgmlType stored = w.shape.size() == 1 ? GgmlType::f32 : type;
    writer.add_tensor({w.gguf_name,
                       std::vector<std::uint64_t>(w.shape.rbegin(), w.shape.rend()),
                       static_cast<std::uint32_t>(stored),
                       encode(stored, values, codes),
                       {}});
  }
  return writer;
}

// The llama.* keys of tiny_config (tying is decided by the absence of output.weight).
void add_tiny_config_metadata(GgufWriter& writer) {
  using namespace test_support;
  writer.add("general.architecture", v_string("llama"))
      .add("llama.block_count", v_u32(2))
      .add("llama.context_length", v_u32(128))
      .add("llama.embedding_length", v_u32(64))
      .add("llama.feed_forward_length", v_u32(96))
      .add("llama.attention.head_count", v_u32(4))
      .add("llama.attention.head_count_kv", v_u32(2))
      .add("llama.rope.freq_base", v_f32(10000.0f))
      .add("llama.attention.layer_norm_rms_epsilon", v_f32(1e-5f))
      .add("llama.vocab_size", v_u32(100));
}

ModelWeights load_st(const TempDir& dir, const std::vector<StTensor>& tensors,
                     const ModelConfig& config) {
  const SafetensorsCheckpoint checkpoint(
      dir.write("model.safetensors", test_support::safetensors_file(tensors)));
  return load_model_weights(checkpoint, config);
}

ModelWeights load_gguf(const TempDir& dir, const GgufWriter& writer, const ModelConfig& config) {
  const GgufFile file(dir.write("model.gguf", writer.build().bytes));
  return load_model_weights(file, config);
}

// The table's tensors with the names the model gives them, HF names for both formats.
std::vector<std::pair<const HostTensor*, std::string>> entries(const ModelWeights& w) {
  std::vector<std::pair<const HostTensor*, std::string>> out{
      {&w.token_embedding, "model.embed_tokens.weight"}};
  for (std::size_t l = 0; l < w.layers.size(); ++l) {
    const LayerWeights& x = w.layers[l];
    const std::string p = "model.layers." + std::to_string(l) + ".";
    for (const auto& [t, n] : std::vector<std::pair<const HostTensor*, const char*>>{
             {&x.attn_norm, "input_layernorm"},
             {&x.q, "self_attn.q_proj"},
             {&x.k, "self_attn.k_proj"},
             {&x.v, "self_attn.v_proj"},
             {&x.o, "self_attn.o_proj"},
             {&x.ffn_norm, "post_attention_layernorm"},
             {&x.gate, "mlp.gate_proj"},
             {&x.up, "mlp.up_proj"},
             {&x.down, "mlp.down_proj"}})
      out.push_back({t, p + n + ".weight"});
  }
  out.push_back({&w.final_norm, "model.norm.weight"});
  if (!w.config.tie_word_embeddings) out.push_back({&w.lm_head, "lm_head.weight"});
  return out;
}

// Every tensor of the table holds exactly the model's values (in HF layout) with its shape.
void expect_table_is(const ModelWeights& loaded, const std::vector<Weight>& model) {
  std::map<std::string, const Weight*> by_name;
  for (const Weight& w : model) by_name[w.hf_name] = &w;
  const auto tensors = entries(loaded);
  ASSERT_EQ(tensors.size(), model.size());
  for (const auto& [tensor, hf_name] : tensors) {
    const Weight& w = *by_name.at(hf_name);
    ASSERT_EQ(tensor->shape, w.shape) << hf_name;
    ASSERT_EQ(tensor->data.size(), w.values.size()) << hf_name;
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < w.values.size(); ++i)
      if (tensor->data[i] != bf16_bits(w.values[i])) ++wrong;
    EXPECT_EQ(wrong, 0u) << hf_name << " (" << tensor->name << "): " << wrong << " of "
                         << w.values.size() << " values differ";
  }
  if (loaded.config.tie_word_embeddings) {
    EXPECT_TRUE(loaded.lm_head.data.empty());
    EXPECT_EQ(&loaded.output_projection(), &loaded.token_embedding);
  } else {
    EXPECT_EQ(&loaded.output_projection(), &loaded.lm_head);
  }
}

void expect_same_tables(const ModelWeights& a, const ModelWeights& b) {
  const auto ta = entries(a), tb = entries(b);
  ASSERT_EQ(ta.size(), tb.size());
  for (std::size_t i = 0; i < ta.size(); ++i) {
    EXPECT_EQ(ta[i].first->shape, tb[i].first->shape) << ta[i].second;
    EXPECT_TRUE(ta[i].first->data == tb[i].first->data) << ta[i].second << " differs";
  }
}

// --- Loading ----------------------------------------------------------------------------------

TEST(ModelWeights, SafetensorsAndGgufGiveTheSameTableInEveryFloatType) {
  for (bool tied : {false, true}) {
    const ModelConfig config = tiny_config(tied);
    const std::vector<Weight> model = tiny_model(config, kQ8Codes, tied ? 7u : 11u);
    TempDir dir;
    std::vector<ModelWeights> tables;
    for (const char* dtype : {"F32", "F16", "BF16"}) {
      SCOPED_TRACE(std::string("safetensors ") + dtype + (tied ? " tied" : " untied"));
      tables.push_back(load_st(dir, st_tensors(model, dtype), config));
      expect_table_is(tables.back(), model);
    }
    for (GgmlType type : {GgmlType::f32, GgmlType::f16, GgmlType::bf16, GgmlType::q8_0}) {
      SCOPED_TRACE("GGUF " + std::string(ggml_type_name(type)) + (tied ? " tied" : " untied"));
      tables.push_back(load_gguf(dir, gguf_writer(model, type, kQ8Codes), config));
      expect_table_is(tables.back(), model);
      expect_same_tables(tables.front(), tables.back());
    }
  }
}

TEST(ModelWeights, ShardedSafetensorsCheckpointLoadsTheSameTable) {
  // Layer 0 and the embedding in one shard, the rest in the other, as an index names them.
  const ModelConfig config = tiny_config(false);
  const std::vector<Weight> model = tiny_model(config, kQ8Codes, 17u);
  std::vector<StTensor> first, second;
  nlohmann::json weight_map = nlohmann::json::object();
  for (StTensor& t : st_tensors(model, "BF16")) {
    const bool in_first =
        t.name == "model.embed_tokens.weight" || t.name.rfind("model.layers.0.", 0) == 0;
    const char* shard =
        in_first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
    weight_map[t.name] = shard;
    (in_first ? first : second).push_back(std::move(t));
  }
  TempDir dir;
  dir.write("model-00001-of-00002.safetensors", test_support::safetensors_file(first));
  dir.write("model-00002-of-00002.safetensors", test_support::safetensors_file(second));
  dir.write_text(
      "model.safetensors.index.json",
      nlohmann::json{{"metadata", nlohmann::json::object()}, {"weight_map", weight_map}}.dump());
  const SafetensorsCheckpoint checkpoint(dir.root());
  ASSERT_EQ(checkpoint.shards().size(), 2u);
  expect_table_is(load_model_weights(checkpoint, config), model);

  // A shape error names the shard that holds the tensor; a missing tensor names the checkpoint.
  ModelConfig wider = config;
  wider.intermediate_size = 128;
  EXPECT_TRUE(contains_all(error_of([&] { load_model_weights(checkpoint, wider); }),
                           {"model-00001-of-00002.safetensors",
                            "'model.layers.0.mlp.gate_proj.weight'", "expects [128, 64]"}));
  ModelConfig three_layers = config;
  three_layers.num_layers = 3;
  EXPECT_TRUE(contains_all(error_of([&] { load_model_weights(checkpoint, three_layers); }),
                           {"the checkpoint in " + dir.root() + " (2 shards)",
                            "'model.layers.2.input_layernorm.weight'", "is missing"}));
}

TEST(ModelWeights, Q4_0GgufMatchesTheSafetensorsModel) {
  const ModelConfig config = tiny_config(false);
  const std::vector<Weight> model = tiny_model(config, kQ4Codes, 23u);
  TempDir dir;
  const ModelWeights gguf = load_gguf(dir, gguf_writer(model, GgmlType::q4_0, kQ4Codes), config);
  expect_table_is(gguf, model);
  expect_same_tables(load_st(dir, st_tensors(model, "BF16"), config), gguf);
}

TEST(ModelWeights, QuantizedValuesOffTheGridStayWithinTheFormatsError) {
  // Arbitrary values, quantized as ggml does (scale amax / 127): loaded within half a q8_0 step
  // plus one bf16 rounding of the value.
  ModelConfig config = tiny_config(true);
  std::vector<Weight> model = tiny_model(config, kQ8Codes, 5u);
  std::mt19937 rng(99);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  Weight& up = model[8];  // layer 0 up projection
  ASSERT_EQ(up.gguf_name, "blk.0.ffn_up.weight");
  for (float& v : up.values) v = normal(rng);
  GgufWriter writer;
  std::vector<std::byte> q8;
  std::vector<float> step;
  for (std::size_t b = 0; b < up.values.size(); b += 32) {
    float amax = 0.0f;
    for (std::size_t i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(up.values[b + i]));
    const std::uint16_t d = half_bits(amax / 127.0f);
    put_u16(q8, d);
    for (std::size_t i = 0; i < 32; ++i)
      q8.push_back(static_cast<std::byte>(
          static_cast<std::int8_t>(std::lround(up.values[b + i] / half_to_float(d)))));
    step.push_back(half_to_float(d));
  }
  for (const Weight& w : model) {
    std::vector<float> values = w.values;
    if (w.rope_heads > 0) values = llama_cpp_permute(values, w.rope_heads, w.shape[0], w.shape[1]);
    const bool is_up = &w == &up;
    writer.add_tensor({w.gguf_name,
                       std::vector<std::uint64_t>(w.shape.rbegin(), w.shape.rend()),
                       static_cast<std::uint32_t>(is_up ? GgmlType::q8_0 : GgmlType::f32),
                       is_up ? q8 : test_support::f32_bytes(values),
                       {}});
  }
  TempDir dir;
  const ModelWeights loaded = load_gguf(dir, writer, config);
  const HostTensor& t = loaded.layers[0].up;
  for (std::size_t i = 0; i < up.values.size(); ++i) {
    const float x = up.values[i];
    const float bound = step[i / 32] * (0.5f + 1e-3f) + std::fabs(x) * 0x1p-8f * 1.01f + 1e-7f;
    ASSERT_LE(std::fabs(bfloat16_to_float(t.data[i]) - x), bound) << "element " << i;
  }
}

TEST(ModelWeights, GgufDimsAreInnermostFirst) {
  // gate is [intermediate 96, hidden 64]: GGUF dims [64, 96]. Element (r, c) is the value at
  // r * 64 + c of the data, as in the HF matrix.
  const ModelConfig config = tiny_config(true);
  const std::vector<Weight> model = tiny_model(config, kQ8Codes, 3u);
  TempDir dir;
  const GgufWriter writer = gguf_writer(model, GgmlType::f32, kQ8Codes);
  const GgufFile file(dir.write("model.gguf", writer.build().bytes));
  EXPECT_EQ(file.tensor("blk.1.ffn_gate.weight").dims, (std::vector<std::uint64_t>{64, 96}));
  EXPECT_EQ(file.tensor("blk.1.ffn_down.weight").dims, (std::vector<std::uint64_t>{96, 64}));
  const ModelWeights w = load_model_weights(file, config);
  EXPECT_EQ(w.layers[1].gate.shape, (std::vector<std::int64_t>{96, 64}));
  EXPECT_EQ(w.layers[1].down.shape, (std::vector<std::int64_t>{64, 96}));
  const Weight& gate = model[1 + 9 + 6];
  ASSERT_EQ(gate.hf_name, "model.layers.1.mlp.gate_proj.weight");
  EXPECT_EQ(w.layers[1].gate.at(95, 3), gate.values[95 * 64 + 3]);
  EXPECT_EQ(w.layers[1].gate.at(2, 63), gate.values[2 * 64 + 63]);
}

TEST(ModelWeights, ConfigFromGgufMetadataDecidesTying) {
  for (bool tied : {false, true}) {
    const ModelConfig config = tiny_config(tied);
    const std::vector<Weight> model = tiny_model(config, kQ8Codes, 31u);
    GgufWriter writer = gguf_writer(model, GgmlType::bf16, kQ8Codes);
    add_tiny_config_metadata(writer);
    TempDir dir;
    const GgufFile file(dir.write("model.gguf", writer.build().bytes));
    const ModelConfig from_file = model_config_from_gguf(file);
    EXPECT_EQ(from_file.tie_word_embeddings, tied);
    expect_table_is(load_model_weights(file, from_file), model);
  }
}

// --- The RoPE layout --------------------------------------------------------------------------

TEST(ModelWeights, GgufQkRowsAreUnpermutedToHfLayout) {
  // The permutation itself, on one head of head_dim 4: HF rows r0 r1 | r2 r3 (rotate_half pairs
  // r0 with r2) are stored by llama.cpp as r0 r2 r1 r3 (neighbours pair).
  EXPECT_EQ(llama_cpp_permute({0, 1, 2, 3}, 1, 4, 1), (std::vector<float>{0, 2, 1, 3}));
  EXPECT_EQ(llama_cpp_permute({0, 1, 2, 3, 4, 5, 6, 7}, 2, 8, 1),
            (std::vector<float>{0, 2, 1, 3, 4, 6, 5, 7}));

  const ModelConfig config = tiny_config(false);
  const std::vector<Weight> model = tiny_model(config, kQ8Codes, 41u);
  TempDir dir;
  const ModelWeights hf = load_st(dir, st_tensors(model, "BF16"), config);
  const ModelWeights gguf = load_gguf(dir, gguf_writer(model, GgmlType::bf16, kQ8Codes), config);
  for (int l = 0; l < 2; ++l) {
    EXPECT_TRUE(gguf.layers[l].q.data == hf.layers[l].q.data) << "layer " << l << " q";
    EXPECT_TRUE(gguf.layers[l].k.data == hf.layers[l].k.data) << "layer " << l << " k";
  }
  // Negative control: the file's own row order is not the table's.
  const GgufFile file(dir.path("model.gguf"));
  const std::vector<float> stored = file.tensor_to_float(file.tensor("blk.0.attn_q.weight"));
  EXPECT_NE(stored, model[2].values);
}

// RoPE on one head vector at `position`, in double.
std::vector<double> rope(std::vector<double> x, double position, double theta, bool interleaved) {
  const std::size_t half = x.size() / 2;
  for (std::size_t i = 0; i < half; ++i) {
    const double angle =
        position * std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(x.size()));
    const std::size_t a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + half;
    const double xa = x[a], xb = x[b];
    x[a] = xa * std::cos(angle) - xb * std::sin(angle);
    x[b] = xb * std::cos(angle) + xa * std::sin(angle);
  }
  return x;
}

// Head `head` of W x for a [heads * head_dim, cols] matrix of floats.
std::vector<double> head_of(const std::vector<float>& w, const std::vector<double>& x,
                            std::int64_t head, std::int64_t head_dim) {
  std::vector<double> y(static_cast<std::size_t>(head_dim), 0.0);
  const std::size_t cols = x.size();
  for (std::int64_t r = 0; r < head_dim; ++r)
    for (std::size_t c = 0; c < cols; ++c)
      y[static_cast<std::size_t>(r)] +=
          w[static_cast<std::size_t>(head * head_dim + r) * cols + c] * x[c];
  return y;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

TEST(ModelWeights, LoadedTableWithRotateHalfScoresAsLlamaCppDoesOnTheFile) {
  // llama.cpp applies neighbour-pair RoPE to the file's (permuted) q and k; the engine applies
  // rotate_half to the loaded table. Every attention score q_h(p) . k_g(s) must agree, and with
  // the wrong RoPE on the loaded table it must not (the check can fail).
  const ModelConfig config = tiny_config(false);
  const std::vector<Weight> model = tiny_model(config, kQ8Codes, 53u);
  TempDir dir;
  const GgufWriter writer = gguf_writer(model, GgmlType::f32, kQ8Codes);
  const ModelWeights table = load_gguf(dir, writer, config);
  const GgufFile file(dir.path("model.gguf"));
  const std::vector<float> file_q = file.tensor_to_float(file.tensor("blk.1.attn_q.weight"));
  const std::vector<float> file_k = file.tensor_to_float(file.tensor("blk.1.attn_k.weight"));
  std::vector<float> table_q, table_k;
  for (std::uint16_t b : table.layers[1].q.data) table_q.push_back(bfloat16_to_float(b));
  for (std::uint16_t b : table.layers[1].k.data) table_k.push_back(bfloat16_to_float(b));

  std::mt19937 rng(5);
  std::normal_distribution<double> normal;
  std::vector<double> x_q(64), x_k(64);
  for (double& v : x_q) v = normal(rng);
  for (double& v : x_k) v = normal(rng);
  const double theta = config.rope_theta;
  double worst_right = 0.0, worst_wrong = 0.0;
  for (std::int64_t h = 0; h < 4; ++h) {
    const std::int64_t g = h / 2;  // its key-value head
    for (double p : {0.0, 3.0, 17.0}) {
      for (double s : {1.0, 9.0}) {
        const double llama_cpp = dot(rope(head_of(file_q, x_q, h, 16), p, theta, true),
                                     rope(head_of(file_k, x_k, g, 16), s, theta, true));
        const double engine = dot(rope(head_of(table_q, x_q, h, 16), p, theta, false),
                                  rope(head_of(table_k, x_k, g, 16), s, theta, false));
        const double wrong = dot(rope(head_of(table_q, x_q, h, 16), p, theta, true),
                                 rope(head_of(table_k, x_k, g, 16), s, theta, true));
        const double scale = 1.0 + std::fabs(llama_cpp);
        worst_right = std::max(worst_right, std::fabs(engine - llama_cpp) / scale);
        worst_wrong = std::max(worst_wrong, std::fabs(wrong - llama_cpp) / scale);
      }
    }
  }
  EXPECT_LT(worst_right, 1e-12);
  EXPECT_GT(worst_wrong, 1e-3);
}

// --- Refusals ---------------------------------------------------------------------------------

std::vector<StTensor> without(std::vector<StTensor> tensors, const std::string& name) {
  for (auto it = tensors.begin(); it != tensors.end(); ++it)
    if (it->name == name) {
      tensors.erase(it);
      return tensors;
    }
  ADD_FAILURE() << name << " is not in the model";
  return tensors;
}

TEST(ModelWeights, RefusesAMissingTensor) {
  const ModelConfig config = tiny_config(false);
  const std::vector<StTensor> tensors = st_tensors(tiny_model(config, kQ8Codes, 1u), "BF16");
  TempDir dir;
  EXPECT_TRUE(contains_all(error_of([&] {
                             load_st(dir, without(tensors, "model.layers.1.mlp.up_proj.weight"),
                                     config);
                           }),
                           {"model.safetensors", "tensor 'model.layers.1.mlp.up_proj.weight'",
                            "layer 1 MLP up projection", "expected shape [96, 64]", "is missing"}));
  EXPECT_TRUE(contains_all(
      error_of([&] { load_st(dir, without(tensors, "lm_head.weight"), config); }),
      {"'lm_head.weight'", "output projection (untied)", "is missing", "tied embeddings no"}));
  // GGUF: the model without its last tensor, output.weight.
  std::vector<Weight> model = tiny_model(config, kQ8Codes, 1u);
  ASSERT_EQ(model.back().gguf_name, "output.weight");
  model.pop_back();
  EXPECT_TRUE(contains_all(
      error_of([&] { load_gguf(dir, gguf_writer(model, GgmlType::f32, kQ8Codes), config); }),
      {"model.gguf", "tensor 'output.weight'", "is missing", "expected shape [100, 64]"}));
}

TEST(ModelWeights, RefusesAMisshapedTensorNamingBothShapes) {
  ModelConfig config = tiny_config(true);
  std::vector<StTensor> tensors = st_tensors(tiny_model(config, kQ8Codes, 2u), "F32");
  for (StTensor& t : tensors)
    if (t.name == "model.layers.0.self_attn.k_proj.weight") {
      t.shape = {64, 32};  // transposed
    }
  TempDir dir;
  EXPECT_TRUE(
      contains_all(error_of([&] { load_st(dir, tensors, config); }),
                   {"tensor 'model.layers.0.self_attn.k_proj.weight'", "layer 0 key projection",
                    "has shape [64, 32]", "expects [32, 64]", "kv heads 2", "head_dim 16"}));

  // GGUF: a gate written with its dims in row-major order instead of innermost first.
  std::vector<Weight> model = tiny_model(config, kQ8Codes, 2u);
  GgufWriter writer;
  for (const Weight& w : model) {
    std::vector<std::uint64_t> dims(w.shape.rbegin(), w.shape.rend());
    if (w.gguf_name == "blk.1.ffn_gate.weight") dims = {96, 64};
    std::vector<float> values = w.values;
    if (w.rope_heads > 0) values = llama_cpp_permute(values, w.rope_heads, w.shape[0], w.shape[1]);
    writer.add_tensor({w.gguf_name, dims, 0, test_support::f32_bytes(values), {}});
  }
  EXPECT_TRUE(contains_all(error_of([&] { load_gguf(dir, writer, config); }),
                           {"model.gguf", "tensor 'blk.1.ffn_gate.weight'", "has shape [64, 96]",
                            "GGUF dims, innermost first: [96, 64]", "expects [96, 64]"}));

  // A config with another vocabulary than the file.
  config.vocab_size = 101;
  EXPECT_TRUE(
      contains_all(error_of([&] { load_st(dir, st_tensors(model, "F32"), config); }),
                   {"'model.embed_tokens.weight'", "has shape [100, 64]", "expects [101, 64]"}));
}

TEST(ModelWeights, RefusesUnexpectedTensorsAndAcceptsTheDocumentedExtras) {
  const ModelConfig config = tiny_config(true);
  const std::vector<Weight> model = tiny_model(config, kQ8Codes, 4u);
  TempDir dir;
  // A bias the engine would silently ignore.
  std::vector<StTensor> tensors = st_tensors(model, "BF16");
  tensors.push_back({"model.layers.0.self_attn.q_proj.bias",
                     "BF16",
                     {64},
                     encode_st("BF16", std::vector<float>(64, 1.0f))});
  EXPECT_TRUE(contains_all(error_of([&] { load_st(dir, tensors, config); }),
                           {"unexpected tensor 'model.layers.0.self_attn.q_proj.bias'"}));
  // A third layer the config does not have.
  ModelConfig one_layer = config;
  one_layer.num_layers = 1;
  EXPECT_TRUE(contains_all(error_of([&] { load_st(dir, st_tensors(model, "BF16"), one_layer); }),
                           {"unexpected tensor 'model.layers.1.", "layers 1"}));
  EXPECT_TRUE(contains_all(
      error_of([&] { load_gguf(dir, gguf_writer(model, GgmlType::f32, kQ8Codes), one_layer); }),
      {"unexpected tensor 'blk.1."}));

  // Accepted: inv_freq buffers, and a tied lm_head.weight of the right shape (not loaded).
  tensors = st_tensors(model, "BF16");
  tensors.push_back({"model.layers.1.self_attn.rotary_emb.inv_freq",
                     "F32",
                     {8},
                     encode_st("F32", std::vector<float>(8, 0.5f))});
  tensors.push_back(
      {"lm_head.weight", "BF16", {100, 64}, encode_st("BF16", std::vector<float>(6400, 2.0f))});
  const ModelWeights tied = load_st(dir, tensors, config);
  expect_table_is(tied, model);
  // ... but not one of the wrong shape.
  tensors.back() = {
      "lm_head.weight", "BF16", {100, 32}, encode_st("BF16", std::vector<float>(3200, 2.0f))};
  EXPECT_TRUE(contains_all(
      error_of([&] { load_st(dir, tensors, config); }),
      {"'lm_head.weight'", "tied to the embedding", "has shape [100, 32]", "expects [100, 64]"}));

  // GGUF: output.weight in a file whose config is tied.
  const std::vector<Weight> untied_model = tiny_model(tiny_config(false), kQ8Codes, 4u);
  EXPECT_TRUE(contains_all(
      error_of([&] { load_gguf(dir, gguf_writer(untied_model, GgmlType::f32, kQ8Codes), config); }),
      {"has 'output.weight'", "ties the output projection"}));
  // GGUF: rope_freqs.weight is accepted when the config names it.
  ModelConfig with_freqs = config;
  with_freqs.rope_freqs_tensor = "rope_freqs.weight";
  GgufWriter writer = gguf_writer(model, GgmlType::f32, kQ8Codes);
  writer.add_tensor(
      {"rope_freqs.weight", {8}, 0, test_support::f32_bytes(std::vector<float>(8, 1.0f)), {}});
  expect_table_is(load_gguf(dir, writer, with_freqs), model);
  EXPECT_TRUE(contains_all(error_of([&] { load_gguf(dir, writer, config); }),
                           {"unexpected tensor 'rope_freqs.weight'"}));
}

TEST(ModelWeights, RefusesTypesItCannotConvert) {
  const ModelConfig config = tiny_config(true);
  const std::vector<Weight> model = tiny_model(config, kQ8Codes, 6u);
  TempDir dir;
  std::vector<StTensor> tensors = st_tensors(model, "F32");
  for (StTensor& t : tensors)
    if (t.name == "model.norm.weight") t = {t.name, "I32", {64}, std::vector<std::byte>(256)};
  EXPECT_TRUE(
      contains_all(error_of([&] { load_st(dir, tensors, config); }),
                   {"tensor 'model.norm.weight'", "stored as dtype I32", "F32, F16 and BF16"}));
  // GGUF q5_0 (block 32, 22 bytes): readable, not convertible by the loader.
  GgufWriter writer;
  for (const Weight& w : model) {
    const bool q5 = w.gguf_name == "blk.0.attn_v.weight";
    writer.add_tensor(
        {w.gguf_name,
         std::vector<std::uint64_t>(w.shape.rbegin(), w.shape.rend()),
         q5 ? static_cast<std::uint32_t>(GgmlType::q5_0) : 0u,
         q5 ? std::vector<std::byte>(32 * 64 / 32 * 22) : test_support::f32_bytes(w.values),
         {}});
  }
  EXPECT_TRUE(
      contains_all(error_of([&] { load_gguf(dir, writer, config); }),
                   {"tensor 'blk.0.attn_v.weight'", "stored as type q5_0", "q8_0, q4_0 and q4_1"}));
}

// --- Blocks kept as stored (WeightLoadOptions::keep_quantized_blocks) ---------------------------

// A projection's kept blocks and its bf16 copy, by HF name.
std::vector<std::tuple<std::string, const std::optional<QuantizedTensor>*, const HostTensor*>> kept_blocks(
    const ModelWeights& w) {
  std::vector<std::tuple<std::string, const std::optional<QuantizedTensor>*, const HostTensor*>> out;
  for (std::size_t l = 0; l < w.layers.size(); ++l) {
    const LayerWeights& x = w.layers[l];
    const std::string p = "model.layers." + std::to_string(l) + ".";
    out.emplace_back(p + "self_attn.q_proj", &x.blocks.q, &x.q);
    out.emplace_back(p + "self_attn.k_proj", &x.blocks.k, &x.k);
    out.emplace_back(p + "self_attn.v_proj", &x.blocks.v, &x.v);
    out.emplace_back(p + "self_attn.o_proj", &x.blocks.o, &x.o);
    out.emplace_back(p + "mlp.gate_proj", &x.blocks.gate, &x.gate);
    out.emplace_back(p + "mlp.up_proj", &x.blocks.up, &x.up);
    out.emplace_back(p + "mlp.down_proj", &x.blocks.down, &x.down);
  }
  out.emplace_back("output projection", &w.output_blocks, &w.output_projection());
  return out;
}

// The blocks, dequantized on the CPU and rounded to bf16, against the bf16 copy: bit for bit.
std::size_t differing_values(const QuantizedTensor& blocks, const HostTensor& copy) {
  const ByteView bytes{reinterpret_cast<const std::byte*>(blocks.bytes.data()), blocks.bytes.size()};
  const std::vector<float> values = dequantize(blocks.type, bytes, copy.data.size());
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < values.size(); ++i) wrong += float_to_bfloat16(values[i]) != copy.data[i];
  return wrong;
}

TEST(ModelWeights, KeepsEachQuantizedProjectionsBlocksInTheTablesRowOrder) {
  for (const GgmlType type : {GgmlType::q4_0, GgmlType::q4_1, GgmlType::q8_0})
    for (const bool tied : {true, false}) {
      SCOPED_TRACE(std::string(ggml_type_name(type)) + (tied ? ", tied" : ", untied"));
      const ModelConfig config = tiny_config(tied);
      const Codes codes = type == GgmlType::q8_0 ? kQ8Codes : kQ4Codes;
      const std::vector<Weight> model = tiny_model(config, codes, 41u);
      TempDir dir;
      const GgufFile file(dir.write("model.gguf", gguf_writer(model, type, codes).build().bytes));
      const ModelWeights w = load_model_weights(file, config, WeightLoadOptions{true});
      expect_table_is(w, model);  // the bf16 copy as without blocks
      for (const auto& [name, blocks, copy] : kept_blocks(w)) {
        ASSERT_TRUE(blocks->has_value()) << name;
        const QuantizedTensor& b = **blocks;
        EXPECT_EQ(b.type, type) << name;
        EXPECT_EQ(b.shape, copy->shape) << name;
        const GgmlTypeInfo& info = ggml_type_info(type);
        EXPECT_EQ(b.row_bytes(), static_cast<std::size_t>(copy->shape[1] / 32) * info.block_bytes) << name;
        ASSERT_EQ(b.bytes.size(), b.row_bytes() * static_cast<std::size_t>(copy->shape[0])) << name;
        EXPECT_EQ(differing_values(b, *copy), 0u) << name << ": the blocks are not the bf16 copy's rows";
        // q and k: the file's rows are llama.cpp's order, the kept ones the table's.
        const GgufTensorInfo& stored = file.tensor(b.name);
        const ByteView raw = file.tensor_bytes(stored);
        const bool same_bytes = std::memcmp(raw.data, b.bytes.data(), raw.size) == 0;
        const bool rope = name.find("q_proj") != std::string::npos || name.find("k_proj") != std::string::npos;
        EXPECT_EQ(same_bytes, !rope) << name;
      }
      // Nothing is kept without the option.
      const ModelWeights plain = load_model_weights(file, config);
      for (const auto& [name, blocks, copy] : kept_blocks(plain)) EXPECT_FALSE(blocks->has_value()) << name;
    }
}

TEST(ModelWeights, KeptBlocksInFileOrderFailTheComparison) {
  // The negative control of the test above: q's blocks left in the file's (llama.cpp's) row order
  // differ from the un-permuted bf16 copy.
  const ModelConfig config = tiny_config(false);
  const std::vector<Weight> model = tiny_model(config, kQ4Codes, 43u);
  TempDir dir;
  const GgufFile file(dir.write("model.gguf", gguf_writer(model, GgmlType::q4_1, kQ4Codes).build().bytes));
  const ModelWeights w = load_model_weights(file, config, WeightLoadOptions{true});
  QuantizedTensor file_order = *w.layers[0].blocks.q;
  const ByteView raw = file.tensor_bytes(file.tensor("blk.0.attn_q.weight"));
  std::memcpy(file_order.bytes.data(), raw.data, raw.size);
  EXPECT_GT(differing_values(file_order, w.layers[0].q), 0u);
}

TEST(ModelWeights, KeepsOnlyTheProjectionsStoredInBlocks) {
  // f32 matrices and one q8_0 up projection: only that one is kept; a f32 output projection has
  // no blocks.
  const ModelConfig config = tiny_config(false);
  const std::vector<Weight> model = tiny_model(config, kQ8Codes, 47u);
  GgufWriter writer;
  for (const Weight& w : model) {
    std::vector<float> values = w.values;
    if (w.rope_heads > 0) values = llama_cpp_permute(values, w.rope_heads, w.shape[0], w.shape[1]);
    const GgmlType type = w.gguf_name == "blk.1.ffn_up.weight" ? GgmlType::q8_0 : GgmlType::f32;
    writer.add_tensor({w.gguf_name, std::vector<std::uint64_t>(w.shape.rbegin(), w.shape.rend()),
                       static_cast<std::uint32_t>(type), encode(type, values, kQ8Codes), {}});
  }
  TempDir dir;
  const GgufFile file(dir.write("model.gguf", writer.build().bytes));
  const ModelWeights w = load_model_weights(file, config, WeightLoadOptions{true});
  for (const auto& [name, blocks, copy] : kept_blocks(w))
    EXPECT_EQ(blocks->has_value(), name == "model.layers.1.mlp.up_proj") << name;
  EXPECT_EQ(differing_values(*w.layers[1].blocks.up, w.layers[1].up), 0u);
}

TEST(ModelWeights, FloatToBfloat16RoundsToNearestEven) {
  EXPECT_EQ(float_to_bfloat16(1.0f), 0x3F80);
  EXPECT_EQ(float_to_bfloat16(-2.5f), 0xC020);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1); a hair above rounds up.
  EXPECT_EQ(float_to_bfloat16(1.0f + 0x1p-8f), 0x3F80);
  EXPECT_EQ(float_to_bfloat16(1.0f + 0x1p-8f + 0x1p-20f), 0x3F81);
  EXPECT_EQ(float_to_bfloat16(1.0f + 0x1p-7f + 0x1p-8f), 0x3F82);  // odd + half: up to even
  EXPECT_EQ(float_to_bfloat16(3.4e38f), 0x7F80);                   // rounds to infinity
  EXPECT_EQ(float_to_bfloat16(INFINITY), 0x7F80);
  EXPECT_TRUE(std::isnan(bfloat16_to_float(float_to_bfloat16(NAN))));
}

// --- 4-bit groups: GPTQ and AWQ checkpoints ---------------------------------------------------

using stage3::Int4CheckpointFormat;
using stage3::Int4GroupHost;

// A random stored form: q uniform over 0..15, zero points 1..15 (GPTQ v1 cannot hold 0), half
// scales 2^-7 .. 2^-3.
Int4GroupHost random_groups(int n, int k, int group_size, unsigned seed) {
  std::mt19937 rng(seed);
  Int4GroupHost w;
  w.n = n;
  w.k = k;
  w.group_size = group_size;
  std::uniform_int_distribution<int> byte(0, 255), zero(1, 15);
  std::uniform_real_distribution<float> scale(1.f / 128, 1.f / 8);
  for (int i = 0; i < n * k / 2; ++i) w.qweight.push_back(static_cast<std::uint8_t>(byte(rng)));
  for (int i = 0; i < n * (k / group_size); ++i) {
    w.scales.push_back(half_bits(scale(rng)));
    w.zeros.push_back(static_cast<std::uint8_t>(zero(rng)));
  }
  return w;
}

// s (q - z) of the stored form, rounded to bf16 as a float (written out here, not the library's).
std::vector<float> dequantized_bf16_values(const Int4GroupHost& w) {
  std::vector<float> out;
  for (int row = 0; row < w.n; ++row)
    for (int kk = 0; kk < w.k; ++kk) {
      const std::size_t entry = static_cast<std::size_t>(row) * (w.k / w.group_size) + kk / w.group_size;
      __half_raw raw;
      raw.x = w.scales[entry];
      const float value = __half2float(__half(raw)) *
                          static_cast<float>(stage3::test_support::stored_q(w, row, kk) - w.zeros[entry]);
      out.push_back(__bfloat162float(__float2bfloat16_rn(value)));
    }
  return out;
}

template <typename T>
std::vector<std::byte> raw_bytes(const std::vector<T>& values) {
  std::vector<std::byte> out(values.size() * sizeof(T));
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

// The tensors of a projection `prefix` (its name without ".weight") packed as `format`.
void add_packed(std::vector<StTensor>& tensors, const std::string& prefix, const Int4GroupHost& w,
                Int4CheckpointFormat format, bool with_g_idx = true) {
  const stage3::test_support::PackedCheckpoint packed = stage3::test_support::pack_checkpoint(w, format);
  const std::uint64_t n = static_cast<std::uint64_t>(w.n), k = static_cast<std::uint64_t>(w.k),
                      groups = k / static_cast<std::uint64_t>(w.group_size);
  const bool awq = format == Int4CheckpointFormat::awq;
  tensors.push_back({prefix + ".qweight", "I32", awq ? std::vector<std::uint64_t>{k, n / 8} : std::vector<std::uint64_t>{k / 8, n},
                     raw_bytes(packed.qweight)});
  tensors.push_back({prefix + ".qzeros", "I32", {groups, n / 8}, raw_bytes(packed.qzeros)});
  tensors.push_back({prefix + ".scales", "F16", {groups, n}, raw_bytes(packed.scales)});
  if (!awq && with_g_idx) {
    std::vector<std::int32_t> g_idx;
    for (int kk = 0; kk < w.k; ++kk) g_idx.push_back(kk / w.group_size);
    tensors.push_back({prefix + ".g_idx", "I32", {k}, raw_bytes(g_idx)});
  }
}

WeightQuantization quantization_of(Int4CheckpointFormat format, std::int64_t group_size) {
  WeightQuantization q;
  q.method = format == Int4CheckpointFormat::awq ? "awq" : "gptq";
  q.checkpoint_format = format == Int4CheckpointFormat::gptq_v1   ? "gptq"
                        : format == Int4CheckpointFormat::gptq_v2 ? "gptq_v2"
                                                                  : "awq";
  q.group_size = group_size;
  return q;
}

bool is_layer_projection(const std::string& hf_name) {
  return hf_name.rfind("model.layers.", 0) == 0 && hf_name.find("_proj.weight") != std::string::npos;
}

// The tiny model as a GPTQ/AWQ checkpoint in groups of 32: every layer projection packed but
// `left_unpacked` (stored as BF16, as a quantizer's skipped module), the rest in BF16. `model`
// becomes what the table must hold (the packed projections' values the stored form's, rounded to
// bf16); `stored` gets each packed projection's stored form by HF name.
std::vector<StTensor> int4_checkpoint(std::vector<Weight>& model, Int4CheckpointFormat format,
                                      const std::string& left_unpacked,
                                      std::map<std::string, Int4GroupHost>* stored = nullptr) {
  std::vector<StTensor> tensors;
  unsigned seed = 7;
  for (Weight& w : model) {
    if (!is_layer_projection(w.hf_name) || w.hf_name == left_unpacked) {
      tensors.push_back({w.hf_name, "BF16", u64_shape(w.shape), encode_st("BF16", w.values)});
      continue;
    }
    const Int4GroupHost groups =
        random_groups(static_cast<int>(w.shape[0]), static_cast<int>(w.shape[1]), 32, seed++);
    w.values = dequantized_bf16_values(groups);
    add_packed(tensors, w.hf_name.substr(0, w.hf_name.size() - 7), groups, format);
    if (stored != nullptr) stored->emplace(w.hf_name, groups);
  }
  return tensors;
}

const char* format_name(Int4CheckpointFormat format) { return stage3::int4_checkpoint_format_name(format); }

TEST(ModelWeights, Int4CheckpointsLoadTheirDequantizedWeightsAndKeepTheGroups) {
  const std::string unpacked = "model.layers.1.self_attn.v_proj.weight";
  for (const Int4CheckpointFormat format :
       {Int4CheckpointFormat::gptq_v1, Int4CheckpointFormat::gptq_v2, Int4CheckpointFormat::awq})
    for (const bool tied : {false, true}) {
      SCOPED_TRACE(std::string(format_name(format)) + (tied ? ", tied" : ", untied"));
      ModelConfig config = tiny_config(tied);
      config.quantization = quantization_of(format, 32);
      std::vector<Weight> model = tiny_model(config, kQ8Codes, 43u);
      std::map<std::string, Int4GroupHost> stored;
      const std::vector<StTensor> tensors = int4_checkpoint(model, format, unpacked, &stored);
      TempDir dir;
      const SafetensorsCheckpoint checkpoint(dir.write("model.safetensors", test_support::safetensors_file(tensors)));
      const ModelWeights plain = load_model_weights(checkpoint, config);
      expect_table_is(plain, model);
      const ModelWeights kept = load_model_weights(checkpoint, config, WeightLoadOptions{true});
      expect_table_is(kept, model);
      std::size_t kept_count = 0;
      for (std::size_t l = 0; l < kept.layers.size(); ++l) {
        const std::string p = "model.layers." + std::to_string(l) + ".";
        const Int4Layer& g = kept.layers[l].groups;
        const Int4Layer& none = plain.layers[l].groups;
        for (const auto& [groups, without, name] :
             std::vector<std::tuple<const std::optional<Int4GroupHost>*, const std::optional<Int4GroupHost>*, std::string>>{
                 {&g.q, &none.q, "self_attn.q_proj"}, {&g.k, &none.k, "self_attn.k_proj"},
                 {&g.v, &none.v, "self_attn.v_proj"}, {&g.o, &none.o, "self_attn.o_proj"},
                 {&g.gate, &none.gate, "mlp.gate_proj"}, {&g.up, &none.up, "mlp.up_proj"},
                 {&g.down, &none.down, "mlp.down_proj"}}) {
          const std::string hf = p + name + ".weight";
          EXPECT_FALSE(without->has_value()) << hf << ": kept without keep_quantized_blocks";
          if (hf == unpacked) {
            EXPECT_FALSE(groups->has_value()) << hf << " is stored in BF16";
            continue;
          }
          ASSERT_TRUE(groups->has_value()) << hf;
          const Int4GroupHost& want = stored.at(hf);
          EXPECT_EQ((*groups)->n, want.n) << hf;
          EXPECT_EQ((*groups)->k, want.k) << hf;
          EXPECT_EQ((*groups)->group_size, 32) << hf;
          EXPECT_EQ((*groups)->qweight, want.qweight) << hf;
          EXPECT_EQ((*groups)->scales, want.scales) << hf;
          EXPECT_EQ((*groups)->zeros, want.zeros) << hf;
          ++kept_count;
        }
        EXPECT_FALSE(kept.layers[l].blocks.q.has_value()) << "GGUF blocks from a safetensors checkpoint";
      }
      EXPECT_EQ(kept_count, 13u);
      EXPECT_FALSE(kept.output_groups.has_value());
    }
}

TEST(ModelWeights, RefusesInt4CheckpointsTheFormCannotHold) {
  const ModelConfig base = [] {
    ModelConfig c = tiny_config(false);
    c.quantization = quantization_of(Int4CheckpointFormat::gptq_v1, 32);
    return c;
  }();
  const std::string down = "model.layers.0.mlp.down_proj";
  // Loads `tensors` with `config`, returning the error.
  const auto error = [](const std::vector<StTensor>& tensors, const ModelConfig& config) {
    TempDir dir;
    const std::string path = dir.write("model.safetensors", test_support::safetensors_file(tensors));
    return error_of([&] { load_model_weights(SafetensorsCheckpoint(path), config); });
  };
  const auto checkpoint = [&](Int4CheckpointFormat format) {
    std::vector<Weight> model = tiny_model(base, kQ8Codes, 43u);
    return int4_checkpoint(model, format, "");
  };
  const auto without = [](std::vector<StTensor> tensors, const std::string& name) {
    tensors.erase(std::remove_if(tensors.begin(), tensors.end(), [&](const StTensor& t) { return t.name == name; }),
                  tensors.end());
    return tensors;
  };
  const auto find = [](std::vector<StTensor>& tensors, const std::string& name) -> StTensor& {
    for (StTensor& t : tensors)
      if (t.name == name) return t;
    throw std::runtime_error("no tensor " + name);
  };
  const std::vector<StTensor> good = checkpoint(Int4CheckpointFormat::gptq_v1);
  {  // the control: the checkpoint loads
    TempDir dir;
    const std::string path = dir.write("model.safetensors", test_support::safetensors_file(good));
    EXPECT_NO_THROW(load_model_weights(SafetensorsCheckpoint(path), base));
  }

  ModelConfig unquantized = base;
  unquantized.quantization.reset();
  EXPECT_TRUE(contains_all(error(good, unquantized),
                           {"model.safetensors", "'model.layers.0.self_attn.q_proj.qweight'", "query projection",
                            "no \"quantization_config\""}));

  std::vector<StTensor> both = good;
  both.push_back({down + ".weight", "BF16", {64, 96}, std::vector<std::byte>(64 * 96 * 2)});
  EXPECT_TRUE(contains_all(error(both, base), {down + ".weight", down + ".qweight", "both present"}));

  EXPECT_TRUE(contains_all(error(without(good, down + ".qzeros"), base),
                           {down + ".qzeros", "is missing", "qweight, qzeros and scales together"}));

  std::vector<StTensor> bf16_scales = good;
  find(bf16_scales, down + ".scales").dtype = "BF16";
  EXPECT_TRUE(contains_all(error(bf16_scales, base), {down + ".scales", "is BF16", "stores it as F16"}));

  // AWQ's tensors under a GPTQ config: qweight [K, N / 8] where GPTQ has [K / 8, N].
  EXPECT_TRUE(contains_all(error(checkpoint(Int4CheckpointFormat::awq), base),
                           {".qweight'", "has shape [64, 8]", "gptq packing", "[8, 64]"}));

  std::vector<StTensor> act_order = good;
  std::vector<std::int32_t> shuffled(96);
  for (int kk = 0; kk < 96; ++kk) shuffled[static_cast<std::size_t>(kk)] = kk % 3;  // desc_act's interleaved groups
  find(act_order, down + ".g_idx").data = raw_bytes(shuffled);
  EXPECT_TRUE(contains_all(error(act_order, base), {down, "act-order"}));

  ModelConfig one_group_a_row = base;  // the config says G = K: the file's groups of 32 do not match
  one_group_a_row.quantization->group_size = -1;
  EXPECT_TRUE(contains_all(error(good, one_group_a_row), {"q_proj.qzeros'", "has shape [2, 8]", "groups of 64", "[1, 8]"}));

  ModelConfig group_16 = base;  // divides every K, but the layout's chunks take 32, 64 or multiples of 128
  group_16.quantization->group_size = 16;
  EXPECT_TRUE(contains_all(error(good, group_16), {"q_proj.qweight'", "group size 16 is not 32, 64 or a multiple of 128"}));

  ModelConfig group_48 = base;
  group_48.quantization->group_size = 48;
  EXPECT_TRUE(contains_all(error(good, group_48), {"group_size 48 does not divide in_features 64"}));

  // lm_head packed: 100 outputs are not whole words of 8 zero points.
  std::vector<StTensor> packed_head = without(good, "lm_head.weight");
  packed_head.push_back({"lm_head.qweight", "I32", {8, 100}, std::vector<std::byte>(8 * 100 * 4)});
  packed_head.push_back({"lm_head.qzeros", "I32", {2, 13}, std::vector<std::byte>(2 * 13 * 4)});
  packed_head.push_back({"lm_head.scales", "F16", {2, 100}, std::vector<std::byte>(2 * 100 * 2)});
  EXPECT_TRUE(contains_all(error(packed_head, base), {"lm_head.qweight", "100 x 64", "multiples of 8"}));

  // GPTQ v1 stores zero points minus one: a stored 15 is a zero point of 16.
  std::vector<StTensor> zero_16 = good;
  std::vector<std::int32_t> fifteens(static_cast<std::size_t>(3 * 64 / 8), static_cast<std::int32_t>(0xFFFFFFFFu));
  find(zero_16, down + ".qzeros").data = raw_bytes(fifteens);
  EXPECT_TRUE(contains_all(error(zero_16, base), {down, "is 16"}));
}

// --- The real model ---------------------------------------------------------------------------

// --- load_model: a path as the programs take it -----------------------------------------------

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// config.json of tiny_config(false), as transformers writes a Llama config.
constexpr const char* kTinyConfigJson = R"({"model_type": "llama", "hidden_size": 64, "intermediate_size": 96,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100,
    "max_position_embeddings": 128, "rms_norm_eps": 1e-5, "tie_word_embeddings": false})";

TEST(LoadModel, ReadsAHuggingFaceDirectoryWithItsTokenizerAndChatTemplate) {
  const ModelConfig config = tiny_config(false);
  const std::vector<Weight> model = tiny_model(config, kQ8Codes, 41u);
  TempDir dir;
  dir.write("model.safetensors", test_support::safetensors_file(st_tensors(model, "BF16")));
  dir.write_text("config.json", kTinyConfigJson);
  LoadedModel loaded = load_model(dir.root());
  EXPECT_EQ(loaded.format, "safetensors");
  expect_table_is(loaded.weights, model);
  EXPECT_FALSE(loaded.tokenizer.has_value());
  EXPECT_TRUE(contains_all(loaded.notes.at(0), {"no tokenizer.json"}));

  // With SmolLM2's tokenizer.json and a tokenizer_config.json holding its chat template.
  dir.write_text("tokenizer.json", read_file(std::string(KC_TOKENIZER_TEST_DATA) + "/smollm2.tokenizer.json"));
  const nlohmann::json chat = nlohmann::json::parse(read_file(std::string(KC_TOKENIZER_TEST_DATA) + "/chat.golden.json"));
  dir.write_text("tokenizer_config.json",
                 nlohmann::json{{"chat_template", chat.at("templates").at("smollm2")}}.dump());
  loaded = load_model(dir.root());
  ASSERT_TRUE(loaded.tokenizer.has_value());
  EXPECT_EQ(loaded.tokenizer->decode(loaded.tokenizer->encode("Hello world", false)), "Hello world");
  ASSERT_TRUE(loaded.chat_template.has_value());
  EXPECT_EQ(loaded.chat_template->kind(), ChatTemplateKind::chatml);
  EXPECT_TRUE(loaded.notes.empty());

  // A malformed tokenizer_config.json is an error that names it, not a silent "no template".
  dir.write_text("tokenizer_config.json", R"({"chat_template": "x",})");
  EXPECT_TRUE(contains_all(error_of([&] { load_model(dir.root()); }), {"tokenizer_config.json"}));

  // A template the engine does not render leaves no chat format and says why.
  dir.write_text("tokenizer_config.json", R"({"chat_template": "{{ messages }}"})");
  loaded = load_model(dir.root());
  EXPECT_FALSE(loaded.chat_template.has_value());
  ASSERT_EQ(loaded.notes.size(), 1u);
  EXPECT_TRUE(contains_all(loaded.notes[0], {"no chat format"}));
}

// generation_config.json's end ids join config.json's (Llama-3 Instruct keeps <|eot_id|> there
// only), its suggested sampling is reported, and a bad one is an error that names it.
TEST(LoadModel, TakesTheEndIdsOfGenerationConfigJson) {
  const ModelConfig config = tiny_config(false);
  const std::vector<Weight> model = tiny_model(config, kQ8Codes, 41u);
  TempDir dir;
  dir.write("model.safetensors", test_support::safetensors_file(st_tensors(model, "BF16")));
  nlohmann::json config_json = nlohmann::json::parse(kTinyConfigJson);
  config_json["eos_token_id"] = 97;
  dir.write_text("config.json", config_json.dump());
  dir.write_text("generation_config.json",
                 R"({"bos_token_id": 96, "eos_token_id": [97, 98, 99], "do_sample": true, "temperature": 0.6,
                     "top_p": 0.9, "transformers_version": "4.45.0"})");
  LoadedModel loaded = load_model(dir.root());
  EXPECT_EQ(loaded.weights.config.eos_token_ids, (std::vector<std::int64_t>{97, 98, 99}));
  std::string notes;
  for (const std::string& note : loaded.notes) notes += note + " / ";
  EXPECT_TRUE(contains_all(notes, {"2 end token id(s) added from generation_config.json",
                                   "suggests sampling (temperature 0.6, top_p 0.9, top_k unset)"}))
      << notes;

  dir.write_text("generation_config.json", R"({"eos_token_id": 100})");  // outside the vocabulary
  EXPECT_TRUE(contains_all(error_of([&] { load_model(dir.root()); }), {"generation_config.json", "100"}));
  dir.write_text("generation_config.json", R"({"eos_token_id": "2"})");
  EXPECT_TRUE(contains_all(error_of([&] { load_model(dir.root()); }), {"generation_config.json", "not an integer"}));
  dir.write_text("generation_config.json", R"({"temperature": "hot"})");
  EXPECT_TRUE(contains_all(error_of([&] { load_model(dir.root()); }), {"generation_config.json", "temperature"}));
  dir.write_text("generation_config.json", R"({"eos_token_id": 97})");  // nothing new: no note
  loaded = load_model(dir.root());
  EXPECT_EQ(loaded.weights.config.eos_token_ids, (std::vector<std::int64_t>{97}));
  for (const std::string& note : loaded.notes) EXPECT_EQ(note.find("generation_config"), std::string::npos) << note;
}

TEST(LoadModel, ReadsAGgufFileAndSaysWhatItDequantized) {
  const ModelConfig config = tiny_config(true);
  const std::vector<Weight> model = tiny_model(config, kQ8Codes, 43u);
  GgufWriter writer = gguf_writer(model, GgmlType::q8_0, kQ8Codes);
  add_tiny_config_metadata(writer);
  TempDir dir;
  const std::string path = dir.write("model.gguf", writer.build().bytes);
  const LoadedModel loaded = load_model(path);
  EXPECT_EQ(loaded.format, "gguf");
  EXPECT_TRUE(loaded.weights.config.tie_word_embeddings);
  expect_table_is(loaded.weights, model);
  EXPECT_TRUE(loaded.rope_freq_factors.empty());
  EXPECT_FALSE(loaded.tokenizer.has_value());
  const std::string notes = loaded.notes.at(0) + " / " + loaded.notes.at(1);
  EXPECT_TRUE(contains_all(notes, {"q8_0 tensors dequantized to bf16", "no tokenizer in the file"})) << notes;
}

TEST(LoadModel, ReadsAGptqDirectoryAndSaysWhatItUnpacked) {
  ModelConfig config = tiny_config(false);
  std::vector<Weight> model = tiny_model(config, kQ8Codes, 41u);
  TempDir dir;
  dir.write("model.safetensors",
            test_support::safetensors_file(int4_checkpoint(model, Int4CheckpointFormat::gptq_v2, "")));
  dir.write_text("config.json", R"({"model_type": "llama", "hidden_size": 64, "intermediate_size": 96,
      "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100,
      "max_position_embeddings": 128, "rms_norm_eps": 1e-5, "tie_word_embeddings": false,
      "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": false,
                              "sym": false, "checkpoint_format": "gptq_v2"}})");
  LoadedModel loaded = load_model(dir.root());
  expect_table_is(loaded.weights, model);
  ASSERT_EQ(loaded.notes.size(), 2u);
  EXPECT_TRUE(contains_all(loaded.notes[0], {"14 projections packed in 4-bit gptq", "gptq_v2 packing", "groups of 32",
                                             "dequantized to bf16 at load"}));
  EXPECT_TRUE(contains_all(loaded.notes[1], {"no tokenizer.json"}));
  EXPECT_FALSE(loaded.weights.layers[1].groups.down.has_value());
  loaded = load_model(dir.root(), WeightLoadOptions{true});
  ASSERT_EQ(loaded.notes.size(), 3u);
  EXPECT_TRUE(contains_all(loaded.notes[1], {"14 projections also kept in 4-bit groups"}));
  EXPECT_TRUE(loaded.weights.layers[1].groups.down.has_value());
}

TEST(LoadModel, ReadsTheQuantizationConfigOfAutoGptqAndAutoAwqFromItsOwnFile) {
  const char* kConfig = R"({"model_type": "llama", "hidden_size": 64, "intermediate_size": 96,
      "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100,
      "max_position_embeddings": 128, "rms_norm_eps": 1e-5, "tie_word_embeddings": false})";
  for (const Int4CheckpointFormat format : {Int4CheckpointFormat::gptq_v1, Int4CheckpointFormat::awq}) {
    const bool awq = format == Int4CheckpointFormat::awq;
    SCOPED_TRACE(format_name(format));
    std::vector<Weight> model = tiny_model(tiny_config(false), kQ8Codes, 45u);
    TempDir dir;
    dir.write("model.safetensors", test_support::safetensors_file(int4_checkpoint(model, format, "")));
    dir.write_text("config.json", kConfig);  // no quantization_config: an older checkpoint's
    // Without the file beside it, the packed tensors have nothing to say how they are packed.
    EXPECT_TRUE(contains_all(error_of([&] { load_model(dir.root()); }), {".qweight'", "no \"quantization_config\""}));
    if (awq)
      dir.write_text("quant_config.json", R"({"zero_point": true, "q_group_size": 32, "w_bit": 4, "version": "GEMM"})");
    else
      dir.write_text("quantize_config.json", R"({"bits": 4, "group_size": 32, "desc_act": false, "sym": false})");
    const LoadedModel loaded = load_model(dir.root());
    expect_table_is(loaded.weights, model);
    ASSERT_TRUE(loaded.weights.config.quantization.has_value());
    EXPECT_EQ(loaded.weights.config.quantization->method, awq ? "awq" : "gptq");
    ASSERT_GE(loaded.notes.size(), 2u);
    EXPECT_TRUE(contains_all(loaded.notes[0], {"the quantization config read from", awq ? "quant_config.json" : "quantize_config.json"}));
    EXPECT_TRUE(contains_all(loaded.notes[1], {"14 projections packed in 4-bit", awq ? "awq" : "gptq"}));
  }
}

TEST(LoadModel, RefusesAPathThatIsNotThere) {
  EXPECT_TRUE(contains_all(error_of([] { load_model("/nonexistent/model.gguf"); }),
                           {"/nonexistent/model.gguf", "does not exist"}));
  TempDir dir;  // a directory without config.json
  EXPECT_TRUE(contains_all(error_of([&] { load_model(dir.root()); }), {"config.json"}));
}

// scripts/hf_reference.py's GPTQ and AWQ cases (KC_HF_REFERENCE=DIR, the folder it wrote; skipped
// without it): the engine reads the checkpoint that PyTorch packed into the very bf16 bits of the
// model transformers runs — a packer written apart from these tests' against the one reader.
TEST(ModelWeights, ReferenceInt4CheckpointsLoadAsTheModelsTransformersRuns) {
  const char* root = std::getenv("KC_HF_REFERENCE");
  if (root == nullptr || root[0] == '\0') GTEST_SKIP() << "KC_HF_REFERENCE is unset (scripts/hf_reference.py's output)";
  int cases = 0;
  for (const char* name : {"gqa4_gptq", "gqa1_awq"}) {
    const std::string dir = std::string(root) + "/" + name;
    if (!std::ifstream(dir + "/reference.json")) continue;
    SCOPED_TRACE(name);
    const nlohmann::json reference = nlohmann::json::parse(read_file(dir + "/reference.json"));
    const LoadedModel packed = load_model(reference.at("engine_model").get<std::string>(), WeightLoadOptions{true});
    const LoadedModel plain = load_model(reference.at("model").get<std::string>());
    ASSERT_TRUE(packed.weights.config.quantization.has_value());
    EXPECT_EQ(packed.weights.config.quantization->method, reference.at("quantization").at("quant_method"));
    EXPECT_EQ(packed.weights.config.quantization->group_size, reference.at("quantization").at("group_size").get<int>());
    expect_same_tables(packed.weights, plain.weights);
    for (const LayerWeights& layer : packed.weights.layers)
      for (const auto* groups : {&layer.groups.q, &layer.groups.k, &layer.groups.v, &layer.groups.o, &layer.groups.gate,
                                 &layer.groups.up, &layer.groups.down})
        EXPECT_TRUE(groups->has_value());
    ++cases;
  }
  if (cases == 0) GTEST_SKIP() << root << " holds neither gqa4_gptq nor gqa1_awq (--cases gqa4_gptq,gqa1_awq)";
}

TEST(ModelWeights, LoadsTheRealSmolLM2Gguf) {
  const std::string path = test_support::smollm2_gguf_path();
  if (path.empty()) GTEST_SKIP() << test_support::kSmolLM2GgufMissing;
  const GgufFile file(path);
  const ModelWeights w = load_model_weights(file, model_config_from_gguf(file));
  ASSERT_EQ(w.layers.size(), 30u);
  EXPECT_TRUE(w.config.tie_word_embeddings);
  EXPECT_EQ(w.token_embedding.shape, (std::vector<std::int64_t>{49152, 576}));
  EXPECT_EQ(&w.output_projection(), &w.token_embedding);
  EXPECT_EQ(w.final_norm.shape, (std::vector<std::int64_t>{576}));
  for (const LayerWeights& l : w.layers) {
    EXPECT_EQ(l.q.shape, (std::vector<std::int64_t>{576, 576}));
    EXPECT_EQ(l.k.shape, (std::vector<std::int64_t>{192, 576}));
    EXPECT_EQ(l.v.shape, (std::vector<std::int64_t>{192, 576}));
    EXPECT_EQ(l.o.shape, (std::vector<std::int64_t>{576, 576}));
    EXPECT_EQ(l.gate.shape, (std::vector<std::int64_t>{1536, 576}));
    EXPECT_EQ(l.up.shape, (std::vector<std::int64_t>{1536, 576}));
    EXPECT_EQ(l.down.shape, (std::vector<std::int64_t>{576, 1536}));
    EXPECT_EQ(l.attn_norm.shape, (std::vector<std::int64_t>{576}));
  }
  std::size_t not_finite = 0;
  for (std::uint16_t b : w.layers[0].q.data)
    not_finite += std::isfinite(bfloat16_to_float(b)) ? 0 : 1;
  EXPECT_EQ(not_finite, 0u);

  // load_model, as kc-generate and kc-serve take the file: the same table, the tokenizer and the
  // chat format, and what was dequantized.
  const LoadedModel loaded = load_model(path);
  expect_same_tables(loaded.weights, w);
  ASSERT_TRUE(loaded.tokenizer.has_value());
  ASSERT_TRUE(loaded.chat_template.has_value());
  EXPECT_EQ(loaded.chat_template->kind(), ChatTemplateKind::chatml);
  ASSERT_EQ(loaded.notes.size(), 2u);
  EXPECT_TRUE(contains_all(loaded.notes[0] + loaded.notes[1], {"210 q4_1 tensors", "1 q8_0 tensors"}));
}

}  // namespace
}  // namespace kc::engine
