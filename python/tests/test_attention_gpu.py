"""GPU tests (marker gpu) of the attention bindings against a float64 torch reference.

Pages are shuffled over a pool with spare pages (a wrong page id reads other data), outputs
are poisoned with NaN, lengths are mixed (1, a page + 1, odd, several pages). The reference
gathers each sequence's pages, decodes fp8 codes (torch float8 views) times their scales and
takes the softmax in float64. Tolerance (docs/attention.md): per (token, head) row
‖out − ref‖₂ / max(‖ref‖₂, 10⁻²) ≤ 10⁻² (P is rounded to fp16 for the tensor cores).
"""

from __future__ import annotations

import itertools
import math

import pytest

import onecat

pytestmark = pytest.mark.gpu
if not onecat.gpu_available():
    pytest.skip(f"no GPU: {onecat._C.gpu_unavailable_reason()}", allow_module_level=True)
torch = pytest.importorskip("torch")

HEADS, KV_HEADS, DIM, PAGE = 16, 4, 128, 16  # GQA 4
SPARE_PAGES = 3


def gen():
    return torch.Generator().manual_seed(1234)


def make_cache(g, pages, kv="f16", scale="head"):
    """(k_cache, v_cache, k_scale, v_scale) on the GPU: fp16 in [-1, 1) or fp8 codes of such values."""
    shape = (pages, KV_HEADS, PAGE, DIM)
    if kv == "f16":
        k = (torch.rand(shape, generator=g) * 2 - 1).half()
        v = (torch.rand(shape, generator=g) * 2 - 1).half()
        return k.cuda(), v.cuda(), None, None
    n = KV_HEADS if scale == "head" else 1
    ks = torch.rand(n, generator=g) * 0.016 + 0.004
    vs = torch.rand(n, generator=g) * 0.016 + 0.004
    fp8 = torch.float8_e4m3fn if kv == "e4m3" else torch.float8_e5m2
    bshape = (1, -1, 1, 1) if n > 1 else (1, 1, 1, 1)
    k = ((torch.rand(shape, generator=g) * 2 - 1) / ks.view(bshape)).to(fp8).view(torch.uint8)
    v = ((torch.rand(shape, generator=g) * 2 - 1) / vs.view(bshape)).to(fp8).view(torch.uint8)
    return k.cuda(), v.cuda(), ks.cuda(), vs.cuda()


def decoded(cache, scale, kv):
    """The cache's values as float64 [pages, kv_heads, page, dim]."""
    if kv == "f16":
        return cache.double()
    fp8 = torch.float8_e4m3fn if kv == "e4m3" else torch.float8_e5m2
    vals = cache.view(fp8).float().double()
    s = scale.double().view(1, -1, 1, 1) if scale.numel() > 1 else scale.double().view(1, 1, 1, 1)
    return vals * s


