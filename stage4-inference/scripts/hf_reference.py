#!/usr/bin/env python3
"""Writes the Hugging Face transformers reference that the stage-4 engine's parity tests compare
against: for each case a Llama-shaped model, the logits transformers computes for a few token
sequences, and its greedy continuations. The engine must load the same model, reproduce the
logits within the bf16 tolerance and pick the same top-1 token wherever the reference's top-1/top-2
margin is larger than that tolerance. The format is tests/hf_reference_format.md.

    python3 stage4-inference/scripts/hf_reference.py --out DIR [--device cuda|cpu]
        [--cases gqa1_untied,gqa4_tied,gqa8_llama3,gqa4_gptq,gqa1_awq,smollm2_gguf] [--gguf PATH]
        [--initializer-range STD]

    # on the GPU host (PyTorch, transformers, safetensors; gguf and accelerate for the GGUF
    # case; no network needed), then the engine's parity test on the same GPU:
    python3 stage4-inference/scripts/hf_reference.py --out /tmp/hf-ref --device cuda \\
        --gguf "$(scripts/fetch_smollm2.sh)"
    python3 stage4-inference/scripts/check_hf_reference.py /tmp/hf-ref
    KC_HF_REFERENCE=/tmp/hf-ref ctest --test-dir build/ci -R HfParity -V

It writes, per case, DIR/<case>/:
  config.json, model.safetensors, generation_config.json
                  the random-weight cases' model (LlamaForCausalLM, seeded, bf16), as
                  save_pretrained writes it (transformers 5: RoPE in "rope_parameters")
  reference.json  the case: the model's absolute path, versions, device, config, and per
                  sequence the ids, the prompt length, the greedy continuation and the top-1/top-2
                  logit margins
  seq<k>.f32      the logits of sequence k: float32 little-endian, [n, vocab], row i = logits
                  after reading ids[0..i]
  gptq/, awq/     the cases gqa4_gptq and gqa1_awq only: the same model as a GPTQ (v1: qweight,
                  qzeros, scales, g_idx) or AWQ (GEMM packing: qweight, qzeros, scales)
                  checkpoint for the engine, config.json with its quantization_config; the model
                  in the case's folder, which transformers runs, holds those projections
                  dequantized (s (q - z), rounded to bf16), so both sides read the same weights.
                  reference.json names it "engine_model".
The case smollm2_gguf reads the GGUF file given with --gguf (SmolLM2-135M-Instruct) where it is,
and is skipped, saying so, without --gguf.

Every model runs in bfloat16 with eager attention, loaded with from_pretrained as a checkpoint
is. Each sequence is a prompt of p ids followed by the 32 tokens transformers' generate() picks
greedily after it (do_sample=False and no end-of-text stop, so always 32); the logits come from
one forward pass over all p + 32 ids. Each sequence also records how far bf16 arithmetic alone
moves those logits (the same bf16 weights run in float32): the scale a tolerance must allow.

The random cases' weights have std 0.02 (initializer_range, transformers' default; recorded; set
by --initializer-range). Wider weights do not make the logits more telling: the top-1/top-2
margins grow with the logits' RMS, so their histogram in units of the RMS (the unit the parity
test judges ties in) stays the same, while sharper attention and larger MLP gains make bf16's own
error grow faster. With 0.1, bf16 alone moves gqa8_llama3's logits by up to 0.75 of the row RMS
(0.06 with 0.02) and flips 10 of its 291 judged top-1 tokens (none with 0.02).
"""
import argparse
import copy
import datetime
import hashlib
import importlib.util
import json
import os
import sys
import time

os.environ.setdefault("TQDM_DISABLE", "1")  # transformers' GGUF reader has a bar of its own

T_START = time.perf_counter()

FORMAT = "kc-hf-reference 1"
NEW_TOKENS = 32
INITIALIZER_RANGE = 0.02
MARGIN_BINS = (0.05, 0.1, 0.25)
JUDGED_MARGIN = 0.1  # top-1/top-2 margin, in units of the row's RMS, past which top-1 is judged

