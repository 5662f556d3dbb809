"""CPU tests of the attention bindings: spec derivation, argument checks, the no-GPU error. No torch."""

from __future__ import annotations

import re

import pytest

import onecat
from conftest import CudaArrayStub

HAS_GPU = onecat.gpu_available()
no_gpu_only = pytest.mark.skipif(HAS_GPU, reason="checks the error raised without a GPU")
NO_GPU_MESSAGE = onecat.info()["gpu_unavailable_reason"] + "; this command needs an NVIDIA GPU"

B, H, KVH, D, PAGE, PAGES, MAXP = 3, 8, 2, 128, 16, 12, 4


def f16(*shape, **kw):
    return CudaArrayStub(shape, "<f2", **kw)


def i32(*shape, **kw):
    return CudaArrayStub(shape, "<i4", **kw)


def f32(*shape, **kw):
    return CudaArrayStub(shape, "<f4", **kw)


def u8(*shape, **kw):
    return CudaArrayStub(shape, "|u1", **kw)


def cache(typestr="<f2"):
    return CudaArrayStub((PAGES, KVH, PAGE, D), typestr)


def decode_args(tokens=B, **over):
    args = dict(q=f16(tokens, H, D), k_cache=cache(), v_cache=cache(), block_table=i32(B, MAXP), seq_lens=i32(B))
    args.update(over)
    return args


def call_decode(**over):
    kw = dict(out=f16(B, H, D))
    for k in ("out", "kv", "k_scale", "v_scale", "window", "workspace", "sm_scale"):
        if k in over:
            kw[k] = over.pop(k)
    a = decode_args(**over)
    return onecat.attention.decode(a["q"], a["k_cache"], a["v_cache"], a["block_table"], a["seq_lens"], **kw)


def test_attention_is_exported():
    assert onecat.attention.FAMILY == "attention"
    for name in ("prefill", "decode", "verify", "kv_write", "workspace", "workspace_size", "attention_spec", "Workspace"):
        assert callable(getattr(onecat.attention, name)), name
    assert onecat.kv_write is onecat.attention.kv_write
    from onecat.families import family_module

    assert callable(family_module("attention").call_kernel)


def test_attention_spec_canonical():
    s = onecat.attention.attention_spec("decode", heads=32, kv_heads=8, dim=128, page=16)
    assert s == "attention:op=decode,heads=32,kv_heads=8,dim=128,page=16,kv=f16,kv_scale=none,window=0"
    s = onecat.attention.attention_spec("verify", heads=32, kv_heads=8, dim=128, page=16, kv="e4m3", kv_scale="head", q=8)
    assert s == "attention:op=verify,heads=32,kv_heads=8,dim=128,page=16,kv=e4m3,kv_scale=head,q=8,window=0"
    s = onecat.attention.attention_spec("prefill", heads=32, kv_heads=8, dim=128, page=16, causal=True)
    assert s == "attention:op=prefill,heads=32,kv_heads=8,dim=128,page=16,kv=f16,kv_scale=none,causal=1,window=0"
    s = onecat.attention.attention_spec("kv_write", kv_heads=8, dim=128, page=16, kv="e5m2")
    assert s == "attention:op=kv_write,kv_heads=8,dim=128,page=16,kv=e5m2,kv_scale=tensor"
    with pytest.raises(ValueError, match="no kernel"):
        onecat.attention.attention_spec("decode", heads=32, kv_heads=8, dim=96, page=16)
    with pytest.raises(ValueError, match="op must be"):
        onecat.attention.attention_spec("bogus", heads=32, kv_heads=8, dim=128, page=16)


def test_decode_dtype_errors_name_the_argument():
    with pytest.raises(TypeError, match=r"onecat.attention.decode: q must be float16, got float32"):
        call_decode(q=f32(B, H, D))
    with pytest.raises(TypeError, match=r"onecat.attention.decode: block_table must be int32, got float16"):
        call_decode(block_table=f16(B, MAXP))
    with pytest.raises(TypeError, match=r"onecat.attention.decode: seq_lens must be int32"):
        call_decode(seq_lens=CudaArrayStub((B,), "<i8"))
    with pytest.raises(TypeError, match=r"onecat.attention.decode: k_cache must be float16, or uint8"):
        call_decode(k_cache=cache("<f4"), v_cache=cache("<f4"))
    with pytest.raises(TypeError, match=r"onecat.attention.decode: v_cache must be float16"):
        call_decode(v_cache=cache("|u1"))
    with pytest.raises(TypeError, match=r"onecat.attention.decode: out must be float16"):
        call_decode(out=f32(B, H, D))
    with pytest.raises(TypeError, match=r"onecat.attention.decode: q must be a tensor or array"):
        call_decode(q=[1.0])


