"""attention: paged prefill, decode and verify over a K/V page pool, and kv_write (docs/attention.md).

``onecat.attention`` is this module (``onecat.attention.decode(...)``); ``onecat.kv_write``
is exported at the top level too. Layout (the same for every op):

* ``k_cache``, ``v_cache``: ``[num_pages, kv_heads, page, dim]``, float16, or uint8 fp8 codes
  (``kv="e4m3"`` or ``"e5m2"``; torch ``float8_e4m3fn``/``float8_e5m2`` caches need no ``kv``)
  with ``k_scale``/``v_scale`` float32 ``[1]`` (per tensor) or ``[kv_heads]`` (per head):
  value = code · scale.
* ``block_table``: int32 ``[batch, max_pages]``; ``seq_lens``: int32 ``[batch]``, keys of each
  sequence **including its new tokens** (run ``kv_write`` first).
* ``q``, ``out``: float16 ``[tokens, heads, dim]``; sequence b's queries are its last positions.

The spec (``attention:op=...``) follows from the shapes and dtypes plus ``window``/``causal``;
the kernel is the tuned (else default) one for the bucket: tokens for prefill and kv_write,
sequences for decode and verify.

Workspace: decode and verify kernels may split a sequence's keys over several CTAs, which
merge through an fp32 partial buffer and int32 counters. A call never allocates (so it can be
captured in a CUDA graph): allocate once with :func:`workspace` (counters zeroed; the kernel
leaves them zero, so the workspace is reusable by any later call of the same spec that fits)
and pass it as ``workspace=``. A call whose kernel needs one and gets none or too small a one
raises ``ValueError``.
"""

from __future__ import annotations

import math
import sys
from numbers import Integral, Real
from typing import Any, Iterable, NamedTuple

from .. import _C
from .._arrays import Array, Stream, array_shape, check_int, new_like, stream_handle

FAMILY = "attention"
_PKG = "onecat.attention"


class Workspace(NamedTuple):
    """Split-KV scratch for decode/verify: ``partial`` float32, ``counters`` int32 (zeroed once)."""

    partial: Array
    counters: Array


def _kv_name(kv: str | None, op: str) -> str:
    if kv is None:
        return ""
    if kv not in ("f16", "e4m3", "e5m2"):
        raise ValueError(f"{op}: kv must be 'f16', 'e4m3' or 'e5m2', got {kv!r}")
    return kv


def attention_spec(
    op: str,
    *,
    heads: int = 0,
    kv_heads: int,
    dim: int,
    page: int,
    kv: str = "f16",
    kv_scale: str | None = None,
    causal: bool = True,
    window: int = 0,
    q: int = 1,
) -> str:
    """The canonical spec of an attention op (``op`` = prefill, decode, verify or kv_write).

    ``kv_scale`` defaults to ``none`` for f16 caches and ``tensor`` for fp8; ``q`` is verify's
    query tokens per sequence. Raises ``ValueError`` for a shape the family has no kernel for.
    """
    if kv_scale is None:
        kv_scale = "none" if kv == "f16" else "tensor"
    return _C.attention_spec(str(op), int(heads), int(kv_heads), int(dim), int(page), str(kv), str(kv_scale),
                             bool(causal), int(window), int(q))


def workspace_size(spec: str, batch: int | Iterable[int]) -> tuple[int, int]:
    """(partial float32 elements, int32 counters) that ``spec``'s dispatched kernel needs.

    ``batch`` is a sequence count or several (the maximum over them is returned, so one
    workspace serves every batch size a graph or a server uses). Prefill and kv_write need
    none. Needs the GPU: the answer depends on the kernel dispatched for each bucket.
    """
    batches = [batch] if isinstance(batch, Integral) else list(batch)
    floats = counters = 0
    for b in batches:
        f, c = _C.attention_workspace_size(str(spec), check_int(b, f"{_PKG}.workspace_size", "batch"))
        floats, counters = max(floats, f), max(counters, c)
    return floats, counters


