// kc/engine/model_weights.hpp — a Llama model's weights on the host, in bf16, from a GGUF file or
// a Hugging Face safetensors checkpoint.
//
// The table holds what one forward pass reads: the token embedding, per decoder block the two
// RMSNorm weights and the seven projections (q, k, v, o, gate, up, down), the final norm and the
// output projection (lm_head, or the token embedding again when the model ties them). Every
// tensor is row-major, outermost dimension first, in the layout of the Hugging Face checkpoint:
//
//   tensor            shape                          HF name (GGUF name)
//   token_embedding   [vocab, hidden]                model.embed_tokens.weight (token_embd.weight)
//   attn_norm         [hidden]                       model.layers.N.input_layernorm.weight
//                                                    (blk.N.attn_norm.weight)
//   q                 [heads * head_dim, hidden]     ...self_attn.q_proj.weight (blk.N.attn_q)
//   k, v              [kv_heads * head_dim, hidden]  ...self_attn.{k,v}_proj.weight (attn_k,
//   attn_v) o                 [hidden, heads * head_dim]     ...self_attn.o_proj.weight
//   (attn_output) ffn_norm          [hidden] ...post_attention_layernorm.weight (ffn_norm) gate, up
//   [intermediate, hidden]         ...mlp.{gate,up}_proj.weight (ffn_gate, ffn_up) down [hidden,
//   intermediate]         ...mlp.down_proj.weight (ffn_down) final_norm        [hidden]
//   model.norm.weight (output_norm.weight) lm_head           [vocab, hidden] lm_head.weight
//   (output.weight)
//
// A projection [out, in] computes y = W x: row r of the matrix is output feature r.
//
// Dtype. Everything is converted to bf16, the engine's compute dtype, when it is loaded: F32 and
// F16 are rounded to nearest even, BF16 is copied bit for bit, and the GGUF block types the
// engine reads (q8_0, q4_0, q4_1; dequantize.hpp) are dequantized to float and then rounded.
// Quantized blocks kept as stored (WeightLoadOptions::keep_quantized_blocks): a GGUF projection
// stored as q4_0, q4_1 or q8_0 also keeps its blocks, byte for byte, beside its bf16 copy (the
// engine's native path runs decode steps on them: RunnerOptions::native_quantized); the bf16 copy
// is always made, so a kept model costs bf16's memory plus the blocks'.
//
// 4-bit groups (GPTQ and AWQ). A Hugging Face checkpoint whose config.json has a
// "quantization_config" (ModelConfig::quantization) may store any projection as 4-bit weights in
// groups along K: in place of <name>.weight, <prefix>.qweight and .qzeros (int32 words), .scales
// (F16) and, for GPTQ, .g_idx (int32), packed as kc/stage3/int4_groups.hpp describes for the
// checkpoint_format. Each is unpacked into the stored form w = s (q - z) (a GPTQ act-order g_idx,
// whose groups are not runs of consecutive k, is refused), dequantized exactly in float and
// rounded to bf16 for the table; with WeightLoadOptions::keep_quantized_blocks the stored form is
// kept too (LayerWeights::groups, ModelWeights::output_groups), for the engine's int4 GEMV. The
// token embedding is never packed; which projections are is read from the tensors themselves (a
// layer or the lm_head a quantizer left in bf16 has its .weight), so "modules_to_not_convert" needs
// no reading. A packed tensor without a quantization_config, a group size that does not divide K,
// N or K not a multiple of 8, scales not in F16, and a projection with both a .weight and a
// .qweight are refused, naming the tensor.
//
// Orientation. GGUF lists a tensor's dims innermost first (ggml's ne[0] is the length of a row),
// so a GGUF q of dims [hidden, heads * head_dim] is the [heads * head_dim, hidden] matrix above,
// with the same bytes in the same order. safetensors lists shapes outermost first, as the table.
//
// RoPE layout of q and k. Hugging Face's Llama rotates with rotate_half: in each head, element i
// turns with element i + head_dim / 2. llama.cpp rotates neighbours (2i with 2i + 1), so its
// converter (convert_hf_to_gguf.py, LlamaModel.permute) reorders the rows of q_proj and k_proj
// within each head, viewing a head's head_dim rows as [2, head_dim / 2] and transposing them:
//
//   GGUF row (head h, 2j + i)  =  HF row (head h, i * head_dim / 2 + j)   for i in {0, 1}
//
// (k with kv_heads heads, q with heads heads). The loader undoes that for GGUF files, so the
// table is always in Hugging Face's layout whichever file it came from, and the engine applies
// RoPE with rotate_half (kc::stage2 RopeLayout::rotate_half) for every model. Rows are whole
// quantization blocks, so the reorder is a move of dequantized rows and loses nothing; kept blocks
// of q and k are reordered the same way, row of blocks by row of blocks.
//
// Checks. Every tensor's shape is checked against the ModelConfig before anything is converted.
// A missing tensor, a tensor of another shape or of a dtype the loader cannot convert, and a
// tensor the table has no place for throw kc::Error naming the file, the tensor, and for shapes
// the expected and the found one. Extra tensors are refused, with three exceptions that carry no
// weights the engine needs: GGUF's rope_freqs.weight (Llama 3's RoPE frequencies, named in
// ModelConfig::rope_freqs_tensor and read from there), old HF checkpoints' per-layer
// self_attn.rotary_emb.inv_freq buffers (recomputed from rope_theta), and an HF lm_head.weight
// in a model with tied embeddings (checked for shape, not loaded: transformers ties it to the
// embedding the same way). A GGUF file whose config is tied has no output.weight by construction
// (model_config_from_gguf decides tying from its absence).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kc/engine/ggml_types.hpp"
#include "kc/engine/model_config.hpp"
#include "kc/stage3/int4_groups.hpp"

