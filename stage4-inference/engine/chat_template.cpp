// The chat formats (kc/engine/chat_template.hpp): recognizing a template and rendering it.
#include "kc/engine/chat_template.hpp"

#include <fmt/format.h>

#include "kc/common/error.hpp"
#include "unicode.hpp"

namespace kc::engine {
namespace {

bool contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}
bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}
bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

// The ChatML loop and generation prompt every recognized ChatML template ends with.
constexpr std::string_view kChatmlLoop =
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";
// SmolLM2's opening: a default system turn when the first message is not a system message.
constexpr std::string_view kChatmlDefaultSystemOpen =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\n";
constexpr std::string_view kChatmlDefaultSystemClose = "<|im_end|>\n' }}{% endif %}";
constexpr std::string_view kChatmlPlainOpen = "{% for message in messages %}";

// Meta-Llama-3-Instruct's template.
constexpr std::string_view kLlama3 =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim "
    "+ '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
    "{{ content }}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";

// meta-llama/Llama-2-7b-chat-hf's template (13b's and 70b's are the same). The "\\n" are Jinja
// escapes inside its string literals; the two spaces after ' ' are Jinja white space, not output.
constexpr std::string_view kLlama2 =
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set "
    "system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set "
    "system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] "
    "== 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate "
    "user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != "
    "false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + "
    "message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if "
    "message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif "
    "message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% "
    "endfor %}";

std::string excerpt(std::string_view text) {
  std::string shown(text.substr(0, 120));
  for (char& c : shown)
    if (c == '\n') c = ' ';
  return text.size() > 120 ? shown + " ..." : shown;
}

// Jinja's trim is Python's str.strip(): white space as Python's str.isspace() has it, which is
// Unicode White_Space plus the four information separators U+001C..U+001F.
std::string python_strip(const std::string& text) {
  const detail::DecodedText decoded = detail::decode_utf8(text, "a chat message");
  const auto space = [](char32_t c) {
    return detail::is_whitespace(c) || (c >= 0x1C && c <= 0x1F);
  };
  std::size_t first = 0, last = decoded.code_points.size();
  while (first < last && space(decoded.code_points[first])) ++first;
  while (last > first && space(decoded.code_points[last - 1])) --last;
  return text.substr(decoded.offsets[first], decoded.offsets[last] - decoded.offsets[first]);
}

std::string llama3_turn(const std::string& role, const std::string& content) {
  return "<|start_header_id|>" + role + "<|end_header_id|>\n\n" + python_strip(content) +
         "<|eot_id|>";
}

// Llama-2-chat's template, step by step: a first system message goes inside the first user turn;
// the turns after it must alternate user/assistant from a user turn (the template raises
// otherwise); a message of another role where an assistant turn would be writes nothing.
std::string render_llama2(const std::vector<ChatMessage>& messages,
                          const ChatRenderOptions& options) {
  if (messages.empty())
    throw Error("a Llama 2 chat needs at least one message (its template reads the first one)");
  const std::string bos = options.bos_token.empty() ? "<s>" : options.bos_token;
  const std::string eos = options.eos_token.empty() ? "</s>" : options.eos_token;
  const bool has_system = messages[0].role == "system";
  const std::size_t first = has_system ? 1 : 0;
  std::string out;
  for (std::size_t i = first; i < messages.size(); ++i) {
    const std::size_t turn = i - first;
    const bool user = messages[i].role == "user";
    if (user != (turn % 2 == 0))
      throw Error(fmt::format("Conversation roles must alternate user/assistant/user/assistant/... "
                              "(Llama 2's template): message {} has role \"{}\"",
                              i, messages[i].role));
    // An empty system message still makes a <<SYS>> block: in Jinja, '' != false.
    const std::string content =
        turn == 0 && has_system
            ? "<<SYS>>\n" + messages[0].content + "\n<</SYS>>\n\n" + messages[i].content
            : messages[i].content;
    if (user)
      out += bos + "[INST] " + python_strip(content) + " [/INST]";
    else if (messages[i].role == "assistant")
      out += " " + python_strip(content) + " " + eos;
  }
  return out;
}

}  // namespace

