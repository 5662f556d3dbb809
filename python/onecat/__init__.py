"""onecat: generated, autotuned LLM kernels for NVIDIA Volta (sm_70) and later GPUs.

Hand it torch (or CuPy, or any ``__cuda_array_interface__`` / DLPack) arrays and it runs
the kernel tuned for their shape, on the caller's current CUDA stream, without copies::

    import torch, onecat
    x = torch.randn(7, 4096, dtype=torch.float16, device="cuda")
    w = torch.ones(4096, dtype=torch.float16, device="cuda")
    y = onecat.rmsnorm(x, w, 1e-6)

``import onecat`` works without a GPU; calls that need one raise ``RuntimeError``.
See docs/python.md.
"""

from __future__ import annotations

from . import _env

_env.prepare()

try:
    from . import _C
except ImportError as e:  # pragma: no cover - a broken install
    raise ImportError(
        "onecat's extension onecat._C is missing or does not load "
        f"({e}); install the package with `pip install .` from the onecat checkout "
        "(or build it with -DONECAT_PYTHON=ON, docs/python.md)"
    ) from e

from . import cache
from ._C import LLM as _EngineLLM
from ._C import DecodeStream, Model, StepOutput, Tokenizer
from ._engine import CompletionOutput, RequestOutput, SamplingParams, StructuredOutputsParams
from ._engine import generate as _generate
from ._engine import chat as _chat
from ._engine import get_default_sampling_params as _get_default_sampling_params
from ._engine import stream as _stream
from ._engine import VllmLLM as _VllmLLM
from .chat import apply_chat_template
from ._core import (
    Kernel,
    cache_dir,
    compile,
    emit,
    gpu_available,
    info,
    prepare,
    set_cache_dir,
    tune,
)
from .families import export_families as _export_families

_EngineLLM.stream = _stream
_EngineLLM.generate = _generate
_EngineLLM.get_default_sampling_params = _get_default_sampling_params
_EngineLLM.chat = _chat
LLM = _VllmLLM

__version__ = "0.1.0"

__all__ = [
    "CompletionOutput",
    "DecodeStream",
    "Kernel",
    "LLM",
    "Model",
    "RequestOutput",
    "SamplingParams",
    "StructuredOutputsParams",
    "StepOutput",
    "Tokenizer",
    "apply_chat_template",
    "cache",
    "cache_dir",
    "compile",
    "emit",
    "gpu_available",
    "info",
    "prepare",
    "set_cache_dir",
    "tune",
]
__all__ += _export_families(globals())
