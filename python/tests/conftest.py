"""Shared helpers: CUDA-array stubs for the CPU tests, and the gpu marker's skip rule."""

from __future__ import annotations

import pytest

import onecat


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


def pytest_collection_modifyitems(config, items):
    reason = None
    for item in items:
        if "gpu" in item.keywords:
            if reason is None:
                reason = _gpu_skip_reason()
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture
def cache_dir(tmp_path):
    """A fresh kernel cache for one test; the previous one is restored after it."""
    before = onecat.cache_dir()
    onecat.set_cache_dir(tmp_path / "cache")
    yield tmp_path / "cache"
    onecat.set_cache_dir(before)
