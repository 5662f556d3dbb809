"""`onecat serve` over HTTP on the CPU backend (docs/serve.md).

Starts the built `onecat` binary ($ONECAT_BIN, else $ONECAT_BUILD_DIR/onecat, else build/onecat)
on a free port with a tiny checkpoint (tools/make_tiny_checkpoint.py --tokenizer --chat-template)
and drives it with the standard library: greedy output equals `onecat generate`, chat and
completions streamed and not, n > 1 with seeds, stop strings, logprobs, echo with the prompt's
logprobs (checked against the onecat package's own forward), logit_bias, tools and a forced
tool_choice, /tokenize, a generated suite of malformed requests, a client that leaves mid-stream
or before a whole response, SIGTERM draining, and the 30-s load test with 64 streaming clients.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from conftest import tiny_checkpoint

ROOT = Path(__file__).resolve().parents[2]
API_KEY = "test-key"
MODEL_NAME = "tiny"
MAX_MODEL_LEN = 256
AUTH = {"Authorization": f"Bearer {API_KEY}"}


def onecat_bin() -> Path:
    if os.environ.get("ONECAT_BIN"):
        return Path(os.environ["ONECAT_BIN"])
    return Path(os.environ.get("ONECAT_BUILD_DIR", ROOT / "build")) / "onecat"


class Server:
    """An `onecat serve` process; its port is read from its first line on stderr."""

    def __init__(self, model: Path, max_model_len: int = MAX_MODEL_LEN, *extra: str):
        self.proc = subprocess.Popen(
            [str(onecat_bin()), "serve", "--model", str(model), "--device", "cpu", "--port", "0", "--served-model-name", MODEL_NAME,
             "--api-key", API_KEY, "--max-model-len", str(max_model_len), *extra],
            stderr=subprocess.PIPE, text=True)
        self.log: list[str] = []
        deadline = time.time() + 60
        self.port = None
        while time.time() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.log.append(line)
            m = re.search(r"on http://127\.0\.0\.1:(\d+) ", line)
            if m:
                self.port = int(m.group(1))
                break
        if self.port is None:
            self.proc.kill()
            raise RuntimeError("onecat serve did not start: " + "".join(self.log) + self.proc.stderr.read())
        # Keep reading stderr so the server never blocks on a full pipe.
        self.reader = threading.Thread(target=lambda: self.log.extend(self.proc.stderr), daemon=True)
        self.reader.start()

    def request(self, method, path, body=None, headers=None, raw: bytes | None = None, timeout=30):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        h = dict(AUTH if headers is None else headers)
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        if data is not None:
            h.setdefault("Content-Type", "application/json")
        conn.request(method, path, body=data, headers=h)
        resp = conn.getresponse()
        payload = resp.read()
        conn.close()
        return resp.status, payload

    def post(self, path, body, **kw):
        status, payload = self.request("POST", path, body, **kw)
        return status, json.loads(payload) if payload else None

    def ok(self, path, body):
        status, j = self.post(path, body)
        assert status == 200, j
        return j

    def stream(self, path, body):
        """The SSE events' data lines of a streamed request, in order."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        conn.request("POST", path, body=json.dumps(body), headers={**AUTH, "Content-Type": "application/json"})
        resp = conn.getresponse()
        assert resp.status == 200, resp.read()
        assert resp.getheader("Content-Type", "").startswith("text/event-stream")
        events = [line[len("data: "):] for line in resp.read().decode().split("\n\n") if line.strip()]
        conn.close()
        return events

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    if not onecat_bin().exists():
        pytest.skip(f"no onecat binary at {onecat_bin()} (build it with scripts/build, or set ONECAT_BIN)")
    listing = subprocess.run([str(onecat_bin()), "--help"], capture_output=True, text=True).stdout
    if "not in this build" in listing:
        pytest.skip("this onecat was built without cpp-httplib (libcpp-httplib-dev): no serve command")
    return tiny_checkpoint(tmp_path_factory, "serve-tiny", "--tokenizer", "--chat-template")


@pytest.fixture(scope="module")
def server(model):
    s = Server(model)
    yield s
    s.stop()
    assert s.proc.returncode == 0, "".join(s.log)


def completion(server, prompt, **kw):
    return server.ok("/v1/completions", {"model": MODEL_NAME, "prompt": prompt, **kw})


def chat(server, messages, **kw):
    return server.ok("/v1/chat/completions", {"model": MODEL_NAME, "messages": messages, **kw})


MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "the cat sat on"}]


def test_health_version_models(server):
    assert server.request("GET", "/health", headers={})[0] == 200
    status, body = server.request("GET", "/version")
    assert status == 200 and json.loads(body)["version"]
    status, body = server.request("GET", "/v1/models")
    models = json.loads(body)
    assert status == 200 and models["object"] == "list"
    assert [m["id"] for m in models["data"]] == [MODEL_NAME]
    assert models["data"][0]["max_model_len"] == MAX_MODEL_LEN


def test_device_auto_says_when_it_runs_on_the_cpu(model):
    # --device is auto by default: the GPU where there is one, else the CPU, said on stderr.
    cli = subprocess.run([str(onecat_bin()), "generate", "--model", str(model), "--prompt", "the cat", "--max-tokens",
                          "2", "--json"], check=True, capture_output=True, text=True)
    info = json.loads(subprocess.run([str(onecat_bin()), "info", "--json"], check=True, capture_output=True,
                                     text=True).stdout)
    assert ("running on the CPU backend" in cli.stderr) == (not info["gpus"]), cli.stderr
    assert json.loads(cli.stdout)["text"]


def test_hub_ids_come_from_the_hugging_face_cache(model, tmp_path):
    """--model ORG/NAME (vLLM's way) loads the snapshot huggingface-cli left in the cache."""
    snapshot = tmp_path / "models--org--tiny" / "snapshots" / "c0ffee"
    snapshot.parent.mkdir(parents=True)
    snapshot.symlink_to(model, target_is_directory=True)
    (tmp_path / "models--org--tiny" / "refs").mkdir()
    (tmp_path / "models--org--tiny" / "refs" / "main").write_text("c0ffee")
    env = {**os.environ, "HF_HUB_CACHE": str(tmp_path)}
    args = ["generate", "--device", "cpu", "--prompt", "the cat", "--max-tokens", "6", "--json"]
    by_id = subprocess.run([str(onecat_bin()), *args, "--model", "org/tiny"], env=env, check=True,
                           capture_output=True, text=True)
    by_dir = subprocess.run([str(onecat_bin()), *args, "--model", str(model)], check=True, capture_output=True,
                            text=True)
    assert json.loads(by_id.stdout)["ids"] == json.loads(by_dir.stdout)["ids"]
    missing = subprocess.run([str(onecat_bin()), *args, "--model", "org/absent"], env=env, capture_output=True,
                             text=True)
    assert missing.returncode == 2 and "huggingface-cli download org/absent" in missing.stderr, missing.stderr


def test_generate_names_a_wrong_path_before_a_missing_tokenizer(model, tmp_path):
    args = ["generate", "--device", "cpu", "--prompt", "the cat", "--max-tokens", "2"]
    absent = subprocess.run([str(onecat_bin()), *args, "--model", str(tmp_path / "absent")], capture_output=True,
                            text=True)
    assert absent.returncode == 2 and "is neither a checkpoint directory" in absent.stderr, absent.stderr
    # A checkpoint without its tokenizer: --prompt is refused naming the file, --prompt-ids runs.
    bare = tmp_path / "bare"
    bare.mkdir()
    for f in model.iterdir():
        if f.name != "tokenizer.json":
            (bare / f.name).symlink_to(f)
    no_tok = subprocess.run([str(onecat_bin()), *args, "--model", str(bare)], capture_output=True, text=True)
    assert no_tok.returncode == 2 and "needs the checkpoint's tokenizer.json" in no_tok.stderr, no_tok.stderr
    ids = subprocess.run([str(onecat_bin()), "generate", "--device", "cpu", "--prompt-ids", "1,2", "--max-tokens", "2",
                          "--json", "--model", str(bare)], capture_output=True, text=True)
    assert ids.returncode == 0 and len(json.loads(ids.stdout)["ids"]) == 2, ids.stderr


def test_greedy_completion_equals_generate(server, model):
    prompt = "the quick brown fox"
    r = completion(server, prompt, max_tokens=24, temperature=0, logprobs=0)
    cli = subprocess.run([str(onecat_bin()), "generate", "--model", str(model), "--device", "cpu", "--prompt", prompt,
                          "--max-tokens", "24", "--json"], check=True, capture_output=True, text=True)
    expected = json.loads(cli.stdout)
    choice = r["choices"][0]
    # generate prints special tokens (the tiny model does sample <bos>); the API skips them, as
    # OpenAI's and vLLM's do. Token by token, the texts agree.
    assert "".join(choice["logprobs"]["tokens"]) == expected["text"]
    assert choice["text"] == expected["text"].replace("<bos>", "").replace("<eos>", "")
    assert choice["finish_reason"] == expected["finish_reason"]
    assert r["object"] == "text_completion" and r["model"] == MODEL_NAME
    u = r["usage"]
    assert u["prompt_tokens"] == len(expected["prompt_ids"])
    assert u["completion_tokens"] == len(expected["ids"])
    assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"]
    # The same prompt as token ids, and within a list of prompts (one choice each, in order).
    ids = server.ok("/tokenize", {"prompt": prompt})["tokens"]
    assert ids == expected["prompt_ids"]
    assert completion(server, ids, max_tokens=24, temperature=0)["choices"][0]["text"] == choice["text"]
    both = completion(server, [prompt, ids], max_tokens=24, temperature=0)
    assert [c["index"] for c in both["choices"]] == [0, 1]
    assert [c["text"] for c in both["choices"]] == [choice["text"]] * 2
    assert both["usage"]["prompt_tokens"] == 2 * len(ids)


