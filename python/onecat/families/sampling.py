"""sampling: rows of fp32 logits → next tokens, their logprobs and the top-n logprobs (docs/sampling.md).

``onecat.sample`` runs vLLM's sampling per row (temperature, top_k, top_p, min_p, repetition /
presence / frequency penalties over the row's history, a seeded Philox draw) with every
setting either one value for all rows or one value per row. ``onecat.argmax`` is greedy
decoding at bandwidth. Both take a CUDA array (torch, CuPy, ...) and run the kernel tuned for
its shape, or a host array (NumPy, a CPU torch tensor) and run the CPU reference
(runtime/cpu/sampling), which the GPU matches token for token except where a draw lies within
fp32 rounding of a boundary.
"""

from __future__ import annotations

import sys
from numbers import Integral, Real
from typing import Any, NamedTuple, Sequence

from .. import _C
from .._arrays import Array, Stream, array_shape, is_host, new_like, stream_handle

FAMILY = "sampling"
_SAMPLE = "onecat.sample"
_ARGMAX = "onecat.argmax"
_MAX_LOGPROBS = 20
#: sizeof(sampling::RowParams), codegen/sampling/row_params.h.
_ROW_PARAMS_BYTES = 56


class Sampled(NamedTuple):
    """What :func:`sample` returns, arrays of the logits' library and device."""

    #: int32 ``[rows]``: the sampled token of each row.
    tokens: Array
    #: float32 ``[rows]``: each sampled token's logprob under the raw logits (log_softmax).
    logprobs: Array
    #: int32 ``[rows, n]``: the n most likely ids of each row (raw logits), best first; ``-1``
    #: past a row's own ``logprobs``. None when no row asks for logprobs.
    top_ids: Array | None
    #: float32 ``[rows, n]``: their logprobs; ``-inf`` past a row's own count. None as top_ids.
    top_logprobs: Array | None


def sampling_spec(vocab: int, *, op: str = "sample", logprobs: int = 0) -> str:
    """The canonical spec of the sample (``logprobs``: the most top logprobs a row may ask for) or argmax kernel."""
    return _C.sampling_spec(op, int(vocab), int(logprobs))


def _new_host(like: Any, shape: tuple[int, ...], dtype: str) -> Any:
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(like, torch.Tensor):
        return torch.empty(shape, dtype=getattr(torch, dtype))
    import numpy

    return numpy.empty(shape, dtype=dtype)


def _per_row(value: Any, rows: int, name: str, kind: type, minimum: Any = None) -> list[Any]:
    """One value per row from a scalar or a sequence of `rows` values."""
    if hasattr(value, "tolist"):  # a NumPy/torch array or scalar
        value = value.tolist()
    values = list(value) if isinstance(value, (list, tuple)) else None
    if values is None:
        values = [value] * rows
    elif len(values) != rows:
        raise ValueError(f"{_SAMPLE}: {name} must be one value or one per row ({rows}), got {len(values)}")
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, kind):
            raise TypeError(f"{_SAMPLE}: {name} must be {'an int' if kind is Integral else 'a number'}, got {type(v).__name__}")
        if minimum is not None and v < minimum:
            raise ValueError(f"{_SAMPLE}: {name} must be ≥ {minimum}, got {v}")
        out.append(int(v) if kind is Integral else float(v))
    return out


def _histories(value: Any, rows: int, name: str) -> list[list[int]] | None:
    if value is None:
        return None
    if not isinstance(value, (list, tuple)) or len(value) != rows:
        raise ValueError(f"{_SAMPLE}: {name} must be a list of one id list per row ({rows})")
    out = []
    for ids in value:
        ids = ids.tolist() if hasattr(ids, "tolist") else ids
        if not isinstance(ids, (list, tuple)):
            raise TypeError(f"{_SAMPLE}: {name} must hold lists of int ids, got {type(ids).__name__}")
        for i in ids:
            if isinstance(i, bool) or not isinstance(i, Integral):
                raise TypeError(f"{_SAMPLE}: {name} must hold int ids, got {type(i).__name__}")
        out.append([int(i) for i in ids])
    return out


