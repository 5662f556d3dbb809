"""moe: mixture-of-experts layers (docs/moe.md).

``onecat.moe_route`` picks each token's top-k experts from fp16 router logits (ties to the lower
id) with their softmax weights (renormalised with ``norm=True``, transformers' ``norm_topk_prob``)
and groups the (token, slot) pairs by expert: on a CUDA array the route kernel, on a host array
(NumPy, a CPU torch tensor) the CPU reference, which the kernel matches id for id. With
``score="sigmoid"`` it is DeepSeek-V3's router: sigmoid scores, chosen by score + ``bias``, within
the ``topk_groups`` best of ``groups`` expert groups, weights scaled by ``scale``.
``onecat.moe_experts`` stacks every expert's packed gate|up and down weights
(:func:`onecat.pack_weight`, one format for all) once; ``onecat.moe`` runs a whole layer on the
GPU: route, each touched expert's gate_up (silu·mul) and down, and the weighted sum per token in
slot order.
"""

from __future__ import annotations

import sys
from typing import Any, NamedTuple, Sequence

from .. import _C
from .._arrays import Array, Stream, array_shape, check_int, is_host, new_like, stream_handle

FAMILY = "moe"
_ROUTE = "onecat.moe_route"
_MOE = "onecat.moe"


class MoeRoute(NamedTuple):
    """What :func:`moe_route` returns, arrays of the logits' library and device."""

    #: int32 ``[tokens, topk]``: each token's experts, highest logit first.
    ids: Array
    #: float32 ``[tokens, topk]``: their weights (softmax or sigmoid scores, renormalised over the
    #: chosen with norm, times scale).
    weights: Array
    #: int32 ``[experts + 1]``: expert e's pairs are ``sorted[offsets[e]:offsets[e + 1]]``.
    offsets: Array
    #: int32 ``[tokens · topk]``: pair indices (token · topk + slot) grouped by expert, ascending.
    sorted: Array


def _bool(value: Any, name: str, op: str) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{op}: {name} must be True or False, got {type(value).__name__}")
    return value


def _from_bytes(like: Any, data: bytes, shape: tuple[int, ...], dtype: str) -> Any:
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(like, torch.Tensor):
        return torch.frombuffer(bytearray(data), dtype=getattr(torch, dtype)).reshape(shape) if data else torch.empty(shape, dtype=getattr(torch, dtype))
    import numpy

    return numpy.frombuffer(data, dtype=dtype).reshape(shape).copy()


def _router(op: str, score: Any, groups: Any, topk_groups: Any, scale: Any) -> tuple[str, int, int, float]:
    if not isinstance(score, str):
        raise TypeError(f"{op}: score must be 'softmax' or 'sigmoid', got {type(score).__name__}")
    groups = check_int(groups, op, "groups")
    topk_groups = -1 if topk_groups is None else check_int(topk_groups, op, "topk_groups")
    if isinstance(scale, bool) or not isinstance(scale, (int, float)):
        raise TypeError(f"{op}: scale must be a number, got {type(scale).__name__}")
    return score, groups, topk_groups, float(scale)


def moe_route_spec(experts: int, topk: int, *, norm: bool = False, score: str = "softmax", bias: bool = False,
                   groups: int = 1, topk_groups: int | None = None) -> str:
    """The canonical spec of the route kernel for ``experts`` experts and top-``topk`` (the
    other arguments as for :func:`moe_route`; ``bias``: whether a correction bias is given)."""
    score, groups, topk_groups, _ = _router(_ROUTE, score, groups, topk_groups, 1.0)
    return _C.moe_route_spec(check_int(experts, _ROUTE, "experts"), check_int(topk, _ROUTE, "topk"),
                             _bool(norm, "norm", _ROUTE), score, _bool(bias, "bias", _ROUTE), groups, topk_groups)