def workspace(spec: str, batch: int | Iterable[int], like: Array) -> Workspace:
    """Allocates a zeroed :class:`Workspace` for ``spec`` and ``batch`` on ``like``'s device (torch or CuPy)."""
    floats, counters = workspace_size(spec, batch)
    floats, counters = max(floats, 1), max(counters, 1)
    mod = type(like).__module__.split(".")[0]
    if mod == "torch":
        torch = sys.modules["torch"]
        return Workspace(torch.zeros(floats, dtype=torch.float32, device=like.device),
                         torch.zeros(counters, dtype=torch.int32, device=like.device))
    if mod == "cupy":
        cupy = sys.modules["cupy"]
        with like.device:
            return Workspace(cupy.zeros(floats, dtype="float32"), cupy.zeros(counters, dtype="int32"))
    raise TypeError(f"{_PKG}.workspace: cannot allocate for a {type(like).__name__} (only torch and CuPy); "
                    "pass Workspace(partial=float32 array, counters=zeroed int32 array)")


def _workspace_args(workspace: Any, op: str) -> tuple[Any, Any]:
    if workspace is None:
        return None, None
    try:
        partial, counters = workspace
    except (TypeError, ValueError):
        raise TypeError(f"{op}: workspace must be a Workspace (partial, counters), got {type(workspace).__name__}") from None
    return partial, counters


_NAMES = {op: f"{_PKG}.{op}" for op in ("prefill", "decode", "verify")}


def _run(
    op: str,
    q: Array,
    k_cache: Array,
    v_cache: Array,
    block_table: Array,
    seq_lens: Array,
    cu_seqlens: Array | None,
    *,
    max_q: int,
    causal: bool,
    window: int,
    kv: str | None,
    k_scale: Array | None,
    v_scale: Array | None,
    sm_scale: float | None,
    workspace: Any,
    out: Array | None,
    stream: Stream,
    _kernel: Any,
) -> Array:
    name = _NAMES[op]
    kv_arg = _kv_name(kv, name)
    window = check_int(window, name, "window")
    shape = array_shape(q, name, "q")
    if sm_scale is None:
        # a q that is not [tokens, heads, dim] is reported by the C++ checks
        sm_scale = 1.0 / math.sqrt(shape[2]) if len(shape) == 3 and shape[2] > 0 else 1.0
    elif isinstance(sm_scale, bool) or not isinstance(sm_scale, Real):
        raise TypeError(f"{name}: sm_scale must be a float, got {type(sm_scale).__name__}")
    partial, counters = _workspace_args(workspace, name)
    if out is None:
        out = new_like(q, shape, "float16", name)
    kernel_spec, config = (_kernel.spec, _kernel.config) if _kernel is not None else ("", "")
    _C.attention(op, out, q, k_cache, v_cache, block_table, seq_lens, cu_seqlens, k_scale, v_scale, partial, counters,
                 kv_arg, bool(causal), window, max_q, float(sm_scale), stream_handle(stream, q, name), kernel_spec,
                 config)
    return out


def prefill(
    q: Array,
    k_cache: Array,
    v_cache: Array,
    block_table: Array,
    seq_lens: Array,
    cu_seqlens: Array,
    *,
    max_q: int,
    causal: bool = True,
    window: int = 0,
    kv: str | None = None,
    k_scale: Array | None = None,
    v_scale: Array | None = None,
    sm_scale: float | None = None,
    out: Array | None = None,
    stream: Stream = None,
    _kernel: Any = None,
) -> Array:
    """Paged (chunked / prefix-cached) prefill: ``out = softmax(q·kᵀ·sm_scale + mask)·v`` per sequence.

    Args:
        q: float16 ``[tokens, heads, dim]``; sequence b's queries are
            ``q[cu_seqlens[b]:cu_seqlens[b+1]]``, its last positions (seq_lens[b] − q_len ... ).
        k_cache, v_cache: the page pool (module docstring); heads % kv_heads == 0.
        block_table: int32 ``[batch, max_pages]``. seq_lens: int32 ``[batch]``.
        cu_seqlens: int32 ``[batch + 1]`` cumulative query counts (on the GPU).
        max_q: the longest query count of the batch (the grid; passed in so no sync is needed).
        causal, window: the mask (window > 0: key j is seen by position i iff i − window < j ≤ i).
        kv, k_scale, v_scale: fp8 caches only.
        sm_scale: default ``1/sqrt(dim)``.
        out: float16 of q's shape; default: a new array of q's library.
        stream: default: the current stream of q's library.

    Raises:
        TypeError: an argument is not an array, or of the wrong dtype.
        ValueError: wrong device, shape, layout, or a spec the family has no kernel for.
        RuntimeError: no GPU (or a CUDA error).
    """
    return _run("prefill", q, k_cache, v_cache, block_table, seq_lens, cu_seqlens,
                max_q=check_int(max_q, f"{_PKG}.prefill", "max_q"), causal=causal, window=window, kv=kv, k_scale=k_scale,
                v_scale=v_scale, sm_scale=sm_scale, workspace=None, out=out, stream=stream, _kernel=_kernel)


