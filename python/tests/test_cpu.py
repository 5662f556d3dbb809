"""CPU tests (CI): import, specs, argument checks and the no-GPU error. No torch needed."""

from __future__ import annotations

import re

import numpy as np
import pytest

import onecat
from conftest import CudaArrayStub, DLPackStub

HAS_GPU = onecat.gpu_available()
no_gpu_only = pytest.mark.skipif(HAS_GPU, reason="checks the error raised without a GPU")
NO_GPU_MESSAGE = onecat.info()["gpu_unavailable_reason"] + "; this command needs an NVIDIA GPU"
# On the device the image's NVRTC 13 cannot target sm_70: those compile tests skip there.
SM70_NVRTC = any(n["targets_sm_70"] for n in onecat.info()["nvrtc"])
needs_sm70_nvrtc = pytest.mark.skipif(not SM70_NVRTC, reason="no NVRTC that targets sm_70 (scripts/setup installs one)")


def f16(*shape, **kw):
    return CudaArrayStub(shape, "<f2", **kw)


# --- import, info, specs -----------------------------------------------------------------


def test_import_and_info():
    info = onecat.info()
    assert {"driver", "gpus", "nvrtc", "cache", "families"} <= set(info)
    names = [f["name"] for f in info["families"]]
    assert "rmsnorm" in names and "gemm" in names
    assert onecat.__version__
    for name in ("rmsnorm", "gemm", "pack_weight", "PackedWeight", "compile", "emit", "tune", "cache"):
        assert hasattr(onecat, name), name


# Families whose Python bindings are not written yet (their C++ op, GPU check and tuning work;
# docs/python.md lists them). Anything else registered must be callable from Python.
WITHOUT_BINDINGS: set[str] = set()


def test_every_family_has_python_bindings():
    from onecat.families import family_module

    names = set(onecat._C.family_names())
    assert WITHOUT_BINDINGS <= names, "a family listed as unbound is not registered: drop it from the list"
    for name in sorted(names - WITHOUT_BINDINGS):
        module = family_module(name)
        assert callable(module.call_kernel)


def test_emit_returns_source():
    src = onecat.emit("rmsnorm:hidden=4096,dtype=f16,residual=1")
    assert "rmsnorm" in src
    assert "gemm" in onecat.emit("gemm:n=256,k=256,fmt=awq4", m=64)


@pytest.mark.parametrize(
    "spec, words",
    [
        ("rmsnorm:hidden=0,dtype=f16,residual=1", ["hidden"]),
        ("rmsnorm:hidden=4096,dtype=f16,residual=1,bogus=2", ["bogus"]),
        ("nosuch:n=1", ["unknown kernel family", "nosuch"]),
        ("gemm:n=256,k=100,fmt=awq4", ["k=100"]),
        ("gemm:n=256,k=256,fmt=int3", ["fmt"]),
        ("gemm:n=255,k=256,fmt=f16,epi=silu_mul", ["even"]),
    ],
)
def test_spec_errors_are_value_errors(spec, words):
    with pytest.raises(ValueError) as e:
        onecat.emit(spec)
    for w in words:
        assert w in str(e.value)


def test_bad_config_is_value_error():
    with pytest.raises(ValueError, match="vec"):
        onecat.emit("rmsnorm:hidden=4096,dtype=f16,residual=0", config="row_threads=128,vec=3,rows=1")


def test_emit_type_errors():
    with pytest.raises(TypeError, match="spec must be a str"):
        onecat.emit(42)


@pytest.mark.parametrize("m", [0, -1, -(2**40), 2**31, 2**64])
def test_token_count_out_of_range_is_value_error(m):
    for fn in (onecat.emit, onecat.compile):
        with pytest.raises(ValueError, match=rf"token count m={m} is out of range: it must be 1 to 2147483647"):
            fn("rmsnorm:hidden=4096,dtype=f16,residual=1", arch="sm_70", m=m)


