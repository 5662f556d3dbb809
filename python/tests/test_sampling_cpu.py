"""CPU tests of the sampling bindings: specs, setting and argument checks, the no-GPU error, and
onecat.sample/onecat.argmax on host arrays (the CPU reference) against independent NumPy
computations on random rows. No torch."""

from __future__ import annotations

import re

import numpy as np
import pytest

import onecat
from conftest import CudaArrayStub

HAS_GPU = onecat.gpu_available()
no_gpu_only = pytest.mark.skipif(HAS_GPU, reason="checks the error raised without a GPU")
NO_GPU_MESSAGE = onecat.info()["gpu_unavailable_reason"] + "; this command needs an NVIDIA GPU"


def f32(*shape, **kw):
    return CudaArrayStub(shape, "<f4", **kw)


def i32(*shape, **kw):
    return CudaArrayStub(shape, "<i4", **kw)


def u8(*shape, **kw):
    return CudaArrayStub(shape, "|u1", **kw)


def random_logits(rows, vocab, seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((rows, vocab)) * 3).astype(np.float32)


def test_sampling_is_exported_with_canonical_specs():
    for name in ("sample", "argmax", "sampling_spec", "Sampled"):
        assert hasattr(onecat, name), name
    assert onecat.sampling_spec(151936, logprobs=20) == "sampling:op=sample,vocab=151936,logprobs=20"
    assert onecat.sampling_spec(151936, op="argmax") == "sampling:op=argmax,vocab=151936"
    with pytest.raises(ValueError, match=r"onecat.sample: no kernel for these arguments"):
        onecat.sampling_spec(151936, logprobs=21)
    with pytest.raises(ValueError, match=r"onecat.argmax: no kernel for these arguments"):
        onecat.sampling_spec(0, op="argmax")
    with pytest.raises(ValueError, match=r"op must be 'sample' or 'argmax'"):
        onecat.sampling_spec(100, op="greedy")


def test_bad_settings_are_the_servers_sentences():
    x = random_logits(3, 50, 1)
    with pytest.raises(ValueError, match=re.escape("onecat.sample: top_p must be in (0, 1], got 1.5 (row 1)")):
        onecat.sample(x, top_p=[1.0, 1.5, 0.5])
    with pytest.raises(ValueError, match=r"onecat.sample: temperature must be a finite number ≥ 0"):
        onecat.sample(x[:1], temperature=-1.0)
    with pytest.raises(ValueError, match=r"logprobs must be in \[0, 20\]"):
        onecat.sample(x, logprobs=21)
    with pytest.raises(ValueError, match=r"temperature must be one value or one per row \(3\), got 2"):
        onecat.sample(x, temperature=[1.0, 0.5])
    with pytest.raises(TypeError, match=r"top_k must be an int, got float"):
        onecat.sample(x, top_k=2.0)
    with pytest.raises(ValueError, match=r"seed must be ≥ 0"):
        onecat.sample(x, seed=-1)
    with pytest.raises(ValueError, match=re.escape("onecat.sample: output_tokens[2] holds id 50, outside the vocabulary [0, 50)")):
        onecat.sample(x, output_tokens=[[1], [], [3, 50]])
    with pytest.raises(ValueError, match=r"prompt_tokens must be a list of one id list per row \(3\)"):
        onecat.sample(x, prompt_tokens=[[1]])
    with pytest.raises(ValueError, match=r"max_logprobs must be in \[4, 20\]"):
        onecat.sample(x, logprobs=4, max_logprobs=3)
    with pytest.raises(TypeError, match=r"onecat.sample: logits must be float32, got float64"):
        onecat.sample(x.astype(np.float64))
    with pytest.raises(ValueError, match=r"logits must have 2 dimensions"):
        onecat.sample(x[0])


def test_argmax_on_the_host_is_numpys_with_nan_never_winning():
    x = random_logits(7, 1001, 2)
    x[1, 5] = np.nan
    x[2, :] = -np.inf
    x[3, 10] = x[3, 900] = 100.0  # equal maxima: the lower id
    x[4, :] = np.nan
    got = onecat.argmax(x)
    assert got.dtype == np.int32 and got.shape == (7,)
    want = np.argmax(np.where(np.isnan(x), -np.inf, x), axis=1)
    assert got.tolist() == want.tolist()
    out = np.full(7, -5, dtype=np.int32)
    assert onecat.argmax(x, out=out) is out and out.tolist() == want.tolist()


def log_softmax(row):
    row = np.where(np.isnan(row), -np.inf, row).astype(np.float64)
    m = row.max()
    return row - m - np.log(np.exp(row - m).sum())


def penalised(row, prompt, output, rep, presence, frequency):
    l = row.astype(np.float32).copy()
    seen = set(prompt) | set(output)
    for t in seen:
        l[t] = l[t] / np.float32(rep) if l[t] > 0 else l[t] * np.float32(rep)
    for t in set(output):
        l[t] = l[t] - np.float32(frequency) * np.float32(output.count(t))
        l[t] = l[t] - np.float32(presence)
    return l


