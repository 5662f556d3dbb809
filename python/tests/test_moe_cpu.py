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


def numpy_sigmoid_route(logits, topk, norm, bias, groups, topk_groups, scale):
    """DeepSeek-V3's router as transformers writes it (DeepseekV3MoE.route_tokens_to_experts),
    with ties to the lower id: sigmoid scores (float64, rounded once to float32 as onecat
    documents), choice = score + bias, groups rated by their two best choices, the other groups'
    experts masked to 0, top-k of the choice, weights = scores (over their sum + 1e-20 with
    norm) times scale."""
    s = (1.0 / (1.0 + np.exp(-logits.astype(np.float64)))).astype(np.float32)
    c = s + (bias if bias is not None else np.float32(0))
    tokens, experts = c.shape
    if groups > 1:
        g = c.reshape(tokens, groups, experts // groups)
        rating = np.sort(g, axis=2)[:, :, -2:].sum(axis=2, dtype=np.float32)
        keep = np.lexsort((np.arange(groups)[None, :].repeat(tokens, 0), -rating), axis=1)[:, :topk_groups]
        mask = np.zeros((tokens, groups), bool)
        np.put_along_axis(mask, keep, True, axis=1)
        c = np.where(mask.repeat(experts // groups, axis=1), c, np.float32(0))
    ids = np.lexsort((np.arange(experts)[None, :].repeat(tokens, 0), -c), axis=1)[:, :topk]
    w = np.take_along_axis(s, ids, axis=1).astype(np.float64)
    if norm:
        w /= w.sum(axis=1, keepdims=True) + 1e-20
    return ids.astype(np.int32), w * scale


@pytest.mark.parametrize("experts, topk, groups, topk_groups, with_bias, norm",
                         [(256, 8, 8, 4, True, True), (160, 6, 1, 1, True, True), (60, 3, 6, 2, False, False)])
def test_sigmoid_route_on_host_logits_matches_numpy(experts, topk, groups, topk_groups, with_bias, norm):
    rng = np.random.default_rng(experts)
    tokens = 50
    logits = (rng.standard_normal((tokens, experts)) * 2).astype(np.float16)
    per = experts // groups
    logits[1, per:2 * per] = np.float16(6)  # one group far ahead: its experts win
    bias = (rng.uniform(-0.3, 0.3, experts)).astype(np.float32) if with_bias else None
    r = onecat.moe_route(logits, topk=topk, norm=norm, score="sigmoid", bias=bias, groups=groups,
                         topk_groups=topk_groups, scale=2.5)
    ids, w = numpy_sigmoid_route(logits, topk, norm, bias, groups, topk_groups, 2.5)
    np.testing.assert_array_equal(r.ids, ids)
    np.testing.assert_allclose(r.weights, w, rtol=1e-5)
    if groups > 1:  # the group far ahead is kept and supplies the best pick
        assert per <= r.ids[1][0] < 2 * per
    spec = onecat.moe_route_spec(experts, topk, norm=norm, score="sigmoid", bias=with_bias, groups=groups,
                                 topk_groups=topk_groups)
    assert spec == (f"moe:op=route,experts={experts},topk={topk},norm={int(norm)},score=sigmoid,"
                    f"bias={int(with_bias)},groups={groups},topk_groups={topk_groups}")


def test_sigmoid_route_refusals():
    logits = np.zeros((2, 64), np.float16)
    with pytest.raises(ValueError, match="need score=sigmoid"):
        onecat.moe_route(logits, topk=2, groups=8)
    with pytest.raises(ValueError, match="does not divide experts=64"):
        onecat.moe_route(logits, topk=2, score="sigmoid", groups=6)
    with pytest.raises(ValueError, match="fewer than topk=8"):
        onecat.moe_route(logits, topk=8, score="sigmoid", groups=16, topk_groups=1)
    with pytest.raises(ValueError, match="score"):
        onecat.moe_route(logits, topk=2, score="relu")
    with pytest.raises(ValueError, match=r"bias.*\[64\]|shape"):
        onecat.moe_route(logits, topk=2, score="sigmoid", bias=np.zeros(63, np.float32))
    with pytest.raises(TypeError, match="bias must be float32"):
        onecat.moe_route(logits, topk=2, score="sigmoid", bias=np.zeros(64, np.float64))


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
        onecat._C.moe_route(ids, w, CudaArrayStub((5,), "<i4"), CudaArrayStub((6,), "<i4"), logits, 2, False, "softmax",
                            None, 1, -1, 1.0, 0)
