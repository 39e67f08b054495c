#!/usr/bin/env python3
"""Hugging Face transformers as the peer of kc's engine (stage 4): the rates kc-engine-bench
measures, for the same models, on this machine's GPU, eager or with a static cache and torch.compile.

    python3 bench/peers/hf_engine_peers.py --synthetic smollm2-135m,llama-3.2-1b --out hf.json
    python3 bench/peers/hf_engine_peers.py --model /path/SmolLM2-135M-Instruct.Q4_1.gguf --out hf.json
    kc-engine-bench --synthetic smollm2-135m,llama-3.2-1b --peers hf.json --markdown DIR

A model is a published configuration (--synthetic: the config.json values kc's
kc/engine/published_configs.hpp holds, random weights drawn on the GPU: the shape decides the
time) or a checkpoint (--model: a Hugging Face directory, or a GGUF file, which transformers
dequantizes to bf16 as kc does; needs the gguf package). Everything runs in bfloat16.

  --mode eager     (default) eager attention and transformers' default dynamic KV cache, as
                   `model.generate` runs out of the box.
  --mode compiled  SDPA attention and a static KV cache (`cache_implementation="static"`), which
                   makes generate() compile its decode step with torch.compile on a GPU
                   (transformers' compile_config: fullgraph, "reduce-overhead", i.e. CUDA graphs);
                   the cache is sized once per batch size (max_cache_len: the longest context plus
                   the decode tokens at batch 1, prompt plus output tokens for the concurrency
                   rows) so one compilation serves every row of that batch size; each is compiled
                   in an untimed warm-up. The prefill is not compiled (generate() compiles decode
                   steps only); its rows are the same forward pass as in eager mode, with SDPA.

  decode       batch 1, a prompt of C random tokens: generate() of N and of 1 new tokens
               (greedy, min_new_tokens = max_new_tokens), tok/s = (N - 1) / (t_N - t_1), the
               median of three pairs;
  prefill      one forward pass over P random tokens: P / time (median of three);
  concurrency  K prompts of the same length in one batch, generate() of T new tokens each:
               K x T / time (a static batch: transformers has no continuous batching), the
               median of three after an untimed run of the same batch.

Eager decode is bound by the host (Python and a launch per operation), so its rate follows the
CPU's clock and load: every model first generates 32 tokens untimed, each batch size of the
concurrency rows runs once untimed, and each row is a median of three. Each row also records
`spread` (max - min over its three runs, as a fraction of the median), so a table can show how far
a peer moved within its own run.

Writes JSON: {"tool": "hf_engine_peers", "peer": "HF transformers <version> eager" (or "... static
cache + torch.compile"), "torch",
"device", "date", "rows": [{"model", "metric": "decode"|"prefill"|"concurrency", "context" |
"prompt" | "requests", ..., "tok_s", "spread"}]}; kc-engine-bench --peers puts each row beside its
own.
"""
import argparse
import datetime
import json
import statistics
import sys
import time

PUBLISHED = {
    "smollm2-135m": dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                         num_key_value_heads=3, vocab_size=49152, max_position_embeddings=8192, rms_norm_eps=1e-5,
                         rope_theta=100000.0, tie_word_embeddings=True),
    "llama-3.2-1b": dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
                         num_key_value_heads=8, head_dim=64, vocab_size=128256, max_position_embeddings=131072,
                         rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=True,
                         rope_scaling=dict(rope_type="llama3", factor=32.0, low_freq_factor=1.0,
                                           high_freq_factor=4.0, original_max_position_embeddings=8192)),
    "llama-3.1-8b": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                         num_key_value_heads=8, vocab_size=128256, max_position_embeddings=131072,
                         rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=False,
                         rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                                           high_freq_factor=4.0, original_max_position_embeddings=8192)),
}


def spread(rates):
    """(max - min) / median of a row's runs."""
    return (max(rates) - min(rates)) / statistics.median(rates)


def ints(text):
    return [int(x) for x in text.split(",") if x]


