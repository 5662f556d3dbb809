"""onecat.Model on the CPU backend (no GPU): a tiny checkpoint written by
tools/make_tiny_checkpoint.py, its logits and greedy generation, and the ValueErrors."""
from __future__ import annotations

import numpy as np
import pytest

import onecat
from conftest import tiny_checkpoint


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return tiny_checkpoint(tmp_path_factory, "qwen2-awq4", "--arch", "qwen2", "--format", "awq4", "--tokenizer")


def test_logits_and_greedy_generation(checkpoint):
    m = onecat.Model(str(checkpoint), device="cpu", kv_cache_tokens=256)
    assert m.config["architecture"] == "Qwen2ForCausalLM"
    assert m.vocab_size == 128
    assert m.eos_token_ids == [95]
    prompt = [3, 14, 15, 92, 65, 35]
    logits = m.logits(prompt)
    assert logits.shape == (6, 128) and logits.dtype == np.float32
    assert np.isfinite(logits).all()
    # The last row alone is the same row; a prefix's rows are the same rows (causal).
    np.testing.assert_array_equal(m.logits(prompt, last_only=True)[0], logits[-1])
    np.testing.assert_array_equal(m.logits(prompt[:4]), logits[:4])
    # The last rows computed by decode steps, one token each, agree with the prefill's rows.
    tail = m.logits(prompt, decode_tail=3)
    assert tail.shape == logits.shape
    np.testing.assert_array_equal(tail[:3], logits[:3])
    np.testing.assert_allclose(tail[3:], logits[3:], rtol=0, atol=1e-4 * float(np.ptp(logits)))
    np.testing.assert_array_equal(m.logits(prompt, last_only=True, decode_tail=3)[0], tail[-1])

    new = m.generate(prompt, 8, stop_ids=[])
    assert len(new) == 8
    context = list(prompt)
    for token in new:  # greedy: each token is the argmax after everything before it
        assert token == int(np.argmax(m.logits(context, last_only=True)[0]))
        context.append(token)
    assert m.generate(prompt, 8, stop_ids=[new[2]]) == new[:new.index(new[2]) + 1]
    sampled = m.generate(prompt, 8, temperature=0.8, seed=5, stop_ids=[])
    assert sampled == m.generate(prompt, 8, temperature=0.8, seed=5, stop_ids=[])


def test_value_errors(checkpoint, tmp_path):
    if onecat._C.gpu_unavailable_reason():
        with pytest.raises(ValueError, match="device cuda"):
            onecat.Model(str(checkpoint), device="cuda")
    with pytest.raises(ValueError, match="tpu"):
        onecat.Model(str(checkpoint), device="tpu")
    with pytest.raises(ValueError, match="config.json"):
        onecat.Model(str(tmp_path), device="cpu")
    m = onecat.Model(str(checkpoint), device="cpu", kv_cache_tokens=32)
    with pytest.raises(ValueError, match="vocabulary"):
        m.logits([1, 500])
    with pytest.raises(ValueError, match="decode_tail"):
        m.logits([1, 2], decode_tail=2)
    with pytest.raises(ValueError, match="top_p"):
        m.generate([1, 2], 4, top_p=2.0)
    with pytest.raises(ValueError, match="KV cache"):
        m.generate([1, 2], 40)
    with pytest.raises(ValueError, match="prompt"):
        m.generate([], 4)
