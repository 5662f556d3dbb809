"""The kernel cache: binaries and tuning records in one SQLite file (docs/cache.md)."""

from __future__ import annotations

import os
from typing import Any

from . import _C


def path() -> str:
    """The cache file (``<cache dir>/kernels.sqlite``)."""
    return _C.cache_file()


def stats() -> dict[str, Any]:
    """Counts: ``binaries``, ``tunings``, ``cubin_bytes``, ``file_bytes``, ``by_arch``, ``by_family``."""
    return _C.cache_stats()


def export(path: str | os.PathLike[str], arch: str | None = None, device: str | None = None) -> dict[str, Any]:
    """Writes the cache (or the part for ``arch`` / a ``device`` name) to one self-contained file.

    Like ``onecat cache export FILE [--arch A] [--device NAME]``. Returns ``file``,
    ``binaries`` and ``tunings`` written.
    """
    return _C.cache_export(os.fspath(path), arch or "", device or "")


def import_(path: str | os.PathLike[str], verify: bool = False) -> dict[str, Any]:
    """Merges an exported file into the cache, checked whole first (nothing changes on a problem).

    Like ``onecat cache import FILE [--verify]``; ``verify`` recompiles every binary and
    requires the same cubin. Returns the counts added and already present, and with
    ``verify`` one entry per binary.

    Raises:
        ValueError: the file is not an onecat cache, is damaged, or is from another generator version.
    """
    return _C.cache_import(os.fspath(path), bool(verify))


__all__ = ["export", "import_", "path", "stats"]