def test_concurrent_requests_equal_alone(server):
    prompts = [f"request {i} says" + " the" * i for i in range(12)]
    alone = [completion(server, p, max_tokens=12, temperature=0)["choices"][0]["text"] for p in prompts]
    together = [None] * len(prompts)

    def run(i):
        together[i] = completion(server, prompts[i], max_tokens=12, temperature=0)["choices"][0]["text"]

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert together == alone


def test_echo(server):
    plain = completion(server, "in a land", max_tokens=8, temperature=0)["choices"][0]["text"]
    r = completion(server, ["in a land", [65, 66]], max_tokens=8, temperature=0, echo=True, n=2)
    assert [c["text"][:len("in a land")] for c in r["choices"][:2]] == ["in a land"] * 2
    assert r["choices"][0]["text"] == "in a land" + plain
    assert r["choices"][2]["text"].startswith("ab")  # ids 65, 66 decoded
    events = server.stream("/v1/completions", {"prompt": "in a land", "max_tokens": 8, "temperature": 0,
                                               "echo": True, "stream": True})
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks[0]["choices"][0]["text"] == "in a land"
    assert "".join(c["choices"][0]["text"] for c in chunks) == "in a land" + plain
    # max_tokens 0 needs echo: the prompt alone.
    r = completion(server, "in a land", max_tokens=0, echo=True)
    assert r["choices"][0]["text"] == "in a land" and r["choices"][0]["finish_reason"] == "length"
    assert r["usage"]["completion_tokens"] == 0
    status, j = server.post("/v1/completions", {"prompt": "a", "max_tokens": 0})
    assert status == 400 and j["error"]["param"] == "max_tokens"


ECHO_PROMPT = "the quick brown fox jumps over the lazy dog, and then the cat sat on the mat " * 2


def log_softmax(rows):
    import numpy as np
    rows = rows.astype(np.float64)
    m = rows.max(axis=1, keepdims=True)
    return rows - m - np.log(np.exp(rows - m).sum(axis=1, keepdims=True))


def test_echo_logprobs_are_the_prompts(server, model):
    """echo with logprobs (lm-eval's log-likelihood requests): logprobs cover the prompt's tokens,
    the first null, then the generated ones; each prompt token's logprob is log_softmax of the
    model's own logits of the tokens before it (one forward of the whole prompt through the Python
    package), with max_tokens 0 and 1, whole and streamed, the prompt in the prefix cache or not."""
    onecat = pytest.importorskip("onecat")
    ids = server.ok("/tokenize", {"prompt": ECHO_PROMPT})["tokens"]
    P = len(ids)
    assert P > 40
    reference = log_softmax(onecat.Model(str(model), device="cpu").logits(ids))
    want = [float(reference[t, ids[t + 1]]) for t in range(P - 1)]
    for max_tokens in (0, 1, 1):  # the second max_tokens 1 finds the prompt's pages cached
        r = completion(server, ECHO_PROMPT, max_tokens=max_tokens, temperature=0, echo=True, logprobs=2)
        choice = r["choices"][0]
        lp = choice["logprobs"]
        assert len(lp["tokens"]) == len(lp["token_logprobs"]) == len(lp["top_logprobs"]) == P + max_tokens
        assert lp["token_logprobs"][0] is None and lp["top_logprobs"][0] is None
        assert lp["token_logprobs"][1:P] == pytest.approx(want, abs=1e-4)
        for logprob, top in zip(lp["token_logprobs"][1:], lp["top_logprobs"][1:]):
            assert 1 <= len(top) <= 2 and max(top.values()) >= logprob - 1e-6
        assert lp["text_offset"][0] == 0
        assert all(b - a == len(t) for a, b, t in zip(lp["text_offset"], lp["text_offset"][1:], lp["tokens"]))
        assert choice["text"].startswith(ECHO_PROMPT) and r["usage"]["completion_tokens"] == max_tokens
        assert r["usage"]["prompt_tokens"] == P
        if max_tokens == 1:
            assert lp["token_logprobs"][P] == pytest.approx(max(lp["top_logprobs"][P].values()), abs=1e-5)
    # Streamed: the prompt's event carries its entries, the generated token's event the rest.
    whole = completion(server, ids, max_tokens=3, temperature=0, echo=True, logprobs=1)["choices"][0]
    events = server.stream("/v1/completions", {"prompt": ids, "max_tokens": 3, "temperature": 0, "echo": True,
                                               "logprobs": 1, "stream": True})
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e)["choices"][0] for e in events[:-1]]
    assert len(chunks[0]["logprobs"]["tokens"]) == P
    assert "".join(c["text"] for c in chunks) == whole["text"]
    for key in ("tokens", "token_logprobs", "top_logprobs", "text_offset"):
        assert [x for c in chunks if c["logprobs"] for x in c["logprobs"][key]] == whole["logprobs"][key], key
    # n = 2, max_tokens 0, streamed: each choice's echo event with the prompt's entries, then its end.
    events = server.stream("/v1/completions", {"prompt": ids, "max_tokens": 0, "echo": True, "logprobs": 1, "n": 2,
                                               "stream": True})
    assert events[-1] == "[DONE]"
    for index in (0, 1):
        mine = [json.loads(e)["choices"][0] for e in events[:-1] if json.loads(e)["choices"][0]["index"] == index]
        assert mine[0]["text"] == whole["text"][:len(mine[0]["text"])] and mine[0]["finish_reason"] is None
        assert mine[0]["logprobs"]["token_logprobs"] == whole["logprobs"]["token_logprobs"][:P]
        assert mine[-1]["finish_reason"] == "length" and "".join(c["text"] for c in mine) == mine[0]["text"]
    # Several prompts as ids in one request (lm-eval's batches), one choice each.
    both = completion(server, [ids, ids[:20]], max_tokens=1, temperature=0, echo=True, logprobs=0)
    assert both["choices"][0]["logprobs"]["token_logprobs"][1:P] == pytest.approx(want, abs=1e-4)
    assert both["choices"][1]["logprobs"]["token_logprobs"][1:20] == pytest.approx(want[:19], abs=1e-4)
    assert all(top == {} for top in both["choices"][0]["logprobs"]["top_logprobs"][1:])


def test_echo_logprobs_do_not_depend_on_the_chunk_size(server, model):
    """Prompts prefilled 3 tokens a step give the logprobs of the default 512-token chunks."""
    body = {"prompt": ECHO_PROMPT, "max_tokens": 1, "temperature": 0, "echo": True, "logprobs": 1}
    big = server.ok("/v1/completions", body)["choices"][0]["logprobs"]["token_logprobs"]
    s = Server(model, MAX_MODEL_LEN, "--max-num-batched-tokens", "3")
    try:
        small = s.ok("/v1/completions", body)["choices"][0]["logprobs"]["token_logprobs"]
    finally:
        s.stop()
    assert small[0] is None and big[0] is None
    assert small[1:] == pytest.approx(big[1:], abs=1e-5)
    assert sum(small[1:]) == pytest.approx(sum(big[1:]), abs=1e-4)


def test_logit_bias(server, model):
    """+100 on a token makes greedy decoding choose it every step; −100 on the greedy choice bans
    it (the token chosen is then not the most likely one: logprobs are the raw distribution's)."""
    forced = server.ok("/tokenize", {"prompt": "q", "add_special_tokens": False})["tokens"]
    assert len(forced) == 1
    r = completion(server, "the cat", max_tokens=5, temperature=0, logit_bias={str(forced[0]): 100}, logprobs=1,
                   ignore_eos=True)
    assert r["choices"][0]["logprobs"]["tokens"] == ["q"] * 5 and r["choices"][0]["text"] == "qqqqq"
    cli = subprocess.run([str(onecat_bin()), "generate", "--model", str(model), "--device", "cpu", "--prompt", "the cat", "--max-tokens",
                          "1", "--json"], check=True, capture_output=True, text=True)
    greedy = json.loads(cli.stdout)["ids"][0]
    plain = completion(server, "the cat", max_tokens=1, temperature=0, logprobs=1)["choices"][0]["logprobs"]
    banned = completion(server, "the cat", max_tokens=1, temperature=0, logprobs=1,
                        logit_bias={str(greedy): -100})["choices"][0]["logprobs"]
    assert plain["token_logprobs"][0] == pytest.approx(max(plain["top_logprobs"][0].values()), abs=1e-6)
    assert banned["token_logprobs"][0] < plain["token_logprobs"][0] - 1e-6
    assert banned["top_logprobs"][0] == pytest.approx(plain["top_logprobs"][0], abs=1e-6)  # raw, unbiased
    # Chat takes it too, and streaming.
    events = server.stream("/v1/chat/completions", {"messages": MESSAGES, "max_tokens": 3, "temperature": 0,
                                                    "logit_bias": {str(forced[0]): 100}, "stream": True,
                                                    "ignore_eos": True})
    assert "".join(json.loads(e)["choices"][0]["delta"].get("content", "") for e in events[:-1]) == "qqq"
    vocab = json.loads((model / "config.json").read_text())["vocab_size"]
    for bias in ({"x": 1}, {"-1": 1}, {str(vocab): 1}, {"5": 100.5}, {"5": "1"}, {"5": None}, {"5": 1, "05": 2},
                 [], "5", {"": 1}, {"99999999999": 1}):
        status, j = server.post("/v1/completions", {"prompt": "a", "logit_bias": bias})
        assert status == 400 and j["error"]["param"] == "logit_bias", (bias, j)


