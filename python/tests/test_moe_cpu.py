"""CPU tests of the moe bindings: the route spec, onecat.moe_route on host logits (the CPU
reference) against an independent NumPy top-k/softmax, expert stacking's refusals, argument
checks before any GPU work, and the no-GPU sentence. No torch."""

from __future__ import annotations

import re

import numpy as np
import pytest

import onecat
from conftest import CudaArrayStub

HAS_GPU = onecat.gpu_available()
no_gpu_only = pytest.mark.skipif(HAS_GPU, reason="checks the error raised without a GPU")
NO_GPU_MESSAGE = onecat.info()["gpu_unavailable_reason"] + "; this command needs an NVIDIA GPU"


def numpy_route(logits, topk, norm):
    """Top-k by logit (ties: the lower id), softmax weights in float64."""
    x = logits.astype(np.float64)
    order = np.lexsort((np.arange(x.shape[1])[None, :].repeat(x.shape[0], 0), -x), axis=1)[:, :topk]
    p = np.exp(x - x.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    w = np.take_along_axis(p, order, axis=1)
    if norm:
        w /= w.sum(axis=1, keepdims=True)
    return order.astype(np.int32), w


def test_moe_is_exported_with_canonical_specs():
    for name in ("moe_route", "moe_route_spec", "moe_experts", "moe", "MoeRoute"):
        assert hasattr(onecat, name), name
    assert onecat.moe_route_spec(128, 8, norm=True) == "moe:op=route,experts=128,topk=8,norm=1"
    with pytest.raises(ValueError, match="topk=9 exceeds experts=8"):
        onecat.moe_route_spec(8, 9)
    with pytest.raises(TypeError, match="topk must be an int"):
        onecat.moe_route_spec(8, 2.0)


@pytest.mark.parametrize("tokens, experts, topk, norm", [(1, 8, 2, True), (37, 60, 4, False), (200, 128, 8, True)])
def test_route_on_host_logits_matches_numpy(tokens, experts, topk, norm):
    rng = np.random.default_rng(tokens)
    logits = (rng.standard_normal((tokens, experts)) * 2).astype(np.float16)
    logits[0, :] = np.float16(0.5)  # a tied row: the lowest ids win
    r = onecat.moe_route(logits, topk=topk, norm=norm)
    ids, w = numpy_route(logits, topk, norm)
    np.testing.assert_array_equal(r.ids, ids)
    np.testing.assert_array_equal(r.ids[0], np.arange(topk))
    np.testing.assert_allclose(r.weights, w, rtol=1e-5)
    # Grouped by expert, pairs ascending within each.
    flat = ids.reshape(-1)
    counts = np.bincount(flat, minlength=experts)
    np.testing.assert_array_equal(r.offsets, np.concatenate([[0], np.cumsum(counts)]))
    np.testing.assert_array_equal(r.sorted, np.argsort(flat, kind="stable"))


def test_route_argument_checks():
    with pytest.raises(TypeError, match="onecat.moe_route: logits must be float16"):
        onecat.moe_route(np.zeros((2, 8), np.float32), topk=2)
    with pytest.raises(ValueError, match="logits must be 2-D"):
        onecat.moe_route(np.zeros(8, np.float16), topk=2)
    with pytest.raises(ValueError, match="topk=9 exceeds experts=8"):
        onecat.moe_route(np.zeros((2, 8), np.float16), topk=9)
    with pytest.raises(TypeError, match="norm must be True or False"):
        onecat.moe_route(np.zeros((2, 8), np.float16), topk=2, norm=1)


def packed_f16(n, k, seed):
    w = (np.random.default_rng(seed).standard_normal((n, k)) * 0.05).astype(np.float16)
    return onecat.pack_weight("f16", device=None, weight=w)


def test_experts_stack_and_refusals():
    gate_up = [packed_f16(2 * 64, 256, e) for e in range(4)]
    down = [packed_f16(256, 64, 10 + e) for e in range(4)]
    experts = onecat.moe_experts(gate_up, down)
    assert (experts.experts, experts.hidden, experts.inter) == (4, 256, 64)
    assert experts.specs(2, True) == [
        "moe:op=route,experts=4,topk=2,norm=1",
        "moe:op=gate_up,experts=4,topk=2,hidden=256,inter=64,fmt=f16,group=0,act_order=0",
        "moe:op=down,experts=4,topk=2,hidden=256,inter=64,fmt=f16,group=0,act_order=0",
        "moe:op=combine,topk=2,hidden=256",
    ]
    with pytest.raises(ValueError, match=r"one weight per expert each \(got 4 and 3\)"):
        onecat.moe_experts(gate_up, down[:3])
    with pytest.raises(ValueError, match=r"down\[2\] is f16 256×32.*one shape and weight format"):
        onecat.moe_experts(gate_up, down[:2] + [packed_f16(256, 32, 99)] + down[3:])
    with pytest.raises(ValueError, match=r"must be \[2·inter, hidden\]"):
        onecat.moe_experts(gate_up, [packed_f16(256, 32, e) for e in range(4)])
    with pytest.raises(TypeError, match="every expert weight must be a PackedWeight"):
        onecat.moe_experts(gate_up, [np.zeros((256, 64), np.float16)] * 4)


def test_layer_argument_checks_before_the_gpu():
    experts = onecat.moe_experts([packed_f16(128, 256, e) for e in range(4)], [packed_f16(256, 64, e) for e in range(4)])
    x, logits, out = CudaArrayStub((3, 256), "<f2"), CudaArrayStub((3, 4), "<f2"), CudaArrayStub((3, 256), "<f2")
    with pytest.raises(ValueError, match=r"onecat.moe: logits must have shape \(3, 4\)"):
        onecat._C.moe(out, x, CudaArrayStub((3, 5), "<f2"), experts, 2, False, 0)
    with pytest.raises(ValueError, match=r"onecat.moe: x must have shape \(3, 256\)"):
        onecat._C.moe(out, CudaArrayStub((3, 255), "<f2"), logits, experts, 2, False, 0)
    with pytest.raises(ValueError, match="topk=5 exceeds experts=4"):
        onecat._C.moe(out, x, logits, experts, 5, False, 0)
    with pytest.raises(TypeError, match="onecat.moe: x must be float16"):
        onecat._C.moe(out, CudaArrayStub((3, 256), "<f4"), logits, experts, 2, False, 0)


@no_gpu_only
def test_without_a_gpu_is_the_cli_sentence():
    experts = onecat.moe_experts([packed_f16(128, 256, e) for e in range(4)], [packed_f16(256, 64, e) for e in range(4)])
    x, logits, out = CudaArrayStub((3, 256), "<f2"), CudaArrayStub((3, 4), "<f2"), CudaArrayStub((3, 256), "<f2")
    with pytest.raises(RuntimeError, match=re.escape(NO_GPU_MESSAGE)):
        onecat._C.moe(out, x, logits, experts, 2, False, 0)
    ids, w = CudaArrayStub((3, 2), "<i4"), CudaArrayStub((3, 2), "<f4")
    with pytest.raises(RuntimeError, match=re.escape(NO_GPU_MESSAGE)):
        onecat._C.moe_route(ids, w, CudaArrayStub((5,), "<i4"), CudaArrayStub((6,), "<i4"), logits, 2, False, 0)
