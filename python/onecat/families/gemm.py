"""gemm: y = epilogue(x · Wᵀ) with W packed once from a checkpoint's (quantised) tensors."""

from __future__ import annotations

from typing import Any

from .. import _C
from .._arrays import Array, Stream, array_shape, dtype_name, new_like, stream_handle

FAMILY = "gemm"
_OP = "onecat.gemm"
_PACK = "onecat.pack_weight"

#: Checkpoint tensors each format takes: (required, optional), named as in the checkpoints.
FORMATS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "f16": (("weight",), ()),
    "awq4": (("qweight", "qzeros", "scales"), ()),
    "gptq4": (("qweight", "scales"), ("qzeros", "g_idx")),
    "fp8b32": (("weight", "scales"), ()),
    "fp8b128": (("weight", "weight_scale_inv"), ()),
    "nvfp4": (("weight", "weight_scale", "weight_scale_2"), ()),
    "mxfp4": (("blocks", "scales"), ()),
}
EPILOGUES = ("none", "bias", "residual", "silu_mul")


def _device_ordinal(device: Any, op: str) -> int:
    """-1 for the host, else a CUDA ordinal, from "auto", None, an int, "cuda[:n]" or a torch.device."""
    if device is None:
        return -1
    if isinstance(device, str) and device == "auto":
        return 0 if _C.gpu_unavailable_reason() == "" else -1
    if isinstance(device, bool):
        raise TypeError(f"{op}: device must be None, 'auto', an int, 'cuda[:n]' or a torch.device, got bool")
    if isinstance(device, int):
        if device < 0:
            raise ValueError(f"{op}: device must be ≥ 0, got {device}")
        return device
    text = str(device)
    if text == "cuda":
        return 0
    if text.startswith("cuda:") and text[5:].isdigit():
        return int(text[5:])
    if text == "cpu":
        return -1
    raise ValueError(f"{op}: device must be None, 'auto', an int, 'cuda[:n]' or a torch.device, got {device!r}")


class PackedWeight:
    """A weight in the kernel layout of its format (docs/gemm.md), made by :func:`pack_weight`.

    It keeps the packed bytes on the host (for :meth:`dequantize`) and, once uploaded
    (:meth:`cuda`, or at creation when a GPU is present), one copy on a GPU that every
    ``onecat.gemm`` call reads.
    """

    def __init__(self, packed: Any) -> None:
        self._w = packed

    @property
    def fmt(self) -> str:
        """The format: f16, awq4, gptq4, fp8b32, fp8b128, nvfp4 or mxfp4."""
        return self._w.fmt

    @property
    def n(self) -> int:
        """Weight rows (out features; for ``epilogue="silu_mul"`` gate and up stacked)."""
        return self._w.n

    @property
    def k(self) -> int:
        """In features: x's last dimension."""
        return self._w.k

    @property
    def group(self) -> int:
        """Block length along K of the format's scales (0: none, or per-channel fp8b128)."""
        return self._w.group

    @property
    def act_order(self) -> bool:
        """gptq4 desc_act: the kernel reads x through the K permutation."""
        return self._w.act_order

    @property
    def global_scale(self) -> float:
        """nvfp4's per-tensor scale (1.0 for the other formats)."""
        return self._w.global_scale

    @property
    def nbytes(self) -> int:
        """Bytes of packed weights, scales and zero points."""
        return self._w.nbytes

    @property
    def device(self) -> int | None:
        """The CUDA ordinal holding the weight, or None while it is only on the host."""
        return self._w.device

    def cuda(self, device: Any = None) -> "PackedWeight":
        """Uploads the weight to a GPU (default: GPU 0) once; returns self."""
        self._w.to_device(-1 if device is None else _device_ordinal(device, "PackedWeight.cuda"))
        return self

    to_device = cuda

    def spec(self, epilogue: str = "none", out_dtype: Any = "float16") -> str:
        """The canonical gemm spec this weight runs with ``epilogue`` and ``out_dtype``."""
        if epilogue not in EPILOGUES:
            raise ValueError(f"PackedWeight.spec: epilogue must be one of {', '.join(EPILOGUES)}, got {epilogue!r}")
        return self._w.spec(epilogue, dtype_name(out_dtype, "PackedWeight.spec", "out_dtype") == "float32")

    def dequantize(self) -> Any:
        """W as float32 [n, k] in the checkpoint's column order, decoded on the CPU.

        A NumPy array when NumPy is installed, else a torch CPU tensor.
        ``x.double() @ torch.as_tensor(w.dequantize()).T`` is the reference of ``gemm``.
        """
        raw = bytearray(self._w.dequantize())
        try:
            import numpy
        except ImportError:
            import torch

            return torch.frombuffer(raw, dtype=torch.float32).reshape(self.n, self.k)
        return numpy.frombuffer(raw, dtype=numpy.float32).reshape(self.n, self.k)

    def __repr__(self) -> str:
        where = "host" if self.device is None else f"cuda:{self.device}"
        extra = ", act_order" if self.act_order else ""
        return f"onecat.PackedWeight(fmt={self.fmt!r}, n={self.n}, k={self.k}, group={self.group}{extra}, on {where})"


