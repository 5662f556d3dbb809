"""GPU tests (marker gpu) of the sampling bindings against the CPU reference, run through the
same functions on host copies of the logits (onecat.sample/onecat.argmax on NumPy arrays)."""

from __future__ import annotations

import numpy as np
import pytest

import onecat

pytestmark = pytest.mark.gpu
if not onecat.gpu_available():
    pytest.skip(f"no GPU: {onecat._C.gpu_unavailable_reason()}", allow_module_level=True)
torch = pytest.importorskip("torch")

# docs/sampling.md "Checks": a GPU token may differ from the reference's only where the
# reference's closest decision lies within 1e-4 (relative) of its boundary, in at most 1 row of 50.
MARGIN = 1e-4


def random_logits(rows, vocab, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, vocab, generator=g) * 3
    x[0, 3 % vocab] = float("nan")  # "% vocab": vocab 1 too
    x[1 % rows, 7 % vocab] = float("inf")
    return x


def reference(x, **kwargs):
    """The CPU reference with each row's margin (how close its decision came to a boundary)."""
    logits = x.numpy()
    rows, vocab = logits.shape
    per_row = lambda v: v if isinstance(v, list) else [v] * rows  # noqa: E731
    settings = onecat._C.SamplingRows(
        vocab,
        per_row(kwargs.get("temperature", 1.0)),
        per_row(kwargs.get("top_k", 0)),
        per_row(kwargs.get("top_p", 1.0)),
        per_row(kwargs.get("min_p", 0.0)),
        per_row(kwargs.get("repetition_penalty", 1.0)),
        per_row(kwargs.get("presence_penalty", 0.0)),
        per_row(kwargs.get("frequency_penalty", 0.0)),
        per_row(kwargs.get("seed", 0)),
        per_row(kwargs.get("step", 0)),
        per_row(kwargs.get("logprobs", 0)),
        kwargs.get("prompt_tokens"),
        kwargs.get("output_tokens"),
    )
    n = settings.max_logprobs
    out = (np.empty(rows, np.int32), np.empty(rows, np.float32), np.empty((rows, n), np.int32),
           np.empty((rows, n), np.float32), np.empty(rows, np.float64))
    onecat._C.sample_host(out[0], out[1], out[2] if n else None, out[3] if n else None, out[4], logits, settings, n)
    return out


