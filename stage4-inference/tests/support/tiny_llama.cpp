// Test support: a small random Llama model and its double-precision forward pass.
#include "support/tiny_llama.hpp"

#include <cmath>
#include <random>

#include "kc/engine/dequantize.hpp"
#include "kc/engine/rope_table.hpp"

namespace kc::engine::test_support {
namespace {

HostTensor make_tensor(const char* name, std::vector<std::int64_t> shape, std::mt19937_64& rng, float low,
                       float high) {
  HostTensor tensor;
  tensor.name = name;
  tensor.shape = std::move(shape);
  std::int64_t count = 1;
  for (std::int64_t d : tensor.shape) count *= d;
  std::uniform_real_distribution<float> uniform(low, high);
  tensor.data.resize(static_cast<std::size_t>(count));
  for (auto& value : tensor.data) value = float_to_bfloat16(uniform(rng));
  return tensor;
}

HostTensor projection(const char* name, std::int64_t out, std::int64_t in, std::mt19937_64& rng) {
  const float bound = static_cast<float>(std::sqrt(3.0 / static_cast<double>(in)));  // variance 1 / in
  return make_tensor(name, {out, in}, rng, -bound, bound);
}

float element(const HostTensor& tensor, std::size_t i) { return bfloat16_to_float(tensor.data[i]); }

// Multiplies every element by `factor` (rounded to bf16 again).
void scale(HostTensor& tensor, float factor) {
  for (std::size_t i = 0; i < tensor.data.size(); ++i) tensor.data[i] = float_to_bfloat16(factor * element(tensor, i));
}

// y = W x for W [out, in] as a HostTensor.
std::vector<double> matvec(const HostTensor& w, const std::vector<double>& x) {
  const std::int64_t out = w.shape[0], in = w.shape[1];
  std::vector<double> y(static_cast<std::size_t>(out), 0.0);
  for (std::int64_t r = 0; r < out; ++r) {
    double sum = 0.0;
    for (std::int64_t c = 0; c < in; ++c)
      sum += static_cast<double>(element(w, static_cast<std::size_t>(r * in + c))) * x[static_cast<std::size_t>(c)];
    y[static_cast<std::size_t>(r)] = sum;
  }
  return y;
}

std::vector<double> rmsnorm(const std::vector<double>& x, const HostTensor& weight, double eps) {
  double sum = 0.0;
  for (double v : x) sum += v * v;
  const double inv = 1.0 / std::sqrt(sum / static_cast<double>(x.size()) + eps);
  std::vector<double> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * element(weight, i);
  return y;
}

}  // namespace

ModelConfig tiny_llama_config(std::int64_t hidden, std::int64_t intermediate, std::int64_t layers,
                              std::int64_t heads, std::int64_t kv_heads, std::int64_t vocab, bool tied) {
  ModelConfig config;
  config.architecture = "llama";
  config.hidden_size = hidden;
  config.intermediate_size = intermediate;
  config.num_layers = layers;
  config.num_heads = heads;
  config.num_kv_heads = kv_heads;
  config.head_dim = hidden / heads;
  config.vocab_size = vocab;
  config.max_position_embeddings = 4096;
  config.rms_norm_eps = 1e-5;
  config.rope_theta = 10000.0;
  config.tie_word_embeddings = tied;
  return config;
}

ModelWeights tiny_llama_weights(const ModelConfig& c, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  ModelWeights weights;
  weights.config = c;
  weights.token_embedding = make_tensor("embed", {c.vocab_size, c.hidden_size}, rng, -1.f, 1.f);
  const std::int64_t q_width = c.num_heads * c.head_dim, kv_width = c.num_kv_heads * c.head_dim;
  for (std::int64_t l = 0; l < c.num_layers; ++l) {
    LayerWeights layer;
    layer.attn_norm = make_tensor("attn_norm", {c.hidden_size}, rng, 0.8f, 1.2f);
    layer.q = projection("q", q_width, c.hidden_size, rng);
    layer.k = projection("k", kv_width, c.hidden_size, rng);
    layer.v = projection("v", kv_width, c.hidden_size, rng);
    layer.o = projection("o", c.hidden_size, q_width, rng);
    layer.ffn_norm = make_tensor("ffn_norm", {c.hidden_size}, rng, 0.8f, 1.2f);
    layer.gate = projection("gate", c.intermediate_size, c.hidden_size, rng);
    layer.up = projection("up", c.intermediate_size, c.hidden_size, rng);
    layer.down = projection("down", c.hidden_size, c.intermediate_size, rng);
    // A query scaled up makes the attention weights peaked: a wrong key or position shows.
    scale(layer.q, 3.f);
    weights.layers.push_back(std::move(layer));
  }
  weights.final_norm = make_tensor("final_norm", {c.hidden_size}, rng, 0.8f, 1.2f);
  if (!c.tie_word_embeddings) {  // logits with a standard deviation of about 3
    weights.lm_head = projection("lm_head", c.vocab_size, c.hidden_size, rng);
    scale(weights.lm_head, 3.f);
  }
  return weights;
}

std::vector<double> reference_logits(const ModelWeights& w, const std::vector<std::int32_t>& ids,
                                     const std::vector<float>& rope_freq_factors) {
  const ModelConfig& c = w.config;
  const std::size_t n = ids.size(), hidden = static_cast<std::size_t>(c.hidden_size);
  const std::int64_t d = c.head_dim, group = c.num_heads / c.num_kv_heads;
  const std::vector<double> inv_freq = rope_inverse_frequencies(c, rope_freq_factors);
  auto rotate = [&](std::vector<double>& x, std::int64_t heads, std::size_t position) {
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t i = 0; i < d / 2; ++i) {
        const double angle = static_cast<double>(position) * inv_freq[static_cast<std::size_t>(i)];
        double& a = x[static_cast<std::size_t>(h * d + i)];
        double& b = x[static_cast<std::size_t>(h * d + i + d / 2)];
        const double ra = a * std::cos(angle) - b * std::sin(angle);
        const double rb = b * std::cos(angle) + a * std::sin(angle);
        a = ra;
        b = rb;
      }
  };

