"""Process set-up done before the extension loads."""

from __future__ import annotations

import glob
import os
import sys


def prepare() -> None:
    """Points onecat at the NVRTC wheel of this Python environment when there is one.

    onecat finds NVRTC through ``ONECAT_NVRTC``, then the virtual environment
    ``ONECAT_VENV`` (default: the checkout's ``.venv``), then the system. An environment
    with ``nvidia-cuda-nvrtc-cu12`` installed (CUDA 12.8's NVRTC, the newest that targets
    sm_70) is used when neither variable is set.
    """
    if os.environ.get("ONECAT_NVRTC") or os.environ.get("ONECAT_VENV"):
        return
    pattern = os.path.join(sys.prefix, "lib", "python3*", "site-packages", "nvidia", "cuda_nvrtc", "lib", "libnvrtc.so.*")
    if glob.glob(pattern):
        os.environ["ONECAT_VENV"] = sys.prefix