def moe_route(logits: Array, *, topk: int, norm: bool = False, score: str = "softmax", bias: Array | None = None,
              groups: int = 1, topk_groups: int | None = None, scale: float = 1.0, stream: Stream = None) -> MoeRoute:
    """Each token's top-``topk`` experts and weights, and the pairs grouped by expert.

    Args:
        logits: float16 ``[tokens, experts]`` router logits, a CUDA array (the kernel) or a host
            array (the CPU reference), contiguous.
        topk: experts per token (1 to 16, at most ``experts``).
        norm: renormalise the chosen weights to sum to one (``norm_topk_prob``).
        score: ``"softmax"`` (Qwen3-MoE, Mixtral) or ``"sigmoid"`` (DeepSeek-V3, GLM-4.5).
        bias: sigmoid only: float32 ``[experts]`` correction bias added to the scores for the
            choice (``e_score_correction_bias``), on logits' device; not in the weights.
        groups, topk_groups: sigmoid only: the experts form ``groups`` equal groups of consecutive
            ids, each rated by the sum of its two best choice values, and only the experts of the
            ``topk_groups`` best groups are chosen (``n_group``, ``topk_group``; default all).
        scale: the weights' factor (``routed_scaling_factor``).
        stream: the CUDA stream; default: the current stream of logits' library.

    Returns:
        A :class:`MoeRoute` of logits' library (and device).

    Raises:
        TypeError: logits or bias is not an array or of the wrong dtype, a number or flag of the
            wrong type.
        ValueError: wrong shape, layout or device; a router without a kernel (e.g. groups that
            do not divide the experts, bias with softmax).
        RuntimeError: no GPU (or a CUDA error) for a CUDA array.
    """
    topk = check_int(topk, _ROUTE, "topk")
    norm = _bool(norm, "norm", _ROUTE)
    score, groups, topk_groups, scale = _router(_ROUTE, score, groups, topk_groups, scale)
    shape = array_shape(logits, _ROUTE, "logits")
    if len(shape) != 2:
        raise ValueError(f"{_ROUTE}: logits must be 2-D [tokens, experts], got shape {tuple(shape)}")
    tokens, experts = shape
    if is_host(logits):
        ids, weights, offsets, pairs = _C.moe_route_cpu(logits, topk, norm, score, bias, groups, topk_groups, scale)
        return MoeRoute(
            _from_bytes(logits, ids, (tokens, topk), "int32"),
            _from_bytes(logits, weights, (tokens, topk), "float32"),
            _from_bytes(logits, offsets, (experts + 1,), "int32"),
            _from_bytes(logits, pairs, (tokens * topk,), "int32"),
        )
    _C.moe_route_spec(experts, topk, norm, score, bias is not None, groups, topk_groups)  # refusals first
    out = MoeRoute(
        new_like(logits, (tokens, topk), "int32", _ROUTE),
        new_like(logits, (tokens, topk), "float32", _ROUTE),
        new_like(logits, (experts + 1,), "int32", _ROUTE),
        new_like(logits, (tokens * topk,), "int32", _ROUTE),
    )
    _C.moe_route(out.ids, out.weights, out.offsets, out.sorted, logits, topk, norm, score, bias, groups, topk_groups,
                 scale, stream_handle(stream, logits, _ROUTE))
    return out


def moe_experts(gate_up: Sequence[Any], down: Sequence[Any]) -> Any:
    """Every expert's weights stacked once for :func:`moe`.

    Args:
        gate_up: per expert, its packed ``[2·inter, hidden]`` weight, gate rows then up rows
            (:func:`onecat.pack_weight` of the two stacked), all of one format and shape.
        down: per expert, its packed ``[hidden, inter]`` weight, all of one format and shape.

    Returns:
        A ``MoeExperts`` (``experts``, ``hidden``, ``inter``; ``specs(topk, norm)`` the layer's
        kernel specs: route, gate_up, down, combine, and where :func:`moe` runs one token as one
        launch the decode layer's), uploaded to the GPU of the first :func:`moe` call.

    Raises:
        TypeError: an element is not a PackedWeight.
        ValueError: counts, shapes or formats that differ, or a shape without a kernel.
    """
    try:
        return _C.moe_experts([w._w for w in gate_up], [w._w for w in down])
    except AttributeError:
        raise TypeError("onecat.MoeExperts: every expert weight must be a PackedWeight (onecat.pack_weight)") from None


def moe(x: Array, logits: Array, experts: Any, *, topk: int, norm: bool = False, out: Array | None = None,
        stream: Stream = None) -> Array:
    """A mixture-of-experts layer: ``out[t] = Σ_k w[t,k] · down_e(silu(gate_e·x[t]) · up_e·x[t])``.

    Four launches (route, gate_up, down, combine); for one token with 4-bit experts (both
    projections in one format), one (``op=decode``), as the model's decode steps run it.

    Args:
        x: float16 CUDA ``[tokens, hidden]``, contiguous, 16-byte aligned.
        logits: float16 ``[tokens, experts]`` router logits on the same GPU.
        experts: a :func:`moe_experts` stack.
        topk, norm: as :func:`moe_route`.
        out: where to write (float16 ``[tokens, hidden]``); default: a new array of x's library.
        stream: the CUDA stream; default: the current stream of x's library.

    Returns:
        ``out``.
    """
    topk = check_int(topk, _MOE, "topk")
    norm = _bool(norm, "norm", _MOE)
    if out is None:
        out = new_like(x, tuple(array_shape(x, _MOE, "x")), "float16", _MOE)
    _C.moe(out, x, logits, experts, topk, norm, stream_handle(stream, x, _MOE))
    return out


def call_kernel(kernel: Any, *args: Any, **kwargs: Any) -> Any:
    """A compiled moe kernel is one op of a layer: call :func:`moe_route` or :func:`moe` instead."""
    raise TypeError(
        f"onecat: {kernel.spec} is one op of a MoE layer; call onecat.moe_route(logits, topk=…) or "
        "onecat.moe(x, logits, onecat.moe_experts(gate_up, down), topk=…)"
    )


__all__ = ["MoeRoute", "moe", "moe_experts", "moe_route", "moe_route_spec"]