  std::vector<std::vector<double>> x(n, std::vector<double>(hidden));
  for (std::size_t t = 0; t < n; ++t)
    for (std::size_t i = 0; i < hidden; ++i) x[t][i] = element(w.token_embedding, static_cast<std::size_t>(ids[t]) * hidden + i);

  for (const LayerWeights& layer : w.layers) {
    std::vector<std::vector<double>> q(n), k(n), v(n);
    for (std::size_t t = 0; t < n; ++t) {
      const std::vector<double> h = rmsnorm(x[t], layer.attn_norm, c.rms_norm_eps);
      q[t] = matvec(layer.q, h);
      k[t] = matvec(layer.k, h);
      v[t] = matvec(layer.v, h);
      rotate(q[t], c.num_heads, t);
      rotate(k[t], c.num_kv_heads, t);
    }
    const double scale = 1.0 / std::sqrt(static_cast<double>(d));
    for (std::size_t t = 0; t < n; ++t) {
      std::vector<double> attn(static_cast<std::size_t>(c.num_heads * d), 0.0);
      for (std::int64_t h = 0; h < c.num_heads; ++h) {
        const std::int64_t kv = h / group;
        std::vector<double> s(t + 1);
        double m = -INFINITY;
        for (std::size_t j = 0; j <= t; ++j) {
          double dot = 0.0;
          for (std::int64_t e = 0; e < d; ++e)
            dot += q[t][static_cast<std::size_t>(h * d + e)] * k[j][static_cast<std::size_t>(kv * d + e)];
          s[j] = dot * scale;
          m = std::max(m, s[j]);
        }
        double sum = 0.0;
        for (double& value : s) sum += (value = std::exp(value - m));
        for (std::size_t j = 0; j <= t; ++j)
          for (std::int64_t e = 0; e < d; ++e)
            attn[static_cast<std::size_t>(h * d + e)] += s[j] / sum * v[j][static_cast<std::size_t>(kv * d + e)];
      }
      const std::vector<double> o = matvec(layer.o, attn);
      for (std::size_t i = 0; i < hidden; ++i) x[t][i] += o[i];
      const std::vector<double> h = rmsnorm(x[t], layer.ffn_norm, c.rms_norm_eps);
      const std::vector<double> gate = matvec(layer.gate, h), up = matvec(layer.up, h);
      std::vector<double> act(gate.size());
      for (std::size_t i = 0; i < gate.size(); ++i) act[i] = gate[i] / (1.0 + std::exp(-gate[i])) * up[i];
      const std::vector<double> down = matvec(layer.down, act);
      for (std::size_t i = 0; i < hidden; ++i) x[t][i] += down[i];
    }
  }
  const HostTensor& out = w.output_projection();
  std::vector<double> logits;
  logits.reserve(n * static_cast<std::size_t>(c.vocab_size));
  for (std::size_t t = 0; t < n; ++t) {
    const std::vector<double> row = matvec(out, rmsnorm(x[t], w.final_norm, c.rms_norm_eps));
    logits.insert(logits.end(), row.begin(), row.end());
  }
  return logits;
}

}  // namespace kc::engine::test_support
