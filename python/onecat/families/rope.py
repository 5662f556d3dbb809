"""rope: rotary position embedding over a fused qkv projection (docs/rope.md).

NeoX style (rotate-half), after Qwen3's per-head q/k RMSNorm when ``q_norm``/``k_norm`` are
given; q is written dense, K and V dense or straight into attention's paged cache
(``k_cache``/``v_cache`` with ``slot_mapping``, the layout and fp8 codes of
``onecat.kv_write``). The frequencies are data: :func:`rope_table` computes transformers'
(default, linear, llama3, yarn) once; upload them as a float32 CUDA array.
"""

from __future__ import annotations

from numbers import Integral, Real
from typing import Any

from .. import _C
from .._arrays import Array, Stream, array_shape, new_like, stream_handle

FAMILY = "rope"
_OP = "onecat.rope"


def rope_table(
    dim: int,
    *,
    theta: float = 10000.0,
    scaling: str = "default",
    factor: float = 1.0,
    low_freq_factor: float = 1.0,
    high_freq_factor: float = 4.0,
    original_max_position: int = 0,
    beta_fast: float = 32.0,
    beta_slow: float = 1.0,
    attention_factor: float | None = None,
    mscale: float = 0.0,
    mscale_all_dim: float = 0.0,
    truncate: bool = True,
) -> tuple[list[float], float]:
    """transformers' ``inv_freq`` (``dim // 2`` fp32 values) and attention factor for a head dim.

    ``scaling`` is ``rope_scaling``'s ``rope_type``: ``"default"``, ``"linear"`` (``factor``),
    ``"llama3"`` (``factor``, ``low_freq_factor``, ``high_freq_factor``,
    ``original_max_position`` = ``original_max_position_embeddings``) or ``"yarn"`` (``factor``,
    ``original_max_position``, ``beta_fast``, ``beta_slow``, ``attention_factor`` — None for
    transformers' default —, ``mscale``, ``mscale_all_dim``, ``truncate``). Computed on the host.
    """
    return _C.rope_table(int(dim), str(scaling), float(theta), float(factor), float(low_freq_factor),
                         float(high_freq_factor), int(original_max_position), float(beta_fast), float(beta_slow),
                         0.0 if attention_factor is None else float(attention_factor), float(mscale),
                         float(mscale_all_dim), bool(truncate))


def rope_spec(
    heads: int,
    kv_heads: int,
    dim: int,
    *,
    qk_norm: bool = False,
    page: int = 0,
    kv: str = "f16",
    kv_scale: str | None = None,
) -> str:
    """The canonical spec: K/V dense (``page`` 0) or into a paged cache of ``page``-token pages."""
    scale = kv_scale if kv_scale is not None else ("none" if kv == "f16" else "tensor")
    return _C.rope_spec(int(heads), int(kv_heads), int(dim), bool(qk_norm), int(page), str(kv), scale)


def _int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
        raise ValueError(f"{_OP}: {name} must be a positive int, got {value!r}")
    return int(value)


def rope(
    qkv: Array,
    positions: Array,
    inv_freq: Array,
    *,
    heads: int,
    kv_heads: int,
    attention_factor: float = 1.0,
    q_norm: Array | None = None,
    k_norm: Array | None = None,
    eps: float = 1e-6,
    k_cache: Array | None = None,
    v_cache: Array | None = None,
    slot_mapping: Array | None = None,
    kv: str | None = None,
    k_scale: Array | None = None,
    v_scale: Array | None = None,
    out: tuple[Array, Array | None, Array | None] | None = None,
    stream: Stream = None,
    _kernel: Any = None,
) -> Any:
    """Rotates q and k of a fused qkv projection; returns ``(q, k, v)``, or ``q`` with a cache.

    Args:
        qkv: float16 ``[tokens, (heads + 2·kv_heads)·dim]`` (or ``[tokens, heads + 2·kv_heads,
            dim]``): q heads, then k heads, then v heads, bias already added.
        positions: int32 ``[tokens]``.
        inv_freq: float32 ``[dim // 2]`` (:func:`rope_table`).
        heads, kv_heads: query and KV heads.
        attention_factor: cos and sin are multiplied by it (:func:`rope_table`'s second value).
        q_norm, k_norm: float16 ``[dim]`` RMSNorm weights (Qwen3), both or neither; ``eps`` its
            epsilon.
        k_cache, v_cache, slot_mapping, kv, k_scale, v_scale: write K and V into this page
            pool instead (as ``onecat.kv_write``: int32 slots, negative = skip).
        out: ``(q, k, v)`` to write (``k``/``v`` None with a cache); default: new arrays of
            qkv's library.

    Raises:
        TypeError: an argument is not an array, or of the wrong dtype.
        ValueError: wrong device, shape, layout, alignment, or a shape without a kernel.
        RuntimeError: no GPU (or a CUDA error).
    """
    heads, kv_heads = _int(heads, "heads"), _int(kv_heads, "kv_heads")
    for name, value in (("attention_factor", attention_factor), ("eps", eps)):
        if isinstance(value, bool) or not isinstance(value, Real):
            raise TypeError(f"{_OP}: {name} must be a float, got {type(value).__name__}")
    if kv is not None and kv not in ("f16", "e4m3", "e5m2"):
        raise ValueError(f"{_OP}: kv must be 'f16', 'e4m3' or 'e5m2', got {kv!r}")
    paged = k_cache is not None
    if out is None:
        shape = array_shape(qkv, _OP, "qkv")
        width = 1
        for d in shape[1:]:
            width *= d
        slots = heads + 2 * kv_heads
        if not shape or width % slots:
            raise ValueError(f"{_OP}: qkv's rows of {width} values are not {slots} heads (heads + 2·kv_heads)")
        tokens, dim = shape[0], width // slots
        q = new_like(qkv, (tokens, heads, dim), "float16", _OP)
        k = None if paged else new_like(qkv, (tokens, kv_heads, dim), "float16", _OP)
        v = None if paged else new_like(qkv, (tokens, kv_heads, dim), "float16", _OP)
    else:
        q, k, v = out
    kernel_spec, config = (_kernel.spec, _kernel.config) if _kernel is not None else ("", "")
    _C.rope(q, k, v, qkv, positions, inv_freq, float(attention_factor), q_norm, k_norm, float(eps), k_cache, v_cache,
            slot_mapping, k_scale, v_scale, kv or "", stream_handle(stream, qkv, _OP), kernel_spec, config)
    return q if paged else (q, k, v)


def call_kernel(kernel: Any, *args: Any, **kwargs: Any) -> Any:
    """``kernel(qkv, positions, inv_freq, *, heads, kv_heads, ...)`` with this kernel's config."""
    return rope(*args, _kernel=kernel, **kwargs)


__all__ = ["rope", "rope_spec", "rope_table"]
