"""Streams, output allocation, dtype names and argument checks for the ops (no copies, no syncs)."""

from __future__ import annotations

import sys
from numbers import Integral
from typing import Any, Sequence

#: Anything onecat reads as an array: a torch tensor, or an object with
#: ``__cuda_array_interface__`` or ``__dlpack__`` (CuPy, Numba, JAX, ...).
Array = Any
#: A CUDA stream: an int (``CUstream`` handle, 0 = legacy default stream), a
#: ``torch.cuda.Stream`` or a ``cupy.cuda.Stream``.
Stream = Any

_DTYPE_NAMES = {
    "f16": "float16",
    "float16": "float16",
    "half": "float16",
    "f32": "float32",
    "float32": "float32",
    "float": "float32",
}


def _is_torch(x: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _is_cupy(x: Any) -> bool:
    return type(x).__module__.split(".")[0] == "cupy"


#: dtype objects (torch, NumPy) already named: an op call finds them by identity, no text.
_SEEN_DTYPES: dict[Any, str] = {}


def dtype_name(dtype: Any, op: str, arg: str) -> str:
    """'float16' or 'float32' from a string, a torch dtype or a NumPy dtype."""
    try:
        name = _DTYPE_NAMES.get(dtype) if isinstance(dtype, str) else _SEEN_DTYPES.get(dtype)
    except TypeError:  # an unhashable dtype-like object
        name = None
    if name is not None:
        return name
    text = str(dtype)
    for prefix in ("torch.", "numpy.", "<class 'numpy.", "dtype('"):
        if text.startswith(prefix):
            text = text[len(prefix) :]
    text = text.rstrip("')>")
    name = _DTYPE_NAMES.get(text)
    if name is None:
        raise ValueError(f"{op}: {arg} must be float16 or float32, got {dtype!r}")
    if not isinstance(dtype, str):
        try:
            _SEEN_DTYPES[dtype] = name
        except TypeError:
            pass
    return name


_RAW_STREAM: list[Any] = []


def _torch_raw_stream() -> Any:
    """torch's ``_cuda_getCurrentRawStream`` (None where this torch has none), looked up once."""
    if not _RAW_STREAM:
        _RAW_STREAM.append(getattr(sys.modules["torch"]._C, "_cuda_getCurrentRawStream", None))
    return _RAW_STREAM[0]


def stream_handle(stream: Stream, like: Array, op: str) -> int:
    """The CUstream to queue on: the explicit one, else the current stream of the array's library.

    For torch that is ``torch.cuda.current_stream(device)`` (so ``with torch.cuda.stream(s)``
    and CUDA graph capture work), for CuPy ``cupy.cuda.get_current_stream()``; otherwise
    the legacy default stream 0.
    """
    if stream is None:
        if _is_torch(like):
            if not like.is_cuda:
                return 0  # no stream to find: the argument checks reject the array, naming it
            raw = _torch_raw_stream()
            if raw is not None:  # the handle itself, without making a Stream object (what inductor calls)
                return raw(like.get_device())
            return int(sys.modules["torch"].cuda.current_stream(like.device).cuda_stream)
        if _is_cupy(like):
            cupy = sys.modules["cupy"]
            return int(cupy.cuda.get_current_stream().ptr)
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
            return int(torch.cuda.current_stream().cuda_stream)
        return 0
    if isinstance(stream, bool):
        raise TypeError(f"{op}: stream must be an int handle, a torch.cuda.Stream or a cupy Stream, got bool")
    if isinstance(stream, int):
        return stream
    for attr in ("cuda_stream", "ptr"):
        if hasattr(stream, attr):
            return int(getattr(stream, attr))
    raise TypeError(f"{op}: stream must be an int handle, a torch.cuda.Stream or a cupy Stream, got {type(stream).__name__}")


def new_like(like: Array, shape: Sequence[int], dtype: str, op: str) -> Array:
    """An uninitialised output array of the same library and device as `like`."""
    if _is_torch(like):
        torch = sys.modules["torch"]
        return torch.empty(tuple(shape), dtype=getattr(torch, dtype), device=like.device)
    if _is_cupy(like):
        cupy = sys.modules["cupy"]
        with like.device:
            return cupy.empty(tuple(shape), dtype=dtype)
    raise TypeError(
        f"{op}: cannot allocate the output for a {type(like).__name__} input (only for torch and CuPy); pass out="
    )


def array_shape(x: Array, op: str, arg: str) -> tuple[int, ...]:
    """The shape of any array onecat accepts (to size outputs before the C++ checks)."""
    shape = getattr(x, "shape", None)
    if isinstance(shape, tuple) and not isinstance(x, (list, tuple)):
        return shape  # torch.Size and NumPy/CuPy shapes: tuples of ints already
    if shape is None or isinstance(x, (list, tuple)):
        from . import _C

        shape = _C.shape_of(x, op, arg)
    return tuple(int(d) for d in shape)


def is_host(x: Any) -> bool:
    """A host array: NumPy (or any buffer) or a CPU torch tensor; CUDA arrays are not."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        return not x.is_cuda
    if hasattr(x, "__cuda_array_interface__"):
        return False
    if hasattr(x, "__dlpack_device__"):
        return x.__dlpack_device__()[0] == 1  # kDLCPU
    return True


def check_int(value: Any, op: str, name: str, minimum: int = 0) -> int:
    """value as an int: TypeError unless it is one (bool is not), ValueError below minimum."""
    if type(value) is int and value >= minimum:  # the common case, without the Integral ABC's check
        return value
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{op}: {name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{op}: {name} must be ≥ {minimum}, got {value}")
    return int(value)