@pytest.mark.parametrize("m", [1.5, "8", True, None])
def test_token_count_must_be_an_int(m):
    with pytest.raises(TypeError, match="m must be an int"):
        onecat.emit("rmsnorm:hidden=4096,dtype=f16,residual=1", m=m)


def test_large_token_counts_come_back():
    # pow2_ceil looped forever above 2**30; every family's default now comes back at once.
    for spec in (
        "rmsnorm:hidden=4096,dtype=f16,residual=1",
        "gemm:n=256,k=256,fmt=awq4",
        "attention:op=decode,heads=32,kv_heads=8,dim=128,page=16,kv=f16",
        "attention:op=prefill,heads=32,kv_heads=8,dim=128,page=16,kv=f16",
    ):
        for m in (2**30 + 1, 2**31 - 1):
            assert onecat.emit(spec, m=m)


@needs_sm70_nvrtc
def test_compile_for_sm70_without_gpu(cache_dir):
    k = onecat.compile("rmsnorm:hidden=4096,dtype=f16,residual=1", arch="sm_70")
    assert k.arch == "sm_70" and k.family == "rmsnorm"
    assert k.registers > 0 and k.spill_store_bytes == 0
    assert k.usage["registers"] == k.registers
    assert k.cubin[:4] == b"\x7fELF"
    assert "rmsnorm" in k.source and not k.cache_hit
    again = onecat.compile("rmsnorm:hidden=4096,dtype=f16,residual=1", arch="sm_70")
    assert again.cache_hit and again.key == k.key
    assert onecat.cache.stats()["binaries"] >= 1
    if not HAS_GPU:
        with pytest.raises(RuntimeError, match=re.escape(NO_GPU_MESSAGE)):
            k(f16(4, 4096), f16(4096), 1e-6, f16(4, 4096), out=f16(4, 4096))


@needs_sm70_nvrtc
def test_cache_export_import(cache_dir, tmp_path):
    onecat.compile("rmsnorm:hidden=1024,dtype=f16,residual=0", arch="sm_70")
    report = onecat.cache.export(tmp_path / "fleet.sqlite", arch="sm_70")
    assert report["binaries"] == 1
    onecat.set_cache_dir(tmp_path / "other")
    assert onecat.cache.stats()["binaries"] == 0
    imported = onecat.cache.import_(tmp_path / "fleet.sqlite")
    assert imported["binaries_added"] == 1 and imported["imported"]
    assert onecat.cache.stats()["binaries"] == 1
    with pytest.raises(ValueError):
        (tmp_path / "junk.sqlite").write_bytes(b"not a cache")
        onecat.cache.import_(tmp_path / "junk.sqlite")


def test_set_cache_dir(tmp_path):
    before = onecat.cache_dir()
    try:
        onecat.set_cache_dir(tmp_path / "c")
        assert onecat.cache_dir() == str(tmp_path / "c")
        assert onecat.cache.path() == str(tmp_path / "c" / "kernels.sqlite")
    finally:
        onecat.set_cache_dir(before)


# --- argument checks (rmsnorm) -----------------------------------------------------------


def test_rmsnorm_rejects_non_arrays():
    with pytest.raises(TypeError, match=r"onecat.rmsnorm: x must be a tensor or array"):
        onecat.rmsnorm([1.0, 2.0], f16(2), out=f16(2))
    with pytest.raises(TypeError, match="eps must be a float"):
        onecat.rmsnorm(f16(4, 64), f16(64), "1e-6", out=f16(4, 64))
    with pytest.raises(ValueError, match="eps must be"):
        onecat.rmsnorm(f16(4, 64), f16(64), -1.0, out=f16(4, 64))


def test_rmsnorm_dtype_errors_name_the_argument():
    with pytest.raises(TypeError, match=r"onecat.rmsnorm: x must be float16, got float32"):
        onecat.rmsnorm(CudaArrayStub((4, 64), "<f4"), f16(64), out=f16(4, 64))
    with pytest.raises(TypeError, match=r"onecat.rmsnorm: weight must be float16, got int32"):
        onecat.rmsnorm(f16(4, 64), CudaArrayStub((64,), "<i4"), out=f16(4, 64))