def test_structured_outputs(server):
    """response_format json_schema / json_object and guided_choice: every reply that ends is JSON the
    schema allows, its properties in the schema's order (the tiny random model's own choices under
    the grammar), on both endpoints, whole and streamed alike; what onecat cannot enforce is a 400
    naming it. The grammar itself is tests/grammar_test.cpp's."""
    assert chat(server, MESSAGES, max_tokens=2, response_format={"type": "text"})["choices"]
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 5}, "n": {"type": "integer"},
                                               "ok": {"type": "boolean"}, "tag": {"enum": ["a", "b", None]}},
              "required": ["name", "n", "ok"]}
    rf = {"type": "json_schema", "json_schema": {"name": "person", "schema": schema, "strict": True}}
    r = chat(server, MESSAGES, max_tokens=120, temperature=1.0, n=6, seed=7, response_format=rf)
    ended = 0
    for choice in r["choices"]:
        text = choice["message"]["content"]
        if choice["finish_reason"] != "stop":
            continue
        ended += 1
        obj = json.loads(text)
        assert list(obj)[:3] == ["name", "n", "ok"] and set(obj) <= {"name", "n", "ok", "tag"}, text
        assert isinstance(obj["name"], str) and len(obj["name"]) <= 5, text
        assert isinstance(obj["n"], int) and isinstance(obj["ok"], bool) and obj.get("tag", "a") in ("a", "b", None)
    assert ended >= 4, r["choices"]
    body = {"messages": MESSAGES, "max_tokens": 120, "temperature": 1.0, "seed": 3, "response_format": rf}
    whole = server.ok("/v1/chat/completions", body)["choices"][0]["message"]["content"]
    events = server.stream("/v1/chat/completions", {**body, "stream": True})
    assert "".join(json.loads(e)["choices"][0]["delta"].get("content", "") for e in events[:-1]) == whole

    r = chat(server, MESSAGES, max_tokens=120, temperature=1.0, n=4, seed=1, response_format={"type": "json_object"})
    assert any(c["finish_reason"] == "stop" for c in r["choices"])
    for c in r["choices"]:
        if c["finish_reason"] == "stop":
            assert isinstance(json.loads(c["message"]["content"]), dict)
    text = completion(server, "x", max_tokens=120, temperature=1.0, seed=2, n=4,
                      guided_json={"type": "array", "items": {"type": "boolean"}, "maxItems": 3})
    for c in text["choices"]:
        if c["finish_reason"] == "stop":
            value = json.loads(c["text"])
            assert len(value) <= 3 and all(isinstance(v, bool) for v in value)
    r = chat(server, MESSAGES, max_tokens=20, temperature=1.0, n=4, seed=5, guided_choice=["yes", "no", "maybe"])
    assert {c["message"]["content"] for c in r["choices"]} <= {"yes", "no", "maybe"}
    assert all(c["finish_reason"] == "stop" for c in r["choices"])

    # Keywords beyond the grammar's reach: pattern, format and integer bounds it takes (a date, a
    # bounded integer, an id), the rest are 400s.
    schema = {"type": "object", "properties": {"day": {"type": "string", "format": "date"},
                                               "n": {"type": "integer", "minimum": -3, "maximum": 12},
                                               "id": {"type": "string", "pattern": "^[A-Z]{2}-\\d{3}$"}},
              "required": ["day", "n", "id"]}
    rf = {"type": "json_schema", "json_schema": {"name": "record", "schema": schema}}
    r = chat(server, MESSAGES, max_tokens=120, temperature=1.0, n=4, seed=9, response_format=rf)
    assert any(c["finish_reason"] == "stop" for c in r["choices"])
    for c in r["choices"]:
        if c["finish_reason"] == "stop":
            obj = json.loads(c["message"]["content"])
            assert re.fullmatch(r"\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])", obj["day"]), obj
            assert -3 <= obj["n"] <= 12 and re.fullmatch(r"[A-Z]{2}-\d{3}", obj["id"]), obj
    r = completion(server, "x", max_tokens=30, temperature=1.0, n=4, seed=6, guided_regex=r"(yes|no) \d{2}!")
    assert all(re.fullmatch(r"(yes|no) \d{2}!", c["text"]) and c["finish_reason"] == "stop" for c in r["choices"])

    for bad, says in (({"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "string", "not": {}}}},
                       '"not"'),
                      ({"type": "xml"}, "text, json_object or json_schema"),
                      ({"type": "json_schema"}, "json_schema object")):
        status, j = server.post("/v1/chat/completions", {"messages": MESSAGES, "response_format": bad})
        assert status == 400 and j["error"]["param"] == "response_format" and says in j["error"]["message"], j


def test_completion_stream_equals_whole(server):
    whole = completion(server, "in a land", max_tokens=20, temperature=0)
    events = server.stream("/v1/completions", {"prompt": "in a land", "max_tokens": 20, "temperature": 0,
                                               "stream": True})
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert "".join(c["choices"][0]["text"] for c in chunks) == whole["choices"][0]["text"]
    assert chunks[-1]["choices"][0]["finish_reason"] == whole["choices"][0]["finish_reason"]
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1])


def test_chat_whole_and_stream(server):
    r = chat(server, MESSAGES, max_tokens=16, temperature=0)
    choice = r["choices"][0]
    assert r["object"] == "chat.completion"
    assert choice["message"]["role"] == "assistant" and isinstance(choice["message"]["content"], str)
    assert choice["finish_reason"] in ("stop", "length")
    # The chat template's rendering (with the generation prompt) is the prompt.
    ids = server.ok("/tokenize", {"messages": MESSAGES})["tokens"]
    detok = server.ok("/detokenize", {"tokens": ids})["prompt"]
    assert detok == "<|system|>be brief<|user|>the cat sat on<|assistant|>"
    assert r["usage"]["prompt_tokens"] == len(ids)
    assert completion(server, ids, max_tokens=16, temperature=0)["choices"][0]["text"] == choice["message"]["content"]
    # Content-part arrays are joined text.
    parts = [{"role": "user", "content": [{"type": "text", "text": "the cat"}, {"type": "text", "text": "sat on"}]}]
    joined = server.ok("/tokenize", {"messages": [{"role": "user", "content": "the cat\nsat on"}]})["tokens"]
    assert server.ok("/tokenize", {"messages": parts})["tokens"] == joined

    events = server.stream("/v1/chat/completions", {"messages": MESSAGES, "max_tokens": 16, "temperature": 0,
                                                    "stream": True, "stream_options": {"include_usage": True}})
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert all("role" not in c["choices"][0]["delta"] for c in chunks[1:-1])
    usage_chunk = chunks[-1]
    assert usage_chunk["choices"] == [] and usage_chunk["usage"] == r["usage"]
    assert all(c["usage"] is None for c in chunks[:-1])
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks[:-1])
    assert text == choice["message"]["content"]
    assert chunks[-2]["choices"][0]["finish_reason"] == choice["finish_reason"]


def test_chat_template_kwargs(server):
    on = server.ok("/tokenize", {"messages": MESSAGES})["tokens"]
    off = server.ok("/tokenize", {"messages": MESSAGES, "chat_template_kwargs": {"enable_thinking": False}})["tokens"]
    assert server.ok("/detokenize", {"tokens": off})["prompt"].endswith("/no_think<|assistant|>")
    assert len(off) > len(on)
    r = chat(server, MESSAGES, max_tokens=4, temperature=0, chat_template_kwargs={"enable_thinking": False})
    assert r["usage"]["prompt_tokens"] == len(off)


TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "the weather in a city",
                                           "parameters": {"type": "object",
                                                          "properties": {"city": {"type": "string"}}}}}]


