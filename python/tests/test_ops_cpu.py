"""CPU tests of the embedding and rope bindings: spec derivation, argument checks, the no-GPU
error, and rope_table against closed forms. No torch."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import onecat
from conftest import CudaArrayStub

HAS_GPU = onecat.gpu_available()
no_gpu_only = pytest.mark.skipif(HAS_GPU, reason="checks the error raised without a GPU")
NO_GPU_MESSAGE = onecat.info()["gpu_unavailable_reason"] + "; this command needs an NVIDIA GPU"

T, H, KVH, D = 5, 8, 2, 128


def f16(*shape, **kw):
    return CudaArrayStub(shape, "<f2", **kw)


def i32(*shape, **kw):
    return CudaArrayStub(shape, "<i4", **kw)


def f32(*shape, **kw):
    return CudaArrayStub(shape, "<f4", **kw)


def test_both_families_are_exported():
    for name in ("embedding", "embedding_spec", "rope", "rope_spec", "rope_table"):
        assert hasattr(onecat, name), name
    assert onecat.embedding_spec(151936, 4096) == "embedding:vocab=151936,hidden=4096"
    assert onecat.rope_spec(32, 8, 128, qk_norm=True) == "rope:heads=32,kv_heads=8,dim=128,qk_norm=1,kv_out=dense"
    assert (
        onecat.rope_spec(32, 8, 128, page=16, kv="e4m3")
        == "rope:heads=32,kv_heads=8,dim=128,qk_norm=0,kv_out=pages,page=16,kv=e4m3,kv_scale=tensor"
    )
    with pytest.raises(ValueError, match="dim must be even"):
        onecat.rope_spec(8, 8, 127)


def test_embedding_argument_checks():
    with pytest.raises(TypeError, match=r"onecat.embedding: ids must be int32, got int64"):
        onecat.embedding(CudaArrayStub((T,), "<i8"), f16(100, 64), out=f16(T, 64))
    with pytest.raises(TypeError, match=r"onecat.embedding: table must be float16, got float32"):
        onecat.embedding(i32(T), f32(100, 64), out=f16(T, 64))
    with pytest.raises(ValueError, match=r"onecat.embedding: out must have shape \(5, 64\), got \(5, 32\)"):
        onecat.embedding(i32(T), f16(100, 64), out=f16(T, 32))
    with pytest.raises(ValueError, match=r"vocab_start must be in"):
        onecat.embedding(i32(T), f16(100, 64), vocab_start=-1, out=f16(T, 64))
    with pytest.raises(TypeError, match=r"vocab_start must be an int"):
        onecat.embedding(i32(T), f16(100, 64), vocab_start=1.5, out=f16(T, 64))
    with pytest.raises(ValueError, match=r"ids must be contiguous"):
        onecat.embedding(i32(T, strides=(8,)), f16(100, 64), out=f16(T, 64))


@no_gpu_only
def test_embedding_without_a_gpu_is_the_cli_sentence():
    with pytest.raises(RuntimeError, match=re.escape(NO_GPU_MESSAGE)):
        onecat.embedding(i32(T), f16(100, 64), out=f16(T, 64))


def rope_args(**over):
    args = dict(qkv=f16(T, (H + 2 * KVH) * D), positions=i32(T), inv_freq=f32(D // 2), heads=H, kv_heads=KVH,
                out=(f16(T, H, D), f16(T, KVH, D), f16(T, KVH, D)))
    args.update(over)
    return args


def test_rope_argument_checks():
    with pytest.raises(ValueError, match=r"onecat.rope: qkv must hold 5 rows"):
        onecat.rope(**rope_args(qkv=f16(T, (H + 2 * KVH) * D - 8)))
    with pytest.raises(ValueError, match=r"positions must have shape \(5,\)"):
        onecat.rope(**rope_args(positions=i32(T + 1)))
    with pytest.raises(TypeError, match=r"positions must be int32"):
        onecat.rope(**rope_args(positions=f32(T)))
    with pytest.raises(ValueError, match=r"inv_freq must have shape \(64,\)"):
        onecat.rope(**rope_args(inv_freq=f32(D)))
    with pytest.raises(ValueError, match=r"q_norm and k_norm together"):
        onecat.rope(**rope_args(q_norm=f16(D)))
    with pytest.raises(ValueError, match=r"k_norm must have shape \(128,\)"):
        onecat.rope(**rope_args(q_norm=f16(D), k_norm=f16(D // 2)))
    with pytest.raises(ValueError, match=r"k must have shape \(5, 2, 128\)"):
        onecat.rope(**rope_args(out=(f16(T, H, D), f16(T, KVH, D // 2), f16(T, KVH, D))))
    with pytest.raises(ValueError, match=r"slot_mapping, k_scale, v_scale and kv are for k_cache/v_cache only"):
        onecat.rope(**rope_args(slot_mapping=i32(T)))
    cache = CudaArrayStub((4, KVH, 16, D), "<f2")
    with pytest.raises(ValueError, match=r"pass k and v, or k_cache and v_cache, not both"):
        onecat.rope(**rope_args(k_cache=cache, v_cache=cache, slot_mapping=i32(T)))
    paged_out = (f16(T, H, D), None, None)
    with pytest.raises(ValueError, match=r"slot_mapping is required"):
        onecat.rope(**rope_args(out=paged_out, k_cache=cache, v_cache=cache))
    codes = CudaArrayStub((4, KVH, 16, D), "|u1")
    with pytest.raises(ValueError, match=r"fp8 caches need k_scale and v_scale"):
        onecat.rope(**rope_args(out=paged_out, k_cache=codes, v_cache=codes, slot_mapping=i32(T), kv="e4m3"))
    with pytest.raises(ValueError, match=r"kv must be"):
        onecat.rope(**rope_args(kv="fp8"))
    with pytest.raises(ValueError, match=r"heads must be a positive int"):
        onecat.rope(**rope_args(heads=0))


@no_gpu_only
def test_rope_without_a_gpu_is_the_cli_sentence():
    with pytest.raises(RuntimeError, match=re.escape(NO_GPU_MESSAGE)):
        onecat.rope(**rope_args())
    cache = CudaArrayStub((4, KVH, 16, D), "<f2")
    with pytest.raises(RuntimeError, match=re.escape(NO_GPU_MESSAGE)):
        onecat.rope(**rope_args(out=(f16(T, H, D), None, None), k_cache=cache, v_cache=cache, slot_mapping=i32(T)))


def fp32_ulps(got, want):
    spacing = np.spacing(np.abs(np.float32(want)))
    return abs(float(got) - want) / float(spacing)


def test_rope_table_matches_the_closed_forms():
    theta, dim = 500000.0, 128
    inv, factor = onecat.rope_table(dim, theta=theta)
    assert factor == 1.0 and len(inv) == dim // 2
    for i, f in enumerate(inv):
        assert fp32_ulps(f, theta ** -(np.float32(2 * i) / np.float32(dim))) <= 3, i
    lin, _ = onecat.rope_table(dim, theta=theta, scaling="linear", factor=4.0)
    assert all(fp32_ulps(a, b / 4) <= 4 for a, b in zip(lin, inv))
    # Llama 3.1: wavelengths below 8192/4 kept, above 8192 divided by 8, blended between.
    l3, _ = onecat.rope_table(dim, theta=theta, scaling="llama3", factor=8.0, original_max_position=8192)
    for a, b in zip(l3, inv):
        wavelen = 2 * math.pi / b
        if wavelen < 2048:
            assert a == b
        elif wavelen > 8192:
            assert fp32_ulps(a, b / 8) <= 2
        else:
            s = (8192 / wavelen - 1) / 3
            assert fp32_ulps(a, b * ((1 - s) / 8 + s)) <= 8
    _, yarn_factor = onecat.rope_table(dim, theta=1e6, scaling="yarn", factor=4.0, original_max_position=32768)
    assert yarn_factor == pytest.approx(0.1 * math.log(4) + 1, rel=1e-6)
    with pytest.raises(ValueError, match=r"scaling must be"):
        onecat.rope_table(dim, scaling="dynamic")
    with pytest.raises(ValueError, match=r"original_max_position_embeddings"):
        onecat.rope_table(dim, scaling="yarn", factor=4.0)
