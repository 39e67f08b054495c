// The GGUF reader on a real model: SmolLM2-135M-Instruct quantized to q4_1 by llama.cpp, as
// scripts/fetch_smollm2.sh fetches it. Skipped unless KC_SMOLLM2_GGUF names the file:
//
//   scripts/fetch_smollm2.sh /tmp/smollm2     # prints the path of the .gguf
//   export KC_SMOLLM2_GGUF=/tmp/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
//   ctest --test-dir build/ci -R SmolLM2Gguf -V
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <map>

#include "kc/engine/gguf.hpp"
#include "kc/engine/model_config.hpp"
#include "support/published_configs.hpp"
#include "support/test_files.hpp"

namespace kc::engine {
namespace {

TEST(SmolLM2Gguf, ReadsTheRealFile) {
  const std::string path = test_support::smollm2_gguf_path();
  if (path.empty()) GTEST_SKIP() << test_support::kSmolLM2GgufMissing;

  const GgufFile file(path);
  const ModelConfig config = model_config_from_gguf(file);
  std::map<std::string_view, int> types;
  for (const GgufTensorInfo& tensor : file.tensors()) ++types[ggml_type_name(tensor.type)];

  std::cout << "file: " << file.path() << " (" << file.bytes().size << " bytes)\n"
            << "GGUF version " << file.version() << ", alignment " << file.alignment()
            << ", data section at byte " << file.data_offset() << "\n"
            << "metadata entries: " << file.metadata().size()
            << ", tensors: " << file.tensors().size() << "\n"
            << "tensor types:";
  for (const auto& [name, count] : types) std::cout << " " << name << " x" << count;
  std::cout << "\nname: " << file.at("general.name").as_string() << "\nconfig: architecture "
            << config.architecture << ", hidden " << config.hidden_size << ", intermediate "
            << config.intermediate_size << ", layers " << config.num_layers << ", heads "
            << config.num_heads << ", kv heads " << config.num_kv_heads << ", head_dim "
            << config.head_dim << ", vocab " << config.vocab_size << ", context "
            << config.max_position_embeddings << ", rope_theta " << config.rope_theta
            << ", rms_norm_eps " << config.rms_norm_eps << ", tied "
            << (config.tie_word_embeddings ? "yes" : "no") << ", bos "
            << config.bos_token_id.value_or(-1) << ", eos";
  for (std::int64_t id : config.eos_token_ids) std::cout << " " << id;
  std::cout << "\n";

  EXPECT_EQ(file.at("general.architecture").as_string(), "llama");
  EXPECT_EQ(file.at("llama.block_count").as_uint64(), 30u);
  test_support::expect_smollm2_135m_shape(config);
  // A Llama block is nine tensors (two norms, q/k/v/o, gate/up/down); with the token embedding
  // and the final norm, and no output.weight (tied), that is 2 + 9 * 30.
  EXPECT_EQ(file.tensors().size(), 2u + 9u * 30u);
  // The file's quantization: the norms in f32 (61 = 2 per block + the final one), the seven
  // weight matrices of each block in q4_1 (210), the token embedding in q8_0.
  for (int layer = 0; layer < 30; ++layer)
    for (const char* part : {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm",
                             "ffn_gate", "ffn_up", "ffn_down"}) {
      const std::string name = "blk." + std::to_string(layer) + "." + part + ".weight";
      const GgufTensorInfo* tensor = file.find_tensor(name);
      ASSERT_NE(tensor, nullptr) << name;
      const bool norm = std::string_view(part).find("norm") != std::string_view::npos;
      EXPECT_EQ(tensor->type, norm ? GgmlType::f32 : GgmlType::q4_1) << name;
    }
  EXPECT_EQ(types["f32"], 61);
  EXPECT_EQ(types["q4_1"], 210);
  EXPECT_EQ(types["q8_0"], 1);
  EXPECT_EQ(file.tensor("token_embd.weight").type, GgmlType::q8_0);
  const GgufTensorInfo& q = file.tensor("blk.0.attn_q.weight");
  EXPECT_EQ(q.dims, (std::vector<std::uint64_t>{576, 576}));
  EXPECT_EQ(file.tensor("blk.0.attn_k.weight").dims, (std::vector<std::uint64_t>{576, 192}));
  EXPECT_EQ(file.tensor("blk.0.ffn_down.weight").dims, (std::vector<std::uint64_t>{1536, 576}));
  EXPECT_EQ(file.tensor("output_norm.weight").type, GgmlType::f32);
  EXPECT_EQ(file.tensor("token_embd.weight").dims, (std::vector<std::uint64_t>{576, 49152}));
  EXPECT_EQ(file.at("tokenizer.ggml.tokens").as_array().size(), 49152u);

  // Dequantize one q4_1 tensor in full: every value finite, the spread of a trained weight.
  const GgufTensorInfo* q4_1 = nullptr;
  for (const GgufTensorInfo& tensor : file.tensors())
    if (tensor.type == GgmlType::q4_1 &&
        (q4_1 == nullptr || tensor.element_count > q4_1->element_count))
      q4_1 = &tensor;
  ASSERT_NE(q4_1, nullptr) << "no q4_1 tensor in the file";
  const std::vector<float> values = file.tensor_to_float(*q4_1);
  ASSERT_EQ(values.size(), q4_1->element_count);
  double sum = 0.0, sum_squares = 0.0;
  float low = values[0], high = values[0];
  std::size_t non_finite = 0;
  for (float v : values) {
    if (!std::isfinite(v)) ++non_finite;
    sum += v;
    sum_squares += static_cast<double>(v) * v;
    low = std::min(low, v);
    high = std::max(high, v);
  }
  const double mean = sum / static_cast<double>(values.size());
  const double rms = std::sqrt(sum_squares / static_cast<double>(values.size()));
  std::cout << "dequantized " << q4_1->name << " [" << q4_1->dims[0] << " x " << q4_1->dims[1]
            << "] q4_1: " << values.size() << " values; min " << low << ", max " << high
            << ", mean " << mean << ", rms " << rms << ", non-finite " << non_finite << "\n";
  EXPECT_EQ(non_finite, 0u);
  EXPECT_GT(rms, 0.0);
  EXPECT_LT(high - low, 100.0f);

  // Then every tensor of the file (f32 norms, the q8_0 token embedding, the q4_1 weights).
  std::size_t total = 0, total_non_finite = 0;
  for (const GgufTensorInfo& tensor : file.tensors()) {
    const std::vector<float> tensor_values = file.tensor_to_float(tensor);
    total += tensor_values.size();
    for (float v : tensor_values) total_non_finite += std::isfinite(v) ? 0 : 1;
  }
  std::cout << "dequantized all " << file.tensors().size() << " tensors: " << total
            << " values, non-finite " << total_non_finite << "\n";
  EXPECT_EQ(total_non_finite, 0u);
}

}  // namespace
}  // namespace kc::engine
