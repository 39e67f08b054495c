// fuzz/fuzz_int4_checkpoint.cpp — the weight loader (engine/model_weights.cpp) on a GPTQ or AWQ
// checkpoint of arbitrary bytes: the packed projections' tensors found, their dtypes and shapes
// checked, unpacked by stage 3's reader (stage3-hpc/src/int4_groups.cpp) and dequantized.
//
// The first byte picks the config (bits 0-1: GPTQ v1, GPTQ v2, AWQ, GPTQ v1 again; bit 2: tied
// embeddings; bit 3: one group a row instead of groups of 32) of a tiny Llama (hidden 64,
// intermediate 96, one layer, 4 heads of 16, 2 KV heads, vocabulary 16); the rest is the
// .safetensors file, written to a temporary file for the checkpoint reader. When it loads (with
// the groups kept), every tensor of the table has its shape's bf16 values, and every kept group
// form its N x K / 2 nibble bytes, N x K / G scales and zero points of at most 15.
//
//   build/fuzz/stage4-inference/fuzz/fuzz_int4_checkpoint stage4-inference/fuzz/corpus/fuzz_int4_checkpoint
#include <unistd.h>

#include <cstdio>
#include <optional>
#include <string>

#include "fuzz_check.hpp"
#include "kc/engine/model_weights.hpp"
#include "kc/engine/safetensors.hpp"

namespace {

using namespace kc::engine;
using kc::fuzz::touch;

ModelConfig config_of(std::uint8_t selector) {
  ModelConfig c;
  c.architecture = "llama";
  c.hidden_size = 64;
  c.intermediate_size = 96;
  c.num_layers = 1;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 16;
  c.vocab_size = 16;
  c.max_position_embeddings = 64;
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 10000.0;
  c.tie_word_embeddings = (selector & 4) != 0;
  WeightQuantization q;
  static const char* const kFormats[4] = {"gptq", "gptq_v2", "awq", "gptq"};
  q.checkpoint_format = kFormats[selector & 3];
  q.method = (selector & 3) == 2 ? "awq" : "gptq";
  q.group_size = (selector & 8) != 0 ? -1 : 32;
  c.quantization = q;
  return c;
}

void check_tensor(const HostTensor& t) {
  std::int64_t elements = 1;
  for (std::int64_t d : t.shape) elements *= d;
  KC_FUZZ_CHECK(static_cast<std::int64_t>(t.data.size()) == elements);
  touch(reinterpret_cast<const std::byte*>(t.data.data()), t.data.size() * sizeof(std::uint16_t));
}

void check_groups(const std::optional<kc::stage3::Int4GroupHost>& g, const HostTensor& copy) {
  if (!g) return;
  KC_FUZZ_CHECK(copy.shape.size() == 2 && g->n == copy.shape[0] && g->k == copy.shape[1]);
  KC_FUZZ_CHECK(g->group_size > 0 && g->k % g->group_size == 0);
  const std::size_t entries = static_cast<std::size_t>(g->n) * static_cast<std::size_t>(g->k / g->group_size);
  KC_FUZZ_CHECK(g->qweight.size() == static_cast<std::size_t>(g->n) * static_cast<std::size_t>(g->k / 2));
  KC_FUZZ_CHECK(g->scales.size() == entries && g->zeros.size() == entries);
  for (std::uint8_t z : g->zeros) KC_FUZZ_CHECK(z <= 15);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const ModelConfig config = config_of(data[0]);
  char path[] = "/tmp/kc_fuzz_int4_XXXXXX";
  const int fd = ::mkstemp(path);
  if (fd < 0) return 0;
  const std::size_t body = size - 1;
  bool written = ::write(fd, data + 1, body) == static_cast<ssize_t>(body);
  ::close(fd);
  const std::string file = std::string(path) + ".safetensors";
  written = written && std::rename(path, file.c_str()) == 0;
  if (written)
    kc::fuzz::expect_kc_errors_only([&] {
      const SafetensorsCheckpoint checkpoint(file);
      const ModelWeights w = load_model_weights(checkpoint, config, WeightLoadOptions{true});
      check_tensor(w.token_embedding);
      check_tensor(w.final_norm);
      for (const LayerWeights& l : w.layers) {
        for (const HostTensor* t : {&l.attn_norm, &l.q, &l.k, &l.v, &l.o, &l.ffn_norm, &l.gate, &l.up, &l.down})
          check_tensor(*t);
        check_groups(l.groups.q, l.q);
        check_groups(l.groups.k, l.k);
        check_groups(l.groups.v, l.v);
        check_groups(l.groups.o, l.o);
        check_groups(l.groups.gate, l.gate);
        check_groups(l.groups.up, l.up);
        check_groups(l.groups.down, l.down);
      }
      if (!config.tie_word_embeddings) check_groups(w.output_groups, w.lm_head);
    });
  std::remove(written ? file.c_str() : path);
  return 0;
}