def test_decode_shape_errors():
    with pytest.raises(ValueError, match=r"q must have one token per sequence"):
        call_decode(tokens=B + 1, out=f16(B + 1, H, D))
    with pytest.raises(ValueError, match=r"seq_lens must have shape \(3,\), got \(4,\)"):
        call_decode(seq_lens=i32(B + 1))
    with pytest.raises(ValueError, match=r"v_cache must have shape"):
        call_decode(v_cache=CudaArrayStub((PAGES, KVH, PAGE * 2, D), "<f2"))
    with pytest.raises(ValueError, match=r"k_cache's last dimension"):
        call_decode(k_cache=CudaArrayStub((PAGES, KVH, PAGE, 64), "<f2"), v_cache=CudaArrayStub((PAGES, KVH, PAGE, 64), "<f2"))
    with pytest.raises(ValueError, match=r"out must have shape \(3, 8, 128\)"):
        call_decode(out=f16(B, H, 64))
    with pytest.raises(ValueError, match=r"onecat.attention.decode: q must have 3 dimensions, got shape \(3, 1024\)"):
        call_decode(q=f16(B, H * D))
    with pytest.raises(ValueError, match=r"no kernel for these arguments"):  # 8 heads over 3 KV heads
        call_decode(k_cache=CudaArrayStub((PAGES, 3, PAGE, D), "<f2"), v_cache=CudaArrayStub((PAGES, 3, PAGE, D), "<f2"))
    with pytest.raises(ValueError, match=r"no kernel for these arguments.*dim=96"):
        call_decode(q=f16(B, H, 96), out=f16(B, H, 96), k_cache=CudaArrayStub((PAGES, KVH, PAGE, 96), "<f2"),
                    v_cache=CudaArrayStub((PAGES, KVH, PAGE, 96), "<f2"))


def test_decode_rejects_non_contiguous():
    strided = f16(B, H, D, strides=(H * D * 4, D * 2, 2))
    with pytest.raises(ValueError, match=r"onecat.attention.decode: q must be contiguous"):
        call_decode(q=strided)
    with pytest.raises(ValueError, match=r"block_table must be contiguous"):
        call_decode(block_table=i32(B, MAXP, strides=(4, 4 * B)))


def test_fp8_cache_arguments():
    with pytest.raises(ValueError, match=r'pass kv="e4m3" or kv="e5m2"'):
        call_decode(k_cache=cache("|u1"), v_cache=cache("|u1"), k_scale=f32(1), v_scale=f32(1))
    with pytest.raises(ValueError, match=r"need k_scale and v_scale"):
        call_decode(k_cache=cache("|u1"), v_cache=cache("|u1"), kv="e4m3")
    with pytest.raises(ValueError, match=r"k_scale must have shape \(1,\) or \(2,\), got \(3,\)"):
        call_decode(k_cache=cache("|u1"), v_cache=cache("|u1"), kv="e4m3", k_scale=f32(3), v_scale=f32(3))
    with pytest.raises(TypeError, match=r"k_scale must be float32"):
        call_decode(k_cache=cache("|u1"), v_cache=cache("|u1"), kv="e4m3", k_scale=f16(1), v_scale=f32(1))
    with pytest.raises(ValueError, match=r"for fp8 caches only"):
        call_decode(k_scale=f32(1), v_scale=f32(1))
    with pytest.raises(ValueError, match=r"kv='e4m3' needs uint8"):
        call_decode(kv="e4m3")
    with pytest.raises(ValueError, match=r"kv must be"):
        call_decode(kv="fp8")