def test_greedy_rows_take_the_penalised_argmax_and_raw_logprobs():
    rows, vocab = 6, 777
    x = random_logits(rows, vocab, 3)
    rng = np.random.default_rng(4)
    prompts = [rng.integers(0, vocab, rng.integers(0, 30)).tolist() for _ in range(rows)]
    outputs = [rng.integers(0, vocab, rng.integers(0, 30)).tolist() for _ in range(rows)]
    rep = [1.0, 1.3, 0.8, 1.0, 2.0, 1.1]
    presence = [0.0, 0.5, -0.5, 1.0, 0.0, 2.0]
    frequency = [0.0, 0.25, 0.0, -1.0, 0.5, 0.1]
    counts = [0, 3, 5, 1, 20, 2]
    got = onecat.sample(x, temperature=0.0, repetition_penalty=rep, presence_penalty=presence,
                        frequency_penalty=frequency, logprobs=counts, prompt_tokens=prompts, output_tokens=outputs)
    assert got.top_ids.shape == (rows, 20) and got.top_logprobs.shape == (rows, 20)
    for r in range(rows):
        l = penalised(x[r], prompts[r], outputs[r], rep[r], presence[r], frequency[r])
        assert got.tokens[r] == int(np.argmax(l)), r
        raw = log_softmax(x[r])
        assert abs(got.logprobs[r] - raw[got.tokens[r]]) <= 1e-4 * max(1.0, abs(raw[got.tokens[r]]))
        order = sorted(range(vocab), key=lambda t: (-x[r][t], t))[: counts[r]]
        assert got.top_ids[r, : counts[r]].tolist() == order
        np.testing.assert_allclose(got.top_logprobs[r, : counts[r]], raw[order], rtol=1e-4, atol=1e-4)
        assert (got.top_ids[r, counts[r] :] == -1).all()
        assert np.isneginf(got.top_logprobs[r, counts[r] :]).all()


def test_sampled_tokens_stay_inside_the_filters_and_repeat_for_a_seed_and_step():
    rows, vocab = 40, 513
    x = random_logits(rows, vocab, 5)
    kwargs = dict(temperature=0.9, top_k=[1 + r % 7 for r in range(rows)], seed=[11 * r for r in range(rows)],
                  step=list(range(rows)))
    a = onecat.sample(x, **kwargs)
    b = onecat.sample(x.copy(), **kwargs)
    assert a.tokens.tolist() == b.tokens.tolist()
    assert a.top_ids is None and a.top_logprobs is None
    for r in range(rows):
        allowed = sorted(range(vocab), key=lambda t: (-x[r][t], t))[: kwargs["top_k"][r]]
        assert int(a.tokens[r]) in allowed, r
    # top_p this small keeps the best token alone; min_p = 1 keeps the maxima alone.
    assert onecat.sample(x, temperature=1.0, top_p=1e-6, seed=3).tokens.tolist() == np.argmax(x, axis=1).tolist()
    assert onecat.sample(x, temperature=1.0, min_p=1.0, seed=3).tokens.tolist() == np.argmax(x, axis=1).tolist()
    # Different steps draw differently somewhere (a flat row: 512 equally likely tokens).
    flat = np.zeros((1, 512), dtype=np.float32)
    draws = {int(onecat.sample(flat, seed=1, step=s).tokens[0]) for s in range(20)}
    assert len(draws) > 10


def test_zero_rows_give_empty_results():
    got = onecat.sample(np.zeros((0, 10), dtype=np.float32), logprobs=2)
    assert got.tokens.shape == (0,)
    assert onecat.argmax(np.zeros((0, 10), dtype=np.float32)).shape == (0,)


def test_device_argument_checks():
    with pytest.raises(TypeError, match=r"onecat.argmax: logits must be float32, got float16"):
        onecat.argmax(CudaArrayStub((3, 100), "<f2"), out=i32(3))
    with pytest.raises(ValueError, match=r"onecat.argmax: out must have shape \(3,\), got \(4,\)"):
        onecat.argmax(f32(3, 100), out=i32(4))
    with pytest.raises(ValueError, match=r"onecat.argmax: logits must be contiguous"):
        onecat.argmax(f32(3, 100, strides=(800, 4)), out=i32(3))
    stubs = dict(tokens=i32(3), token_logprobs=f32(3), top_ids=None, top_logprobs=None, logits=f32(3, 100),
                 params=u8(3, 56), history_offsets=None, history_ids=None, history_table=None, logprobs=0, stream=0)

    def call(**over):
        onecat._C.sample(**{**stubs, **over})

    with pytest.raises(ValueError, match=r"onecat.sample: params must have shape \(3, 56\)"):
        call(params=u8(3, 48))
    with pytest.raises(ValueError, match=r"pass top_ids and top_logprobs exactly when logprobs > 0"):
        call(logprobs=2)
    with pytest.raises(ValueError, match=r"top_ids must have shape \(3, 2\)"):
        call(logprobs=2, top_ids=i32(3, 3), top_logprobs=f32(3, 2))
    with pytest.raises(ValueError, match=r"pass history_offsets, history_ids and history_table together"):
        call(history_offsets=i32(4))
    with pytest.raises(ValueError, match=r"history_table must hold 4 int32 per history id \(40\)"):
        call(history_offsets=i32(4), history_ids=i32(10), history_table=i32(39))
    with pytest.raises(TypeError, match=r"onecat.sample: tokens must be int32, got float32"):
        call(tokens=f32(3))


@no_gpu_only
def test_without_a_gpu_is_the_cli_sentence():
    with pytest.raises(RuntimeError, match=re.escape(NO_GPU_MESSAGE)):
        onecat.argmax(f32(3, 100), out=i32(3))
    with pytest.raises(RuntimeError, match=re.escape(NO_GPU_MESSAGE)):
        onecat._C.sample(i32(3), f32(3), None, None, f32(3, 100), u8(3, 56), None, None, None, 0, 0)
