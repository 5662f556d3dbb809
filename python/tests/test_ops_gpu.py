"""GPU tests (marker gpu) of the embedding and rope bindings against torch (and rope_table
against transformers' own RoPE initialisation when transformers is installed)."""

from __future__ import annotations

import pytest

import onecat

pytestmark = pytest.mark.gpu
if not onecat.gpu_available():
    pytest.skip(f"no GPU: {onecat._C.gpu_unavailable_reason()}", allow_module_level=True)
torch = pytest.importorskip("torch")


def gen():
    return torch.Generator().manual_seed(26)


def test_embedding_gathers_rows_and_zeroes_other_ids():
    g = gen()
    table = (torch.rand(1000, 4096, generator=g) * 4 - 2).half().cuda()
    ids = torch.randint(-20, 1020, (77,), generator=g, dtype=torch.int32).cuda()
    out = onecat.embedding(ids, table, vocab_start=10)
    local = ids.long() - 10
    valid = (local >= 0) & (local < 1000)
    want = torch.where(valid[:, None], table[local.clamp(0, 999)], torch.zeros((), dtype=torch.half, device="cuda"))
    assert torch.equal(out, want)


def qwen3_reference(qkv, positions, inv_freq, factor, heads, kv_heads, dim, q_norm, k_norm, eps):
    """transformers' Qwen3 attention prologue in fp32 (Qwen3RMSNorm's fp16 casts kept), rounded once."""
    x = qkv.view(qkv.shape[0], heads + 2 * kv_heads, dim)
    q, k, v = x[:, :heads], x[:, heads : heads + kv_heads], x[:, heads + kv_heads :]

    def norm(t, w):
        if w is None:
            return t.float()
        f = t.float()
        n = (f * torch.rsqrt(f.pow(2).mean(-1, keepdim=True) + eps)).half()
        return (w * n).float()

    angle = positions.float()[:, None] * inv_freq[None, :]
    cos = (torch.cat([angle, angle], -1).double().cos().float() * factor)[:, None]
    sin = (torch.cat([angle, angle], -1).double().sin().float() * factor)[:, None]

    def rotate(t):
        half = t.shape[-1] // 2
        rotated = torch.cat([-t[..., half:], t[..., :half]], -1)
        return (t.double() * cos.double() + rotated.double() * sin.double()).half()

    return rotate(norm(q, q_norm)), rotate(norm(k, k_norm)), v.clone()


@pytest.mark.parametrize("dim,heads,kv_heads,qk_norm", [(128, 32, 8, True), (64, 8, 8, False), (256, 12, 2, True)])
def test_rope_matches_the_transformers_formula(dim, heads, kv_heads, qk_norm):
    g = gen()
    tokens = 37
    qkv = (torch.rand(tokens, (heads + 2 * kv_heads) * dim, generator=g) * 8 - 4).half().cuda()
    positions = torch.randint(0, 131072, (tokens,), generator=g, dtype=torch.int32).cuda()
    inv, factor = onecat.rope_table(dim, theta=1e6, scaling="yarn", factor=4.0, original_max_position=32768)
    inv_freq = torch.tensor(inv, dtype=torch.float32).cuda()
    qn = (torch.rand(dim, generator=g) * 2 + 0.1).half().cuda() if qk_norm else None
    kn = (torch.rand(dim, generator=g) * 2 + 0.1).half().cuda() if qk_norm else None
    q, k, v = onecat.rope(qkv, positions, inv_freq, heads=heads, kv_heads=kv_heads, attention_factor=factor,
                          q_norm=qn, k_norm=kn, eps=1e-6)
    wq, wk, wv = qwen3_reference(qkv, positions, inv_freq, factor, heads, kv_heads, dim, qn, kn, 1e-6)
    assert torch.equal(v, wv)
    for got, want in ((q, wq), (k, wk)):
        g64, w64 = got.double(), want.double()
        half = dim // 2
        pair = torch.sqrt(w64.pow(2) + torch.cat([w64[..., half:], w64[..., :half]], -1).pow(2))
        ulp = torch.pow(2.0, torch.floor(torch.log2(torch.maximum(g64.abs(), w64.abs()).clamp(min=2**-14))) - 10)
        over = (g64 - w64).abs() > ulp + 2**-20 * pair
        # docs/rope.md: with the q/k norm a few normed values may round the other way.
        allowed = 16 + over.numel() // 256 if qk_norm else 0
        assert int(over.sum()) <= allowed
        assert bool(((g64 - w64).abs() <= ulp + 2**-20 * pair + 2**-9 * pair).all())