def _upload(data: bytes, shape: tuple[int, ...], dtype: str, like: Array, stream: int, explicit: bool) -> Array:
    """`data` as a new device array of like's library, ready before a launch on `stream`."""
    if not data:
        return new_like(like, shape, dtype, _SAMPLE)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(like, torch.Tensor):
        host = torch.frombuffer(bytearray(data), dtype=getattr(torch, dtype)).reshape(shape)
        out = host.to(like.device)  # a synchronous copy: done before any stream reads it
        if explicit:  # the caching allocator must not hand the memory out before `stream` is done with it
            out.record_stream(torch.cuda.ExternalStream(stream, device=like.device))
        return out
    cupy = sys.modules.get("cupy")
    if cupy is not None and type(like).__module__.split(".")[0] == "cupy":
        import numpy

        with like.device:
            out = cupy.asarray(numpy.frombuffer(data, dtype=dtype).reshape(shape))
            cupy.cuda.get_current_stream().synchronize()
            return out
    raise TypeError(f"{_SAMPLE}: cannot upload the settings for a {type(like).__name__} input (only torch and CuPy)")


def sample(
    logits: Array,
    *,
    temperature: float | Sequence[float] = 1.0,
    top_k: int | Sequence[int] = 0,
    top_p: float | Sequence[float] = 1.0,
    min_p: float | Sequence[float] = 0.0,
    repetition_penalty: float | Sequence[float] = 1.0,
    presence_penalty: float | Sequence[float] = 0.0,
    frequency_penalty: float | Sequence[float] = 0.0,
    seed: int | Sequence[int] = 0,
    step: int | Sequence[int] = 0,
    logprobs: int | Sequence[int] = 0,
    prompt_tokens: Sequence[Sequence[int]] | None = None,
    output_tokens: Sequence[Sequence[int]] | None = None,
    max_logprobs: int | None = None,
    stream: Stream = None,
    _kernel: Any = None,
) -> Sampled:
    """Samples one token per row of ``logits`` (vLLM's semantics, docs/sampling.md).

    Args:
        logits: float32 ``[rows, vocab]``, contiguous: a CUDA array (the GPU kernel) or a host
            array (NumPy, CPU torch: the CPU reference).
        temperature, top_k, top_p, min_p, repetition_penalty, presence_penalty,
            frequency_penalty, seed, logprobs: vLLM's ``SamplingParams`` fields, each one
            value for every row or a sequence of one per row. temperature below 1e-5 is
            greedy; top_k 0 or −1, top_p 1 and min_p 0 are off; logprobs (0 … 20) is how
            many top logprobs the row wants.
        step: each row's token index in its sequence's output; with the seed, the only
            randomness (the same seed, step and logits give the same token on CPU and GPU).
        prompt_tokens, output_tokens: each row's prompt ids and generated ids (a list per
            row; repeats count), for the penalties. None: no history.
        max_logprobs: the width of ``top_ids``/``top_logprobs`` (≥ every row's logprobs);
            default: the largest logprobs asked for. A fixed value keeps one kernel for
            batches that ask for different counts.
        stream: the CUDA stream; default: the current stream of logits' library.

    Returns:
        :class:`Sampled`, arrays of the logits' library on its device.

    Raises:
        TypeError: an argument is not an array, or of the wrong dtype or kind.
        ValueError: a bad setting (the server's sentence), an id outside the vocabulary,
            wrong device, shape or layout.
        RuntimeError: no GPU for a CUDA array (or a CUDA error).
    """
    shape = array_shape(logits, _SAMPLE, "logits")
    if len(shape) != 2:
        raise ValueError(f"{_SAMPLE}: logits must have 2 dimensions [rows, vocab], got shape {shape}")
    rows, vocab = shape
    settings = _C.SamplingRows(
        vocab,
        _per_row(temperature, rows, "temperature", Real),
        _per_row(top_k, rows, "top_k", Integral),
        _per_row(top_p, rows, "top_p", Real),
        _per_row(min_p, rows, "min_p", Real),
        _per_row(repetition_penalty, rows, "repetition_penalty", Real),
        _per_row(presence_penalty, rows, "presence_penalty", Real),
        _per_row(frequency_penalty, rows, "frequency_penalty", Real),
        _per_row(seed, rows, "seed", Integral, 0),
        _per_row(step, rows, "step", Integral, 0),
        _per_row(logprobs, rows, "logprobs", Integral),
        _histories(prompt_tokens, rows, "prompt_tokens"),
        _histories(output_tokens, rows, "output_tokens"),
    )
    if _kernel is not None:
        width = int(dict(f.split("=") for f in _kernel.spec.split(":", 1)[1].split(",")).get("logprobs", 0))
    elif max_logprobs is None:
        width = settings.max_logprobs
    else:
        if isinstance(max_logprobs, bool) or not isinstance(max_logprobs, Integral):
            raise TypeError(f"{_SAMPLE}: max_logprobs must be an int, got {type(max_logprobs).__name__}")
        width = int(max_logprobs)
    if not settings.max_logprobs <= width <= _MAX_LOGPROBS:
        raise ValueError(
            f"{_SAMPLE}: max_logprobs must be in [{settings.max_logprobs}, {_MAX_LOGPROBS}] "
            f"(the most logprobs a row asks for, to 20), got {width}"
        )

    if is_host(logits):
        if _kernel is not None:
            raise ValueError(f"{_SAMPLE}: a compiled kernel runs on the GPU; logits is a host array")
        tokens = _new_host(logits, (rows,), "int32")
        token_logprobs = _new_host(logits, (rows,), "float32")
        top_ids = _new_host(logits, (rows, width), "int32") if width else None
        top_logprobs = _new_host(logits, (rows, width), "float32") if width else None
        _C.sample_host(tokens, token_logprobs, top_ids, top_logprobs, None, logits, settings, width)
        return Sampled(tokens, token_logprobs, top_ids, top_logprobs)

    explicit = stream is not None
    handle = stream_handle(stream, logits, _SAMPLE)
    tokens = new_like(logits, (rows,), "int32", _SAMPLE)
    token_logprobs = new_like(logits, (rows,), "float32", _SAMPLE)
    top_ids = new_like(logits, (rows, width), "int32", _SAMPLE) if width else None
    top_logprobs = new_like(logits, (rows, width), "float32", _SAMPLE) if width else None
    params = _upload(settings.row_params(), (rows, _ROW_PARAMS_BYTES), "uint8", logits, handle, explicit)
    offsets = ids = table = None
    entries = settings.history_entries
    if entries:
        offsets = _upload(settings.history_offsets(), (rows + 1,), "int32", logits, handle, explicit)
        ids = _upload(settings.history_ids(), (entries,), "int32", logits, handle, explicit)
        table = new_like(logits, (4 * entries,), "int32", _SAMPLE)  # scratch the kernel initialises
    kernel_spec, config = (_kernel.spec, _kernel.config) if _kernel is not None else ("", "")
    _C.sample(tokens, token_logprobs, top_ids, top_logprobs, logits, params, offsets, ids, table, width, handle,
              kernel_spec, config)
    return Sampled(tokens, token_logprobs, top_ids, top_logprobs)


