"""rmsnorm: RMS normalisation over the last dimension, with an optional fused residual add."""

from __future__ import annotations

from numbers import Real
from typing import Any

from .. import _C
from .._arrays import Array, Stream, array_shape, new_like, stream_handle

FAMILY = "rmsnorm"
_OP = "onecat.rmsnorm"


def rmsnorm_spec(hidden: int, residual: bool = False) -> str:
    """The canonical spec of the kernel for rows of ``hidden`` fp16 values."""
    return _C.rmsnorm_spec(int(hidden), bool(residual))


def rmsnorm(
    x: Array,
    weight: Array,
    eps: float = 1e-6,
    residual: Array | None = None,
    *,
    out: Array | None = None,
    stream: Stream = None,
    _kernel: Any = None,
) -> Array:
    """``out = x / sqrt(mean(x², -1) + eps) · weight`` over the last dimension, in fp16.

    With ``residual``, the kernel first forms ``s = fp16(x + residual)``, writes it back
    into ``residual`` **in place** and normalises ``s`` (vLLM's fused add-RMSNorm).

    Args:
        x: fp16 CUDA array ``[..., hidden]``, contiguous.
        weight: fp16 ``[hidden]`` on the same device.
        eps: added to the mean square (a float ≥ 0).
        residual: None, or fp16 of x's shape (updated in place).
        out: where to write (fp16, x's shape); default: a new array of x's library.
        stream: the CUDA stream; default: the current stream of x's library (torch/CuPy).

    Returns:
        ``out``.

    Raises:
        TypeError: an argument is not an array, or of the wrong dtype.
        ValueError: wrong device, shape, layout (non-contiguous) or alignment.
        RuntimeError: no GPU (or a CUDA error).
    """
    if isinstance(eps, bool) or not isinstance(eps, Real):
        raise TypeError(f"{_OP}: eps must be a float, got {type(eps).__name__}")
    if not eps >= 0:
        raise ValueError(f"{_OP}: eps must be ≥ 0, got {eps}")
    shape = array_shape(x, _OP, "x")
    if out is None:
        out = new_like(x, shape, "float16", _OP)
    kernel_spec, config = (_kernel.spec, _kernel.config) if _kernel is not None else ("", "")
    _C.rmsnorm(out, x, weight, float(eps), residual, stream_handle(stream, x, _OP), kernel_spec, config)
    return out


def call_kernel(kernel: Any, *args: Any, **kwargs: Any) -> Array:
    """``kernel(x, weight, eps, residual=None, *, out=None, stream=None)`` with this kernel's config."""
    return rmsnorm(*args, _kernel=kernel, **kwargs)


__all__ = ["rmsnorm", "rmsnorm_spec"]
