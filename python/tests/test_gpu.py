"""GPU tests (marker gpu): every bound op against a torch reference on random data.

Run on the device with `bash bench/device.sh pytest`. Outputs are poisoned (NaN) before each
call, so an element the kernel never writes fails; the reference uses the CPU decoder's
weights (PackedWeight.dequantize) and float64 sums.
"""

from __future__ import annotations

import pytest

import onecat

pytestmark = pytest.mark.gpu
if not onecat.gpu_available():
    pytest.skip(f"no GPU: {onecat._C.gpu_unavailable_reason()}", allow_module_level=True)
torch = pytest.importorskip("torch")

M_SIZES = (1, 7, 16, 33, 130)
EPS = 1e-6


def gen():
    return torch.Generator().manual_seed(1234)


# --- checkpoint tensors per format (host torch tensors; NumPy is not needed) --------------

E4M3_NAN = (0x7F, 0xFF)


def e4m3_bytes(g, shape, lo=0, hi=256):
    b = torch.randint(lo, hi, shape, generator=g, dtype=torch.int64).to(torch.uint8)
    b[(b == E4M3_NAN[0]) | (b == E4M3_NAN[1])] = 0
    return b


def int4_words(g, shape):
    return torch.randint(-(2**31), 2**31, shape, generator=g, dtype=torch.int64).to(torch.int32)


def uniform(g, shape, lo, hi, dtype=torch.float32):
    return torch.empty(shape).uniform_(lo, hi, generator=g).to(dtype)


def byte_range(g, shape, lo, hi):
    return torch.randint(lo, hi, shape, generator=g, dtype=torch.int64).to(torch.uint8)