def argmax(logits: Array, *, out: Array | None = None, stream: Stream = None, _kernel: Any = None) -> Array:
    """Each row's argmax: the lowest id among its maxima (NaN never wins; a row of NaN and −inf gives 0).

    Args:
        logits: float32 ``[rows, vocab]``, contiguous: a CUDA array (the GPU kernel, 16-byte
            aligned when vocab % 4 == 0, as a fresh tensor is) or a host array (the CPU
            reference).
        out: where to write (int32 ``[rows]``); default: a new array of logits' library.
        stream: the CUDA stream; default: the current stream of logits' library.

    Returns:
        ``out``.

    Raises:
        TypeError: an argument is not an array, or of the wrong dtype.
        ValueError: wrong device, shape, layout or alignment.
        RuntimeError: no GPU for a CUDA array (or a CUDA error).
    """
    shape = array_shape(logits, _ARGMAX, "logits")
    if len(shape) != 2:
        raise ValueError(f"{_ARGMAX}: logits must have 2 dimensions [rows, vocab], got shape {shape}")
    if is_host(logits):
        if _kernel is not None:
            raise ValueError(f"{_ARGMAX}: a compiled kernel runs on the GPU; logits is a host array")
        if out is None:
            out = _new_host(logits, shape[:1], "int32")
        _C.argmax_host(out, logits)
        return out
    if out is None:
        out = new_like(logits, shape[:1], "int32", _ARGMAX)
    kernel_spec, config = (_kernel.spec, _kernel.config) if _kernel is not None else ("", "")
    _C.argmax(out, logits, stream_handle(stream, logits, _ARGMAX), kernel_spec, config)
    return out


def call_kernel(kernel: Any, *args: Any, **kwargs: Any) -> Any:
    """``kernel(logits, ...)``: :func:`sample`'s arguments for an op=sample kernel, :func:`argmax`'s for op=argmax."""
    if kernel.spec.startswith("sampling:op=argmax"):
        return argmax(*args, _kernel=kernel, **kwargs)
    return sample(*args, _kernel=kernel, **kwargs)


__all__ = ["Sampled", "argmax", "sample", "sampling_spec"]
