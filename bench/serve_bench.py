#!/usr/bin/env python3
"""Serving benchmark: an OpenAI-compatible server (onecat serve, or llama.cpp's llama-server, the
same API) under Poisson arrivals, every request streamed; JSON out.

For each request rate (requests/s; `inf` sends them all at once) requests of the workload, new
ones per rate (prompts a prefix cache has not seen), arrive at exponentially spaced times
(seeded) and stream /v1/completions with token-id prompts, so no tokenizer is needed on this
side and every server sees the same tokens. Per request: time to the
first token (TTFT), the gaps between later tokens (ITL: inter-token latency), time per output
token after the first (TPOT), and the output tokens the server's `usage` reports. Per rate:
completed and failed requests, request and output-token throughput over the run's wall time,
and p50/p90/p99 of TTFT, TPOT and ITL.

Workloads: `fixed` (every request --input-len prompt tokens and --output-len new ones) or
`mix`, a ShareGPT-like mix generated here (log-normal prompt and output lengths around
--input-len and --output-len, clipped to [4, 4·len]); `ignore_eos` makes every request run to
its length where the server honours it (onecat and vLLM do; llama-server: n_predict + ignore_eos).
Decoding is greedy unless --temperature (with --top-p) asks for sampling, what chat clients send
by default; each request then carries its own seed, so a rerun draws the same tokens.

    bench/serve_bench.py --url http://127.0.0.1:8000 --model NAME --vocab 151936 \\
        [--rates 1,4,16,inf] [--num-prompts 64] [--workload fixed|mix] [--input-len 1024] \\
        [--output-len 256] [--temperature 0] [--top-p 1] [--seed 0] [--api-key KEY] [--out serve_bench.json]
"""
from __future__ import annotations

import argparse
import http.client
import json
import math
import random
import sys
import threading
import time
from urllib.parse import urlparse


def percentiles(values: list[float]) -> dict:
    if not values:
        return {"p50_ms": None, "p90_ms": None, "p99_ms": None, "mean_ms": None}
    v = sorted(values)

    def at(p):
        x = p / 100 * (len(v) - 1)
        lo = int(x)
        hi = min(lo + 1, len(v) - 1)
        return 1e3 * (v[lo] + (v[hi] - v[lo]) * (x - lo))

    return {"p50_ms": at(50), "p90_ms": at(90), "p99_ms": at(99), "mean_ms": 1e3 * sum(v) / len(v)}


