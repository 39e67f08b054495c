#!/usr/bin/env python3
"""kc-serve against the official openai Python client.

Starts `kc-serve --fake-model` (SmolLM2's tokenizer, plain ChatML, scripted tokens ending in
<|im_end|>) on a free loopback port and talks to it only through `openai.OpenAI`: models,
completions and chat completions, whole and streamed, the errors the client maps to its
exception classes (400, 401, 429 with Retry-After). What the server says must parse into the
client's types, not merely arrive.

    python3 serve_openai_client_test.py --kc-serve build/ci/stage4-inference/server/kc-serve \
        --tokenizer stage4-inference/tests/data/tokenizer/smollm2.tokenizer.json

Exits 77 (ctest's SKIP_RETURN_CODE) when the openai package is missing, unless
KC_REQUIRE_OPENAI=1 (CI) makes that a failure.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request

try:
    import openai
except ImportError:
    if os.environ.get("KC_REQUIRE_OPENAI") == "1":
        print("FAIL: KC_REQUIRE_OPENAI=1 but the openai package is missing "
              "(python3 -m pip install openai==3.57.0)")
        sys.exit(1)
    print("SKIP: the openai Python package is not installed "
          "(python3 -m pip install openai==3.57.0)")
    sys.exit(77)

SCRIPT = "Hello from the kc-serve fake model. "  # FakeModelExecutor::kScriptText
KEY = "openai-client-test-key"
MODEL = "kc-test"


class Server:
    """kc-serve in a child process; its port read from the line it prints."""

    def __init__(self, binary, tokenizer, *extra):
        self.process = subprocess.Popen(
            [binary, "--fake-model", "--tokenizer", tokenizer, "--port", "0", "--api-key", KEY,
             "--model-name", MODEL, *extra],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.output = []
        self.port = None
        deadline = time.monotonic() + 15
        while self.port is None and time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                break
            self.output.append(line)
            match = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if match:
                self.port = int(match.group(1))
        if self.port is None:
            self.stop()
            raise AssertionError("kc-serve did not start:\n" + "".join(self.output))
        # Keep reading its output so a full pipe never blocks it.
        threading.Thread(target=lambda: [self.output.append(l) for l in self.process.stdout],
                         daemon=True).start()

    def client(self, key=KEY):
        return openai.OpenAI(base_url=f"http://127.0.0.1:{self.port}/v1", api_key=key,
                             max_retries=0, timeout=30)

    def health(self):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=5) as r:
            return json.load(r)

    def stop(self):
        self.process.terminate()
        try:
            code = self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise AssertionError("kc-serve did not exit within 15 s of SIGTERM")
        if code != 0:
            raise AssertionError(f"kc-serve exited {code}:\n" + "".join(self.output))


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def test_models_and_completions(client):
    check([m.id for m in client.models.list()] == [MODEL], "models.list names the model")

    whole = client.completions.create(model=MODEL, prompt="Hello there", max_tokens=5, seed=1)
    text = whole.choices[0].text
    check(SCRIPT.startswith(text) and text, f"completion text {text!r}")
    check(whole.choices[0].finish_reason == "length", whole)
    check(whole.usage.completion_tokens == 5 and whole.usage.prompt_tokens > 0, whole.usage)
    check(whole.object == "text_completion", whole)

    chunks = list(client.completions.create(model=MODEL, prompt="Hello there", max_tokens=5,
                                            stream=True))
    check("".join(c.choices[0].text for c in chunks) == text, "streamed text == whole text")
    check(chunks[-1].choices[0].finish_reason == "length", chunks[-1])
    check(all(c.choices[0].finish_reason is None for c in chunks[:-1]), "finish only at the end")
    check(len({c.id for c in chunks}) == 1, "one id per stream")


def test_chat(client):
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    whole = client.chat.completions.create(model=MODEL, messages=messages)
    choice = whole.choices[0]
    check(choice.message.role == "assistant", choice)
    check(choice.message.content == SCRIPT, f"chat reply {choice.message.content!r}")
    check(choice.finish_reason == "stop", "the reply ends at <|im_end|>")
    check(whole.object == "chat.completion" and whole.id.startswith("chatcmpl-"), whole)
    check(whole.usage.prompt_tokens > 0 and whole.usage.completion_tokens > 0, whole.usage)

    short = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=2)
    check(short.choices[0].finish_reason == "length", short)
    check(short.usage.completion_tokens == 2, short.usage)

    chunks = list(client.chat.completions.create(
        model=MODEL, messages=messages, stream=True, stream_options={"include_usage": True}))
    check(chunks[0].choices[0].delta.role == "assistant", "the role comes first")
    check(chunks[-1].choices == [] and chunks[-1].usage.completion_tokens ==
          whole.usage.completion_tokens, "the usage chunk comes last")
    content = [c for c in chunks if c.choices]
    check("".join(c.choices[0].delta.content or "" for c in content) == SCRIPT,
          "the deltas are the reply")
    check(content[-1].choices[0].finish_reason == "stop", content[-1])
    check(all(c.object == "chat.completion.chunk" for c in chunks), "chunk objects")


def test_errors(server, client):
    try:
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "x"}],
                                       n=2)
        raise AssertionError("n=2 was accepted")
    except openai.BadRequestError as error:
        check(error.status_code == 400 and error.body["param"] == "n", error.body)
    try:
        client.chat.completions.create(model=MODEL, messages=[])
        raise AssertionError("empty messages were accepted")
    except openai.BadRequestError as error:
        check(error.body["param"] == "messages", error.body)
    try:
        server.client(key="wrong").models.list()
        raise AssertionError("a wrong key was accepted")
    except openai.AuthenticationError as error:
        check(error.status_code == 401, error)


def test_queue_full(binary, tokenizer):
    """One slot, a queue of one: a third request gets RateLimitError with Retry-After."""
    server = Server(binary, tokenizer, "--max-running", "1", "--max-queue", "1",
                    "--fake-step-ms", "20")
    try:
        client = server.client()
        running = client.completions.create(model=MODEL, prompt="Hi", max_tokens=200,
                                            stream=True)
        next(iter(running))  # admitted and generating
        queued = threading.Thread(target=lambda: client.completions.create(
            model=MODEL, prompt="Hi", max_tokens=2))
        queued.start()
        deadline = time.monotonic() + 5
        while server.health()["waiting"] < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        check(server.health()["waiting"] == 1, "the second request waits")
        try:
            client.completions.create(model=MODEL, prompt="Hi", max_tokens=2)
            raise AssertionError("a request past the queue was accepted")
        except openai.RateLimitError as error:
            check(error.status_code == 429, error)
            check(error.response.headers.get("retry-after") == "1", error.response.headers)
            check(error.body["code"] == "queue_full", error.body)
        running.close()  # the client goes away: the stream is cancelled, the queued one runs
        queued.join(timeout=10)
        check(not queued.is_alive(), "the queued request finished")
    finally:
        server.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kc-serve", required=True)
    parser.add_argument("--tokenizer", required=True)
    args = parser.parse_args()
    print(f"openai {openai.__version__}")
    server = Server(args.kc_serve, args.tokenizer)
    try:
        client = server.client()
        test_models_and_completions(client)
        test_chat(client)
        test_errors(server, client)
    finally:
        server.stop()
    test_queue_full(args.kc_serve, args.tokenizer)
    print("PASS: models, completions and chat completions (whole and streamed), 400/401/429")


if __name__ == "__main__":
    main()