def load(name, model_path, torch, transformers, device, attention):
    if model_path is None:
        config = transformers.LlamaConfig(**PUBLISHED[name])
        config._attn_implementation = attention
        with torch.device(device):
            model = transformers.LlamaForCausalLM(config).to(torch.bfloat16)
        return model.eval()
    import os
    kwargs = dict(dtype=torch.bfloat16, attn_implementation=attention)  # transformers 5: dtype (torch_dtype is deprecated)
    if os.path.isfile(model_path):
        model = transformers.AutoModelForCausalLM.from_pretrained(
            os.path.dirname(os.path.abspath(model_path)), gguf_file=os.path.basename(model_path), **kwargs)
    else:
        model = transformers.AutoModelForCausalLM.from_pretrained(model_path, **kwargs)
    return model.to(device).eval()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--synthetic", help="published shapes, comma-separated: " + ", ".join(PUBLISHED))
    parser.add_argument("--model", help="a Hugging Face directory or a GGUF file")
    parser.add_argument("--contexts", type=ints, default=[128, 2048])
    parser.add_argument("--decode-tokens", type=int, default=64)
    parser.add_argument("--prefill", type=ints, default=[512, 2048])
    parser.add_argument("--concurrency", type=ints, default=[1, 8, 64])
    parser.add_argument("--concurrency-prompt", type=int, default=128)
    parser.add_argument("--concurrency-tokens", type=int, default=128)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--mode", choices=["eager", "compiled"], default="eager")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    if (args.synthetic is None) == (args.model is None):
        parser.error("give --synthetic or --model (one of them)")
    names = args.synthetic.split(",") if args.synthetic else [args.model]
    for name in names:
        if args.synthetic and name not in PUBLISHED:
            parser.error(f"unknown shape '{name}' (known: {', '.join(PUBLISHED)})")

    import torch
    import transformers
    transformers.logging.disable_progress_bar()
    torch.manual_seed(args.seed)
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)

    def timed(fn):
        sync()
        start = time.perf_counter()
        fn()
        sync()
        return time.perf_counter() - start

    rows = []
    for name in names:
        compiled = args.mode == "compiled"
        model = load(name if args.synthetic else None, None if args.synthetic else name, torch, transformers,
                     args.device, "sdpa" if compiled else "eager")
        vocab = model.config.vocab_size

        def prompt(batch, length):
            return torch.randint(0, vocab, (batch, length), device=args.device)

        def generate(ids, new, cache_len=None):
            extra = dict(cache_implementation="static", max_cache_len=cache_len) if compiled else {}
            with torch.no_grad():
                model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new, min_new_tokens=new,
                               do_sample=False, pad_token_id=0, **extra)

        decode_cache = max(args.contexts, default=16) + args.decode_tokens
        # Warm-up (compiled: compiles the batch-1 decode step), long enough for the host's clocks.
        generate(prompt(1, 16), 32, decode_cache)
        for context in args.contexts:
            ids = prompt(1, context)
            pairs = [(timed(lambda: generate(ids, args.decode_tokens, decode_cache)),
                      timed(lambda: generate(ids, 1, decode_cache)))
                     for _ in range(3)]
            rates = [(args.decode_tokens - 1) / (n - one) for n, one in pairs]
            rate = statistics.median(rates)
            rows.append(dict(model=name, metric="decode", context=context, tokens=args.decode_tokens, tok_s=rate,
                             spread=spread(rates)))
            print(f"{name}: decode at context {context}: {rate:.1f} tok/s (spread {spread(rates):.1%})",
                  file=sys.stderr)
        for length in args.prefill:
            ids = prompt(1, length)
            with torch.no_grad():
                rates = [length / timed(lambda: model(ids)) for _ in range(3)]
            rate = statistics.median(rates)
            rows.append(dict(model=name, metric="prefill", prompt=length, tok_s=rate, spread=spread(rates)))
            print(f"{name}: prefill of {length}: {rate:.0f} tok/s (spread {spread(rates):.1%})", file=sys.stderr)
        for requests in args.concurrency:
            ids = prompt(requests, args.concurrency_prompt)
            batch_cache = args.concurrency_prompt + args.concurrency_tokens
            # Untimed first: compiles this batch size's decode step (compiled), warms the
            # allocator's blocks for this batch (eager).
            generate(ids, args.concurrency_tokens, batch_cache)
            rates = [requests * args.concurrency_tokens / timed(lambda: generate(ids, args.concurrency_tokens,
                                                                                 batch_cache))
                     for _ in range(3)]
            rate = statistics.median(rates)
            rows.append(dict(model=name, metric="concurrency", requests=requests, prompt=args.concurrency_prompt,
                             tokens=args.concurrency_tokens, tok_s=rate, spread=spread(rates)))
            print(f"{name}: {requests} requests at once: {rate:.1f} output tok/s (spread {spread(rates):.1%})",
                  file=sys.stderr)
        del model
        if args.device == "cuda":
            torch.cuda.empty_cache()

    mode = "static cache + torch.compile" if args.mode == "compiled" else "eager"
    result = dict(tool="hf_engine_peers", peer=f"HF transformers {transformers.__version__} {mode}",
                  torch=torch.__version__,
                  device=torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
                  date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), rows=rows)
    with open(args.out, "w") as out:
        json.dump(result, out, indent=1)
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