def test_tools_reach_the_template(server):
    """Tools and earlier tool calls are rendered by the chat template (arguments given as JSON text
    reach it as an object, as vLLM passes them); tool_choice none leaves the tools out; a streamed
    request with tools gives the reply it gives whole. Parsing a generated <tool_call> into
    tool_calls is tests/tool_calls_test.cpp's (the tiny model writes none)."""
    history = [{"role": "user", "content": "weather?"},
               {"role": "assistant", "content": None, "tool_calls": [
                   {"id": "c1", "type": "function", "function": {"name": "get_weather",
                                                                 "arguments": json.dumps({"city": "Paris"})}}]},
               {"role": "tool", "content": "sunny", "tool_call_id": "c1"}]
    ids = server.ok("/tokenize", {"messages": history, "tools": TOOLS})["tokens"]
    assert server.ok("/detokenize", {"tokens": ids})["prompt"] == (
        '<|tools|>get_weather;<|user|>weather?<|assistant|><tool_call>{"name": "get_weather", '
        '"arguments": {"city": "Paris"}}</tool_call><|tool|>sunny<|assistant|>')
    none = server.ok("/tokenize", {"messages": history, "tools": TOOLS, "tool_choice": "none"})["tokens"]
    assert not server.ok("/detokenize", {"tokens": none})["prompt"].startswith("<|tools|>")
    r = chat(server, history, tools=TOOLS, tool_choice="auto", max_tokens=8, temperature=0)
    assert r["usage"]["prompt_tokens"] == len(ids)
    assert r["choices"][0]["finish_reason"] in ("stop", "length", "tool_calls")
    # Streamed with tools: the same reply (the streaming split of <tool_call> blocks is
    # tests/tool_calls_test.cpp's ToolCallStream tests; the tiny model writes no call).
    events = server.stream("/v1/chat/completions", {"messages": history, "tools": TOOLS, "max_tokens": 8,
                                                    "temperature": 0, "stream": True})
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    message = r["choices"][0]["message"]
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks) == (message["content"] or "")
    assert [c for c in chunks if "tool_calls" in c["choices"][0]["delta"]] == [] and "tool_calls" not in message
    assert chunks[-1]["choices"][0]["finish_reason"] == r["choices"][0]["finish_reason"]
    for body, param in (({"tools": TOOLS, "tool_choice": "any"}, "tool_choice"),
                        ({"tools": TOOLS, "tool_choice": named_tool("get_time")}, "tool_choice"),
                        ({"tool_choice": "required"}, "tool_choice"),
                        ({"tools": [{"type": "function", "function": {}}]}, "tools"),
                        ({"tools": [{"type": "code"}]}, "tools")):
        status, j = server.post("/v1/chat/completions", {"messages": history, **body})
        assert status == 400 and j["error"]["param"] == param, j


def named_tool(name):
    return {"type": "function", "function": {"name": name}}


def token_id(server, text):
    ids = server.ok("/tokenize", {"prompt": text, "add_special_tokens": False})["tokens"]
    assert len(ids) == 1, ids
    return ids[0]


def test_tool_choice_forces_a_call(server):
    """tool_choice "required" or a named function: the prompt ends with the call's start (the tiny
    tokenizer has no newline, so "<tool_call>\n" reaches the model as "<tool_call>"), the rest of
    the call follows the tool's parameters (constrained decoding), and the reply is parsed as that
    start followed by the generated text. Greedy with +100 on "}" closes every object as soon as the
    grammar lets it: the named call's arguments are {} and its reply "{}}" (the call's own "}").
    Cut short by max_tokens, no call parses: the reply, forced start included, is the content and
    finish_reason stays length. Whole and streamed alike."""
    messages = [{"role": "user", "content": "weather?"}]
    forced = '<tool_call>\n{"name": "get_weather", "arguments": '
    ids = server.ok("/tokenize", {"messages": messages, "tools": TOOLS, "tool_choice": named_tool("get_weather")})
    assert server.ok("/detokenize", {"tokens": ids["tokens"]})["prompt"] == (
        "<|tools|>get_weather;<|user|>weather?<|assistant|>" + forced.replace("\n", ""))
    required = server.ok("/tokenize", {"messages": messages, "tools": TOOLS, "tool_choice": "required"})
    assert server.ok("/detokenize", {"tokens": required["tokens"]})["prompt"] == (
        "<|tools|>get_weather;<|user|>weather?<|assistant|><tool_call>")

    close = {str(token_id(server, "}")): 100}
    call = {"messages": messages, "tools": TOOLS, "tool_choice": named_tool("get_weather"), "temperature": 0,
            "max_tokens": 8, "logit_bias": close}
    r = chat(server, messages, **{k: v for k, v in call.items() if k != "messages"})
    assert r["usage"]["prompt_tokens"] == ids["count"] and r["usage"]["completion_tokens"] == 3
    choice = r["choices"][0]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] is None
    [tool_call] = choice["message"]["tool_calls"]
    assert tool_call["type"] == "function" and tool_call["id"].startswith(r["id"])
    assert tool_call["function"] == {"name": "get_weather", "arguments": "{}"}
    chunks = [json.loads(e) for e in server.stream("/v1/chat/completions", {**call, "stream": True})[:-1]]
    deltas = [c["choices"][0]["delta"] for c in chunks]
    assert "".join(d.get("content") or "" for d in deltas) == ""
    [streamed] = [t for d in deltas for t in d.get("tool_calls", [])]
    assert streamed["index"] == 0 and streamed["function"] == tool_call["function"]
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    # "required": one call to one of the tools, whatever the model writes.
    for seed in range(3):
        r = chat(server, messages, tools=TOOLS, tool_choice="required", temperature=1.0, seed=seed, max_tokens=120)
        choice = r["choices"][0]
        if choice["finish_reason"] == "length":
            continue
        [tool_call] = choice["message"]["tool_calls"]
        assert tool_call["function"]["name"] == "get_weather"
        arguments = json.loads(tool_call["function"]["arguments"])
        assert set(arguments) <= {"city"} and isinstance(arguments.get("city", ""), str)

    for tool_choice, start in ((named_tool("get_weather"), forced), ("required", "<tool_call>\n")):
        body = {"messages": messages, "tools": TOOLS, "tool_choice": tool_choice, "temperature": 0, "max_tokens": 2,
                "logit_bias": close}
        choice = server.ok("/v1/chat/completions", body)["choices"][0]
        content = choice["message"]["content"]
        assert content.startswith(start) and len(content) > len(start) and "tool_calls" not in choice["message"]
        assert choice["finish_reason"] == "length"
        chunks = [json.loads(e) for e in server.stream("/v1/chat/completions", {**body, "stream": True})[:-1]]
        assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks) == content
        assert not any("tool_calls" in c["choices"][0]["delta"] for c in chunks)
        assert chunks[-1]["choices"][0]["finish_reason"] == "length"