def checkpoint(fmt, n, k):
    """(format, pack_weight kwargs) of random but realistic tensors for an n × k weight."""
    g = gen()
    if fmt == "f16":
        return "f16", dict(weight=(0.1 * torch.randn(n, k, generator=g)).half())
    if fmt == "awq4":
        grp = 64
        return "awq4", dict(qweight=int4_words(g, (k, n // 8)), qzeros=int4_words(g, (k // grp, n // 8)),
                            scales=uniform(g, (k // grp, n), 0.002, 0.02, torch.float16))
    if fmt in ("gptq4", "gptq4_act"):
        grp = 32
        g_idx = torch.arange(k, dtype=torch.int32) // grp
        if fmt == "gptq4_act":
            g_idx = g_idx[torch.randperm(k, generator=g)].contiguous()
        return "gptq4", dict(qweight=int4_words(g, (k // 8, n)), qzeros=int4_words(g, (k // grp, n // 8)),
                             scales=uniform(g, (k // grp, n), 0.002, 0.02, torch.float16), g_idx=g_idx)
    if fmt == "gptq4_sym":
        return "gptq4", dict(qweight=int4_words(g, (k // 8, n)), scales=uniform(g, (k // 128, n), 0.002, 0.02, torch.float16))
    if fmt == "fp8b32":
        return "fp8b32", dict(weight=e4m3_bytes(g, (n, k)), scales=byte_range(g, ((n + 31) // 32, k // 32), 127 - 12, 127 - 4))
    if fmt == "fp8b128":
        return "fp8b128", dict(weight=e4m3_bytes(g, (n, k)),
                               weight_scale_inv=uniform(g, ((n + 127) // 128, (k + 127) // 128), 1e-3, 1e-2))
    if fmt == "fp8b128_channel":
        return "fp8b128", dict(weight=e4m3_bytes(g, (n, k)), weight_scale_inv=uniform(g, (n,), 1e-3, 1e-2))
    if fmt == "nvfp4":
        return "nvfp4", dict(weight=byte_range(g, (n, k // 2), 0, 256), weight_scale=e4m3_bytes(g, (n, k // 16), 0x28, 0x40),
                             weight_scale_2=0.02)
    if fmt == "mxfp4":
        return "mxfp4", dict(blocks=byte_range(g, (n, k // 2), 0, 256), scales=byte_range(g, (n, k // 32), 127 - 8, 127))
    raise AssertionError(fmt)


# (variant, N, K): odd N and K that are not powers of two wherever the format allows.
FORMATS = [
    ("f16", 258, 264),
    ("awq4", 136, 320),
    ("gptq4", 136, 256),
    ("gptq4_act", 136, 256),
    ("gptq4_sym", 130, 384),
    ("fp8b32", 98, 160),
    ("fp8b128", 302, 272),
    ("fp8b128_channel", 70, 144),
    ("nvfp4", 130, 224),
    ("mxfp4", 134, 192),
]
EPILOGUES = ("none", "bias", "residual", "silu_mul")
# Odd N (no silu_mul, which stacks gate and up) for the formats whose N is free.
ODD_N = [("f16", 257, 136), ("gptq4_sym", 131, 256), ("fp8b32", 97, 96), ("fp8b128", 129, 160), ("nvfp4", 129, 96),
         ("mxfp4", 127, 64)]


@pytest.fixture(scope="module")
def weights():
    """Every format's packed weight on GPU 0, its dequantised reference, and its kernels prepared."""
    out = {}
    specs = []
    for variant, n, k in FORMATS:
        fmt, tensors = checkpoint(variant, n, k)
        packed = onecat.pack_weight(fmt, device="cuda", **tensors)
        ref = torch.as_tensor(packed.dequantize()).to("cuda", torch.float64)
        out[variant] = (packed, ref)
        for epi in EPILOGUES:
            for out_dtype in ("float16", "float32"):
                specs.append(packed.spec(epi, out_dtype))
    onecat.prepare(specs, buckets=[1, 8, 16, 64, 256])  # every kernel these tests use, compiled in parallel
    return out


def rel_err(got, want):
    got, want = got.double(), want.double()
    return ((got - want).norm() / want.norm().clamp_min(1e-30)).item()


def tolerance(variant, out_dtype):
    # The C++ checker's normwise bounds (3e-3, int4 4e-3), with room for the fp16 rounding of the output.
    base = 4e-3 if variant.startswith(("awq4", "gptq4")) else 3e-3
    return base + (1e-3 if out_dtype == torch.float16 else 0)


def gemm_reference(x, w, epi, bias=None, residual=None):
    acc = x.double() @ w.T
    if epi == "bias":
        acc = acc + bias.double()
    elif epi == "residual":
        acc = acc + residual.double()
    elif epi == "silu_mul":
        half = w.shape[0] // 2
        gate, up = acc[..., :half], acc[..., half:]
        acc = gate * torch.sigmoid(gate) * up
    return acc


def run_gemm(variant, packed, w, m, epi, out_dtype, lead=()):
    k = packed.k
    n_out = packed.n // 2 if epi == "silu_mul" else packed.n
    x = (torch.rand(*lead, m, k, device="cuda") * 2 - 1).half()
    bias = (torch.rand(n_out, device="cuda") - 0.5).half() if epi == "bias" else None
    residual = (torch.rand(*lead, m, n_out, device="cuda") - 0.5).half() if epi == "residual" else None
    out = torch.full((*lead, m, n_out), float("nan"), dtype=out_dtype, device="cuda")
    y = onecat.gemm(x, packed, bias, epilogue=epi, residual=residual, out_dtype=out_dtype, out=out)
    assert y is out
    torch.cuda.synchronize()
    assert torch.isfinite(y).all(), f"{variant} epi={epi} M={m}: unwritten (NaN) outputs"
    want = gemm_reference(x, w, epi, bias, residual)
    err = rel_err(y, want)
    assert err <= tolerance(variant, out_dtype), f"{variant} epi={epi} M={m} {out_dtype}: error {err:.3g}"


@pytest.mark.parametrize("m", M_SIZES)
@pytest.mark.parametrize("variant", [f[0] for f in FORMATS])
def test_gemm_every_format_every_m(weights, variant, m):
    packed, w = weights[variant]
    run_gemm(variant, packed, w, m, "none", torch.float16)


@pytest.mark.parametrize("out_dtype", [torch.float16, torch.float32])
@pytest.mark.parametrize("epi", EPILOGUES)
@pytest.mark.parametrize("variant", [f[0] for f in FORMATS])
def test_gemm_epilogues_and_out_dtypes(weights, variant, epi, out_dtype):
    packed, w = weights[variant]
    for m in (7, 33):
        run_gemm(variant, packed, w, m, epi, out_dtype)


@pytest.mark.parametrize("variant, n, k", ODD_N)
def test_gemm_odd_n(weights, variant, n, k):
    fmt, tensors = checkpoint(variant, n, k)
    packed = onecat.pack_weight(fmt, device="cuda", **tensors)
    w = torch.as_tensor(packed.dequantize()).to("cuda", torch.float64)
    for m in (1, 7, 33):
        run_gemm(variant, packed, w, m, "bias", torch.float16)
        run_gemm(variant, packed, w, m, "residual", torch.float32)


@pytest.mark.parametrize("variant", [f[0] for f in FORMATS])
def test_gemm_norm_weight_fuses_the_rmsnorm(weights, variant):
    """norm_weight: y = (RMSNorm(x) · Wᵀ) against torch's norm (fp64, rounded to fp16 as the
    kernel rounds it) and product, at decode's token counts and a tile of several tokens; the
    norm's weight must be fp16 [K]."""
    packed, w = weights[variant]
    for m, epi in ((1, "none"), (2, "silu_mul" if packed.n % 2 == 0 else "none"), (5, "none")):
        x = ((torch.rand(m, packed.k, device="cuda") * 2 - 1) * 6).half()
        g = (torch.rand(packed.k, device="cuda") + 0.5).half()
        eps = 1e-5
        xd = x.double()
        normed = (xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + eps) * g.double()).half()
        y = onecat.gemm(x, packed, epilogue=epi, norm_weight=g, eps=eps)
        torch.cuda.synchronize()
        err = rel_err(y, gemm_reference(normed, w, epi))
        assert err <= tolerance(variant, torch.float16), f"{variant} M={m} epi={epi}: error {err:.3g}"
    with pytest.raises(ValueError, match="norm_weight"):
        onecat.gemm(x, packed, norm_weight=torch.ones(packed.k + 8, device="cuda").half())
    with pytest.raises(TypeError, match="norm_weight"):
        onecat.gemm(x, packed, norm_weight=torch.ones(packed.k, device="cuda"))
    with pytest.raises(ValueError, match="eps"):
        onecat.gemm(x, packed, norm_weight=g, eps=0.0)


def test_gemm_leading_dims_and_default_output(weights):
    packed, w = weights["awq4"]
    x = (torch.rand(2, 3, packed.k, device="cuda") - 0.5).half()
    y = onecat.gemm(x, packed)
    assert y.shape == (2, 3, packed.n) and y.dtype == torch.float16
    assert rel_err(y, x.double() @ w.T) <= tolerance("awq4", torch.float16)
    y32 = onecat.gemm(x, packed, out_dtype=torch.float32)
    assert y32.dtype == torch.float32


def test_gemm_rejects_non_contiguous_and_offsets(weights):
    packed, _ = weights["f16"]
    x = torch.rand(8, 2 * packed.k, device="cuda").half()
    with pytest.raises(ValueError, match="x must be contiguous"):
        onecat.gemm(x[:, ::2], packed)
    with pytest.raises(ValueError, match="x must be contiguous"):
        onecat.gemm(torch.rand(packed.k, 8, device="cuda").half().t(), packed)
    flat = torch.rand(8 * packed.k + 1, device="cuda").half()
    with pytest.raises(ValueError, match="aligned"):
        onecat.gemm(flat[1:].view(8, packed.k), packed)
    with pytest.raises(TypeError, match="x must be float16, got float32"):
        onecat.gemm(torch.rand(4, packed.k, device="cuda"), packed)
    with pytest.raises(ValueError, match="x must be on a CUDA device"):
        onecat.gemm(torch.rand(4, packed.k).half(), packed)


def test_gemm_on_a_side_stream(weights):
    packed, w = weights["nvfp4"]
    x = (torch.rand(33, packed.k, device="cuda") - 0.5).half()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        y = onecat.gemm(x, packed)
        z = y.float() * 2  # queued behind the gemm on s
    s.synchronize()
    assert rel_err(y, x.double() @ w.T) <= tolerance("nvfp4", torch.float16)
    assert torch.equal(z, y.float() * 2)


@pytest.mark.parametrize("m", [1, 33])
def test_gemm_graph_capture(weights, m):
    packed, _ = weights["gptq4_act"]
    x = (torch.rand(m, packed.k, device="cuda") - 0.5).half()
    bias = (torch.rand(packed.n, device="cuda") - 0.5).half()
    onecat.gemm(x, packed, bias)  # warm-up: kernels compiled and loaded outside the capture
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = onecat.gemm(x, packed, bias)
    x.copy_((torch.rand(m, packed.k, device="cuda") - 0.5).half())
    g.replay()
    torch.cuda.synchronize()
    eager = onecat.gemm(x, packed, bias)
    torch.cuda.synchronize()
    assert torch.equal(y, eager)


def test_compiled_kernel_call(weights):
    packed, w = weights["mxfp4"]
    arch = onecat.info()["gpus"][0]["arch"]
    spec = packed.spec("none", "float32")
    configs = onecat._C.candidate_configs(spec)
    k = onecat.compile(spec, config=configs[-1], arch=arch)
    x = (torch.rand(16, packed.k, device="cuda") - 0.5).half()
    y = k(x, packed)
    torch.cuda.synchronize()
    assert y.dtype == torch.float32
    assert rel_err(y, x.double() @ w.T) <= tolerance("mxfp4", torch.float32)
    other, _ = weights["f16"]
    with pytest.raises(ValueError, match="this kernel is"):
        k(torch.zeros(4, other.k, dtype=torch.float16, device="cuda"), other)


@pytest.mark.parametrize("variant", ["f16", "awq4", "nvfp4"])
def test_gemm_cublas_strategy(weights, variant):
    """strategy=cublas from Python: every epilogue (silu_mul over two 512-token product chunks),
    an fp16 residual added in place (out is the residual), and a CUDA graph of it."""
    packed, w = weights[variant]
    arch = onecat.info()["gpus"][0]["arch"]
    kernels = {
        epi: onecat.compile(packed.spec(epi, "float16"), config="strategy=cublas", arch=arch) for epi in EPILOGUES
    }
    for epi, m in (("none", 40), ("bias", 17), ("silu_mul", 600), ("residual", 33)):
        n_out = packed.n // 2 if epi == "silu_mul" else packed.n
        x = (torch.rand(m, packed.k, device="cuda") * 2 - 1).half()
        bias = (torch.rand(n_out, device="cuda") - 0.5).half() if epi == "bias" else None
        residual = (torch.rand(m, n_out, device="cuda") - 0.5).half() if epi == "residual" else None
        y = kernels[epi](x, packed, bias, residual=residual)
        torch.cuda.synchronize()
        err = rel_err(y, gemm_reference(x, w, epi, bias, residual))
        assert err <= tolerance(variant, torch.float16), f"{variant} epi={epi} M={m}: error {err:.3g}"
    m = 33
    x = (torch.rand(m, packed.k, device="cuda") * 2 - 1).half()
    acc = (torch.rand(m, packed.n, device="cuda") - 0.5).half()
    want = gemm_reference(x, w, "residual", residual=acc)
    kernels["residual"](x, packed, residual=acc, out=acc)
    torch.cuda.synchronize()
    assert rel_err(acc, want) <= tolerance(variant, torch.float16), f"{variant}: in-place residual"
    x = (torch.rand(600, packed.k, device="cuda") * 2 - 1).half()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        captured = kernels["silu_mul"](x, packed)
    x.copy_((torch.rand(600, packed.k, device="cuda") * 2 - 1).half())
    g.replay()
    torch.cuda.synchronize()
    assert rel_err(captured, gemm_reference(x, w, "silu_mul")) <= tolerance(variant, torch.float16), f"{variant}: graph"


# --- rmsnorm -------------------------------------------------------------------------------


def rmsnorm_reference(x, w, residual):
    s = x
    if residual is not None:
        s = (x.float() + residual.float()).half()
    sd = s.double()
    out = sd * torch.rsqrt(sd.pow(2).mean(-1, keepdim=True) + EPS) * w.double()
    return out, s


def max_rel(got, want):
    return ((got.double() - want).abs() / (want.abs() + 2.0**-14)).max().item()


@pytest.mark.parametrize("with_residual", [False, True])
@pytest.mark.parametrize("hidden", [64, 1000, 2047, 4096, 5120])
@pytest.mark.parametrize("rows", [1, 7, 33, 130])
def test_rmsnorm(hidden, rows, with_residual):
    torch.manual_seed(hidden * 1000 + rows)
    x = (torch.rand(rows, hidden, device="cuda") * 6 - 3).half()
    w = (torch.rand(hidden, device="cuda") * 3 - 1.5).half()
    residual = (torch.rand(rows, hidden, device="cuda") * 6 - 3).half() if with_residual else None
    want, s = rmsnorm_reference(x, w, residual)
    out = torch.full_like(x, float("nan"))
    y = onecat.rmsnorm(x, w, EPS, residual, out=out)
    torch.cuda.synchronize()
    assert y is out and torch.isfinite(y).all()
    assert max_rel(y, want) <= 4.0 / 1024
    if with_residual:
        assert torch.equal(residual, s), "residual must hold fp16(x + residual)"


def test_rmsnorm_leading_dims_default_output_and_rejections():
    x = torch.rand(2, 5, 512, device="cuda").half()
    w = torch.rand(512, device="cuda").half()
    y = onecat.rmsnorm(x, w)
    assert y.shape == x.shape and y.dtype == torch.float16
    want, _ = rmsnorm_reference(x, w, None)
    assert max_rel(y, want) <= 4.0 / 1024
    with pytest.raises(ValueError, match="x must be contiguous"):
        onecat.rmsnorm(torch.rand(512, 8, device="cuda").half().t(), torch.rand(8, device="cuda").half())
    with pytest.raises(ValueError, match="x must be contiguous"):
        onecat.rmsnorm(torch.rand(4, 1024, device="cuda").half()[:, ::2], w)
    with pytest.raises(TypeError, match="weight must be float16"):
        onecat.rmsnorm(x, w.float())


def test_rmsnorm_on_a_side_stream_and_graph():
    x = (torch.rand(33, 4096, device="cuda") - 0.5).half()
    w = torch.rand(4096, device="cuda").half()
    res = (torch.rand(33, 4096, device="cuda") - 0.5).half()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        y = onecat.rmsnorm(x, w, EPS)
    s.synchronize()
    want, _ = rmsnorm_reference(x, w, None)
    assert max_rel(y, want) <= 4.0 / 1024

    onecat.rmsnorm(x, w, EPS, res.clone())  # warm-up outside the capture
    torch.cuda.synchronize()
    r = res.clone()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        yg = onecat.rmsnorm(x, w, EPS, r)
    r.copy_(res)
    g.replay()
    torch.cuda.synchronize()
    r2 = res.clone()
    eager = onecat.rmsnorm(x, w, EPS, r2)
    torch.cuda.synchronize()
    assert torch.equal(yg, eager) and torch.equal(r, r2)


def test_tune_and_dispatch_tuned_config(tmp_path):
    before = onecat.cache_dir()
    onecat.set_cache_dir(tmp_path / "cache")
    try:
        spec = "rmsnorm:hidden=2048,dtype=f16,residual=0"
        records = onecat.tune(spec, buckets=[8])
        assert len(records) == 1 and records[0]["bucket"] == 8
        assert any(c["status"] == "ok" for c in records[0]["candidates"])
        again = onecat.tune(spec, buckets=[8])
        assert again[0]["config"] == records[0]["config"]
        entries = onecat.prepare(spec, [8])
        assert entries[0]["tuned"] and entries[0]["config"] == records[0]["config"]
        x = torch.rand(5, 2048, device="cuda").half()
        w = torch.rand(2048, device="cuda").half()
        want, _ = rmsnorm_reference(x, w, None)
        assert max_rel(onecat.rmsnorm(x, w, EPS), want) <= 4.0 / 1024
        report = onecat.cache.export(tmp_path / "out.sqlite")
        assert report["tunings"] == 1
    finally:
        onecat.set_cache_dir(before)
