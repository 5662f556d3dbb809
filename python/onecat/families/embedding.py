"""embedding: token ids → fp16 rows of an embedding table (docs/embedding.md)."""

from __future__ import annotations

from numbers import Integral
from typing import Any

from .. import _C
from .._arrays import Array, Stream, array_shape, new_like, stream_handle

FAMILY = "embedding"
_OP = "onecat.embedding"


def embedding_spec(vocab: int, hidden: int) -> str:
    """The canonical spec of the kernel for a table of ``vocab`` rows of ``hidden`` fp16 values."""
    return _C.embedding_spec(int(vocab), int(hidden))


def embedding(
    ids: Array,
    table: Array,
    *,
    vocab_start: int = 0,
    out: Array | None = None,
    stream: Stream = None,
    _kernel: Any = None,
) -> Array:
    """``out[t] = table[ids[t] − vocab_start]``; an id outside the table's rows gives a zero row.

    Args:
        ids: int32 CUDA array ``[tokens]``, contiguous.
        table: float16 ``[vocab, hidden]`` on the same device (a rank's slice of the vocabulary
            under tensor parallelism, its first id ``vocab_start``).
        vocab_start: the id of the table's first row (an int ≥ 0).
        out: where to write (float16 ``[tokens, hidden]``); default: a new array of table's library.
        stream: the CUDA stream; default: the current stream of table's library (torch/CuPy).

    Returns:
        ``out``.

    Raises:
        TypeError: an argument is not an array, or of the wrong dtype.
        ValueError: wrong device, shape, layout (non-contiguous) or alignment.
        RuntimeError: no GPU (or a CUDA error).
    """
    if isinstance(vocab_start, bool) or not isinstance(vocab_start, Integral):
        raise TypeError(f"{_OP}: vocab_start must be an int, got {type(vocab_start).__name__}")
    if out is None:
        tokens = array_shape(ids, _OP, "ids")[:1]
        hidden = array_shape(table, _OP, "table")[1:]
        out = new_like(table, tokens + hidden, "float16", _OP)
    kernel_spec, config = (_kernel.spec, _kernel.config) if _kernel is not None else ("", "")
    _C.embedding(out, table, ids, int(vocab_start), stream_handle(stream, table, _OP), kernel_spec, config)
    return out


def call_kernel(kernel: Any, *args: Any, **kwargs: Any) -> Array:
    """``kernel(ids, table, *, vocab_start=0, out=None, stream=None)`` with this kernel's config."""
    return embedding(*args, _kernel=kernel, **kwargs)


__all__ = ["embedding", "embedding_spec"]
