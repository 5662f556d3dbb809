"""onecat.LLM on the CPU backend (no GPU): many requests at once give what onecat.Model gives
each alone, step() and cancel(), the prefix cache's statistics, and the ValueErrors."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import onecat

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny") / "llama-fp8"
    subprocess.run([sys.executable, str(ROOT / "tools" / "make_tiny_checkpoint.py"), str(out), "--arch", "llama",
                    "--format", "fp8"], check=True)
    return out


def prompts():
    return [[(7 * i + 3 * j) % 128 for j in range(n)] for i, n in enumerate([1, 5, 17, 33, 64, 70, 3, 48, 90])]


def test_generate_equals_each_prompt_alone(checkpoint):
    alone = onecat.Model(str(checkpoint), kv_cache_tokens=512)
    want = [alone.generate(p, 12, stop_ids=[]) for p in prompts()]
    llm = onecat.LLM(str(checkpoint), max_num_seqs=4, max_num_batched_tokens=48, kv_cache_tokens=2048)
    assert llm.generate(prompts(), 12, temperature=0, stop_ids=[]) == want
    assert llm.idle
    stats = llm.stats
    assert stats["generated_tokens"] == 12 * len(want)
    assert stats["prompt_tokens"] == sum(len(p) for p in prompts())
    # Sampled: request i draws from seed + i, as a lone request with that seed does.
    sampled = llm.generate(prompts(), 6, temperature=0.9, top_k=20, seed=40, stop_ids=[])
    assert sampled == [alone.generate(p, 6, temperature=0.9, top_k=20, seed=40 + i, stop_ids=[])
                       for i, p in enumerate(prompts())]
    # The second run found the first run's full prompt pages in the prefix cache.
    assert llm.stats["prefix_hit_tokens"] > 0


def test_step_and_cancel(checkpoint):
    llm = onecat.LLM(str(checkpoint), max_num_seqs=2, max_num_batched_tokens=32, kv_cache_tokens=512)
    a = llm.add_request(list(range(1, 41)), 30, temperature=0, stop_ids=[])
    b = llm.add_request(list(range(5, 15)), 3, temperature=0, stop_ids=[])
    seen = {a: [], b: []}
    finished = {}
    for _ in range(4):
        for out in llm.step():
            assert isinstance(out, onecat.StepOutput)
            seen[out.id].append(out.token)
            if out.finished:
                finished[out.id] = out.finish_reason
    assert finished.get(b) == "length" and len(seen[b]) == 3
    assert llm.cancel(a) and not llm.cancel(a) and not llm.cancel(999)
    outs = llm.step()
    assert [(o.id, o.token, o.finished, o.finish_reason) for o in outs] == [(a, -1, True, "cancelled")]
    assert llm.idle


def test_value_errors(checkpoint):
    with pytest.raises(ValueError, match="tpu"):
        onecat.LLM(str(checkpoint), device="tpu")
    llm = onecat.LLM(str(checkpoint), kv_cache_tokens=64)
    with pytest.raises(ValueError, match="no tokens"):
        llm.add_request([], 4)
    with pytest.raises(ValueError, match="vocabulary"):
        llm.add_request([1, 500], 4)
    with pytest.raises(ValueError, match="top_p"):
        llm.add_request([1, 2], 4, top_p=2.0)
    with pytest.raises(ValueError, match="KV cache"):
        llm.generate([[1, 2], [3] * 60], 10)
    assert llm.idle  # the first prompt of the refused batch was taken back