def check_against_reference(x, **kwargs):
    got = onecat.sample(x.cuda(), **kwargs)
    torch.cuda.synchronize()
    tokens, logprobs, top_ids, top_logprobs, margins = reference(x, **kwargs)
    rows = x.shape[0]
    differ = [r for r in range(rows) if int(got.tokens[r]) != int(tokens[r])]
    for r in differ:
        assert margins[r] <= MARGIN, f"row {r}: GPU token {int(got.tokens[r])}, reference {tokens[r]} (margin {margins[r]})"
    assert len(differ) <= max(1, rows // 50), differ
    same = [r for r in range(rows) if r not in differ]
    want = torch.from_numpy(logprobs)[same]
    torch.testing.assert_close(got.logprobs.cpu()[same], want, rtol=1e-4, atol=1e-4)
    if top_ids.shape[1]:
        assert torch.equal(got.top_ids.cpu(), torch.from_numpy(top_ids))
        torch.testing.assert_close(got.top_logprobs.cpu(), torch.from_numpy(top_logprobs), rtol=1e-4, atol=1e-4)
    else:
        assert got.top_ids is None and got.top_logprobs is None
    again = onecat.sample(x.cuda(), **kwargs)
    assert torch.equal(again.tokens, got.tokens)  # deterministic


@pytest.mark.parametrize("rows, vocab", [(1, 151936), (7, 1001), (64, 32000)])
def test_sample_matches_the_cpu_reference(rows, vocab):
    g = np.random.default_rng(rows)
    check_against_reference(
        random_logits(rows, vocab, rows),
        temperature=[float(t) for t in g.choice([0.0, 0.5, 1.0, 1.7], rows)],
        top_k=[int(k) for k in g.choice([0, 1, 5, 50], rows)],
        top_p=[float(p) for p in g.choice([1.0, 0.9, 0.5], rows)],
        min_p=[float(p) for p in g.choice([0.0, 0.05], rows)],
        seed=[int(s) for s in g.integers(0, 2**63, rows)],
        step=[int(s) for s in g.integers(0, 1000, rows)],
        logprobs=[int(n) for n in g.choice([0, 1, 5, 20], rows)],
    )


def test_sample_with_penalties_matches_the_cpu_reference():
    rows, vocab = 9, 5003
    g = np.random.default_rng(9)
    check_against_reference(
        random_logits(rows, vocab, 9),
        temperature=[0.0, 0.8] * 4 + [1.0],
        repetition_penalty=1.3,
        presence_penalty=[0.5, -0.5, 0.0] * 3,
        frequency_penalty=[0.25, 0.0, -1.0] * 3,
        seed=5,
        prompt_tokens=[g.integers(0, vocab, int(g.integers(0, 60))).tolist() for _ in range(rows)],
        output_tokens=[g.integers(0, vocab, int(g.integers(0, 60))).tolist() for _ in range(rows)],
        logprobs=3,
    )


def test_sample_on_a_side_stream_and_a_fixed_logprobs_width():
    x = random_logits(5, 4096, 11)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        got = onecat.sample(x.cuda(), temperature=0.0, logprobs=[0, 2, 0, 1, 0], max_logprobs=20)
    stream.synchronize()
    assert got.top_ids.shape == (5, 20)
    tokens, *_ = reference(x, temperature=0.0)
    assert got.tokens.cpu().tolist() == tokens.tolist()
    assert (got.top_ids[0] == -1).all() and (got.top_ids[1, 2:] == -1).all()


@pytest.mark.parametrize("vocab", [1, 1001, 32000, 151936])
def test_argmax_matches_the_cpu_reference_across_batch_sizes(vocab):
    # Several batch sizes through one prepared op: its workspace, zeroed once, serves them all.
    for rows in (1, 3, 64, 5, 200, 2):
        x = random_logits(rows, vocab, rows)
        got = onecat.argmax(x.cuda())
        assert got.cpu().tolist() == onecat.argmax(x.numpy()).tolist(), rows


def test_argmax_checks_alignment():
    x = torch.randn(2, 1025, device="cuda")  # vocab % 4 != 0: 4-byte loads, any float offset
    assert onecat.argmax(x[:, 1:].contiguous()).cpu().tolist() == x[:, 1:].argmax(dim=1).cpu().tolist()
    kernel = onecat.compile(onecat.sampling_spec(4096, op="argmax"), "threads=256,vec=4,unroll=4,split=1")
    big = torch.randn(2 * 4096 + 1, device="cuda")
    view = big[1:].view(2, 4096)  # 16-byte loads (vec=4) at a 4-byte offset
    with pytest.raises(ValueError, match=r"onecat.argmax: logits's data must be 16-byte aligned"):
        kernel(view)


def test_compiled_sampling_kernels_run_their_own_config():
    # split=3 leaves each of the 3 CTAs of a row 1333 logits: more than one 512-wide load.
    spec = onecat.sampling_spec(4000, op="argmax")
    kernel = onecat.compile(spec, "threads=128,vec=4,unroll=2,split=3")
    x = random_logits(4, 4000, 3)
    assert kernel(x.cuda()).cpu().tolist() == onecat.argmax(x.numpy()).tolist()
    sample_kernel = onecat.compile(onecat.sampling_spec(4000, logprobs=2), "threads=256,cap=256")
    got = sample_kernel(x.cuda(), temperature=0.0, logprobs=2)
    assert got.tokens.cpu().tolist() == onecat.argmax(x.numpy()).tolist()
    with pytest.raises(ValueError, match=r"this kernel is sampling:op=argmax,vocab=4000 but the arguments need"):
        kernel(random_logits(4, 3999, 3).cuda())
