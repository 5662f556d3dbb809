"""Shared helpers: CUDA-array stubs for the CPU tests, and the gpu marker's skip rule.

With ONECAT_REQUIRE_GPU=1 (set on every GPU machine's run) a GPU test that cannot run —
no driver, no GPU, torch or CuPy missing — fails instead of being skipped.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import onecat


ROOT = Path(__file__).resolve().parents[2]


def tiny_checkpoint(tmp_path_factory, name: str, *args: str) -> Path:
    """A fresh tools/make_tiny_checkpoint.py checkpoint (its options `args`) in a temporary folder."""
    out = tmp_path_factory.mktemp("tiny") / name
    subprocess.run([sys.executable, str(ROOT / "tools" / "make_tiny_checkpoint.py"), str(out), *args], check=True)
    return out


class CudaArrayStub:
    """An object exposing only __cuda_array_interface__ (as CuPy or Numba arrays do).

    Its pointer is fake: the CPU tests use it to reach argument checks and the no-GPU
    error, never a launch.
    """

    def __init__(self, shape, typestr="<f2", strides=None, ptr=0x10000):
        self.__cuda_array_interface__ = {
            "shape": tuple(shape),
            "typestr": typestr,
            "data": (ptr, False),
            "strides": strides,
            "version": 3,
        }


class DLPackStub:
    """An object exposing only __dlpack__/__dlpack_device__, delegating to a NumPy array."""

    def __init__(self, array):
        self._a = array

    def __dlpack__(self, stream=None):
        return self._a.__dlpack__()

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


def _gpu_skip_reason():
    reason = onecat._C.gpu_unavailable_reason()
    if reason:
        return f"no GPU: {reason}"
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "torch has no CUDA"
    return ""


def _gpu_required():
    return os.environ.get("ONECAT_REQUIRE_GPU") == "1"


def pytest_collection_modifyitems(config, items):
    reason = None
    for item in items:
        if "gpu" in item.keywords:
            if reason is None:
                reason = _gpu_skip_reason()
            if reason and _gpu_required():
                item.add_marker(pytest.mark.usefixtures("_gpu_missing"))
            elif reason:
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture
def _gpu_missing():
    pytest.fail(f"ONECAT_REQUIRE_GPU=1, but this GPU test cannot run: {_gpu_skip_reason()}")


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    # A GPU test module that skips itself at import (no GPU, torch or CuPy missing).
    outcome = yield
    report = outcome.get_result()
    if report.skipped and _gpu_required() and "gpu" in os.path.basename(str(collector.path)):
        report.outcome = "failed"
        report.longrepr = f"ONECAT_REQUIRE_GPU=1, but {collector.path} skipped itself: {report.longrepr}"


@pytest.fixture
def cache_dir(tmp_path):
    """A fresh kernel cache for one test; the previous one is restored after it."""
    before = onecat.cache_dir()
    onecat.set_cache_dir(tmp_path / "cache")
    yield tmp_path / "cache"
    onecat.set_cache_dir(before)