# The random-weight cases: the LlamaConfig arguments, the seed, and the prompt lengths.
RANDOM_CASES = {
    "gqa1_untied": dict(
        seed=1001, prompt_lengths=(1, 17, 77),
        config=dict(hidden_size=512, intermediate_size=1408, num_hidden_layers=2,
                    num_attention_heads=8, num_key_value_heads=8, head_dim=64, vocab_size=1000,
                    tie_word_embeddings=False, rope_theta=10000.0, rope_scaling=None,
                    max_position_embeddings=2048, rms_norm_eps=1e-6)),
    "gqa4_tied": dict(
        seed=1002, prompt_lengths=(1, 17, 77),
        config=dict(hidden_size=512, intermediate_size=1408, num_hidden_layers=3,
                    num_attention_heads=8, num_key_value_heads=2, head_dim=64, vocab_size=1000,
                    tie_word_embeddings=True, rope_theta=10000.0, rope_scaling=None,
                    max_position_embeddings=2048, rms_norm_eps=1e-5)),
    "gqa8_llama3": dict(
        seed=1003, prompt_lengths=(1, 17, 300),
        config=dict(hidden_size=2048, intermediate_size=2816, num_hidden_layers=2,
                    num_attention_heads=16, num_key_value_heads=2, head_dim=128, vocab_size=3001,
                    tie_word_embeddings=False, rope_theta=500000.0,
                    rope_scaling=dict(rope_type="llama3", factor=32.0, low_freq_factor=1.0,
                                      high_freq_factor=4.0,
                                      original_max_position_embeddings=8192),
                    max_position_embeddings=131072, rms_norm_eps=1e-5)),
    # Their layer projections quantized in 4-bit groups (round to nearest, min-max), the engine
    # reading them from a GPTQ or AWQ checkpoint (int4_checkpoint below).
    "gqa4_gptq": dict(
        seed=1004, prompt_lengths=(1, 17, 77), int4=("gptq", 128),
        config=dict(hidden_size=512, intermediate_size=1408, num_hidden_layers=2,
                    num_attention_heads=8, num_key_value_heads=2, head_dim=64, vocab_size=1000,
                    tie_word_embeddings=False, rope_theta=10000.0, rope_scaling=None,
                    max_position_embeddings=2048, rms_norm_eps=1e-5)),
    "gqa1_awq": dict(
        seed=1005, prompt_lengths=(1, 17, 77), int4=("awq", 64),
        config=dict(hidden_size=512, intermediate_size=1408, num_hidden_layers=2,
                    num_attention_heads=8, num_key_value_heads=8, head_dim=64, vocab_size=1000,
                    tie_word_embeddings=True, rope_theta=10000.0, rope_scaling=None,
                    max_position_embeddings=2048, rms_norm_eps=1e-6)),
}
# AWQ's GEMM packing: nibble i of a word holds column 8j + AWQ_ORDER[i].
AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)
GGUF_CASE = "smollm2_gguf"
SMOLLM2_PROMPTS = ("What is the capital of France?", "Write a haiku about the sea.",
                   "List three prime numbers.")
ALL_CASES = tuple(RANDOM_CASES) + (GGUF_CASE,)


def fail(message):
    print(f"hf_reference.py: {message}", file=sys.stderr)
    sys.exit(1)


def parse_args():
    parser = argparse.ArgumentParser(
        description="Writes Hugging Face transformers reference logits and greedy continuations "
                    "for the stage-4 engine's parity tests.")
    parser.add_argument("--out", required=True, help="output folder; one subfolder per case")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"),
                        help="where transformers runs (default cuda)")
    parser.add_argument("--cases", default=",".join(ALL_CASES),
                        help=f"comma-separated cases (default all: {','.join(ALL_CASES)})")
    parser.add_argument("--gguf", help="SmolLM2-135M-Instruct GGUF file, for the case "
                                       f"{GGUF_CASE} (e.g. \"$(scripts/fetch_smollm2.sh)\")")
    parser.add_argument("--initializer-range", type=float, default=INITIALIZER_RANGE,
                        help="std of the random cases' weights (default %(default)s)")
    args = parser.parse_args()
    if not 0.0 < args.initializer_range < 1.0:
        fail(f"--initializer-range {args.initializer_range}: give a std in (0, 1)")
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = [c for c in cases if c not in ALL_CASES]
    if unknown or not cases:
        fail(f"unknown case(s) {', '.join(unknown) or '(none given)'}; "
             f"the cases are {', '.join(ALL_CASES)}")
    args.cases = list(dict.fromkeys(cases))
    if args.gguf is not None and GGUF_CASE in args.cases:
        args.gguf = os.path.abspath(args.gguf)
        if not os.path.isfile(args.gguf):
            fail(f"--gguf {args.gguf}: no such file")
        # transformers reads GGUF files through gguf, and loads them only with accelerate.
        missing = [m for m in ("gguf", "accelerate") if importlib.util.find_spec(m) is None]
        if missing:
            fail(f"{GGUF_CASE} needs the Python package(s) {' and '.join(missing)} "
                 f"(pip install {' '.join(missing)})")
    return args


