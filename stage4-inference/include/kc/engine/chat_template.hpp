// kc/engine/chat_template.hpp — the chat formats of the supported models, rendered in C++.
//
// A model's chat template is a Jinja program (tokenizer_config.json's "chat_template", GGUF's
// tokenizer.chat_template). The engine does not run Jinja: it recognizes the templates of the
// models it supports and renders their format itself, and refuses any other template, saying
// what it found. The formats:
//
//   ChatML (SmolLM2)   <|im_start|>{role}\n{content}<|im_end|>\n ... then <|im_start|>assistant\n
//                      SmolLM2's template puts its default system message first when the
//                      conversation has none.
//   Llama 3            {bos}<|start_header_id|>{role}<|end_header_id|>\n\n{content, trimmed}<|eot_id|>
//                      ... then <|start_header_id|>assistant<|end_header_id|>\n\n
//   Llama 3.1 / 3.2    as Llama 3, always opening with a system turn that states the knowledge
//                      cutoff and the date ("Cutting Knowledge Date: December 2023\nToday Date:
//                      26 Jul 2024\n\n") before the system message. Only conversations without
//                      tools are rendered; tool and ipython turns are refused.
//   Llama 2 (chat)     {bos}[INST] {user, trimmed} [/INST] {assistant, trimmed} {eos}{bos}...
//                      (meta-llama/Llama-2-*-chat-hf's template); a system message goes inside the
//                      first [INST] as "<<SYS>>\n{system}\n<</SYS>>\n\n". Turns must alternate
//                      user/assistant, starting with the user (the template raises otherwise);
//                      there is no generation prompt: "[/INST]" already asks for the reply.
//
// The rendered text contains the special tokens as text; encode it with add_special_tokens =
// false (the BOS is already there), as transformers' apply_chat_template does.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kc::engine {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant"
  std::string content;
};

enum class ChatTemplateKind { chatml, llama3, llama31, llama2 };

struct ChatRenderOptions {
  // Append the header of the assistant's turn, so the model writes the reply next.
  bool add_generation_prompt = true;
  // The BOS text the Llama templates write, and the EOS text Llama 2's writes after each reply;
  // empty: the model's own ("<|begin_of_text|>" for Llama 3, "<s>" and "</s>" for Llama 2).
  std::string bos_token;
  std::string eos_token;
  // Llama 3.1/3.2's "Today Date"; their templates default to this date (3.2's takes today's date
  // when the renderer offers strftime_now, as transformers does).
  std::string date_string = "26 Jul 2024";
};

class ChatTemplate {
 public:
  // Recognizes a supported model's template; throws kc::Error naming `source` (the file it came
  // from) and saying what the template looks like when it is not one the engine renders.
  static ChatTemplate recognize(std::string_view template_text, std::string_view source);
  // Plain ChatML with no default system message, for a tokenizer that carries no template
  // (a tokenizer.json: the template lives in tokenizer_config.json).
  static ChatTemplate chatml() { return ChatTemplate(ChatTemplateKind::chatml, ""); }

  ChatTemplateKind kind() const { return kind_; }
  const char* name() const;
  // ChatML: the system message used when the conversation has none (empty: none is added).
  const std::string& default_system_message() const { return default_system_; }

  std::string render(const std::vector<ChatMessage>& messages,
                     const ChatRenderOptions& options = {}) const;

 private:
  ChatTemplate(ChatTemplateKind kind, std::string default_system)
      : kind_(kind), default_system_(std::move(default_system)) {}

  ChatTemplateKind kind_;
  std::string default_system_;
};

}  // namespace kc::engine
