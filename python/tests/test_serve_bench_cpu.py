"""bench/serve_bench.py against `onecat serve` on the CPU backend: every request of a small
Poisson run and an all-at-once run completes, streamed, with the output length asked for; so do
sampled requests (temperature, top_p, a seed each)."""

from __future__ import annotations

import json
import subprocess
import sys

from test_serve_cpu import API_KEY, MODEL_NAME, ROOT, model, server  # noqa: F401 (fixtures)


def serve_bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "bench" / "serve_bench.py"), *args], capture_output=True,
                          text=True, timeout=300)


def test_serve_bench_runs_every_request(server):  # noqa: F811
    url = ["--url", f"http://127.0.0.1:{server.port}", "--model", MODEL_NAME, "--api-key", API_KEY, "--vocab", "128"]
    out = serve_bench(*url, "--rates", "50,inf", "--num-prompts", "6", "--input-len", "30", "--output-len", "9",
                      "--workload", "fixed")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert [r["rate"] for r in result["runs"]] == [50.0, "inf"]
    for run in result["runs"]:
        assert run["completed"] == 6 and run["failed"] == 0
        assert run["output_tokens"] == 6 * 9  # ignore_eos: every request runs to its length
        assert run["prompt_tokens"] == 6 * 30
        assert 0 < run["ttft"]["p50_ms"] <= run["ttft"]["p99_ms"]
        assert run["itl"]["p50_ms"] > 0 and run["tpot"]["p50_ms"] > 0
    sampled = serve_bench(*url, "--rates", "inf", "--num-prompts", "4", "--input-len", "20", "--output-len", "7",
                          "--temperature", "0.8", "--top-p", "0.9")
    assert sampled.returncode == 0, sampled.stderr
    result = json.loads(sampled.stdout)
    assert result["temperature"] == 0.8 and result["top_p"] == 0.9
    assert result["runs"][0]["completed"] == 4 and result["runs"][0]["output_tokens"] == 4 * 7
    # Every request under a grammar that never ends: each still runs to its length.
    structured = serve_bench(*url, "--rates", "inf", "--num-prompts", "4", "--input-len", "20", "--output-len", "7",
                             "--structured-share", "1")
    assert structured.returncode == 0, structured.stderr
    result = json.loads(structured.stdout)
    assert result["structured_share"] == 1
    assert result["runs"][0]["completed"] == 4 and result["runs"][0]["output_tokens"] == 4 * 7
    bad = serve_bench("--model", "x", "--vocab", "128", "--structured-share", "2")
    assert bad.returncode == 2 and "--structured-share" in bad.stderr
    bad = serve_bench("--model", "x", "--vocab", "128", "--rates", "fast")
    assert bad.returncode == 2 and "--rates" in bad.stderr
    bad = serve_bench("--model", "x", "--vocab", "128", "--top-p", "0")
    assert bad.returncode == 2 and "--top-p" in bad.stderr