def rope_of(config):
    """(rope_theta, rope_scaling or None) of a transformers config, whichever way it spells them:
    transformers 5 keeps both in config.rope_parameters, older versions in rope_theta and
    rope_scaling."""
    params = getattr(config, "rope_parameters", None)
    if isinstance(params, dict) and "rope_theta" in params:
        theta = float(params["rope_theta"])
        scaling = {k: v for k, v in params.items() if k != "rope_theta"}
    else:
        theta = float(getattr(config, "rope_theta", 10000.0))
        scaling = dict(getattr(config, "rope_scaling", None) or {})
    if "type" in scaling and "rope_type" not in scaling:
        scaling["rope_type"] = scaling.pop("type")
    if scaling.get("rope_type", "default") == "default":
        return theta, None
    return theta, dict(sorted(scaling.items()))


def config_summary(config):
    theta, scaling = rope_of(config)
    return {
        "hidden_size": config.hidden_size,
        "intermediate_size": config.intermediate_size,
        "num_layers": config.num_hidden_layers,
        "num_heads": config.num_attention_heads,
        "num_kv_heads": config.num_key_value_heads,
        "head_dim": getattr(config, "head_dim", None) or
                    config.hidden_size // config.num_attention_heads,
        "vocab_size": config.vocab_size,
        "tie_word_embeddings": bool(config.tie_word_embeddings),
        "rope_theta": theta,
        "rope_scaling": scaling,
        "rms_norm_eps": config.rms_norm_eps,
        "max_position_embeddings": config.max_position_embeddings,
    }


def margins_of(logits):
    """Per position, top-1 logit minus top-2 logit."""
    top2 = torch.topk(logits, 2, dim=-1).values
    return top2[:, 0] - top2[:, 1]


def fp32_copy(model, device):
    """The model with its bf16 weights widened to float32 (exactly), computing in float32."""
    # Built anew from the config: transformers refuses .float() on a model read from GGUF.
    copy32 = transformers.AutoModelForCausalLM.from_config(
        model.config, dtype=torch.float32, attn_implementation="eager")
    copy32.load_state_dict({k: v.float() for k, v in model.state_dict().items()})
    return copy32.to(device).eval()


def run_sequence(model, prompt_ids, device, forward=True):
    """Greedy continuation of the prompt with generate(), then (unless forward is False) one
    forward pass over prompt + continuation. Returns (ids, greedy, float32 logits on the CPU or
    None)."""
    prompt = torch.tensor([prompt_ids], dtype=torch.long, device=device)
    out = model.generate(prompt, attention_mask=torch.ones_like(prompt),
                         max_new_tokens=NEW_TOKENS, do_sample=False, eos_token_id=None,
                         pad_token_id=0, use_cache=True)
    greedy = out[0, len(prompt_ids):].tolist()
    if len(greedy) != NEW_TOKENS:
        fail(f"generate() returned {len(greedy)} new tokens, not {NEW_TOKENS}")
    ids = list(prompt_ids) + greedy
    if not forward:
        return ids, greedy, None
    logits = model(torch.tensor([ids], dtype=torch.long, device=device)).logits
    return ids, greedy, logits[0].float().cpu()