def decode(
    q: Array,
    k_cache: Array,
    v_cache: Array,
    block_table: Array,
    seq_lens: Array,
    *,
    window: int = 0,
    kv: str | None = None,
    k_scale: Array | None = None,
    v_scale: Array | None = None,
    sm_scale: float | None = None,
    workspace: Workspace | None = None,
    out: Array | None = None,
    stream: Stream = None,
    _kernel: Any = None,
) -> Array:
    """Decode: one query token per sequence, ``q`` float16 ``[batch, heads, dim]``.

    The query of sequence b is at position ``seq_lens[b] − 1``. ``workspace``: see the
    module docstring (:func:`workspace`); the other arguments as for :func:`prefill`.
    """
    return _run("decode", q, k_cache, v_cache, block_table, seq_lens, None, max_q=0, causal=True, window=window,
                kv=kv, k_scale=k_scale, v_scale=v_scale, sm_scale=sm_scale, workspace=workspace, out=out,
                stream=stream, _kernel=_kernel)


def verify(
    q: Array,
    k_cache: Array,
    v_cache: Array,
    block_table: Array,
    seq_lens: Array,
    *,
    window: int = 0,
    kv: str | None = None,
    k_scale: Array | None = None,
    v_scale: Array | None = None,
    sm_scale: float | None = None,
    workspace: Workspace | None = None,
    out: Array | None = None,
    stream: Stream = None,
    _kernel: Any = None,
) -> Array:
    """Speculative verify: the same number (2..16) of query tokens per sequence, causal.

    ``q`` float16 ``[batch · n, heads, dim]``; sequence b's tokens are rows ``b·n … b·n + n − 1``
    at positions ``seq_lens[b] − n …``. Otherwise as :func:`decode`.
    """
    return _run("verify", q, k_cache, v_cache, block_table, seq_lens, None, max_q=0, causal=True, window=window,
                kv=kv, k_scale=k_scale, v_scale=v_scale, sm_scale=sm_scale, workspace=workspace, out=out,
                stream=stream, _kernel=_kernel)


def kv_write(
    k: Array,
    v: Array,
    k_cache: Array,
    v_cache: Array,
    slot_mapping: Array,
    *,
    kv: str | None = None,
    k_scale: Array | None = None,
    v_scale: Array | None = None,
    stream: Stream = None,
    _kernel: Any = None,
) -> None:
    """Writes new K/V rows into the page pool **in place**: ``cache[slot // page, :, slot % page] = row``.

    Args:
        k, v: float16 ``[tokens, kv_heads, dim]``.
        k_cache, v_cache: the page pool (module docstring); fp8 caches store
            ``encode(value / scale)``.
        slot_mapping: int32 ``[tokens]``: page · page_size + row; negative = skip (padding).
    """
    name = "onecat.kv_write"
    kv_arg = _kv_name(kv, name)
    kernel_spec, config = (_kernel.spec, _kernel.config) if _kernel is not None else ("", "")
    _C.kv_write(k_cache, v_cache, k, v, slot_mapping, k_scale, v_scale, kv_arg, stream_handle(stream, k, name),
                kernel_spec, config)


def call_kernel(kernel: Any, *args: Any, **kwargs: Any) -> Any:
    """A compiled attention kernel's op (from its spec) with this kernel's config."""
    op = dict(f.split("=", 1) for f in kernel.spec.split(":", 1)[1].split(","))["op"]
    fn = {"prefill": prefill, "decode": decode, "verify": verify, "kv_write": kv_write}[op]
    return fn(*args, _kernel=kernel, **kwargs)


attention = sys.modules[__name__]

__all__ = ["attention", "kv_write"]
