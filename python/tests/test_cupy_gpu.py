"""GPU tests (marker gpu) with CuPy arrays: the ops take any __cuda_array_interface__ array.

Outputs are allocated by onecat in CuPy (no out=) or passed in; work is queued on CuPy's
current stream (a non-default one here). References in float64 NumPy on the host.
"""

from __future__ import annotations

import numpy as np
import pytest

import onecat

pytestmark = pytest.mark.gpu
if not onecat.gpu_available():
    pytest.skip(f"no GPU: {onecat._C.gpu_unavailable_reason()}", allow_module_level=True)
cupy = pytest.importorskip("cupy")

EPS = 1e-6


def rng():
    return np.random.default_rng(4321)


@pytest.mark.parametrize("rows, hidden", [(1, 64), (7, 1000), (33, 4096)])
def test_rmsnorm_cupy(rows, hidden):
    r = rng()
    x = (r.random((rows, hidden)) * 6 - 3).astype(np.float16)
    w = (r.random(hidden) * 3 - 1.5).astype(np.float16)
    with cupy.cuda.Stream(non_blocking=True) as s:
        y = onecat.rmsnorm(cupy.asarray(x), cupy.asarray(w), EPS)
        assert isinstance(y, cupy.ndarray) and y.dtype == np.float16 and y.shape == x.shape
        got = cupy.asnumpy(y, stream=s)
        s.synchronize()
    xd = x.astype(np.float64)
    want = xd / np.sqrt((xd**2).mean(-1, keepdims=True) + EPS) * w.astype(np.float64)
    assert np.isfinite(got).all()
    assert (np.abs(got.astype(np.float64) - want) / (np.abs(want) + 2.0**-14)).max() <= 4.0 / 1024


@pytest.mark.parametrize("m", [1, 16, 33])
def test_gemm_cupy_f16_and_awq4(m):
    r = rng()
    n, k = 258, 256
    weight = (0.1 * r.standard_normal((n, k))).astype(np.float16)
    grp, n_awq = 64, 256  # awq4 packs 8 columns per int32 word
    awq = dict(qweight=r.integers(-(2**31), 2**31, (k, n_awq // 8), dtype=np.int64).astype(np.int32),
               qzeros=r.integers(-(2**31), 2**31, (k // grp, n_awq // 8), dtype=np.int64).astype(np.int32),
               scales=r.uniform(0.002, 0.02, (k // grp, n_awq)).astype(np.float16))
    x = (r.random((m, k)) - 0.5).astype(np.float16)
    for packed in (onecat.pack_weight("f16", weight=weight), onecat.pack_weight("awq4", **awq)):
        w = np.asarray(packed.dequantize(), dtype=np.float64)
        out = cupy.full((m, packed.n), np.nan, dtype=np.float16)
        with cupy.cuda.Stream(non_blocking=True) as s:
            y = onecat.gemm(cupy.asarray(x), packed, out=out)
            got = cupy.asnumpy(y, stream=s)
            s.synchronize()
        assert y is out
        want = x.astype(np.float64) @ w.T
        # Normwise, as tests/test_gpu.py: the C++ checker's bounds plus the fp16 output's rounding.
        err = np.linalg.norm(got.astype(np.float64) - want) / np.linalg.norm(want)
        bound = 5e-3 if packed.fmt == "awq4" else 4e-3
        assert np.isfinite(got).all() and err <= bound, f"{packed.fmt}: relative error {err:.3g}"


def test_cupy_argument_checks():
    w = cupy.ones(64, dtype=np.float16)
    with pytest.raises(ValueError, match="x must be contiguous"):
        onecat.rmsnorm(cupy.ones((8, 128), dtype=np.float16)[:, ::2], w)
    with pytest.raises(TypeError, match="float16"):
        onecat.rmsnorm(cupy.ones((8, 64), dtype=np.float32), w)
