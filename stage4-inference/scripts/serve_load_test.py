#!/usr/bin/env python3
"""Many streaming clients against kc-serve at once, with faults: the server's load test.

    python3 stage4-inference/scripts/serve_load_test.py --url http://127.0.0.1:8000 \
        --clients 256 --duration 120 --max-tokens 128 --out load.json
    # or start the server itself on a free loopback port (arguments after --spawn, up to "--"):
    python3 stage4-inference/scripts/serve_load_test.py --spawn build/ci/stage4-inference/server/kc-serve \
        --fake-model --tokenizer stage4-inference/tests/data/tokenizer/smollm2.tokenizer.json -- \
        --clients 48 --duration 5

Each client sends streaming /v1/completions requests (SSE, stream_options.include_usage) one
after the other until --duration has passed, with a prompt of --prompt-words random words. Faults:
--disconnect-fraction of the requests close their connection after a few events (the server must
cancel them and free their KV blocks); --burst N fires N extra requests at once halfway through
(past the server's --max-queue they must get 429 with Retry-After, and the others carry on); a
client that gets a 429 waits as Retry-After says (at most --retry-cap seconds) and tries again.

Measured (stdlib only: asyncio sockets, no HTTP library): requests completed, rejected (429) and
failed (anything else, target: none), output tokens from each stream's usage, requests/s and
tokens/s over the run, time to first token and the time between tokens (p50, p99). Afterwards it
waits for the server to go idle and reads /metrics: running sequences, queue and KV blocks in use
must all be back at 0 (no leaked block). Exit status 1 when a request failed unexpectedly or a
block leaked; the summary goes to stdout and, with --out, to a JSON file.

A list of client counts (--clients 16,64,256) runs one phase per count against the same server,
each --duration long and each followed by the idle check, and writes {"phases": [...]} with one
summary per phase plus the date, the GPU (nvidia-smi, when there is one), the commit
(KC_GIT_COMMIT or git) and the server command: the input of tools/plot_serve.py. One Python
process reads a few tens of thousands of events a second at most; past that it reads several
events at once and the time between tokens it sees is its own pace. --processes N spreads each
phase's clients over N processes (their samples merged).
"""
import argparse
import asyncio
import concurrent.futures
import copy
import json
import os
import random
import re
import statistics
import subprocess
import sys
import time
import urllib.request
from datetime import datetime, timezone

WORDS = ("the of and to in is was for on that with as by at from his her an which this be are were "
         "model token cache kernel tensor warp block memory stream graph batch layer head query key value").split()


def percentile(values, p):
    if not values:
        return None
    values = sorted(values)
    at = p * (len(values) - 1)
    low = int(at)
    high = min(low + 1, len(values) - 1)
    return values[low] + (values[high] - values[low]) * (at - low)


class Stats:
    def __init__(self):
        self.completed = 0
        self.rejected = 0
        self.disconnected = 0
        self.failures = []
        self.output_tokens = 0
        self.ttft = []
        self.inter_token = []


async def read_chunked_events(reader):
    """Yields the SSE `data:` payloads of a chunked HTTP body as they arrive."""
    buffer = b""
    while True:
        size_line = await reader.readline()
        if not size_line:
            return
        size = int(size_line.strip().split(b";")[0], 16)
        if size == 0:
            return
        buffer += await reader.readexactly(size)
        await reader.readexactly(2)
        while b"\n\n" in buffer:
            event, buffer = buffer.split(b"\n\n", 1)
            for line in event.split(b"\n"):
                if line.startswith(b"data: "):
                    yield line[6:].decode()


async def one_request(host, port, key, body, stats, disconnect_after, timeout):
    start = time.monotonic()
    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    try:
        payload = json.dumps(body).encode()
        head = (f"POST /v1/completions HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(payload)}\r\nConnection: close\r\n")
        if key:
            head += f"Authorization: Bearer {key}\r\n"
        writer.write(head.encode() + b"\r\n" + payload)
        await writer.drain()
        status_line = await asyncio.wait_for(reader.readline(), timeout)
        status = int(status_line.split()[1])
        headers = {}
        while True:
            line = await asyncio.wait_for(reader.readline(), timeout)
            if line in (b"\r\n", b""):
                break
            name, _, value = line.decode().partition(":")
            headers[name.strip().lower()] = value.strip()
        if status == 429:
            if "retry-after" not in headers:
                stats.failures.append("429 without Retry-After")
                return 0.0
            stats.rejected += 1
            return float(headers["retry-after"])
        if status != 200:
            rest = await asyncio.wait_for(reader.read(), timeout)
            stats.failures.append(f"HTTP {status}: {rest[:200]!r}")
            return
        events, last, first, usage, done = 0, None, None, None, False
        gaps = []
        async for data in read_chunked_events(reader):
            now = time.monotonic()
            if data == "[DONE]":
                done = True
                break
            chunk = json.loads(data)
            if "error" in chunk:
                stats.failures.append(f"error event: {chunk['error']}")
                return
            if chunk.get("usage"):
                usage = chunk["usage"]
            if chunk.get("choices") and chunk["choices"][0].get("text"):
                if first is None:
                    first = now
                elif last is not None:
                    gaps.append(now - last)
                last = now
                events += 1
                if disconnect_after and events >= disconnect_after:
                    writer.transport.abort()
                    stats.disconnected += 1
                    return
        if not done:
            stats.failures.append("stream ended without [DONE]")
            return
        stats.completed += 1
        if first is not None:
            stats.ttft.append(first - start)
        stats.inter_token.extend(gaps)
        if usage:
            stats.output_tokens += usage.get("completion_tokens", 0)
    except (asyncio.TimeoutError, ConnectionError, asyncio.IncompleteReadError, ValueError) as error:
        stats.failures.append(f"{type(error).__name__}: {error}")
    finally:
        if not writer.transport.is_closing():
            writer.close()