def test_rmsnorm_shape_errors():
    with pytest.raises(ValueError, match=r"weight must have shape \(64,\), got \(32,\)"):
        onecat.rmsnorm(f16(4, 64), f16(32), out=f16(4, 64))
    with pytest.raises(ValueError, match=r"residual must have shape \(4, 64\), got \(4, 32\)"):
        onecat.rmsnorm(f16(4, 64), f16(64), 1e-6, f16(4, 32), out=f16(4, 64))
    with pytest.raises(ValueError, match=r"out must have shape"):
        onecat.rmsnorm(f16(4, 64), f16(64), out=f16(3, 64))
    with pytest.raises(ValueError, match=r"last dimension 40000 has no kernel"):
        onecat.rmsnorm(f16(1, 40000), f16(40000), out=f16(1, 40000))


def test_rmsnorm_rejects_non_contiguous():
    strided = f16(4, 64, strides=(256, 4))  # every other column
    with pytest.raises(ValueError, match=r"x must be contiguous"):
        onecat.rmsnorm(strided, f16(64), out=f16(4, 64))
    transposed = f16(64, 4, strides=(2, 128))
    with pytest.raises(ValueError, match=r"out must be contiguous"):
        onecat.rmsnorm(f16(64, 4), f16(4), out=transposed)


def test_rmsnorm_rejects_host_arrays():
    x = np.zeros((4, 64), np.float16)
    with pytest.raises(ValueError, match=r"x must be on a CUDA device"):
        onecat.rmsnorm(x, f16(64), out=f16(4, 64))
    with pytest.raises(ValueError, match=r"x must be on a CUDA device"):
        onecat.rmsnorm(DLPackStub(x), f16(64), out=f16(4, 64))


def test_output_allocation_needs_torch_or_cupy():
    with pytest.raises(TypeError, match="pass out="):
        onecat.rmsnorm(f16(4, 64), f16(64))


def test_stream_argument_type():
    with pytest.raises(TypeError, match="stream must be"):
        onecat.rmsnorm(f16(4, 64), f16(64), out=f16(4, 64), stream="default")


@no_gpu_only
def test_no_gpu_error_is_the_cli_sentence():
    with pytest.raises(RuntimeError) as e:
        onecat.rmsnorm(f16(4, 64), f16(64), 1e-6, f16(4, 64), out=f16(4, 64))
    assert str(e.value) == NO_GPU_MESSAGE
    with pytest.raises(RuntimeError, match=re.escape(NO_GPU_MESSAGE)):
        onecat.tune("rmsnorm:hidden=4096,dtype=f16,residual=0", buckets=[1])
    with pytest.raises(RuntimeError, match=re.escape(NO_GPU_MESSAGE)):
        onecat.compile("rmsnorm:hidden=4096,dtype=f16,residual=0")
    with pytest.raises(RuntimeError, match=re.escape(NO_GPU_MESSAGE)):
        onecat.prepare("rmsnorm:hidden=4096,dtype=f16,residual=0", [1])


def test_tune_bucket_checks():
    with pytest.raises(ValueError, match="not a bucket"):
        onecat.tune("rmsnorm:hidden=4096,dtype=f16,residual=0", buckets=[3])
    with pytest.raises(TypeError, match="buckets must be ints"):
        onecat.tune("rmsnorm:hidden=4096,dtype=f16,residual=0", buckets=["1"])


# --- pack_weight and gemm ----------------------------------------------------------------

rng = np.random.default_rng(7)
AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]  # column 8j + AWQ_ORDER[p] sits at bits 4p