def write_sequence(case_dir, k, prompt_ids, model, model32, device, extra=None):
    ids, greedy, logits = run_sequence(model, prompt_ids, device)
    n, p = len(ids), len(prompt_ids)
    if tuple(logits.shape) != (n, model.config.vocab_size):
        fail(f"logits have shape {tuple(logits.shape)}, not ({n}, {model.config.vocab_size})")
    if not torch.isfinite(logits).all():
        fail(f"sequence {k}: the logits hold NaN or Inf")
    name = f"seq{k}.f32"
    logits.numpy().astype("<f4", copy=False).tofile(os.path.join(case_dir, name))
    margins = margins_of(logits)
    # Where the cached greedy decode and the full forward pass agree on the next token.
    argmax = logits.argmax(dim=-1)
    agree = sum(int(argmax[p - 1 + j] == greedy[j]) for j in range(NEW_TOKENS))
    # How far bf16 arithmetic alone moves the logits: the same bf16 weights run in float32.
    logits32 = model32(torch.tensor([ids], dtype=torch.long, device=device)).logits[0].float().cpu()
    error = (logits - logits32).abs()
    diff = error.max(dim=-1).values
    rms = logits.pow(2).mean(dim=-1).sqrt()
    rel = margins / rms
    judged = rel > JUDGED_MARGIN
    top1_same = argmax == logits32.argmax(dim=-1)
    # The same greedy decode in float32: how many tokens it keeps the bf16 continuation's (how far a
    # token-for-token comparison of two correct bf16 and float32 runs can reach on this model).
    _, greedy32, _ = run_sequence(model32, prompt_ids, device, forward=False)
    same32 = 0
    while same32 < NEW_TOKENS and greedy32[same32] == greedy[same32]:
        same32 += 1
    seq = {
        "ids": ids,
        "logits_file": name,
        "prompt_length": p,
        "greedy": greedy,
        "top2_margin_min": float(margins.min()),
        "top2_margin_hist": {f"lt_{b}": int((margins < b).sum()) for b in MARGIN_BINS},
        "top2_margin_over_rms_min": float(rel.min()),
        "top2_margin_over_rms_hist": {f"lt_{b}": int((rel < b).sum()) for b in MARGIN_BINS},
        "greedy_agrees_with_forward_argmax": agree,
        "bf16_vs_fp32": {
            "max_abs_diff": float(diff.max()),
            "median_row_max_abs_diff": float(diff.median()),
            "worst_over_rms": float((diff / rms).max()),
            "mean_over_rms": float((error / rms[:, None]).mean()),
            "top1_agree": int(top1_same.sum()),
            "judged": int(judged.sum()),
            "top1_agree_judged": int((top1_same & judged).sum()),
            "greedy_same_run": same32,
        },
    }
    if extra:
        seq.update(extra)
    return seq


def load_model(folder, gguf_file, device):
    """The model as transformers loads a checkpoint: bf16 weights, eager attention."""
    model = transformers.AutoModelForCausalLM.from_pretrained(
        folder, gguf_file=gguf_file, dtype=torch.bfloat16, attn_implementation="eager")
    model.to(device).eval()
    where = os.path.join(folder, gguf_file or "")
    if model.config._attn_implementation != "eager":
        fail(f"{where}: transformers runs {model.config._attn_implementation} attention, "
             "not eager")
    for name, buf in model.named_buffers():
        if name.endswith("inv_freq") and buf.dtype != torch.float32:
            fail(f"{where}: the RoPE frequencies {name} are {buf.dtype}, not float32")
    return model


def header(case, model_ref, config, device):
    return {
        "format": FORMAT,
        "case": case,
        "model": model_ref,
        "dtype": "bfloat16",
        "attn_implementation": "eager",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "config": config_summary(config),
    }


def to_int32(words):
    """int64 values in [0, 2^32) as the int32 of the same bits."""
    return torch.where(words >= 2 ** 31, words - 2 ** 32, words).to(torch.int32)