def test_verify_and_prefill_shapes():
    a = decode_args(tokens=B * 4)
    with pytest.raises(ValueError, match=r"not a whole number per sequence"):
        onecat.attention.verify(f16(B * 4 + 1, H, D), a["k_cache"], a["v_cache"], a["block_table"], a["seq_lens"],
                                out=f16(B * 4 + 1, H, D))
    with pytest.raises(ValueError, match=r"no kernel for these arguments.*q=17"):
        onecat.attention.verify(f16(B * 17, H, D), a["k_cache"], a["v_cache"], a["block_table"], a["seq_lens"],
                                out=f16(B * 17, H, D))
    q = f16(20, H, D)
    with pytest.raises(ValueError, match=r"cu_seqlens must have shape \(4,\)"):
        onecat.attention.prefill(q, a["k_cache"], a["v_cache"], a["block_table"], a["seq_lens"], i32(B), max_q=8,
                                 out=f16(20, H, D))
    with pytest.raises(ValueError, match=r"max_q must be ≥ 0|max_q .*must be ≥ 1"):
        onecat.attention.prefill(q, a["k_cache"], a["v_cache"], a["block_table"], a["seq_lens"], i32(B + 1), max_q=0,
                                 out=f16(20, H, D))
    with pytest.raises(ValueError, match=r"max_q 21 exceeds"):
        onecat.attention.prefill(q, a["k_cache"], a["v_cache"], a["block_table"], a["seq_lens"], i32(B + 1), max_q=21,
                                 out=f16(20, H, D))
    with pytest.raises(TypeError, match=r"max_q must be an int"):
        onecat.attention.prefill(q, a["k_cache"], a["v_cache"], a["block_table"], a["seq_lens"], i32(B + 1), max_q=2.0,
                                 out=f16(20, H, D))


def test_workspace_argument_checks():
    with pytest.raises(TypeError, match=r"workspace must be a Workspace"):
        call_decode(workspace=3)
    ws = onecat.attention.Workspace(f16(16), i32(4))
    with pytest.raises(TypeError, match=r"workspace.partial must be float32"):
        call_decode(workspace=ws)
    prefill = onecat.attention.attention_spec("prefill", heads=H, kv_heads=KVH, dim=D, page=PAGE)
    assert onecat.attention.workspace_size(prefill, [1, 64]) == (0, 0)  # prefill never splits: no GPU needed
    with pytest.raises(TypeError, match=r"cannot allocate for a CudaArrayStub"):
        onecat.attention.workspace(prefill, 4, like=f16(1))

def test_kv_write_checks():
    k = f16(5, KVH, D)
    with pytest.raises(ValueError, match=r"onecat.kv_write: k must have shape \(5, 2, 128\)"):
        onecat.kv_write(f16(5, KVH, 64), k, cache(), cache(), i32(5))
    with pytest.raises(ValueError, match=r"slot_mapping must have shape \(5,\)"):
        onecat.kv_write(k, k, cache(), cache(), i32(4))
    with pytest.raises(TypeError, match=r"slot_mapping must be int32"):
        onecat.kv_write(k, k, cache(), cache(), CudaArrayStub((5,), "<i8"))
    with pytest.raises(ValueError, match=r'pass kv="e4m3"'):
        onecat.kv_write(k, k, cache("|u1"), cache("|u1"), i32(5), k_scale=f32(KVH), v_scale=f32(KVH))


@no_gpu_only
def test_attention_no_gpu_error():
    with pytest.raises(RuntimeError, match=re.escape(NO_GPU_MESSAGE)):
        call_decode()
    with pytest.raises(RuntimeError, match=re.escape(NO_GPU_MESSAGE)):
        call_decode(k_cache=cache("|u1"), v_cache=cache("|u1"), kv="e5m2", k_scale=f32(KVH), v_scale=f32(KVH))
    a = decode_args(tokens=20)
    with pytest.raises(RuntimeError, match=re.escape(NO_GPU_MESSAGE)):
        onecat.attention.prefill(a["q"], a["k_cache"], a["v_cache"], a["block_table"], a["seq_lens"], i32(B + 1),
                                 max_q=10, out=f16(20, H, D))
    with pytest.raises(RuntimeError, match=re.escape(NO_GPU_MESSAGE)):
        onecat.kv_write(f16(5, KVH, D), f16(5, KVH, D), cache(), cache(), i32(5))
    spec = onecat.attention.attention_spec("decode", heads=H, kv_heads=KVH, dim=D, page=PAGE)
    with pytest.raises(RuntimeError, match=re.escape(NO_GPU_MESSAGE)):
        onecat.attention.workspace_size(spec, [1, 8])
