#!/usr/bin/env python3
"""llama.cpp as a peer of kc-engine-bench: llama-bench on the same GGUF file, on the same GPU.

    python3 bench/peers/llama_cpp_peer.py --llama-bench BUILD/out/bin/llama-bench \\
        --gguf SmolLM2-135M-Instruct.Q4_1.gguf --out llama.json
    kc-engine-bench --model SmolLM2-135M-Instruct.Q4_1.gguf --peers hf.json,llama.json ...

Runs llama-bench twice, all layers on the GPU (-ngl 99), flash attention on unless --no-flash-attn:
decode as `-p 0 -n TOKENS -d CONTEXTS` (TOKENS generated after CONTEXTS tokens already in the
cache: kc-engine-bench's decode rows at those contexts) and prefill as `-p PROMPTS -n 0`, each
repeated -r 5 times (llama-bench reports the mean rate). Writes the rows kc-engine-bench --peers
reads: {"tool": "llama_cpp_peer", "peer": ..., "rows": [{"model": <the file's name>, "metric":
"decode"|"prefill", "context"|"prompt": N, "tok_s": R}]}, with llama-bench's own JSON kept under
"raw". bench/peers/fetch_llama_cpp.sh and build_llama_cpp.sh make the binary.
"""
import argparse
import datetime
import json
import os
import subprocess
import sys


def ints(text):
    return [int(x) for x in text.split(",") if x]


def bench(binary, gguf, extra, flash_attn):
    command = [binary, "-m", gguf, "-ngl", "99", "-fa", "1" if flash_attn else "0", "-r", "5", "-o", "json"] + extra
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        sys.exit(f"llama_cpp_peer: {' '.join(command)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    try:
        results = json.loads(done.stdout)
    except json.JSONDecodeError as error:
        sys.exit(f"llama_cpp_peer: llama-bench wrote no JSON ({error}):\n{done.stdout[-2000:]}")
    if not isinstance(results, list) or not results:
        sys.exit("llama_cpp_peer: llama-bench returned no results")
    return command, results


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--llama-bench", required=True, help="the llama-bench binary")
    parser.add_argument("--gguf", required=True)
    parser.add_argument("--contexts", default="128,2048", help="decode after this many tokens (llama-bench -d)")
    parser.add_argument("--decode-tokens", type=int, default=128)
    parser.add_argument("--prefill", default="512,2048")
    parser.add_argument("--no-flash-attn", action="store_true")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    for path in (args.llama_bench, args.gguf):
        if not os.path.isfile(path):
            sys.exit(f"llama_cpp_peer: no file {path}")

    flash = not args.no_flash_attn
    model = os.path.basename(args.gguf)
    rows = []
    decode_cmd, decode = bench(args.llama_bench, args.gguf,
                               ["-p", "0", "-n", str(args.decode_tokens), "-d", args.contexts], flash)
    prefill_cmd, prefill = bench(args.llama_bench, args.gguf, ["-p", args.prefill, "-n", "0"], flash)
    for r in decode:
        rows.append({"model": model, "metric": "decode", "context": int(r.get("n_depth", 0)),
                     "tokens": int(r["n_gen"]), "tok_s": float(r["avg_ts"])})
    for r in prefill:
        rows.append({"model": model, "metric": "prefill", "prompt": int(r["n_prompt"]), "tok_s": float(r["avg_ts"])})
    raw = decode + prefill
    commands = [" ".join(decode_cmd), " ".join(prefill_cmd)]
    first = raw[0]
    build = first.get("build_commit", "unknown")
    if build == "unknown":  # built from fetch_llama_cpp.sh's archive, which has no git history
        source = os.path.join(os.path.dirname(os.path.abspath(args.llama_bench)), "..", "..", "llama.cpp", "KC_SOURCE")
        if os.path.isfile(source):
            with open(source, encoding="utf-8") as f:
                words = f.read().split()
            build = f"(llama-cpp-python {words[words.index('llama-cpp-python') + 1]})" if "llama-cpp-python" in words else build
    summary = {
        "tool": "llama_cpp_peer",
        "peer": f"llama.cpp {build}" + (" (flash attention)" if flash else ""),
        "device": first.get("gpu_info", ""),
        "backends": first.get("backends", ""),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "commands": commands,
        "rows": rows,
        "raw": raw,
    }
    with open(args.out, "w", encoding="utf-8") as out:
        json.dump(summary, out, indent=1)
        out.write("\n")
    for row in rows:
        size = row.get("context", row.get("prompt"))
        print(f"{row['metric']:8s} {size:6d}: {row['tok_s']:10.1f} tok/s")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