namespace kc::engine {

class GgufFile;
class SafetensorsCheckpoint;

// One tensor in bf16: `shape` outermost first, `data` the bf16 bit patterns, row-major.
struct HostTensor {
  std::string name;                 // as the source file names it
  std::vector<std::int64_t> shape;  // outermost first
  std::vector<std::uint16_t> data;  // bf16 bits

  std::int64_t element_count() const;
  // The element at (row, col) of a 2-D tensor, as a float.
  float at(std::int64_t row, std::int64_t col) const;
};

// A projection's weights in ggml blocks, as the GGUF file stores them (q4_0, q4_1 or q8_0; block
// layouts in dequantize.hpp): `shape` [N, K] outermost first as the HostTensor's, `bytes` N rows of
// K / 32 blocks, the rows in the table's order (q and k un-permuted like their bf16 copy).
struct QuantizedTensor {
  std::string name;  // as the file names it
  GgmlType type = GgmlType::q4_0;
  std::vector<std::int64_t> shape;  // [N, K]
  std::vector<std::uint8_t> bytes;

  // K / 32 blocks of `type`.
  std::size_t row_bytes() const;
};

// The blocks of a layer's projections, each present where the file stores it quantized.
struct QuantizedLayer {
  std::optional<QuantizedTensor> q, k, v, o, gate, up, down;
};

// The 4-bit groups of a layer's projections (a GPTQ/AWQ checkpoint's), each present where the
// checkpoint packs it; [N, K] rows in the table's order.
struct Int4Layer {
  std::optional<stage3::Int4GroupHost> q, k, v, o, gate, up, down;
};

struct LayerWeights {
  HostTensor attn_norm, q, k, v, o, ffn_norm, gate, up, down;
  QuantizedLayer blocks;  // only with WeightLoadOptions::keep_quantized_blocks
  Int4Layer groups;       // the same
};

struct ModelWeights {
  ModelConfig config;
  HostTensor token_embedding;
  std::vector<LayerWeights> layers;  // config.num_layers of them
  HostTensor final_norm;
  HostTensor lm_head;  // empty (no shape, no data) when config.tie_word_embeddings
  // The output projection's blocks (lm_head's, or the token embedding's when the model ties them),
  // where it is stored quantized and WeightLoadOptions::keep_quantized_blocks asked for them.
  std::optional<QuantizedTensor> output_blocks;
  // The untied lm_head's 4-bit groups, where a GPTQ/AWQ checkpoint packs it and
  // keep_quantized_blocks asked for them.
  std::optional<stage3::Int4GroupHost> output_groups;

  // The output projection: lm_head, or the token embedding when the model ties them.
  const HostTensor& output_projection() const;
};

struct WeightLoadOptions {
  // Also keep the blocks of every projection (q, k, v, o, gate, up, down and the output
  // projection) that a GGUF file stores as q4_0, q4_1 or q8_0 (LayerWeights::blocks,
  // ModelWeights::output_blocks), and the 4-bit groups of every projection a GPTQ/AWQ
  // checkpoint packs (LayerWeights::groups, ModelWeights::output_groups).
  bool keep_quantized_blocks = false;
};

// Loads the weights of a Llama GGUF file whose shape `config` describes (usually
// model_config_from_gguf(file)); q and k are un-permuted to Hugging Face's layout.
ModelWeights load_model_weights(const GgufFile& file, const ModelConfig& config,
                                const WeightLoadOptions& options = {});
// Loads the weights of a Hugging Face checkpoint (one file or shards) whose config.json gave
// `config`; its projections may be packed in 4-bit groups (GPTQ/AWQ, above).
ModelWeights load_model_weights(const SafetensorsCheckpoint& checkpoint, const ModelConfig& config,
                                const WeightLoadOptions& options = {});

// Float to bf16 bits, rounded to nearest even (NaN stays a quiet NaN of the same sign).
std::uint16_t float_to_bfloat16(float value);

}  // namespace kc::engine
