// server/fake_model.cpp — the scripted model step of kc/serve/fake_model.hpp.
#include "kc/serve/fake_model.hpp"

#include <thread>

#include "kc/common/error.hpp"

namespace kc::serve {

FakeModelExecutor::FakeModelExecutor(const engine::Tokenizer& tokenizer,
                                     std::chrono::milliseconds step_delay,
                                     std::optional<engine::TokenId> end_token)
    : script_(tokenizer.encode(kScriptText, /*add_special_tokens=*/false)),
      step_delay_(step_delay) {
  require(!script_.empty(), "fake model: the tokenizer encodes its script to no tokens");
  if (end_token) script_.push_back(*end_token);
}

std::vector<engine::TokenId> FakeModelExecutor::execute(const engine::StepBatch& batch) {
  if (step_delay_.count() > 0) std::this_thread::sleep_for(step_delay_);
  std::vector<engine::TokenId> sampled;
  for (const engine::ScheduledSequence& sequence : batch.sequences)
    if (sequence.samples)
      sampled.push_back(script_[static_cast<std::size_t>(sequence.output_index) % script_.size()]);
  return sampled;
}

}  // namespace kc::serve