def test_reasoning_parser(server, model):
    """--reasoning-parser qwen3: a reply that does not begin with <think> (the tiny model never
    writes one) is all content, reasoning_content null, streamed or not; after a prompt that ends
    with <think> (the template's open_think) the reply is reasoning up to a </think> it never
    writes: all reasoning. The splitting itself is tests/reasoning_test.cpp's."""
    bad = subprocess.run([str(onecat_bin()), "serve", "--model", str(model), "--reasoning-parser", "magic"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--reasoning-parser" in bad.stderr
    plain = chat(server, MESSAGES, max_tokens=12, temperature=0)["choices"][0]["message"]
    s = Server(model, MAX_MODEL_LEN, "--reasoning-parser", "qwen3")
    try:
        message = chat(s, MESSAGES, max_tokens=12, temperature=0)["choices"][0]["message"]
        assert message["reasoning_content"] is None and message["content"] == plain["content"]
        events = s.stream("/v1/chat/completions", {"messages": MESSAGES, "max_tokens": 12, "temperature": 0,
                                                   "stream": True})
        deltas = [json.loads(e)["choices"][0]["delta"] for e in events[:-1]]
        assert "".join(d.get("content", "") for d in deltas) == plain["content"]
        assert not any("reasoning_content" in d for d in deltas)
        opened = {"chat_template_kwargs": {"open_think": True}}
        thought = chat(server, MESSAGES, max_tokens=12, temperature=0, **opened)["choices"][0]["message"]["content"]
        assert thought and "</think>" not in thought
        message = chat(s, MESSAGES, max_tokens=12, temperature=0, **opened)["choices"][0]["message"]
        assert message["reasoning_content"] == thought and message["content"] == ""
        events = s.stream("/v1/chat/completions", {"messages": MESSAGES, "max_tokens": 12, "temperature": 0,
                                                   "stream": True, **opened})
        deltas = [json.loads(e)["choices"][0]["delta"] for e in events[:-1]]
        assert "".join(d.get("reasoning_content", "") for d in deltas) == thought
        assert "".join(d.get("content", "") for d in deltas) == ""
    finally:
        s.stop()
    assert s.proc.returncode == 0


def test_chat_template_option_and_vllm_flags(model, tmp_path):
    """--chat-template (a file, or the template itself) replaces the checkpoint's for chat with and
    without tools; vLLM's --enable-auto-tool-choice, --tool-call-parser hermes, --trust-remote-code
    and --dtype half are taken as they are; other values and a bad template exit 2 with one sentence
    before the model loads."""
    template = tmp_path / "t.jinja"
    template.write_text("{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}"
                        "{% if add_generation_prompt %}[reply]{% endif %}")
    for given in (str(template), template.read_text()):
        s = Server(model, MAX_MODEL_LEN, "--chat-template", given, "--enable-auto-tool-choice", "--tool-call-parser",
                   "hermes", "--trust-remote-code", "--dtype", "half", "--tensor-parallel-size", "1")
        try:
            ids = s.ok("/tokenize", {"messages": MESSAGES})["tokens"]
            assert s.ok("/detokenize", {"tokens": ids})["prompt"] == "[system]be brief[user]the cat sat on[reply]"
            ids = s.ok("/tokenize", {"messages": MESSAGES, "tools": TOOLS})["tokens"]
            assert s.ok("/detokenize", {"tokens": ids})["prompt"] == "[system]be brief[user]the cat sat on[reply]"
            assert chat(s, MESSAGES, max_tokens=4, temperature=0)["choices"][0]["message"]["content"] is not None
        finally:
            s.stop()
        assert s.proc.returncode == 0
    for args, says in ((["--chat-template", str(tmp_path / "missing.jinja")], "neither a file nor a template"),
                       (["--chat-template", "{% for %}"], "--chat-template: chat template line 1"),
                       (["--tool-call-parser", "pythonic"], "--tool-call-parser must be hermes"),
                       (["--dtype", "bfloat16"], "--dtype must be auto, half or float16"),
                       (["--tensor-parallel-size", "2"], "--tensor-parallel-size must be 1"),
                       (["--quantization", "awq"], "quantization awq, but"),
                       (["--quantization", "int3"], "quantization must be one of")):
        r = subprocess.run([str(onecat_bin()), "serve", "--model", str(model), *args], capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 2 and says in r.stderr, (args, r.stderr)


def test_speculative_serving(server, model):
    """--speculative draft:DIR --num-draft-tokens K (the checkpoint as its own draft) and n-gram
    drafts: greedy replies are the plain server's; with n-gram drafts a seeded sampled reply is
    too (certain drafts are verified with the plain sampler's own draws, docs/engine.md)."""
    body = dict(max_tokens=16, temperature=0)
    plain = completion(server, "the cat sat on the mat, the cat", **body)["choices"][0]["text"]
    sampled = completion(server, "the cat sat on the mat, the cat", max_tokens=16, temperature=0.7,
                         seed=5)["choices"][0]["text"]
    for flags in (["--speculative", f"draft:{model}", "--num-draft-tokens", "3"],
                  ["--num-speculative-tokens", "4", "--prompt-lookup-min", "2", "--prompt-lookup-max", "3"]):
        s = Server(model, MAX_MODEL_LEN, *flags)
        try:
            assert completion(s, "the cat sat on the mat, the cat", **body)["choices"][0]["text"] == plain
            if "--num-speculative-tokens" in flags:
                assert completion(s, "the cat sat on the mat, the cat", max_tokens=16, temperature=0.7,
                                  seed=5)["choices"][0]["text"] == sampled
                # Per request (extension): k from 0 (none) to the server's, the same reply.
                for k in (0, 2):
                    assert completion(s, "the cat sat on the mat, the cat", num_draft_tokens=k,
                                      **body)["choices"][0]["text"] == plain
                status, j = s.post("/v1/completions", {"prompt": "the cat", "num_draft_tokens": 5})
                assert status == 400 and j["error"]["param"] == "num_draft_tokens", j
        finally:
            s.stop()
        assert s.proc.returncode == 0
    bad = subprocess.run([str(onecat_bin()), "serve", "--model", str(model), "--num-draft-tokens", "2",
                          "--speculative", "medusa"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "speculative must be ngram or draft:DIR" in bad.stderr


def test_fp8_kv_cache_serving(model):
    """--kv-cache-dtype fp8: the server runs on a cache of one-byte codes (greedy replies are
    deterministic: the same twice); an unknown type is one sentence and exit 2."""
    s = Server(model, MAX_MODEL_LEN, "--kv-cache-dtype", "fp8")
    try:
        first = completion(s, "the cat sat on the mat, the cat", max_tokens=12, temperature=0)
        again = completion(s, "the cat sat on the mat, the cat", max_tokens=12, temperature=0)
        assert first["choices"][0]["text"] == again["choices"][0]["text"]
        assert first["usage"]["completion_tokens"] >= 1
        # The start-up lines before the address: the load's figures and the pool's type.
        assert any(re.match(r"onecat serve: loaded .*: [0-9.]+ GB read in [0-9.]+ s \(", line) for line in s.log), s.log
        pool = r"onecat serve: KV cache \d+ tokens \(\d+ pages of 16, fp8_e4m3\)"
        assert any(re.match(pool, line) for line in s.log), s.log
    finally:
        s.stop()
    assert s.proc.returncode == 0
    bad = subprocess.run([str(onecat_bin()), "serve", "--model", str(model), "--kv-cache-dtype", "int4"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--kv-cache-dtype" in bad.stderr and "fp8_e5m2" in bad.stderr


def test_num_pages(model):
    """--num-pages sizes the pool in pages of 16 tokens; with --kv-cache-tokens too, or negative,
    it is one sentence and exit 2."""
    s = Server(model, MAX_MODEL_LEN, "--num-pages", "40")
    try:
        assert any(line.startswith("onecat serve: KV cache 640 tokens (40 pages of 16, fp16)") for line in s.log), s.log
        assert completion(s, "the cat sat", max_tokens=4, temperature=0)["usage"]["completion_tokens"] >= 1
    finally:
        s.stop()
    assert s.proc.returncode == 0
    for flags, words in ((["--num-pages", "4", "--kv-cache-tokens", "64"], "not both"),
                         (["--num-pages", "-3"], "must be positive"),
                         (["--num-pages", "15"], "fewer than --max-model-len 4096"),
                         (["--num-pages", "99999999999"], "more than any GPU holds")):
        bad = subprocess.run([str(onecat_bin()), "serve", "--model", str(model), *flags],
                             capture_output=True, text=True, timeout=60)
        assert bad.returncode == 2 and words in bad.stderr, (flags, bad.stderr)


def test_generation_config_defaults(server, model, tmp_path):
    """Fields a request leaves out take the checkpoint's generation_config.json (vLLM's
    --generation-config auto), --override-generation-config goes over it, bad ones exit 2."""
    greedy = completion(server, "once upon", max_tokens=12, temperature=0)["choices"][0]["text"]
    (tmp_path / "generation_config.json").write_text(json.dumps({"temperature": 0.0, "eos_token_id": 95}))
    for flags in (["--generation-config", str(tmp_path)], ["--override-generation-config", '{"temperature": 0}']):
        s = Server(model, MAX_MODEL_LEN, *flags)
        try:
            assert any("default sampling is the checkpoint's (temperature 0)" in line for line in s.log), s.log
            # No temperature given: the default 0 is greedy, whatever the seed.
            for seed in (1, 2):
                assert completion(s, "once upon", max_tokens=12, seed=seed)["choices"][0]["text"] == greedy
        finally:
            s.stop()
    for flags, words in ((["--generation-config", str(tmp_path / "none")], "auto, vllm or a directory"),
                         (["--override-generation-config", "{"], "must be a JSON object"),
                         (["--override-generation-config", '{"top_p": 0}'], "top_p")):
        bad = subprocess.run([str(onecat_bin()), "serve", "--model", str(model), *flags],
                             capture_output=True, text=True, timeout=60)
        assert bad.returncode == 2 and words in bad.stderr, (flags, bad.stderr)


def test_n_and_seeds_reproducible(server):
    body = dict(max_tokens=16, temperature=1.0, n=2)
    a = completion(server, "once upon", seed=7, **body)
    b = completion(server, "once upon", seed=7, **body)
    assert len(a["choices"]) == 2 and [c["index"] for c in a["choices"]] == [0, 1]
    assert [c["text"] for c in a["choices"]] == [c["text"] for c in b["choices"]]
    assert 2 <= a["usage"]["completion_tokens"] <= 32
    texts = {c["text"] for seed in (1, 2, 3, 4) for c in completion(server, "once upon", seed=seed, **body)["choices"]}
    assert len(texts) > 1, "sampling with different seeds gave one text every time"
    ca = chat(server, MESSAGES, seed=11, **body)
    cb = chat(server, MESSAGES, seed=11, **body)
    assert [c["message"]["content"] for c in ca["choices"]] == [c["message"]["content"] for c in cb["choices"]]


def test_stop_strings(server):
    full = completion(server, "the cat", max_tokens=40, temperature=0)["choices"][0]["text"]
    assert len(full) > 12, full
    stop = full[6:9]
    expected = full[:full.index(stop)]
    r = completion(server, "the cat", max_tokens=40, temperature=0, stop=[stop, "zzzz-not-there"])
    assert r["choices"][0]["text"] == expected
    assert r["choices"][0]["finish_reason"] == "stop"
    events = server.stream("/v1/completions", {"prompt": "the cat", "max_tokens": 40, "temperature": 0,
                                               "stop": stop, "stream": True})
    chunks = [json.loads(e) for e in events[:-1]]
    assert "".join(c["choices"][0]["text"] for c in chunks) == expected
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    # Chat: the same cut.
    whole = chat(server, MESSAGES, max_tokens=40, temperature=0)["choices"][0]["message"]["content"]
    if len(whole) > 8:
        s = whole[4:7]
        cut = chat(server, MESSAGES, max_tokens=40, temperature=0, stop=s)["choices"][0]
        assert cut["message"]["content"] == whole[:whole.index(s)] and cut["finish_reason"] == "stop"


def test_logprobs(server):
    r = completion(server, "the cat", max_tokens=8, temperature=0, logprobs=3)
    lp = r["choices"][0]["logprobs"]
    n = r["usage"]["completion_tokens"]
    assert len(lp["tokens"]) == len(lp["token_logprobs"]) == len(lp["top_logprobs"]) == n
    for token, logprob, top in zip(lp["tokens"], lp["token_logprobs"], lp["top_logprobs"]):
        assert logprob <= 0
        assert 1 <= len(top) <= 3
        # Greedy: the chosen token is the most likely one.
        assert abs(max(top.values()) - logprob) < 1e-5
    assert "".join(lp["tokens"]).startswith(r["choices"][0]["text"])  # plus "<eos>" when it stopped there
    c = chat(server, MESSAGES, max_tokens=6, temperature=0, logprobs=True, top_logprobs=2)
    content = c["choices"][0]["logprobs"]["content"]
    assert len(content) == c["usage"]["completion_tokens"]
    for entry in content:
        assert entry["logprob"] <= 0 and len(entry["top_logprobs"]) == 2
        assert entry["top_logprobs"][0]["logprob"] >= entry["top_logprobs"][1]["logprob"]
        assert entry["bytes"] == list(entry["token"].encode())
    # Streamed: each chunk carries its tokens' entries; together they are the whole response's.
    events = server.stream("/v1/chat/completions", {"messages": MESSAGES, "max_tokens": 6, "temperature": 0,
                                                    "logprobs": True, "top_logprobs": 2, "stream": True})
    streamed = [e for ev in events[:-1] for e in (json.loads(ev)["choices"][0]["logprobs"] or {"content": []})["content"]]
    assert streamed == content
    # Without logprobs, none.
    assert chat(server, MESSAGES, max_tokens=2)["choices"][0]["logprobs"] is None


def test_tokenize_round_trip(server):
    text = "hello world, the end!"
    ids = server.ok("/tokenize", {"prompt": text})
    assert ids["count"] == len(ids["tokens"]) > 0 and ids["max_model_len"] == MAX_MODEL_LEN
    assert server.ok("/detokenize", {"tokens": ids["tokens"]})["prompt"] == text


def parse_prometheus(text: str) -> dict:
    """Prometheus's text format → {(name, frozenset(labels)): value}; checks every sample has a
    # TYPE of its family, every line is a comment or a sample, and prometheus_client's parser
    reads the same samples."""
    types, samples = {}, {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            types[name] = kind
            continue
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)', line)
        assert m, f"not a sample: {line!r}"
        name, labels, value = m.groups()
        family = re.sub(r"_(bucket|sum|count)$", "", name) if name not in types else name
        assert family in types, f"{name} has no # TYPE"
        pairs = frozenset(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', labels or ""))
        samples[(name, pairs)] = float(value)
    # Prometheus's own parser reads the same samples.
    official = {(s.name, frozenset(s.labels.items())): s.value
                for family in text_string_to_metric_families(text) for s in family.samples}
    assert official == samples
    return samples


def metric(samples, name, **labels):
    want = {("model_name", MODEL_NAME), *labels.items()}
    found = [v for (n, ls), v in samples.items() if n == name and want <= set(ls)]
    return sum(found)


def assert_no_pages_held(server):
    """Once idle, no request is left in the engine and no KV page is held (no leak)."""
    deadline = time.time() + 10
    while True:
        m = parse_prometheus(server.request("GET", "/metrics")[1].decode())
        idle = (metric(m, "onecat_num_requests_running"), metric(m, "onecat_num_requests_waiting"),
                metric(m, "onecat_kv_cache_usage_perc")) == (0, 0, 0)
        if idle or time.time() > deadline:
            break
        time.sleep(0.05)
    assert idle, f"still held after 10 s: {m}"


def test_metrics(server):
    before = parse_prometheus(server.request("GET", "/metrics")[1].decode())
    usages = [completion(server, "the cat", max_tokens=6, temperature=0)["usage"],
              chat(server, MESSAGES, max_tokens=5, temperature=0, n=2)["usage"]]
    events = server.stream("/v1/completions", {"prompt": "a b c", "max_tokens": 4, "temperature": 0, "stream": True,
                                               "stream_options": {"include_usage": True}})
    usages.append(json.loads(events[-2])["usage"])
    server.post("/v1/completions", {"prompt": 5})
    after = parse_prometheus(server.request("GET", "/metrics")[1].decode())
    assert metric(after, "onecat_num_requests_running") == metric(after, "onecat_num_requests_waiting") == 0
    # Mid-stream, the engine's gauges show the request and its pages (8 choices of 200 tokens, so a
    # loaded machine still reads the gauges before the tiny model is done).
    sock, _ = open_stream(server.port, {"prompt": "the cat", "max_tokens": 200, "n": 8, "stream": True,
                                       "ignore_eos": True})
    during = parse_prometheus(server.request("GET", "/metrics")[1].decode())
    sock.close()
    assert metric(during, "onecat_num_requests_running") + metric(during, "onecat_num_requests_waiting") >= 1
    assert 0 < metric(during, "onecat_kv_cache_usage_perc") <= 1

    def delta(name, **labels):
        return metric(after, name, **labels) - metric(before, name, **labels)

    assert delta("onecat_requests_total", endpoint="/v1/completions", status="200") >= 2
    assert delta("onecat_requests_total", endpoint="/v1/chat/completions", status="200") == 1
    assert delta("onecat_requests_total", endpoint="/v1/completions", status="400") == 1
    assert delta("onecat_prompt_tokens_total") == sum(u["prompt_tokens"] for u in usages)
    assert delta("onecat_generation_tokens_total") == sum(u["completion_tokens"] for u in usages)
    for h in ("onecat_time_to_first_token_seconds", "onecat_e2e_request_latency_seconds"):
        assert delta(h + "_count") == 3
        assert metric(after, h + "_bucket", le="+Inf") == metric(after, h + "_count")
        buckets = sorted((float(dict(ls)["le"]), v) for (n, ls), v in after.items() if n == h + "_bucket")
        assert all(a[1] <= b[1] for a, b in zip(buckets, buckets[1:])), "buckets must be cumulative"
    assert 0 <= metric(after, "onecat_prefix_cache_hit_rate") <= 1
    # /metrics needs the key like every endpoint but /health.
    assert server.request("GET", "/metrics", headers={})[0] == 401


def test_metrics_speculative_acceptance(server, model):
    """With --num-speculative-tokens, /metrics counts the drafts verified and accepted (in all and
    by position), as the engine's EngineStats does; greedy output is the same as without drafts."""
    prompt = "a b c a b c a b c a b c a b c"
    body = {"prompt": prompt, "max_tokens": 40, "temperature": 0, "ignore_eos": True}
    plain = server.ok("/v1/completions", body)["choices"][0]["text"]
    assert metric(parse_prometheus(server.request("GET", "/metrics")[1].decode()),
                  "onecat_spec_decode_num_draft_tokens_total") == 0
    s = Server(model, MAX_MODEL_LEN, "--num-speculative-tokens", "3")
    try:
        assert s.ok("/v1/completions", body)["choices"][0]["text"] == plain
        m = parse_prometheus(s.request("GET", "/metrics")[1].decode())
    finally:
        s.stop()
    drafted = metric(m, "onecat_spec_decode_num_draft_tokens_total")
    accepted = metric(m, "onecat_spec_decode_num_accepted_tokens_total")
    assert drafted > 0 and 0 <= accepted <= drafted, (drafted, accepted)
    by_position = [metric(m, "onecat_spec_decode_num_accepted_tokens_per_pos_total", position=str(k))
                   for k in range(3)]
    assert sum(by_position) == accepted
    assert all(a >= b for a, b in zip(by_position, by_position[1:])), "a later draft is accepted only after the earlier"


# ---- malformed requests, generated -------------------------------------------------------------

def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


CANDIDATES = ["x", "", True, False, 0, -1, 1, 2, 2.5, -3.5, 10**20, -(10**20), [], [1], ["a"], {}, {"a": 1}]
# field → (endpoints, predicate of a valid value); None (absent) is always valid.
FIELDS = {
    "n": ("both", lambda v: _is_int(v) and 1 <= v <= 64),
    "max_tokens": ("both", lambda v: _is_int(v) and 1 <= v <= MAX_MODEL_LEN - 8),
    "temperature": ("both", lambda v: _is_num(v) and 0 <= v <= 2),
    "top_p": ("both", lambda v: _is_num(v) and 0 < v <= 1),
    "top_k": ("both", lambda v: _is_int(v) and -1 <= v < 2**31),
    "min_p": ("both", lambda v: _is_num(v) and 0 <= v <= 1),
    "presence_penalty": ("both", lambda v: _is_num(v) and -2 <= v <= 2),
    "frequency_penalty": ("both", lambda v: _is_num(v) and -2 <= v <= 2),
    "repetition_penalty": ("both", lambda v: _is_num(v) and 0 < v <= 1e6),
    "seed": ("both", lambda v: _is_int(v) and -(2**63) <= v < 2**64),
    "stream": ("both", lambda v: isinstance(v, bool)),
    "stop": ("both", lambda v: (isinstance(v, str) and v != "") or
             (isinstance(v, list) and all(isinstance(s, str) and s for s in v))),
    "model": ("both", lambda v: v == MODEL_NAME),
    "user": ("both", lambda v: isinstance(v, str)),
    "logit_bias": ("both", lambda v: v == {}),
    "response_format": ("both", lambda v: False),
    "stream_options": ("both", lambda v: False),  # valid only with stream: true
    "logprobs": ("completions", lambda v: _is_int(v) and 0 <= v <= 20),
    "echo": ("completions", lambda v: isinstance(v, bool)),
    "prompt": ("completions", lambda v: (isinstance(v, str) and v != "") or v == [1] or v == ["a"]),
    "messages": ("chat", lambda v: False),
    "top_logprobs": ("chat", lambda v: _is_int(v) and v == 0),  # > 0 needs logprobs: true
    "max_completion_tokens": ("chat", lambda v: _is_int(v) and 1 <= v <= MAX_MODEL_LEN - 20),
    "chat_template_kwargs": ("chat", lambda v: isinstance(v, dict)),
    "tools": ("chat", lambda v: v == []),
    "tool_choice": ("chat", lambda v: v in ("auto", "none")),
    "num_draft_tokens": ("both", lambda v: _is_int(v) and v == 0),  # this server does not speculate
}
BASE = {"/v1/completions": {"prompt": "the cat", "max_tokens": 2},
        "/v1/chat/completions": {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}}


def bad_requests(model_vocab: int):
    """(description, method, path, body bytes or None, headers) of requests that must get a 4xx."""
    out = []
    for path, base in BASE.items():
        kind = "completions" if path == "/v1/completions" else "chat"
        for field, (where, valid) in FIELDS.items():
            if where not in ("both", kind):
                continue
            for v in CANDIDATES:
                if not valid(v):
                    out.append((f"{path} {field}={v!r}", "POST", path, json.dumps({**base, field: v}).encode(), AUTH))
        text = json.dumps(base)
        for cut in range(len(text)):  # every truncation of a valid body is malformed JSON
            out.append((f"{path} truncated at {cut}", "POST", path, text[:cut].encode(), AUTH))
        # b'{"max_tokens": 1e400}': a number past a double's range was a 500 (nlohmann's out_of_range).
        for raw in (b"[]", b"1", b'"x"', b"null", b"{\"prompt\": \"\xff\xfe\"}", b"{'a': 1}", b"[" * 200 + b"]" * 200,
                    b'{"max_tokens": 1e400}'):
            out.append((f"{path} body {raw[:20]!r}", "POST", path, raw, AUTH))
        out.append((f"{path} without auth", "POST", path, text.encode(), {}))
        out.append((f"{path} wrong key", "POST", path, text.encode(), {"Authorization": "Bearer nope"}))
        out.append((f"{path} basic auth", "POST", path, text.encode(), {"Authorization": f"Basic {API_KEY}"}))
    long_ids = [1] * (MAX_MODEL_LEN + 1)
    for body in ({"prompt": long_ids}, {"prompt": "ab" * MAX_MODEL_LEN}, {"prompt": [long_ids, [1]]},
                 {"prompt": [1, 2], "max_tokens": MAX_MODEL_LEN}, {"prompt": [1, 2], "max_tokens": 2**62},
                 {"prompt": [-1]}, {"prompt": [model_vocab]}, {"prompt": [2**40]}, {"prompt": [[1], "a", 3]},
                 {"prompt": [1, "a"]}, {"prompt": [[]]}, {"prompt": "a", "n": 2, "best_of": 3},
                 {"prompt": "a", "stop": ["x"] * 17}, {"prompt": "a", "stop": "y" * 300}):
        out.append((f"completions {str(body)[:60]}", "POST", "/v1/completions", json.dumps(body).encode(), AUTH))
    for messages in ([], [{}], [{"role": "robot", "content": "x"}], [{"role": "user", "content": 5}],
                     [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}],
                     [{"role": "user", "content": [{"type": "text"}]}], [{"role": "user", "content": [5]}],
                     ["hi"], [{"role": 1, "content": "x"}], [{"role": "user", "content": "x" * (3 * MAX_MODEL_LEN)}]):
        out.append((f"chat messages {str(messages)[:60]}", "POST", "/v1/chat/completions",
                    json.dumps({"messages": messages}).encode(), AUTH))
    for body in ({"prompt": 5}, {}, {"messages": "x"}, {"prompt": ["a"]}):
        out.append((f"tokenize {body}", "POST", "/tokenize", json.dumps(body).encode(), AUTH))
    for body in ({"tokens": "x"}, {"tokens": [-1]}, {"tokens": [10**9]}, {"tokens": [1.5]}, {}):
        out.append((f"detokenize {body}", "POST", "/detokenize", json.dumps(body).encode(), AUTH))
    for method, path in (("GET", "/nope"), ("POST", "/v1/nope"), ("GET", "/v1/completions"),
                         ("DELETE", "/v1/models"), ("GET", "/v1/models/../../etc")):
        out.append((f"{method} {path}", method, path, None, AUTH))
    for path in ("/v1/models", "/version", "/tokenize"):
        out.append((f"{path} without auth", "GET" if path != "/tokenize" else "POST", path, b"{}", {}))
    return out


def test_bad_input_suite(server, model):
    vocab = json.loads((model / "config.json").read_text())["vocab_size"]
    cases = bad_requests(vocab)
    assert len(cases) >= 200, len(cases)
    failures = []
    for what, method, path, raw, headers in cases:
        status, payload = server.request(method, path, raw=raw, headers={**headers, "Content-Type":
                                                                           "application/json"})
        try:
            err = json.loads(payload)["error"]
            ok = 400 <= status < 500 and isinstance(err["message"], str) and err["message"] and "type" in err \
                and "param" in err and "code" in err
        except (ValueError, KeyError, TypeError):
            ok = False
        if not ok:
            failures.append(f"{what}: {status} {payload[:200]!r}")
    assert not failures, f"{len(failures)} of {len(cases)} bad requests not refused:\n" + "\n".join(failures[:20])
    assert_no_pages_held(server)
    # An oversized body: 413 from its Content-Length (the server answers before reading it).
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + API_KEY.encode() +
                 b"\r\nContent-Type: application/json\r\nContent-Length: " + str(9 << 20).encode() + b"\r\n\r\n")
    answer = b""
    while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
        chunk = sock.recv(4096)
        if not chunk:
            break
        answer += chunk
    sock.close()
    assert answer.startswith(b"HTTP/1.1 413"), answer
    assert "8.0 MiB" in json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]["message"]
    # JSON sent as a form (`curl -d` without a Content-Type): small bodies are read as JSON, and one
    # over the library's form limit (8 KiB) is refused with the header to send instead.
    body = {"prompt": "the cat", "max_tokens": 1, "temperature": 0}
    form = {**AUTH, "Content-Type": "application/x-www-form-urlencoded"}
    assert server.request("POST", "/v1/completions", raw=json.dumps(body).encode(), headers=form)[0] == 200
    body["user"] = "x" * 20000
    status, payload = server.request("POST", "/v1/completions", raw=json.dumps(body).encode(), headers=form)
    assert status == 413 and "Content-Type: application/json" in json.loads(payload)["error"]["message"], payload
    assert server.request("GET", "/health", headers={})[0] == 200
    assert completion(server, "the cat", max_tokens=2, temperature=0)["choices"][0]["finish_reason"]


def open_stream(port, body):
    """A streamed completion on a raw socket: the socket, once the first event has arrived."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    data = json.dumps(body).encode()
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + API_KEY.encode() +
                 b"\r\nContent-Type: application/json\r\nContent-Length: " + str(len(data)).encode() +
                 b"\r\n\r\n" + data)
    got = b""
    while b"data:" not in got:
        got += sock.recv(4096)
    assert got.startswith(b"HTTP/1.1 200"), got
    return sock, got


def test_client_leaving_mid_stream(server):
    before = sum("the client went away" in line for line in server.log)
    for seed in range(4):
        sock, _ = open_stream(server.port, {"prompt": "the cat", "max_tokens": MAX_MODEL_LEN - 8, "stream": True,
                                            "seed": seed, "ignore_eos": True})
        sock.close()
    deadline = time.time() + 10
    while sum("the client went away" in line for line in server.log) < before + 4 and time.time() < deadline:
        time.sleep(0.05)
    assert sum("the client went away" in line for line in server.log) == before + 4, "".join(server.log)
    assert_no_pages_held(server)
    assert server.request("GET", "/health", headers={})[0] == 200
    r = completion(server, "the cat", max_tokens=4, temperature=0, ignore_eos=True)
    assert r["usage"]["completion_tokens"] == 4 and r["choices"][0]["finish_reason"] == "length"


def test_client_leaving_a_whole_request(model):
    """A non-streamed request whose client closes its connection is cancelled (the handler finds
    its socket by the connection's two ends and looks at it every 50 ms while it waits): its pages
    are let go long before it could have ended, it counts as status 499 and not as a finished
    request, and the server serves on, kept-alive connections too; every request's socket was
    found."""
    s = Server(model, 4096)
    try:
        # Two requests on one kept-alive connection; the second's time gives the generation rate.
        conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=60)
        sockets, rate = [], None
        for tokens in (4, 400):
            start = time.time()
            conn.request("POST", "/v1/completions", body=json.dumps(
                {"prompt": "the cat", "max_tokens": tokens, "ignore_eos": True, "seed": 1}),
                headers={**AUTH, "Content-Type": "application/json"})
            resp = conn.getresponse()
            assert resp.status == 200 and json.loads(resp.read())["usage"]["completion_tokens"] == tokens
            rate = tokens / (time.time() - start)
            sockets.append(conn.sock)
        assert sockets[0] is not None and sockets[1] is sockets[0], "the connection was not kept alive"
        conn.close()
        tokens = 4000
        whole_run = tokens / rate  # at least: later tokens attend to more
        before = parse_prometheus(s.request("GET", "/metrics")[1].decode())
        sock = socket.create_connection(("127.0.0.1", s.port), timeout=30)
        data = json.dumps({"prompt": "the cat", "max_tokens": tokens, "ignore_eos": True, "seed": 2}).encode()
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + API_KEY.encode() +
                     b"\r\nContent-Type: application/json\r\nContent-Length: " + str(len(data)).encode() +
                     b"\r\n\r\n" + data)
        deadline = time.time() + 10
        while True:  # running, with pages held
            m = parse_prometheus(s.request("GET", "/metrics")[1].decode())
            if metric(m, "onecat_num_requests_running") == 1 and metric(m, "onecat_kv_cache_usage_perc") > 0:
                break
            assert time.time() < deadline, m
            time.sleep(0.02)
        sock.close()
        left = time.time()
        assert_no_pages_held(s)
        freed = time.time() - left
        assert freed < min(2.0, whole_run / 2), f"pages freed {freed:.2f} s after the client left; the whole " \
                                                f"request takes {whole_run:.1f} s or more"
        deadline = time.time() + 5
        while not any("the client went away" in line for line in s.log) and time.time() < deadline:
            time.sleep(0.02)
        assert sum("the client went away" in line for line in s.log) == 1, "".join(s.log)
        assert not any("was not found" in line for line in s.log), "".join(s.log)
        after = parse_prometheus(s.request("GET", "/metrics")[1].decode())

        def delta(name, **labels):
            return metric(after, name, **labels) - metric(before, name, **labels)

        assert delta("onecat_requests_total", endpoint="/v1/completions", status="499") == 1
        assert delta("onecat_generation_tokens_total") == 0 and delta("onecat_e2e_request_latency_seconds_count") == 0
        r = completion(s, "the cat", max_tokens=4, temperature=0, ignore_eos=True)
        assert r["usage"]["completion_tokens"] == 4 and r["choices"][0]["finish_reason"] == "length"
    finally:
        s.stop()
    assert s.proc.returncode == 0, "".join(s.log)


def test_sigterm_drains_in_flight_requests(model):
    s = Server(model, max_model_len=4096)
    tokens = 600  # a second or more on the CPU: still running when SIGTERM comes
    sock, got = open_stream(s.port, {"prompt": "the cat", "max_tokens": tokens, "stream": True, "seed": 5,
                                     "ignore_eos": True})
    s.proc.send_signal(signal.SIGTERM)
    # No new connections once the signal is taken, while the stream goes on.
    deadline = time.time() + 5
    refused = False
    while time.time() < deadline and not refused:
        try:
            socket.create_connection(("127.0.0.1", s.port), timeout=1).close()
            time.sleep(0.02)
        except OSError:
            refused = True
    assert refused, "the server still accepts connections after SIGTERM"
    assert s.proc.poll() is None, "the server exited before its in-flight stream ended"
    while not got.endswith(b"data: [DONE]\r\n\r\n") and b"data: [DONE]" not in got[-64:]:
        chunk = sock.recv(65536)
        if not chunk:
            break
        got += chunk
    sock.close()
    s.proc.wait(timeout=60)
    assert s.proc.returncode == 0, "".join(s.log)
    assert b"data: [DONE]" in got
    events = [json.loads(line[len(b"data: "):]) for line in got.split(b"\n")
              if line.startswith(b"data: {")]
    assert events[-1]["choices"][0]["finish_reason"] == "length"
    assert sum(1 for e in events if e["choices"][0]["text"]) > tokens // 2


# The load test's bound on resident memory growth after warm-up: 2 MiB. Measured on the 2-core
# development machine: 380–396 KiB over 30 s (1225–1280 streams), 352 KiB over 60 s (1859 streams), so it
# does not grow with the streams; a leak of a few KiB per stream (a request's state, a
# connection's buffers) breaks the bound within the 30 s.
RSS_GROWTH_KIB = 2 * 1024


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


# The load test's length: the issue's 30 s in CI; longer on demand.
LOAD_SECONDS = float(os.environ.get("ONECAT_SERVE_LOAD_SECONDS", "30"))


def test_64_concurrent_streaming_clients(model):
    """The issue's bounded load on a server of its own: 64 clients streaming at once (chat, and
    completions with logprobs) for ONECAT_SERVE_LOAD_SECONDS (30 by default); no errors, every
    stream ends with [DONE], and the server's resident memory (VmRSS, sampled every 0.2 s) does not
    grow after the warm-up (the first third, at most 10 s) by more than RSS_GROWTH_KIB."""
    clients, seconds = 64, LOAD_SECONDS
    warmup = min(10.0, seconds / 3)
    s = Server(model)
    errors, rounds = [], [0] * clients
    start = threading.Event()
    done = threading.Event()
    samples = []  # (seconds since start, VmRSS KiB)

    def sampler():
        start.wait()
        t0 = time.time()
        while not done.is_set():
            samples.append((time.time() - t0, rss_kib(s.proc.pid)))
            time.sleep(0.2)

    def client(i):
        start.wait()
        deadline = time.time() + seconds
        while time.time() < deadline:
            try:
                if i % 2:
                    events = s.stream("/v1/completions", {
                        "prompt": f"client {i} round {rounds[i]}", "max_tokens": 16, "seed": i, "logprobs": 2,
                        "stream": True, "stream_options": {"include_usage": True}})
                else:
                    events = s.stream("/v1/chat/completions", {
                        "messages": [{"role": "user", "content": f"client {i} round {rounds[i]}"}], "max_tokens": 16,
                        "seed": i, "stream": True, "stream_options": {"include_usage": True}})
                if events[-1] != "[DONE]" or json.loads(events[-2])["usage"]["completion_tokens"] < 1:
                    errors.append(f"client {i}: {events[-2:]}")
            except Exception as e:  # noqa: BLE001 - every failure is a finding here
                errors.append(f"client {i}: {e!r}")
            rounds[i] += 1

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    watcher = threading.Thread(target=sampler)
    for t in threads + [watcher]:
        t.start()
    start.set()
    for t in threads:
        t.join(timeout=seconds + 120)
    done.set()
    watcher.join()
    try:
        assert not errors, f"{len(errors)} errors: {errors[:5]}"
        assert min(rounds) >= 1, rounds
        assert_no_pages_held(s)
        assert s.request("GET", "/health", headers={})[0] == 200
    finally:
        s.stop()
    assert s.proc.returncode == 0, "".join(s.log[-20:])
    settled = [kib for t, kib in samples if t < warmup][-1]
    peak = max(kib for t, kib in samples if t >= warmup)
    growth = peak - settled
    print(f"{sum(rounds)} streams by {clients} clients in {seconds} s; VmRSS {settled} KiB after {warmup} s of "
          f"warm-up, peak {peak} KiB after it: growth {growth} KiB")
    assert growth < RSS_GROWTH_KIB, f"resident memory grew by {growth} KiB after warm-up"


def test_vllm_engine_flags(model):
    """vLLM's --seed (requests without a seed replay across restarts), --no-enable-prefix-caching
    (no prompt token found in the cache), --enforce-eager and the log flags it takes as they are;
    --block-size other than 16 exits 2."""
    prompt = "the cat sat on the mat " * 4
    texts = []
    for flags in (["--seed", "5", "--quantization", "none"], ["--seed", "5", "--no-enable-prefix-caching", "--enforce-eager",
                                    "--disable-log-requests", "--disable-log-stats", "--block-size", "16"]):
        s = Server(model, MAX_MODEL_LEN, *flags)
        try:
            texts.append([completion(s, prompt, max_tokens=12, temperature=1.0)["choices"][0]["text"]
                          for _ in range(2)])
            hits = metric(parse_prometheus(s.request("GET", "/metrics")[1].decode()), "onecat_prefix_cache_hit_rate")
            assert (hits > 0) == ("--no-enable-prefix-caching" not in flags), (flags, hits)
        finally:
            s.stop()
    assert texts[0] == texts[1], texts  # the same seeds in the same order
    assert texts[0][0] != texts[0][1]  # yet one request's seed is not the next's
    bad = subprocess.run([str(onecat_bin()), "serve", "--model", str(model), "--block-size", "32"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--block-size must be 16" in bad.stderr, bad.stderr
