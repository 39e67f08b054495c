// kc/serve/fake_model.hpp — a model step without a model, so kc-serve runs and is tested on a
// machine with no GPU (`kc-serve --fake-model`).
//
// Every sequence's output is one fixed text, tokenized and repeated: the sampled token number i
// of a request is script[i % script.size()], whatever the prompt. Given an end token (a chat
// model's end of turn, <|im_end|>), the script is the text's tokens and then that token, so a
// chat reply ends as a model's would. The real scheduler, tokenizer, detokenizer and stop
// conditions run as they would with a model; only logits are missing.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "kc/engine/scheduler.hpp"
#include "kc/engine/tokenizer.hpp"

namespace kc::serve {

class FakeModelExecutor : public engine::ModelExecutor {
 public:
  static constexpr const char* kScriptText = "Hello from the kc-serve fake model. ";

  // `step_delay` is slept each step, so a client can disconnect in the middle of a stream.
  FakeModelExecutor(const engine::Tokenizer& tokenizer, std::chrono::milliseconds step_delay,
                    std::optional<engine::TokenId> end_token = std::nullopt);
  std::vector<engine::TokenId> execute(const engine::StepBatch& batch) override;
  const std::vector<engine::TokenId>& script() const { return script_; }

 private:
  std::vector<engine::TokenId> script_;
  std::chrono::milliseconds step_delay_;
};

}  // namespace kc::serve
