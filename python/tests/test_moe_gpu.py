"""GPU tests (marker gpu) of the moe bindings: onecat.moe_route on CUDA logits against the CPU
reference (the same function on a host copy), and onecat.moe, a whole layer, against a plain
per-expert torch loop on the dequantised weights, in awq4 and f16."""

from __future__ import annotations

import numpy as np
import pytest

import onecat

pytestmark = pytest.mark.gpu
if not onecat.gpu_available():
    pytest.skip(f"no GPU: {onecat._C.gpu_unavailable_reason()}", allow_module_level=True)
torch = pytest.importorskip("torch")


@pytest.mark.parametrize("tokens, experts, topk, norm", [(1, 128, 8, True), (77, 60, 4, False), (1025, 16, 1, True)])
def test_route_matches_the_cpu_reference(tokens, experts, topk, norm):
    g = torch.Generator().manual_seed(tokens)
    logits = (torch.randn(tokens, experts, generator=g) * 2).half()
    logits[0] = 0.25
    got = onecat.moe_route(logits.cuda(), topk=topk, norm=norm)
    want = onecat.moe_route(logits, topk=topk, norm=norm)
    torch.testing.assert_close(got.ids.cpu(), want.ids, rtol=0, atol=0)
    torch.testing.assert_close(got.offsets.cpu(), want.offsets, rtol=0, atol=0)
    torch.testing.assert_close(got.sorted.cpu(), want.sorted, rtol=0, atol=0)
    torch.testing.assert_close(got.weights.cpu(), want.weights, rtol=1e-5, atol=0)


@pytest.mark.parametrize("experts, topk, groups, topk_groups", [(256, 8, 8, 4), (160, 8, 1, 1), (60, 3, 6, 2)])
def test_sigmoid_route_matches_the_cpu_reference(experts, topk, groups, topk_groups):
    g = torch.Generator().manual_seed(experts)
    logits = (torch.randn(300, experts, generator=g) * 2).half()
    bias = torch.rand(experts, generator=g) * 0.6 - 0.3
    kw = dict(topk=topk, norm=True, score="sigmoid", groups=groups, topk_groups=topk_groups, scale=2.5)
    got = onecat.moe_route(logits.cuda(), bias=bias.cuda(), **kw)
    want = onecat.moe_route(logits, bias=bias, **kw)
    torch.testing.assert_close(got.ids.cpu(), want.ids, rtol=0, atol=0)
    torch.testing.assert_close(got.sorted.cpu(), want.sorted, rtol=0, atol=0)
    torch.testing.assert_close(got.weights.cpu(), want.weights, rtol=1e-6, atol=0)


def test_sigmoid_agrees_with_the_cpu_on_every_half():
    # The kernel and the CPU reference round sigmoid from double once, so their scores (and so
    # every choice) agree bit for bit: checked on all finite fp16 logits, each a token's only
    # contender (top-1, no norm: the weight is the score itself).
    bits = torch.arange(-(1 << 15), 1 << 15, dtype=torch.int32).to(torch.int16)
    values = bits.view(torch.float16)
    values = values[torch.isfinite(values)]
    logits = torch.full((values.numel(), 4), float("-inf"), dtype=torch.float16)
    logits[:, 1] = values
    got = onecat.moe_route(logits.cuda(), topk=1, score="sigmoid")
    want = onecat.moe_route(logits, topk=1, score="sigmoid")
    assert torch.equal(got.weights.cpu().view(torch.int32), want.weights.view(torch.int32))
    assert torch.equal(got.ids.cpu(), want.ids)


AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]  # column 8j + AWQ_ORDER[p] sits at bits 4p (as test_cpu.py)


def awq4(n, k, seed, group=64):
    rng = np.random.default_rng(seed)
    q = rng.integers(0, 16, size=(k, n), dtype=np.int64)
    z = rng.integers(0, 16, size=(k // group, n), dtype=np.int64)
    s = rng.uniform(0.0005, 0.005, size=(k // group, n)).astype(np.float16)

    def pack(codes):
        out = np.zeros((codes.shape[0], codes.shape[1] // 8), dtype=np.int64)
        for p in range(8):
            out |= codes[:, AWQ_ORDER[p] :: 8] << (4 * p)
        return out.astype(np.uint32).view(np.int32)

    return onecat.pack_weight("awq4", device=None, qweight=pack(q), qzeros=pack(z), scales=s)


def f16(n, k, seed):
    g = torch.Generator().manual_seed(seed)
    return onecat.pack_weight("f16", device=None, weight=(torch.randn(n, k, generator=g) * 0.05).half())


@pytest.mark.parametrize("fmt", ["f16", "awq4"])
@pytest.mark.parametrize("tokens", [1, 5, 300])
def test_layer_matches_a_torch_loop(fmt, tokens):
    experts, topk, hidden, inter = 16, 3, 256, 128
    make = f16 if fmt == "f16" else awq4
    gate_up = [make(2 * inter, hidden, e) for e in range(experts)]
    down = [make(hidden, inter, 100 + e) for e in range(experts)]
    stack = onecat.moe_experts(gate_up, down)
    g = torch.Generator().manual_seed(tokens)
    x = (torch.randn(tokens, hidden, generator=g) * 0.5).half()
    logits = (torch.randn(tokens, experts, generator=g) * 2).half()
    logits[:: 2, :topk] = 9  # every other token to the same experts
    out = onecat.moe(x.cuda(), logits.cuda(), stack, topk=topk, norm=True)

    route = onecat.moe_route(logits, topk=topk, norm=True)
    wg = [torch.from_numpy(np.asarray(w.dequantize())).float() for w in gate_up]
    wd = [torch.from_numpy(np.asarray(w.dequantize())).float() for w in down]
    want = torch.zeros(tokens, hidden)
    for t in range(tokens):
        for k in range(topk):
            e = int(route.ids[t, k])
            gu = wg[e] @ x[t].float()
            h = (torch.nn.functional.silu(gu[:inter]) * gu[inter:]).half().float()
            want[t] += float(route.weights[t, k]) * (wd[e] @ h)
    err = (out.cpu().float() - want).norm() / want.norm()
    assert err < 4e-3, f"{fmt} tokens={tokens}: relative error {err:.2e}"
