"""Family-independent API: info, emit, compile, tune, prepare and the cache directory."""

from __future__ import annotations

import json
import os
from typing import Any, Iterable, Sequence

from . import _C
from .families import family_module

#: The M buckets the dispatcher uses (powers of two up to 4096), the tuner's default set.
DEFAULT_BUCKETS: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 2048)


def info() -> dict[str, Any]:
    """What this machine offers onecat, as ``onecat info --json`` prints it.

    Keys: ``driver`` (None without one), ``gpus``, ``gpu_unavailable_reason``, ``nvrtc``
    (each library found, its version and archs), ``nvrtc_searched``, ``cublas``,
    ``families`` and ``cache``.
    """
    return json.loads(_C.info_json())


def gpu_available() -> bool:
    """Whether a CUDA driver and at least one GPU are usable."""
    return _C.gpu_unavailable_reason() == ""


def _check_str(value: Any, op: str, arg: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{op}: {arg} must be a str, got {type(value).__name__}")
    return value


#: The largest token count ``m`` (kernels take it as a C int), codegen/tokens.h.
MAX_TOKENS = 2**31 - 1


def _check_m(value: Any, op: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{op}: m must be an int, got {type(value).__name__}")
    if not 1 <= value <= MAX_TOKENS:
        raise ValueError(f"{op}: token count m={value} is out of range: it must be 1 to {MAX_TOKENS}")
    return value


def emit(spec: str, config: str | None = None, arch: str = "sm_70", m: int = 1) -> str:
    """The generated CUDA source of a kernel (no GPU and no NVRTC needed).

    Args:
        spec: what the kernel fixes, e.g. ``"rmsnorm:hidden=4096,dtype=f16,residual=1"``.
        config: the tuned parameters; None for the family's default for ``m`` tokens.
        arch: the target, ``"sm_70"`` (default), ``"sm_90"``, ...
        m: token count whose default config is used when ``config`` is None.

    Raises:
        ValueError: a malformed spec or config, naming the offending field, or ``m`` outside
            1 to 2**31 - 1.
        TypeError: ``m`` is not an int.
    """
    _check_str(spec, "onecat.emit", "spec")
    m = _check_m(m, "onecat.emit")
    out = _C.emit(spec, config or "", _check_str(arch, "onecat.emit", "arch"), m)
    return out["source"]


def _field(name: str, doc: str) -> Any:
    return property(lambda self: getattr(self._k, name), doc=doc)


class Kernel:
    """A compiled kernel: its source, resources and cubin; calling it runs exactly this config.

    Calling takes the arguments of the family's function (``onecat.rmsnorm``,
    ``onecat.gemm``, ...) and checks that they make this kernel's spec; it needs a GPU of
    the kernel's arch.
    """

    def __init__(self, compiled: Any) -> None:
        self._k = compiled

    family = _field("family", "The kernel family, e.g. 'gemm'.")
    spec = _field("spec", "The canonical spec.")
    config = _field("config", "The canonical config.")
    arch = _field("arch", "The target, e.g. 'sm_70'.")
    source = _field("source", "The generated CUDA source.")
    kernel_expression = _field("kernel_expression", "The NVRTC name expression of the kernel.")
    lowered_name = _field("lowered_name", "The kernel's mangled symbol.")
    nvrtc_version = _field("nvrtc_version", "The NVRTC that compiled it.")
    key = _field("key", "The binary's cache key (SHA-256 hex).")
    cubin = _field("cubin", "The ELF image.")
    registers = _field("registers", "Registers per thread (ptxas).")
    shared_bytes = _field("shared_bytes", "Static shared memory in bytes.")
    spill_store_bytes = _field("spill_store_bytes", "Register spill stores in bytes.")
    spill_load_bytes = _field("spill_load_bytes", "Register spill loads in bytes.")
    stack_bytes = _field("stack_bytes", "Stack frame in bytes.")
    compile_ms = _field("compile_ms", "NVRTC compile time in ms.")
    cache_hit = _field("cache_hit", "Whether it came from the kernel cache.")

    @property
    def usage(self) -> dict[str, int]:
        """ptxas's resource report: registers, shared memory, spills, stack, barriers."""
        k = self._k
        return {
            "registers": k.registers,
            "shared_bytes": k.shared_bytes,
            "spill_store_bytes": k.spill_store_bytes,
            "spill_load_bytes": k.spill_load_bytes,
            "stack_bytes": k.stack_bytes,
            "barriers": k.barriers,
        }

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        arch = _C.gpu_arch()
        if arch != self.arch:
            raise ValueError(f"onecat.Kernel: this kernel was compiled for {self.arch}; the GPU is {arch}")
        return family_module(self.family).call_kernel(self, *args, **kwargs)

    def __repr__(self) -> str:
        return f"onecat.Kernel({self.spec!r}, config={self.config!r}, arch={self.arch!r}, registers={self.registers})"


def compile(spec: str, config: str | None = None, arch: str | None = None, m: int = 1) -> Kernel:
    """Compiles a kernel with NVRTC, or finds it in the kernel cache.

    Args:
        spec: the kernel spec, e.g. ``"gemm:n=4096,k=4096,fmt=awq4"``.
        config: the config; None for the default for ``m`` tokens: with ``arch`` None the one that
            runs here untuned (gemm: ``strategy=cublas`` where cuBLAS can run and it is the better
            choice), with an arch named the family's own.
        arch: the target (``"sm_70"`` needs no GPU); None for this machine's GPU.
        m: token count whose default config is used when ``config`` is None.

    Raises:
        ValueError: a malformed spec, config or arch, or ``m`` outside 1 to 2**31 - 1.
        TypeError: ``m`` is not an int.
        RuntimeError: no NVRTC can target the arch, a compile error, or no GPU when arch is None.
    """
    _check_str(spec, "onecat.compile", "spec")
    m = _check_m(m, "onecat.compile")
    if arch is not None:
        _check_str(arch, "onecat.compile", "arch")
    return Kernel(_C.compile(spec, config or "", arch or "", m))


def _buckets(buckets: Iterable[int] | None, op: str) -> list[int]:
    if buckets is None:
        return list(DEFAULT_BUCKETS)
    if isinstance(buckets, int):
        buckets = [buckets]
    out = []
    for b in buckets:
        if isinstance(b, bool) or not isinstance(b, int):
            raise TypeError(f"{op}: buckets must be ints, got {type(b).__name__}")
        if b < 1 or b > 4096 or b & (b - 1):
            raise ValueError(f"{op}: bucket {b} is not a bucket (powers of two from 1 to 4096)")
        out.append(b)
    return out


def tune(spec: str, buckets: Iterable[int] | None = None, *, jobs: int | None = None, retune: bool = False) -> list[dict[str, Any]]:
    """Tunes a spec on GPU 0 for each M bucket and stores the records in the kernel cache.

    Every candidate config is compiled, checked against the CPU reference and timed; the
    winner is what ``onecat.<family>(...)`` then dispatches for that bucket. Buckets already
    tuned on this device are returned from the cache unless ``retune``.

    Returns:
        One dict per bucket: ``spec``, ``bucket``, ``config``, ``default_config``,
        ``best_us``, ``default_us``, ``device`` and ``candidates`` (every candidate's
        ``config``, ``status``, ``median_us``, ``min_us``, ``max_us``, ``detail``).

    Raises:
        RuntimeError: without a GPU (the CLI's sentence), or when no candidate survives.
    """
    _check_str(spec, "onecat.tune", "spec")
    return _C.tune(spec, _buckets(buckets, "onecat.tune"), int(jobs or 0), bool(retune))


def prepare(specs: str | Sequence[str], buckets: Iterable[int] | None = None, *, jobs: int | None = None, device: int | None = None) -> list[dict[str, Any]]:
    """Compiles (in parallel, through the cache) and loads the kernels dispatched for specs × buckets.

    After this, calls in those buckets only launch: no compile, no module load. Do it (or
    one eager call per shape) before capturing a CUDA graph.

    Returns:
        One dict per (spec, bucket): ``spec``, ``bucket``, ``config`` and ``tuned``.
    """
    if isinstance(specs, str):
        specs = [specs]
    for s in specs:
        _check_str(s, "onecat.prepare", "specs")
    return _C.prepare(list(specs), _buckets(buckets, "onecat.prepare"), int(jobs or 0), -1 if device is None else int(device))


def set_cache_dir(path: str | os.PathLike[str] | None) -> None:
    """Uses ``path`` as the kernel cache directory (as ``ONECAT_CACHE_DIR`` does); None restores the default."""
    _C.set_cache_dir("" if path is None else os.fspath(path))


def cache_dir() -> str:
    """The kernel cache directory in use."""
    return _C.cache_dir()