@pytest.mark.parametrize("kv", ["f16", "e4m3"])
def test_rope_into_the_cache_equals_rope_then_kv_write(kv):
    g = gen()
    tokens, heads, kv_heads, dim, page, pages = 29, 16, 4, 128, 16, 5
    qkv = (torch.rand(tokens, (heads + 2 * kv_heads) * dim, generator=g) * 8 - 4).half().cuda()
    positions = torch.randint(0, 4096, (tokens,), generator=g, dtype=torch.int32).cuda()
    inv, factor = onecat.rope_table(dim, theta=500000.0, scaling="llama3", factor=8.0, original_max_position=8192)
    inv_freq = torch.tensor(inv, dtype=torch.float32).cuda()
    slots = torch.randperm(pages * page, generator=g)[:tokens].int()
    slots[3] = -1
    slots = slots.cuda()
    dtype = torch.half if kv == "f16" else torch.uint8
    k_cache = torch.zeros(pages, kv_heads, page, dim, dtype=dtype, device="cuda")
    v_cache = torch.zeros_like(k_cache)
    k_ref, v_ref = torch.zeros_like(k_cache), torch.zeros_like(k_cache)
    scales = {} if kv == "f16" else dict(kv=kv, k_scale=torch.full((1,), 0.02).cuda(), v_scale=torch.full((1,), 0.03).cuda())
    q = onecat.rope(qkv, positions, inv_freq, heads=heads, kv_heads=kv_heads, attention_factor=factor,
                    k_cache=k_cache, v_cache=v_cache, slot_mapping=slots, **scales)
    q2, k, v = onecat.rope(qkv, positions, inv_freq, heads=heads, kv_heads=kv_heads, attention_factor=factor)
    onecat.kv_write(k, v, k_ref, v_ref, slots, **scales)
    assert torch.equal(q, q2)
    assert torch.equal(k_cache, k_ref) and torch.equal(v_cache, v_ref)


def test_rope_table_is_transformers():
    transformers = pytest.importorskip("transformers")
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    cases = [
        dict(theta=10000.0),
        dict(theta=10000.0, rope_scaling={"rope_type": "linear", "factor": 4.0}),
        dict(theta=500000.0, rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                           "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}),
        dict(theta=1e6, rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}),
    ]
    for case in cases:
        scaling = case.get("rope_scaling")
        # max_position_embeddings = factor × original: the factor both transformers rules give.
        config = transformers.LlamaConfig(hidden_size=4096, num_attention_heads=32, head_dim=128,
                                          rope_theta=case["theta"], rope_scaling=scaling,
                                          max_position_embeddings=32768 * 4)
        rotary = LlamaRotaryEmbedding(config, device="cpu")
        want, want_factor = rotary.inv_freq.float(), float(rotary.attention_scaling)
        kind = scaling["rope_type"] if scaling else "default"
        extra = {k: v for k, v in (scaling or {}).items() if k in ("factor", "low_freq_factor", "high_freq_factor")}
        if scaling and "original_max_position_embeddings" in scaling:
            extra["original_max_position"] = scaling["original_max_position_embeddings"]
        got, factor = onecat.rope_table(128, theta=case["theta"], scaling=kind, **extra)
        got = torch.tensor(got)
        # torch's powf may differ from a correctly rounded power in the last bit.
        assert torch.allclose(got, want, rtol=4e-7, atol=0), (kind, (got - want).abs().max())
        assert factor == pytest.approx(want_factor, rel=1e-6), kind