def pack_weight(fmt: str, *, device: Any = "auto", **tensors: Array) -> PackedWeight:
    """Packs a layer's checkpoint tensors into the kernel layout of ``fmt`` (on the host).

    Tensors are host arrays (torch CPU tensors, NumPy arrays), contiguous, named as in the
    checkpoint (docs/gemm.md, "Checkpoint layouts")::

        f16      weight [N, K] float16
        awq4     qweight [K, N/8] int32, qzeros [K/G, N/8] int32, scales [K/G, N] float16
        gptq4    qweight [K/8, N] int32, scales [K/G, N] float16, qzeros=None (symmetric),
                 g_idx=None ([K] int32; a permuted g_idx is act-order)
        fp8b32   weight [N, K] E4M3 (uint8/float8_e4m3fn), scales [ceil(N/32), K/32] UE8M0 bytes or float32
        fp8b128  weight [N, K] E4M3, weight_scale_inv [ceil(N/128), ceil(K/128)] or [N] float32
        nvfp4    weight [N, K/2] uint8, weight_scale [N, K/16] E4M3, weight_scale_2 float
        mxfp4    blocks [N, K/2] or [N, K/32, 16] uint8, scales [N, K/32] UE8M0

    Args:
        fmt: the format name.
        device: where to upload: ``"auto"`` (GPU 0 when there is one, else stay on the
            host), None (host only; call :meth:`PackedWeight.cuda` later), an ordinal,
            ``"cuda:n"`` or a ``torch.device``.

    Raises:
        TypeError: a missing or unknown tensor name, or a tensor of the wrong dtype.
        ValueError: an unknown format, a wrong shape or a value the format cannot hold.
    """
    if not isinstance(fmt, str):
        raise TypeError(f"{_PACK}: fmt must be a str, got {type(fmt).__name__}")
    if fmt not in FORMATS:
        raise ValueError(f"{_PACK}: unknown format '{fmt}' (known: {', '.join(FORMATS)})")
    required, optional = FORMATS[fmt]
    missing = [name for name in required if name not in tensors]
    unknown = [name for name in tensors if name not in required and name not in optional]
    if missing or unknown:
        wanted = ", ".join(required) + (" [, " + ", ".join(optional) + "]" if optional else "")
        problem = f"missing {', '.join(missing)}" if missing else f"unexpected {', '.join(unknown)}"
        raise TypeError(f"{_PACK}: {fmt} takes {wanted}; {problem}")
    ordinal = _device_ordinal(device, _PACK)
    pack = getattr(_C, f"pack_{fmt}")
    args = {name: tensors.get(name) for name in required + optional}
    return PackedWeight(pack(**args, device=ordinal))