ChatTemplate ChatTemplate::recognize(std::string_view text, std::string_view source) {
  if (text.empty())
    throw Error(fmt::format("{}: there is no chat template; give the conversation as plain text "
                            "or use a model whose tokenizer carries one",
                            source));
  if (contains(text, "<|im_start|>")) {
    if (text == std::string(kChatmlPlainOpen) + std::string(kChatmlLoop))
      return ChatTemplate(ChatTemplateKind::chatml, "");
    if (starts_with(text, kChatmlDefaultSystemOpen) && ends_with(text, kChatmlLoop)) {
      const std::string_view middle = text.substr(
          kChatmlDefaultSystemOpen.size(),
          text.size() - kChatmlDefaultSystemOpen.size() - kChatmlLoop.size());
      if (ends_with(middle, kChatmlDefaultSystemClose)) {
        const std::string_view system =
            middle.substr(0, middle.size() - kChatmlDefaultSystemClose.size());
        if (!contains(system, "'") && !contains(system, "{") && !contains(system, "<|"))
          return ChatTemplate(ChatTemplateKind::chatml, std::string(system));
      }
    }
    throw Error(fmt::format("{}: the chat template uses ChatML's <|im_start|> but is not a ChatML "
                            "template the engine renders (SmolLM2's, or the plain ChatML loop); "
                            "it begins: {}",
                            source, excerpt(text)));
  }
  if (contains(text, "<|start_header_id|>") && contains(text, "<|eot_id|>")) {
    if (text == kLlama3) return ChatTemplate(ChatTemplateKind::llama3, "");
    if (contains(text, "Cutting Knowledge Date: December 2023") &&
        contains(text, "\"Today Date: \" + date_string"))
      return ChatTemplate(ChatTemplateKind::llama31, "");
    throw Error(fmt::format("{}: the chat template uses Llama 3's <|start_header_id|> but is "
                            "neither Llama 3's template nor one of Llama 3.1/3.2's (with their "
                            "\"Cutting Knowledge Date\" system turn); it begins: {}",
                            source, excerpt(text)));
  }
  if (text == kLlama2) return ChatTemplate(ChatTemplateKind::llama2, "");
  throw Error(fmt::format("{}: unknown chat template: the engine renders ChatML (SmolLM2, "
                          "<|im_start|>), Llama 3 (<|start_header_id|>) and Llama-2-chat's "
                          "([INST], that template exactly) templates; this one begins: {}",
                          source, excerpt(text)));
}

const char* ChatTemplate::name() const {
  switch (kind_) {
    case ChatTemplateKind::chatml: return "ChatML";
    case ChatTemplateKind::llama3: return "Llama 3";
    case ChatTemplateKind::llama31: return "Llama 3.1/3.2";
    case ChatTemplateKind::llama2: return "Llama 2";
  }
  return "unknown";
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages,
                                 const ChatRenderOptions& options) const {
  const std::string llama3_bos =
      options.bos_token.empty() ? "<|begin_of_text|>" : options.bos_token;
  std::string out;
  switch (kind_) {
    case ChatTemplateKind::chatml:
      for (std::size_t i = 0; i < messages.size(); ++i) {
        if (i == 0 && messages[0].role != "system" && !default_system_.empty())
          out += "<|im_start|>system\n" + default_system_ + "<|im_end|>\n";
        out += "<|im_start|>" + messages[i].role + "\n" + messages[i].content + "<|im_end|>\n";
      }
      if (options.add_generation_prompt) out += "<|im_start|>assistant\n";
      return out;
    case ChatTemplateKind::llama3:
      for (std::size_t i = 0; i < messages.size(); ++i) {
        if (i == 0) out += llama3_bos;
        out += llama3_turn(messages[i].role, messages[i].content);
      }
      break;
    case ChatTemplateKind::llama31: {
      if (messages.empty())
        throw Error("a Llama 3.1/3.2 chat needs at least one message (its template reads the "
                    "first one)");
      std::size_t first = 0;
      std::string system;
      if (messages[0].role == "system") {
        system = python_strip(messages[0].content);
        first = 1;
      }
      out += llama3_bos + "<|start_header_id|>system<|end_header_id|>\n\n" +
             "Cutting Knowledge Date: December 2023\nToday Date: " + options.date_string +
             "\n\n" + system + "<|eot_id|>";
      for (std::size_t i = first; i < messages.size(); ++i) {
        if (messages[i].role == "tool" || messages[i].role == "ipython")
          throw Error(fmt::format("message {} has role \"{}\": the engine renders Llama 3.1/3.2 "
                                  "conversations without tools only",
                                  i, messages[i].role));
        out += llama3_turn(messages[i].role, messages[i].content);
      }
      break;
    }
    case ChatTemplateKind::llama2:
      return render_llama2(messages, options);
  }
  if (options.add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

}  // namespace kc::engine