def make_body(args, rng):
    prompt = " ".join(rng.choice(WORDS) for _ in range(args.prompt_words))
    return {"prompt": prompt, "max_tokens": args.max_tokens, "stream": True, "temperature": 0,
            "stream_options": {"include_usage": True}}


async def client(args, host, port, stats, deadline, rng):
    while time.monotonic() < deadline:
        disconnect = 2 if rng.random() < args.disconnect_fraction else 0
        retry_after = await one_request(host, port, args.api_key, make_body(args, rng), stats, disconnect,
                                        args.timeout)
        if retry_after:  # rejected: wait as the server asks (at most --retry-cap seconds)
            await asyncio.sleep(min(retry_after, args.retry_cap))


async def run(args, host, port):
    stats = Stats()
    rng = random.Random(args.seed)
    start = time.monotonic()
    deadline = start + args.duration
    tasks = [asyncio.create_task(client(args, host, port, stats, deadline, random.Random(rng.random())))
             for _ in range(args.clients)]
    if args.burst:
        await asyncio.sleep(args.duration / 2)
        await asyncio.gather(*(one_request(host, port, args.api_key, make_body(args, rng), stats, 0, args.timeout)
                               for _ in range(args.burst)))
    await asyncio.gather(*tasks)
    return stats, time.monotonic() - start


def phase_worker(args, host, port):
    """One process's share of a phase (a process pool's task): its Stats and its seconds."""
    return asyncio.run(run(args, host, port))


def run_phase(args, host, port):
    """A phase: args.clients clients (and args.burst) over args.processes processes, merged."""
    if args.processes <= 1:
        return asyncio.run(run(args, host, port))
    shares = []
    for i in range(args.processes):
        share = copy.copy(args)
        share.clients = args.clients // args.processes + (1 if i < args.clients % args.processes else 0)
        share.burst = args.burst // args.processes + (1 if i < args.burst % args.processes else 0)
        share.seed = args.seed * 1000 + i
        if share.clients or share.burst:
            shares.append(share)
    merged, seconds = Stats(), 0.0
    with concurrent.futures.ProcessPoolExecutor(max_workers=len(shares)) as pool:
        for stats, took in pool.map(phase_worker, shares, [host] * len(shares), [port] * len(shares)):
            merged.completed += stats.completed
            merged.rejected += stats.rejected
            merged.disconnected += stats.disconnected
            merged.failures += stats.failures
            merged.output_tokens += stats.output_tokens
            merged.ttft += stats.ttft
            merged.inter_token += stats.inter_token
            seconds = max(seconds, took)
    return merged, seconds


def summarize(args, stats, seconds, after, idle, preemptions_before):
    leaked = after.get("kc_serve_kv_blocks_used", -1)
    preemptions = after.get("kc_serve_preemptions_total")
    return {
        "clients": args.clients, "duration_s": round(seconds, 3), "max_tokens": args.max_tokens,
        "prompt_words": args.prompt_words, "processes": args.processes, "completed": stats.completed,
        "rejected_429": stats.rejected, "disconnected": stats.disconnected, "burst": args.burst,
        "failed": len(stats.failures), "failures": stats.failures[:10],
        "requests_per_s": stats.completed / seconds, "output_tokens": stats.output_tokens,
        "tokens_per_s": stats.output_tokens / seconds,
        "ttft_p50_ms": 1e3 * (percentile(stats.ttft, 0.5) or 0), "ttft_p99_ms": 1e3 * (percentile(stats.ttft, 0.99) or 0),
        "inter_token_p50_ms": 1e3 * (percentile(stats.inter_token, 0.5) or 0),
        "inter_token_p99_ms": 1e3 * (percentile(stats.inter_token, 0.99) or 0),
        "idle": idle,
        "preemptions": None if preemptions is None else preemptions - (preemptions_before or 0),
        "kv_blocks_used_at_idle": leaked, "kv_blocks_free_at_idle": after.get("kc_serve_kv_blocks_free"),
    }