def gemm(
    x: Array,
    packed: PackedWeight,
    bias: Array | None = None,
    *,
    epilogue: str | None = None,
    residual: Array | None = None,
    out_dtype: Any = "float16",
    out: Array | None = None,
    stream: Stream = None,
    norm_weight: Array | None = None,
    eps: float = 1e-6,
    _kernel: Any = None,
) -> Array:
    """``y = epilogue(x · Wᵀ)``, or with ``norm_weight`` ``y = epilogue(RMSNorm(x) · Wᵀ)``: the
    kernel tuned for x's M bucket (the default when untuned).

    Args:
        x: fp16 CUDA array ``[..., K]``, contiguous, on the weight's GPU (M = its rows).
        packed: the weight, uploaded (see :func:`pack_weight`).
        bias: fp16 ``[N]``; implies ``epilogue="bias"``.
        epilogue: ``"none"``, ``"bias"`` (+ bias[n]), ``"residual"`` (+ residual[m, n]) or
            ``"silu_mul"`` (W = [gate; up], y = silu(x·gateᵀ) · (x·upᵀ), N/2 columns);
            default from which of bias/residual is given.
        residual: fp16 of the output's shape; implies ``epilogue="residual"``.
        out_dtype: ``float16`` (default) or ``float32`` (string, torch or NumPy dtype).
        out: where to write; default: a new array of x's library.
        stream: the CUDA stream; default: the current stream of x's library.
        norm_weight: fp16 ``[K]``: x is normed first, ``x / sqrt(mean(x²) + eps) · norm_weight``
            rounded to fp16, inside the gemm (spec ``norm=rms``, strategy gemv: a decode step's
            norm without its own launch).
        eps: the norm's epsilon (with ``norm_weight``).

    Returns:
        ``out``, shape ``[..., N]`` (``[..., N/2]`` for silu_mul).

    Raises:
        TypeError: an argument is not an array, or of the wrong dtype.
        ValueError: wrong device, shape, layout or epilogue, or the weight is not on a GPU.
        RuntimeError: no GPU (or a CUDA error).
    """
    if not isinstance(packed, PackedWeight):
        raise TypeError(f"{_OP}: packed must be an onecat.PackedWeight (from onecat.pack_weight), got {type(packed).__name__}")
    if epilogue is None:
        if bias is not None and residual is not None:
            raise ValueError(f"{_OP}: give bias or residual, not both (one epilogue per kernel)")
        epilogue = "bias" if bias is not None else "residual" if residual is not None else "none"
    if not isinstance(epilogue, str):
        raise TypeError(f"{_OP}: epilogue must be a str, got {type(epilogue).__name__}")
    if epilogue not in EPILOGUES:
        raise ValueError(f"{_OP}: epilogue must be one of {', '.join(EPILOGUES)}, got {epilogue!r}")
    out_name = dtype_name(out_dtype, _OP, "out_dtype")
    shape = array_shape(x, _OP, "x")
    if out is None:
        n_out = packed.n // 2 if epilogue == "silu_mul" else packed.n
        out = new_like(x, shape[:-1] + (n_out,) if shape else (n_out,), out_name, _OP)
    kernel_spec, config = (_kernel.spec, _kernel.config) if _kernel is not None else ("", "")
    _C.gemm(out, x, packed._w, bias, residual, epilogue, out_name == "float32", stream_handle(stream, x, _OP), kernel_spec, config,
            norm_weight, float(eps))
    return out


def call_kernel(kernel: Any, x: Array, packed: PackedWeight, bias: Array | None = None, **kwargs: Any) -> Array:
    """``kernel(x, packed, bias=None, *, residual=None, out=None, stream=None)``: epilogue and
    out dtype come from the kernel's spec."""
    spec = dict(field.split("=") for field in kernel.spec.split(":", 1)[1].split(","))
    return gemm(x, packed, bias, epilogue=spec["epi"], out_dtype="float32" if spec["out"] == "f32" else "float16",
                _kernel=kernel, **kwargs)


__all__ = ["PackedWeight", "gemm", "pack_weight"]
