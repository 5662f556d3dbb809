"""One module per kernel family; each exports its plain functions into ``onecat``.

A family module defines ``FAMILY`` (its name in specs), ``__all__`` (what ``onecat``
re-exports) and ``call_kernel(kernel, *args, **kwargs)`` (how an ``onecat.Kernel`` of the
family is called). Adding a family: write the module, add its name to ``_MODULES``, and
bind its C++ side (docs/python.md, "Adding a family").
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

_MODULES = ("rmsnorm", "gemm", "attention", "embedding", "rope", "sampling", "moe")


def _load() -> dict[str, ModuleType]:
    return {name: importlib.import_module(f"{__name__}.{name}") for name in _MODULES}


_FAMILIES = _load()


def family_module(family: str) -> ModuleType:
    """The module of a family name ("rmsnorm", "gemm", ...)."""
    try:
        return _FAMILIES[family]
    except KeyError:
        raise ValueError(f"onecat: no Python bindings for the kernel family '{family}' (known: {', '.join(_FAMILIES)})") from None


def export_families(namespace: dict[str, Any]) -> list[str]:
    """Puts every family's public functions into `namespace` (the onecat package); returns their names."""
    names: list[str] = []
    for module in _FAMILIES.values():
        for name in module.__all__:
            namespace[name] = getattr(module, name)
            names.append(name)
    return names