def workload(kind: str, n: int, input_len: int, output_len: int, vocab: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    seeds = random.Random(seed + 1)  # apart, so the prompts stay those of a greedy run
    requests = []
    for _ in range(n):
        if kind == "fixed":
            p, o = input_len, output_len
        else:  # log-normal lengths (ShareGPT's are heavy-tailed), median at the given lengths
            p = int(min(4 * input_len, max(4, rng.lognormvariate(math.log(input_len), 0.8))))
            o = int(min(4 * output_len, max(4, rng.lognormvariate(math.log(output_len), 0.7))))
        requests.append({"prompt": [rng.randrange(100, vocab) for _ in range(p)], "max_tokens": o,
                         "seed": seeds.randrange(1 << 31)})
    return requests


class Client:
    def __init__(self, url: str, model: str, api_key: str | None, timeout: float, temperature: float = 0,
                 top_p: float = 1, structured_share: float = 0, structured_regex: str = "[a-z ]+"):
        u = urlparse(url)
        self.host, self.port = u.hostname, u.port or 80
        self.model, self.timeout = model, timeout
        self.temperature, self.top_p = temperature, top_p
        self.structured_share, self.structured_regex = structured_share, structured_regex
        self.headers = {"Content-Type": "application/json"}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"

    def run(self, request: dict) -> dict:
        """One streamed completion: token arrival times relative to the send, usage, error."""
        body = {"model": self.model, "prompt": request["prompt"], "max_tokens": request["max_tokens"],
                "temperature": self.temperature, "stream": True, "stream_options": {"include_usage": True},
                "ignore_eos": True}
        if self.temperature > 0:
            body.update({"top_p": self.top_p, "seed": request["seed"]})
        # A share of the requests under a grammar (vLLM's guided_regex; onecat samples their rows on
        # the host beside the others' on the GPU): the seed decides which, the same at every rate.
        if self.structured_share > 0 and (request["seed"] % 1000) < self.structured_share * 1000:
            body["guided_regex"] = self.structured_regex
        out = {"prompt_tokens": len(request["prompt"]), "times": [], "output_tokens": None, "error": None}
        start = time.perf_counter()
        try:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            conn.request("POST", "/v1/completions", body=json.dumps(body), headers=self.headers)
            resp = conn.getresponse()
            if resp.status != 200:
                out["error"] = f"HTTP {resp.status}: {resp.read()[:200]!r}"
                return out
            buffer = b""
            while True:
                chunk = resp.read1(65536)
                if not chunk:
                    break
                buffer += chunk
                while b"\n\n" in buffer:
                    event, buffer = buffer.split(b"\n\n", 1)
                    for line in event.split(b"\n"):
                        if not line.startswith(b"data: "):
                            continue
                        data = line[6:]
                        if data == b"[DONE]":
                            continue
                        j = json.loads(data)
                        if j.get("usage"):
                            out["output_tokens"] = j["usage"]["completion_tokens"]
                        if j.get("choices") and j["choices"][0].get("text"):
                            out["times"].append(time.perf_counter() - start)
            conn.close()
        except Exception as e:  # a failed request is counted, not fatal
            out["error"] = f"{type(e).__name__}: {e}"
        return out


def run_rate(client: Client, requests: list[dict], rate: float, seed: int) -> dict:
    rng = random.Random(seed)
    results: list[dict | None] = [None] * len(requests)
    threads = []
    begin = time.perf_counter()
    at = 0.0
    for i, r in enumerate(requests):
        if math.isfinite(rate):
            at += rng.expovariate(rate)
            delay = begin + at - time.perf_counter()
            if delay > 0:
                time.sleep(delay)

        def one(i=i, r=r):
            results[i] = client.run(r)

        t = threading.Thread(target=one, daemon=True)
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    wall = time.perf_counter() - begin
    done = [r for r in results if r and not r["error"]]
    ttft, tpot, itl = [], [], []
    output_tokens = 0
    for r in done:
        times = r["times"]
        if times:
            ttft.append(times[0])
            itl.extend(b - a for a, b in zip(times, times[1:]))
        n = r["output_tokens"] if r["output_tokens"] is not None else len(times)
        output_tokens += n
        if len(times) > 1 and n > 1:
            tpot.append((times[-1] - times[0]) / (n - 1))
    errors = [r["error"] for r in results if r and r["error"]]
    return {"rate": rate if math.isfinite(rate) else "inf", "requests": len(requests), "completed": len(done),
            "failed": len(errors), "errors": errors[:5], "seconds": wall,
            "requests_per_second": len(done) / wall, "output_tokens": output_tokens,
            "output_tokens_per_second": output_tokens / wall,
            "prompt_tokens": sum(r["prompt_tokens"] for r in done),
            "ttft": percentiles(ttft), "tpot": percentiles(tpot), "itl": percentiles(itl)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default="http://127.0.0.1:8000")
    ap.add_argument("--model", required=True, help="the model name the server serves")
    ap.add_argument("--vocab", type=int, required=True, help="prompt ids are drawn from [100, vocab)")
    ap.add_argument("--rates", default="1,4,16,inf", help="requests/s, comma-separated; inf: all at once")
    ap.add_argument("--num-prompts", type=int, default=64)
    ap.add_argument("--workload", choices=["fixed", "mix"], default="fixed")
    ap.add_argument("--input-len", type=int, default=1024)
    ap.add_argument("--output-len", type=int, default=256)
    ap.add_argument("--temperature", type=float, default=0, help="0: greedy; above: sampled, a seed per request")
    ap.add_argument("--top-p", type=float, default=1, help="with --temperature")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--structured-share", type=float, default=0,
                    help="the share of requests sent with guided_regex (onecat and vLLM only)")
    ap.add_argument("--structured-regex", default="[a-z ]+", help="their regex (default: one that never ends)")
    ap.add_argument("--api-key")
    ap.add_argument("--timeout", type=float, default=600, help="seconds a request may take")
    ap.add_argument("--out", help="write the JSON here too")
    a = ap.parse_args()
    try:
        rates = [float(x) for x in a.rates.split(",")]
    except ValueError:
        print(f"serve_bench: --rates {a.rates!r} is not a comma-separated list of numbers (or inf)", file=sys.stderr)
        return 2
    if a.temperature < 0 or not 0 < a.top_p <= 1:
        print("serve_bench: --temperature must be 0 or more and --top-p in (0, 1]", file=sys.stderr)
        return 2
    if a.num_prompts < 1 or a.input_len < 1 or a.output_len < 1 or a.vocab <= 100 or any(r <= 0 for r in rates):
        print("serve_bench: --num-prompts, --input-len, --output-len and every rate must be positive, "
              "--vocab above 100", file=sys.stderr)
        return 2
    if not 0 <= a.structured_share <= 1:
        print("serve_bench: --structured-share must be in [0, 1]", file=sys.stderr)
        return 2
    client = Client(a.url, a.model, a.api_key, a.timeout, a.temperature, a.top_p, a.structured_share,
                    a.structured_regex)
    result = {"url": a.url, "model": a.model, "workload": a.workload, "input_len": a.input_len,
              "output_len": a.output_len, "num_prompts": a.num_prompts, "temperature": a.temperature,
              "top_p": a.top_p, "seed": a.seed, "structured_share": a.structured_share, "runs": []}
    for i, rate in enumerate(rates):
        # Prompts of their own per rate: a server that caches prefixes (onecat, vLLM) would find an
        # earlier rate's prompts in its cache and skip their prefill.
        requests = workload(a.workload, a.num_prompts, a.input_len, a.output_len, a.vocab, a.seed + 1000 * i)
        run = run_rate(client, requests, rate, a.seed + i)
        result["runs"].append(run)
        print(f"rate {run['rate']}: {run['completed']}/{run['requests']} done, {run['requests_per_second']:.2f} req/s, "
              f"{run['output_tokens_per_second']:.1f} out tok/s, TTFT p50 {run['ttft']['p50_ms']} ms, "
              f"TPOT p50 {run['tpot']['p50_ms']} ms", file=sys.stderr)
    text = json.dumps(result, indent=1)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")
    print(text)
    return 0 if all(r["failed"] == 0 for r in result["runs"]) else 1


if __name__ == "__main__":
    sys.exit(main())