def int4_pack(weight, group_size, method):
    """A [N, K] float32 weight in 4-bit groups of group_size along K, GPTQ's min-max rule rounded
    to nearest: per row and group lo = min(0, min w), hi = max(0, max w), s = (hi - lo) / 15 as a
    half, z = round(-lo / s) in 1..15 (GPTQ v1 stores z - 1, so 0 is not storable), q = round(w / s)
    + z in 0..15 (a group of zeros: s = 0, q = z). Returns the dequantized weight s (q - z) in
    float32 (exact) and the checkpoint's tensors. "gptq" (v1): qweight int32 [K / 8, N] (nibble i
    of word (r, n) is q of k = 8r + i), qzeros int32 [K / G, N / 8] (nibble i of word (u, j) is
    z - 1 of column 8j + i), scales float16 [K / G, N], g_idx int32 [K] (k // G). "awq" (GEMM):
    qweight int32 [K, N / 8] and qzeros int32 [K / G, N / 8] (z itself), nibble i of word (r, j)
    holding column 8j + AWQ_ORDER[i]; scales float16 [K / G, N]."""
    n, k = weight.shape
    groups = weight.reshape(n, k // group_size, group_size)
    lo = groups.amin(-1).clamp(max=0.0)
    hi = groups.amax(-1).clamp(min=0.0)
    scale = ((hi - lo) / 15).to(torch.float16)
    s = scale.float()
    safe = torch.where(s > 0, s, torch.ones_like(s))
    zero = torch.round(-lo / safe).clamp(1, 15)
    q = (torch.round(groups / safe[..., None]) + zero[..., None]).clamp(0, 15)
    q = torch.where(s[..., None] > 0, q, zero[..., None].expand_as(q))
    dequantized = (s[..., None] * (q - zero[..., None])).reshape(n, k)
    nibbles = 4 * torch.arange(8, dtype=torch.int64)
    q = q.reshape(n, k).to(torch.int64).t()  # [K, N]
    scales = scale.t().contiguous()
    if method == "awq":
        order = torch.tensor(AWQ_ORDER)
        along_n = lambda v: to_int32((v.reshape(v.shape[0], n // 8, 8)[..., order] <<
                                      nibbles.reshape(1, 1, 8)).sum(-1)).contiguous()
        return dequantized, {"qweight": along_n(q),
                             "qzeros": along_n(zero.to(torch.int64).t()), "scales": scales}
    qweight = to_int32((q.reshape(k // 8, 8, n) << nibbles.reshape(1, 8, 1)).sum(1))
    z = (zero.to(torch.int64) - 1).t().reshape(k // group_size, n // 8, 8)
    qzeros = to_int32((z << nibbles.reshape(1, 1, 8)).sum(-1))
    g_idx = (torch.arange(k, dtype=torch.int32) // group_size).to(torch.int32)
    return dequantized, {"qweight": qweight.contiguous(), "qzeros": qzeros.contiguous(),
                         "scales": scales, "g_idx": g_idx}


def is_layer_projection(name):
    return name.startswith("model.layers.") and name.endswith("_proj.weight")


def int4_checkpoint(model, method, group_size, folder):
    """Quantizes every layer projection of `model` (bf16, in place: the weights become their
    dequantization rounded to bf16) and writes the GPTQ or AWQ checkpoint of the result into
    `folder`: config.json with the quantization_config, model.safetensors with the packed
    projections and the other weights as they are. Returns the quantization_config."""
    from safetensors.torch import save_file
    os.makedirs(folder, exist_ok=True)
    tensors = {}
    with torch.no_grad():
        for name, param in model.state_dict().items():
            if not is_layer_projection(name):
                tensors[name] = param.detach().clone().contiguous()
                continue
            dequantized, packed = int4_pack(param.float().cpu(), group_size, method)
            param.copy_(dequantized.to(param.dtype))
            prefix = name[:-len(".weight")]
            for part, tensor in packed.items():
                tensors[f"{prefix}.{part}"] = tensor
    if not model.config.tie_word_embeddings:
        tensors.setdefault("lm_head.weight", model.lm_head.weight.detach().clone().contiguous())
    elif "lm_head.weight" in tensors:
        del tensors["lm_head.weight"]  # tied: save_pretrained leaves it out as well
    if method == "awq":
        quantization = {"quant_method": "awq", "bits": 4, "group_size": group_size,
                        "zero_point": True, "version": "gemm", "modules_to_not_convert": None}
    else:
        quantization = {"quant_method": "gptq", "bits": 4, "group_size": group_size,
                        "desc_act": False, "sym": False, "checkpoint_format": "gptq"}
    config = model.config.to_dict()
    config["quantization_config"] = quantization
    config["dtype"] = "bfloat16"  # transformers 5's key; to_dict() leaves it null before a save
    with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)
    save_file(tensors, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})
    return quantization


def case_folder(out, name):
    """DIR/<case>/, without the reference.json of an earlier run: until this run writes its own,
    the folder does not claim to hold a reference."""
    case_dir = os.path.join(out, name)
    os.makedirs(case_dir, exist_ok=True)
    old = os.path.join(case_dir, "reference.json")
    if os.path.exists(old):
        os.remove(old)
    return case_dir


def random_case(name, spec, out, device, init_range):
    case_dir = case_folder(out, name)
    # A deep copy: transformers 5 folds rope_theta into the rope_scaling dict it is given, in
    # place, when it makes config.rope_parameters.
    kwargs = copy.deepcopy(spec["config"])
    theta, scaling = kwargs["rope_theta"], copy.deepcopy(kwargs["rope_scaling"])
    config = transformers.LlamaConfig(**kwargs, initializer_range=init_range,
                                      bos_token_id=1, eos_token_id=2,
                                      attn_implementation="eager")
    if rope_of(config) != (theta, scaling):
        fail(f"{name}: transformers made the RoPE {rope_of(config)}, not {(theta, scaling)}")
    # Built and initialized in float32 on the CPU, so the weights do not depend on the device,
    # then rounded to bf16 and saved.
    torch.manual_seed(spec["seed"])
    model = transformers.LlamaForCausalLM(config).to(torch.bfloat16)
    quantization = None
    if spec.get("int4"):
        method, group_size = spec["int4"]
        quantization = int4_checkpoint(model, method, group_size, os.path.join(case_dir, method))
    model.save_pretrained(case_dir, safe_serialization=True)
    del model
    # The reference runs the checkpoint as loaded from the files. (The model built above must
    # not run: .to(torch.bfloat16) also rounds its RoPE inverse frequencies to bf16, which
    # from_pretrained keeps in float32; at position 300 that moves angles by up to 0.54 rad.)
    model = load_model(case_dir, None, device)
    if rope_of(model.config) != (theta, scaling):
        fail(f"{case_dir}/config.json: transformers reads the RoPE back as "
             f"{rope_of(model.config)}, not {(theta, scaling)}")
    model32 = fp32_copy(model, device)

    generator = torch.Generator().manual_seed(spec["seed"])
    sequences = []
    for k, p in enumerate(spec["prompt_lengths"]):
        prompt = torch.randint(0, config.vocab_size, (p,), generator=generator).tolist()
        sequences.append(write_sequence(case_dir, k, prompt, model, model32, device))
    ref = header(name, os.path.abspath(case_dir), model.config, device)
    ref["config"]["initializer_range"] = init_range
    ref["seed"] = spec["seed"]
    if quantization is not None:
        ref["engine_model"] = os.path.abspath(os.path.join(case_dir, quantization["quant_method"]))
        ref["quantization"] = quantization
    ref["sequences"] = sequences
    return case_dir, ref


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def gguf_case(gguf_path, out, device):
    case_dir = case_folder(out, GGUF_CASE)
    folder, file_name = os.path.split(gguf_path)
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder, gguf_file=file_name)
    model = load_model(folder, file_name, device)
    model32 = fp32_copy(model, device)
    if model.config.model_type != "llama":
        fail(f"{gguf_path}: transformers reads a {model.config.model_type} model, not llama")
    if tokenizer.chat_template is None:
        fail(f"{gguf_path}: the tokenizer transformers loads from it has no chat template")

    sequences = []
    for k, text in enumerate(SMOLLM2_PROMPTS):
        messages = [{"role": "user", "content": text}]
        chat_text = tokenizer.apply_chat_template(messages, add_generation_prompt=True,
                                                  tokenize=False)
        prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True,
                                               tokenize=True)
        if hasattr(prompt, "keys"):  # transformers 5 returns a BatchEncoding
            prompt = prompt["input_ids"]
        prompt = [int(i) for i in prompt]
        plain = tokenizer(chat_text, add_special_tokens=False)["input_ids"]
        if plain != prompt:
            fail(f"{gguf_path}: the chat template's ids differ from the ids of its text "
                 f"({prompt} against {plain})")
        seq = write_sequence(case_dir, k, prompt, model, model32, device,
                             extra={"messages": messages, "prompt_text": chat_text})
        seq["greedy_text"] = tokenizer.decode(seq["greedy"], skip_special_tokens=False)
        sequences.append(seq)
    ref = header(GGUF_CASE, gguf_path, model.config, device)
    ref["model_size"] = os.path.getsize(gguf_path)
    ref["model_sha256"] = sha256_of(gguf_path)
    ref["sequences"] = sequences
    return case_dir, ref


def to_json(value, indent=""):
    """JSON indented by one space a level, with each list of numbers on one line."""
    inner = indent + " "
    if isinstance(value, dict) and value:
        items = [f"{inner}{json.dumps(k)}: {to_json(v, inner)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + indent + "}"
    if isinstance(value, list) and value and not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        return "[\n" + ",\n".join(inner + to_json(v, inner) for v in value) + "\n" + indent + "]"
    return json.dumps(value, ensure_ascii=False)


def main():
    args = parse_args()
    global torch, transformers
    try:
        import torch
        import transformers
    except ImportError as e:
        fail(f"{e}; this script needs PyTorch and transformers (pip install torch transformers "
             "safetensors gguf accelerate)")
    if args.device == "cuda" and not torch.cuda.is_available():
        fail("--device cuda, but PyTorch sees no CUDA device (use --device cpu to run on the CPU)")
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    os.makedirs(args.out, exist_ok=True)
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, device "
          f"{torch.cuda.get_device_name() if args.device == 'cuda' else 'cpu'}, imports "
          f"{time.perf_counter() - T_START:.1f} s", flush=True)

    written = 0
    with torch.inference_mode():
        for case in args.cases:
            t0 = time.perf_counter()
            if case == GGUF_CASE:
                if args.gguf is None:
                    print(f"{case}: skipped, no --gguf file given (SmolLM2-135M-Instruct, "
                          "from scripts/fetch_smollm2.sh)", flush=True)
                    continue
                case_dir, ref = gguf_case(args.gguf, args.out, args.device)
            else:
                case_dir, ref = random_case(case, RANDOM_CASES[case], args.out, args.device,
                                            args.initializer_range)
            with open(os.path.join(case_dir, "reference.json"), "w", encoding="utf-8") as f:
                f.write(to_json(ref) + "\n")
            written += 1
            seqs = ref["sequences"]
            hist = {b: sum(s["top2_margin_hist"][f"lt_{b}"] for s in seqs) for b in MARGIN_BINS}
            positions = sum(len(s["ids"]) for s in seqs)
            agree = sum(s["greedy_agrees_with_forward_argmax"] for s in seqs)
            rel = {b: sum(s["top2_margin_over_rms_hist"][f"lt_{b}"] for s in seqs)
                   for b in MARGIN_BINS}
            fp = [s["bf16_vs_fp32"] for s in seqs]
            print(f"{case}: {time.perf_counter() - t0:.1f} s, {len(seqs)} sequences, "
                  f"{positions} positions; top-2 margin min "
                  f"{min(s['top2_margin_min'] for s in seqs):.4f}, "
                  + ", ".join(f"<{b}: {hist[b]}" for b in MARGIN_BINS)
                  + "; over the row RMS "
                  + ", ".join(f"<{b}: {rel[b]}" for b in MARGIN_BINS)
                  + f"; greedy = forward argmax at {agree}/{len(seqs) * NEW_TOKENS}; "
                  f"bf16 vs fp32: |diff| <= {max(f['max_abs_diff'] for f in fp):.3f}, worst "
                  f"{max(f['worst_over_rms'] for f in fp):.3f} and mean "
                  f"{sum(f['mean_over_rms'] for f in fp) / len(fp):.4f} of the RMS, top-1 "
                  f"{sum(f['top1_agree_judged'] for f in fp)}/{sum(f['judged'] for f in fp)} "
                  f"where the margin > {JUDGED_MARGIN} RMS, greedy identical runs "
                  + " ".join(f"{f['greedy_same_run']}/{NEW_TOKENS}" for f in fp), flush=True)
    print(f"{written} case(s) written to {args.out} in {time.perf_counter() - T_START:.1f} s "
          "(imports included)")


if __name__ == "__main__":
    main()