def phase_ok(args, summary):
    """Prints why a phase failed; True when it passed."""
    ok = summary["failed"] == 0 and summary["idle"] and summary["kv_blocks_used_at_idle"] == 0 \
        and summary["completed"] > 0
    if args.burst and summary["rejected_429"] == 0:
        print("serve_load_test: the burst drew no 429 (is --max-queue below the burst?)", file=sys.stderr)
        ok = ok and not args.expect_rejections
    if args.expect_preemptions and not summary["preemptions"]:
        print("serve_load_test: no sequence was preempted (is the KV cache small enough?)", file=sys.stderr)
        ok = False
    return ok


def provenance(command):
    """Where and when: the date, the GPU nvidia-smi names (if any), the commit and the server."""
    gpu = ""
    try:
        gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20).stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        pass
    commit = os.environ.get("KC_GIT_COMMIT", "")
    if not commit:
        try:
            commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                    timeout=20, cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    return {"tool": "serve_load_test", "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "gpu": gpu, "commit": commit, "server": " ".join(command) if command else ""}


def metrics(host, port, key):
    request = urllib.request.Request(f"http://{host}:{port}/metrics")
    with urllib.request.urlopen(request, timeout=10) as response:
        text = response.read().decode()
    values = {}
    for line in text.splitlines():
        match = re.match(r"^(kc_serve_[a-z_]+) ([0-9.eE+-]+)$", line)
        if match:
            values[match.group(1)] = float(match.group(2))
    return values


def idle_metrics(host, port, key, wait):
    end = time.monotonic() + wait
    while True:
        values = metrics(host, port, key)
        idle = values.get("kc_serve_running_sequences", 1) == 0 and values.get("kc_serve_queue_length", 1) == 0
        if idle or time.monotonic() > end:
            return values, idle
        time.sleep(0.1)


def spawn(command):
    process = subprocess.Popen(command + ["--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        match = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
        if match:
            return process, int(match.group(1))
    process.kill()
    sys.exit(f"serve_load_test: the server did not start: {' '.join(command)}")


def main():
    argv = sys.argv[1:]
    command = None
    if argv and argv[0] == "--spawn":
        end = argv.index("--") if "--" in argv else len(argv)
        command, argv = argv[1:end], argv[end + 1:]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--api-key", default="")
    parser.add_argument("--clients", default="64",
                        help="streaming clients at once; a comma list runs one phase per count")
    parser.add_argument("--processes", type=int, default=1,
                        help="Python processes the clients of a phase are spread over")
    parser.add_argument("--duration", type=float, default=30.0, help="seconds of load")
    parser.add_argument("--prompt-words", type=int, default=64)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--disconnect-fraction", type=float, default=0.0)
    parser.add_argument("--burst", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds a request may wait for a byte")
    parser.add_argument("--retry-cap", type=float, default=1.0,
                        help="longest wait after a 429, whatever its Retry-After says (seconds)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--expect-rejections", action="store_true",
                        help="fail unless the burst drew at least one 429")
    parser.add_argument("--expect-preemptions", action="store_true",
                        help="fail unless the server preempted a sequence (kc_serve_preemptions_total)")
    parser.add_argument("--out")
    args = parser.parse_args(argv)

    process = None
    if command:
        process, port = spawn(command)
        host = "127.0.0.1"
    else:
        match = re.match(r"http://([^:/]+):(\d+)", args.url)
        if not match:
            parser.error(f"--url {args.url}: expected http://HOST:PORT")
        host, port = match.group(1), int(match.group(2))
    try:
        counts = [int(count) for count in str(args.clients).split(",") if count.strip()]
    except ValueError:
        parser.error(f"--clients {args.clients}: expected a count or a comma list of counts")
    if not counts or min(counts) < 1 or args.processes < 1:
        parser.error("--clients wants counts >= 1 and --processes at least 1")
    summaries, ok = [], True
    try:
        preemptions = metrics(host, port, args.api_key).get("kc_serve_preemptions_total")
        for count in counts:
            phase = copy.copy(args)
            phase.clients = count
            stats, seconds = run_phase(phase, host, port)
            after, idle = idle_metrics(host, port, args.api_key, 30)
            summary = summarize(phase, stats, seconds, after, idle, preemptions)
            preemptions = after.get("kc_serve_preemptions_total")
            print(json.dumps(summary, indent=1), flush=True)
            ok = phase_ok(phase, summary) and ok
            summaries.append(summary)
    finally:
        if process:
            process.terminate()
            process.wait(timeout=60)
    report = summaries[0] if len(counts) == 1 and "," not in str(args.clients) else \
        dict(provenance(command), phases=summaries)
    if args.out:
        with open(args.out, "w") as out:
            json.dump(report, out, indent=1)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