def awq_tensors(n, k, group):
    q = rng.integers(0, 16, size=(k, n), dtype=np.int64)
    z = rng.integers(0, 16, size=(k // group, n), dtype=np.int64)
    s = rng.uniform(0.002, 0.02, size=(k // group, n)).astype(np.float16)

    def pack(codes):
        rows, cols = codes.shape
        out = np.zeros((rows, cols // 8), dtype=np.int64)
        for p in range(8):
            out |= codes[:, AWQ_ORDER[p] :: 8] << (4 * p)
        return out.astype(np.uint32).view(np.int32)

    w = (q - np.repeat(z, group, axis=0)) * np.repeat(s.astype(np.float32), group, axis=0)
    return dict(qweight=pack(q), qzeros=pack(z), scales=s), w.T.astype(np.float32)


def gptq_tensors(n, k, group, act_order):
    q = rng.integers(0, 16, size=(k, n), dtype=np.int64)
    s = rng.uniform(0.002, 0.02, size=(k // group, n)).astype(np.float16)
    qweight = np.zeros((k // 8, n), dtype=np.int64)
    for i in range(8):
        qweight |= q[i::8, :] << (4 * i)
    g_idx = np.arange(k, dtype=np.int32) // group
    if act_order:
        g_idx = rng.permutation(g_idx).astype(np.int32)
    w = (q - 8) * s.astype(np.float32)[g_idx, :]
    return dict(qweight=qweight.astype(np.uint32).view(np.int32), scales=s, g_idx=g_idx), w.T.astype(np.float32)


def test_pack_f16_roundtrip():
    w = rng.standard_normal((24, 64)).astype(np.float16)
    p = onecat.pack_weight("f16", weight=w, device=None)
    assert (p.fmt, p.n, p.k, p.device) == ("f16", 24, 64, None)
    np.testing.assert_array_equal(p.dequantize(), w.astype(np.float32))
    assert p.spec() == "gemm:n=24,k=64,fmt=f16,group=0,out=f16,epi=none,act_order=0"
    assert "out=f32,epi=silu_mul" in p.spec("silu_mul", "float32")


def test_pack_awq4_matches_reference():
    tensors, want = awq_tensors(32, 256, 128)
    p = onecat.pack_weight("awq4", device=None, **tensors)
    assert (p.n, p.k, p.group) == (32, 256, 128)
    np.testing.assert_allclose(p.dequantize(), want, rtol=1e-3, atol=1e-5)


@pytest.mark.parametrize("act_order", [False, True])
def test_pack_gptq4_matches_reference(act_order):
    tensors, want = gptq_tensors(24, 128, 32, act_order)
    p = onecat.pack_weight("gptq4", device=None, **tensors)
    assert p.act_order == act_order and p.group == 32
    np.testing.assert_allclose(p.dequantize(), want, rtol=1e-3, atol=1e-5)


def test_pack_other_formats_shapes():
    n, k = 40, 256
    e4m3 = rng.integers(0, 0x7F, size=(n, k), dtype=np.uint8)  # no NaN codes
    p = onecat.pack_weight("fp8b32", weight=e4m3, scales=np.full((2, k // 32), 127, np.uint8), device=None)
    assert (p.fmt, p.group) == ("fp8b32", 32)
    p = onecat.pack_weight("fp8b128", weight=e4m3, weight_scale_inv=np.full((1, 2), 0.5, np.float32), device=None)
    assert p.group == 128
    p = onecat.pack_weight("fp8b128", weight=e4m3, weight_scale_inv=np.full((n,), 0.5, np.float32), device=None)
    assert p.group == 0
    codes = rng.integers(0, 256, size=(n, k // 2), dtype=np.uint8)
    p = onecat.pack_weight("nvfp4", weight=codes, weight_scale=np.full((n, k // 16), 0x38, np.uint8),
                           weight_scale_2=0.5, device=None)
    assert p.global_scale == 0.5 and p.dequantize().shape == (n, k)
    p = onecat.pack_weight("mxfp4", blocks=codes.reshape(n, k // 32, 16), scales=np.full((n, k // 32), 127, np.uint8),
                           device=None)
    assert (p.n, p.k) == (n, k)


def test_pack_weight_errors():
    with pytest.raises(ValueError, match="unknown format 'int3'"):
        onecat.pack_weight("int3", weight=np.zeros((8, 8), np.float16))
    with pytest.raises(TypeError, match="missing qzeros"):
        onecat.pack_weight("awq4", qweight=np.zeros((8, 8), np.int32), scales=np.zeros((1, 64), np.float16))
    with pytest.raises(TypeError, match="unexpected bias"):
        onecat.pack_weight("f16", weight=np.zeros((8, 8), np.float16), bias=np.zeros(8, np.float16))
    with pytest.raises(TypeError, match=r"onecat.pack_weight: weight must be float16, got float32"):
        onecat.pack_weight("f16", weight=np.zeros((8, 8), np.float32))
    with pytest.raises(ValueError, match=r"weight must be contiguous"):
        onecat.pack_weight("f16", weight=np.zeros((8, 16), np.float16)[:, ::2])
    with pytest.raises(ValueError, match=r"weight must be a host"):
        onecat.pack_weight("f16", weight=f16(8, 8))
    tensors, _ = awq_tensors(32, 256, 128)
    tensors["scales"] = tensors["scales"][:, :16].copy()
    with pytest.raises(ValueError):
        onecat.pack_weight("awq4", device=None, **tensors)
    nan = np.full((8, 32), 0x7F, np.uint8)  # E4M3 NaN
    with pytest.raises(ValueError, match="NaN"):
        onecat.pack_weight("fp8b32", weight=nan, scales=np.full((1, 1), 127, np.uint8), device=None)


def test_gemm_argument_checks():
    w = onecat.pack_weight("f16", weight=np.zeros((24, 64), np.float16), device=None)
    with pytest.raises(TypeError, match="packed must be an onecat.PackedWeight"):
        onecat.gemm(f16(4, 64), np.zeros((24, 64), np.float16), out=f16(4, 24))
    with pytest.raises(TypeError, match=r"onecat.gemm: x must be float16, got float32"):
        onecat.gemm(CudaArrayStub((4, 64), "<f4"), w, out=f16(4, 24))
    with pytest.raises(ValueError, match=r"x must have K=64 columns"):
        onecat.gemm(f16(4, 32), w, out=f16(4, 24))
    with pytest.raises(ValueError, match=r"x must be contiguous"):
        onecat.gemm(f16(4, 64, strides=(256, 4)), w, out=f16(4, 24))
    with pytest.raises(ValueError, match="packed is on the host"):
        onecat.gemm(f16(4, 64), w, out=f16(4, 24))
    with pytest.raises(ValueError, match="epilogue must be one of"):
        onecat.gemm(f16(4, 64), w, epilogue="gelu", out=f16(4, 24))
    with pytest.raises(ValueError, match="not both"):
        onecat.gemm(f16(4, 64), w, f16(24), residual=f16(4, 24), out=f16(4, 24))
    with pytest.raises(ValueError, match="out_dtype must be float16 or float32"):
        onecat.gemm(f16(4, 64), w, out_dtype="int8", out=f16(4, 24))


@no_gpu_only
@pytest.mark.parametrize("module", ["test_gpu.py", "test_attention_gpu.py", "test_cupy_gpu.py"])
def test_gpu_tests_fail_instead_of_skipping_when_a_gpu_is_required(module):
    """ONECAT_REQUIRE_GPU=1 (every GPU machine's run sets it): a GPU test that cannot run fails."""
    import os
    import subprocess
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    run = lambda env: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", os.path.join(here, module)],
        capture_output=True, text=True, env={**os.environ, **env}, timeout=300)
    skipped = run({"ONECAT_REQUIRE_GPU": "0"})
    assert skipped.returncode in (0, 5), skipped.stdout  # 5: the module skipped itself, no test ran
    assert "skipped" in skipped.stdout
    required = run({"ONECAT_REQUIRE_GPU": "1"})
    assert required.returncode != 0, required.stdout
    assert "ONECAT_REQUIRE_GPU=1" in required.stdout