def make_batch(g, seq_lens, kv="f16", scale="head"):
    max_pages = max(1, max(-(-n // PAGE) for n in seq_lens))
    pages = len(seq_lens) * max_pages + SPARE_PAGES
    table = torch.randperm(pages, generator=g)[: len(seq_lens) * max_pages].view(len(seq_lens), max_pages)
    k, v, ks, vs = make_cache(g, pages, kv, scale)
    return table.int().cuda(), torch.tensor(seq_lens, dtype=torch.int32).cuda(), k, v, ks, vs


def reference(q, k, v, ks, vs, kv, table, seq_lens, q_lens, causal=True, window=0, sm_scale=None):
    """float64 [tokens, heads, dim]; sequence b's queries are its last q_lens[b] positions."""
    kd, vd = decoded(k, ks, kv), decoded(v, vs, kv)
    qd = q.double()
    out = torch.zeros_like(qd)
    group = HEADS // KV_HEADS
    t0 = 0
    for b, (n_keys, n_q) in enumerate(zip(seq_lens, q_lens)):
        ids = table[b, : -(-n_keys // PAGE)].long()
        keys = kd[ids].permute(1, 0, 2, 3).reshape(KV_HEADS, -1, DIM)[:, :n_keys]
        vals = vd[ids].permute(1, 0, 2, 3).reshape(KV_HEADS, -1, DIM)[:, :n_keys]
        keys = keys.repeat_interleave(group, 0)  # [heads, keys, dim]
        vals = vals.repeat_interleave(group, 0)
        qs = qd[t0 : t0 + n_q].transpose(0, 1)  # [heads, n_q, dim]
        s = qs @ keys.transpose(1, 2) * (1 / math.sqrt(DIM) if sm_scale is None else sm_scale)
        pos = torch.arange(n_keys - n_q, n_keys, device=q.device).view(-1, 1)
        j = torch.arange(n_keys, device=q.device).view(1, -1)
        seen = torch.ones(n_q, n_keys, dtype=torch.bool, device=q.device)
        if causal:
            seen &= j <= pos
        if window:
            seen &= j > pos - window
        s = s.masked_fill(~seen, float("-inf"))
        p = torch.softmax(s, -1).nan_to_num(0.0)
        out[t0 : t0 + n_q] = (p @ vals).transpose(0, 1)
        t0 += n_q
    return out


def check(out, ref):
    assert not torch.isnan(out).any(), "the kernel left NaN (unwritten) outputs"
    err = (out.double() - ref).norm(dim=-1) / ref.norm(dim=-1).clamp_min(1e-2)
    assert err.max().item() <= 1e-2, f"worst row error {err.max().item():.3g}"


def queries(g, tokens):
    return ((torch.rand(tokens, HEADS, DIM, generator=g) * 2 - 1) * 3).half().cuda()


def poisoned(tokens):
    return torch.full((tokens, HEADS, DIM), float("nan"), dtype=torch.float16, device="cuda")


@pytest.mark.parametrize("kv, scale", [("f16", None), ("e4m3", "head"), ("e5m2", "tensor")])
@pytest.mark.parametrize("seq_lens", [[1, 17, 100, 33, 300], [5]])
def test_decode(kv, scale, seq_lens):
    g = gen()
    table, lens, k, v, ks, vs = make_batch(g, seq_lens, kv, scale)
    q = queries(g, len(seq_lens))
    spec = onecat.attention.attention_spec("decode", heads=HEADS, kv_heads=KV_HEADS, dim=DIM, page=PAGE, kv=kv,
                                           kv_scale=None if kv == "f16" else scale)
    ws = onecat.attention.workspace(spec, len(seq_lens), like=q)
    fp8 = {} if kv == "f16" else dict(kv=kv, k_scale=ks, v_scale=vs)
    for _ in range(2):  # split kernels: the counters must be left zero for the second call
        out = poisoned(len(seq_lens))
        onecat.attention.decode(q, k, v, table, lens, workspace=ws, out=out, **fp8)
        torch.cuda.synchronize()
        check(out, reference(q, k, v, ks, vs, kv, table, seq_lens, [1] * len(seq_lens)))
    assert int(ws.counters.abs().sum()) == 0


def test_decode_without_needed_workspace_raises_or_runs():
    g = gen()
    seq_lens = [40, 9]
    table, lens, k, v, _, _ = make_batch(g, seq_lens)
    q = queries(g, 2)
    spec = onecat.attention.attention_spec("decode", heads=HEADS, kv_heads=KV_HEADS, dim=DIM, page=PAGE)
    floats, counters = onecat.attention.workspace_size(spec, 2)
    if floats == 0:
        out = onecat.attention.decode(q, k, v, table, lens)
        check(out, reference(q, k, v, None, None, "f16", table, seq_lens, [1, 1]))
    else:
        with pytest.raises(ValueError, match="workspace"):
            onecat.attention.decode(q, k, v, table, lens)


@pytest.mark.parametrize("kv", ["f16", "e4m3"])
def test_verify(kv):
    g = gen()
    n = 8
    seq_lens = [8, 20, 129, 64]
    table, lens, k, v, ks, vs = make_batch(g, seq_lens, kv, "head")
    q = queries(g, n * len(seq_lens))
    spec = onecat.attention.attention_spec("verify", heads=HEADS, kv_heads=KV_HEADS, dim=DIM, page=PAGE, kv=kv,
                                           kv_scale=None if kv == "f16" else "head", q=n)
    ws = onecat.attention.workspace(spec, [1, len(seq_lens)], like=q)
    fp8 = {} if kv == "f16" else dict(kv=kv, k_scale=ks, v_scale=vs)
    out = poisoned(q.shape[0])
    onecat.attention.verify(q, k, v, table, lens, workspace=ws, out=out, **fp8)
    torch.cuda.synchronize()
    check(out, reference(q, k, v, ks, vs, kv, table, seq_lens, [n] * len(seq_lens)))


@pytest.mark.parametrize("kv, window", [("f16", 0), ("f16", 24), ("e4m3", 0)])
def test_prefill(kv, window):
    g = gen()
    q_lens = [5, 64, 1, 30]
    prefix = [0, 16, 40, 7]  # chunked prefill / prefix caching: keys before the queries
    seq_lens = [a + b for a, b in zip(q_lens, prefix)]
    table, lens, k, v, ks, vs = make_batch(g, seq_lens, kv, "tensor")
    cu = torch.tensor([0, *itertools.accumulate(q_lens)], dtype=torch.int32).cuda()
    q = queries(g, sum(q_lens))
    fp8 = {} if kv == "f16" else dict(kv=kv, k_scale=ks, v_scale=vs)
    out = poisoned(q.shape[0])
    onecat.attention.prefill(q, k, v, table, lens, cu, max_q=max(q_lens), window=window, out=out, **fp8)
    torch.cuda.synchronize()
    check(out, reference(q, k, v, ks, vs, kv, table, seq_lens, q_lens, window=window))


@pytest.mark.parametrize("sm_scale", [-0.2, 0.0, 0.5])
def test_any_sm_scale(sm_scale):
    """Negative and zero scales too (torch's SDPA takes any): zero gives every seen key one weight."""
    g = gen()
    q_lens, prefix = [37, 3], [0, 50]
    seq_lens = [a + b for a, b in zip(q_lens, prefix)]
    table, lens, k, v, ks, vs = make_batch(g, seq_lens, "e4m3", "head")
    cu = torch.tensor([0, *itertools.accumulate(q_lens)], dtype=torch.int32).cuda()
    q = queries(g, sum(q_lens))
    out = poisoned(q.shape[0])
    onecat.attention.prefill(q, k, v, table, lens, cu, max_q=max(q_lens), sm_scale=sm_scale, out=out,
                             kv="e4m3", k_scale=ks, v_scale=vs)
    torch.cuda.synchronize()
    check(out, reference(q, k, v, ks, vs, "e4m3", table, seq_lens, q_lens, sm_scale=sm_scale))
    spec = onecat.attention.attention_spec("decode", heads=HEADS, kv_heads=KV_HEADS, dim=DIM, page=PAGE, kv="e4m3",
                                           kv_scale="head")
    ws = onecat.attention.workspace(spec, len(seq_lens), like=q)
    qd = q[:2].contiguous()
    out = poisoned(2)
    onecat.attention.decode(qd, k, v, table, lens, workspace=ws, sm_scale=sm_scale, out=out, kv="e4m3", k_scale=ks,
                            v_scale=vs)
    torch.cuda.synchronize()
    check(out, reference(qd, k, v, ks, vs, "e4m3", table, seq_lens, [1, 1], sm_scale=sm_scale))


def test_kv_write_f16_exact():
    g = gen()
    tokens, pages = 37, 6
    k_cache, v_cache, _, _ = make_cache(g, pages)
    k0, v0 = k_cache.clone(), v_cache.clone()
    kn = torch.randn(tokens, KV_HEADS, DIM, generator=g).half().cuda()
    vn = torch.randn(tokens, KV_HEADS, DIM, generator=g).half().cuda()
    slots = torch.randperm(pages * PAGE, generator=g)[:tokens].int()
    slots[4::5] = -1  # padding
    onecat.kv_write(kn, vn, k_cache, v_cache, slots.cuda())
    torch.cuda.synchronize()
    for t, s in enumerate(slots.tolist()):
        if s >= 0:
            k0[s // PAGE, :, s % PAGE] = kn[t]
            v0[s // PAGE, :, s % PAGE] = vn[t]
    assert torch.equal(k_cache, k0) and torch.equal(v_cache, v0)


def test_kv_write_e4m3():
    g = gen()
    tokens, pages = 20, 3
    k_cache, v_cache, ks, vs = make_cache(g, pages, "e4m3", "head")
    before = k_cache.clone()
    kn = (torch.rand(tokens, KV_HEADS, DIM, generator=g) * 2 - 1).half().cuda()
    vn = (torch.rand(tokens, KV_HEADS, DIM, generator=g) * 2 - 1).half().cuda()
    slots = torch.randperm(pages * PAGE, generator=g)[:tokens].int().cuda()
    onecat.kv_write(kn, vn, k_cache, v_cache, slots, kv="e4m3", k_scale=ks, v_scale=vs)
    torch.cuda.synchronize()
    kd, vd = decoded(k_cache, ks, "e4m3"), decoded(v_cache, vs, "e4m3")
    for t, s in enumerate(slots.tolist()):
        for new, dec, sc in ((kn, kd, ks), (vn, vd, vs)):
            got = dec[s // PAGE, :, s % PAGE]
            # e4m3 keeps 3 mantissa bits: ≤ 2⁻⁴ relative, plus the subnormal step of each scale
            tol = new[t].double().abs() / 16 + sc.double().view(-1, 1) * 2.0**-9
            assert ((got - new[t].double()).abs() <= tol).all()
    untouched = torch.ones(pages * PAGE, dtype=torch.bool)
    untouched[slots.cpu().long()] = False
    rows = before.permute(0, 2, 1, 3).reshape(pages * PAGE, -1)
    assert torch.equal(k_cache.permute(0, 2, 1, 3).reshape(pages * PAGE, -1)[untouched.cuda()], rows[untouched.cuda()])


def test_decode_on_a_side_stream_and_in_a_graph():
    """Decode queued on a non-default stream, and captured in a CUDA graph then replayed on new
    queries: the same result as eager, and the split counters left zero by both."""
    g = gen()
    seq_lens = [1, 17, 100, 33, 300]
    table, lens, k, v, _, _ = make_batch(g, seq_lens)
    q = queries(g, len(seq_lens))
    spec = onecat.attention.attention_spec("decode", heads=HEADS, kv_heads=KV_HEADS, dim=DIM, page=PAGE)
    ws = onecat.attention.workspace(spec, len(seq_lens), like=q)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        out = poisoned(len(seq_lens))
        onecat.attention.decode(q, k, v, table, lens, workspace=ws, out=out)
    s.synchronize()
    check(out, reference(q, k, v, None, None, "f16", table, seq_lens, [1] * len(seq_lens)))

    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    captured = poisoned(len(seq_lens))
    with torch.cuda.graph(graph):
        onecat.attention.decode(q, k, v, table, lens, workspace=ws, out=captured)
    q.copy_(queries(g, len(seq_lens)))
    graph.replay()
    torch.cuda.synchronize()
    eager = poisoned(len(seq_lens))
    onecat.attention.decode(q, k, v, table, lens, workspace=ws, out=eager)
    torch.cuda.synchronize()
    assert torch.equal(captured, eager)
    check(eager, reference(q, k, v, None, None, "f16", table, seq_lens, [1] * len(seq_lens)))
    assert int(ws.counters.abs().sum()) == 0


def test_prefill_and_kv_write_in_a_graph():
    """kv_write then prefill over the written pages, captured together and replayed."""
    g = gen()
    q_lens = [5, 64, 1]
    seq_lens = list(q_lens)
    table, lens, k, v, _, _ = make_batch(g, seq_lens)
    cu = torch.tensor([0, *itertools.accumulate(q_lens)], dtype=torch.int32).cuda()
    tokens = sum(q_lens)
    # Each token's slot: its sequence's page from the table, its position in that sequence.
    slots = []
    for b, n in enumerate(q_lens):
        for pos in range(n):
            slots.append(int(table[b, pos // PAGE]) * PAGE + pos % PAGE)
    slots = torch.tensor(slots, dtype=torch.int32).cuda()
    kn = torch.randn(tokens, KV_HEADS, DIM, generator=g).half().cuda()
    vn = torch.randn(tokens, KV_HEADS, DIM, generator=g).half().cuda()
    q = queries(g, tokens)

    def step(out):
        onecat.kv_write(kn, vn, k, v, slots)
        onecat.attention.prefill(q, k, v, table, lens, cu, max_q=max(q_lens), out=out)

    step(poisoned(tokens))  # warm-up: kernels compiled and loaded outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    captured = poisoned(tokens)
    with torch.cuda.graph(graph):
        step(captured)
    kn.copy_(torch.randn(tokens, KV_HEADS, DIM, generator=g).half())
    q.copy_(queries(g, tokens))
    graph.replay()
    torch.cuda.synchronize()
    check(captured, reference(q, k, v, None, None, "f16", table, seq_lens, q_lens))
