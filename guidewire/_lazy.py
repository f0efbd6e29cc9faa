"""Module-level lazy attributes (PEP 562): heavy imports wait for the first use of a name."""

from __future__ import annotations

import importlib
from typing import Callable


def lazy_getattr(package: str, names: dict[str, str]) -> Callable[[str], object]:
    """A module ``__getattr__`` that imports ``names[attr]`` (absolute, or relative to ``package``)
    on first access, caches the value in the module's globals and returns it."""
    def __getattr__(name: str):
        mod = names.get(name)
        if mod is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(mod, package), name)
        setattr(importlib.import_module(package), name, value)
        return value

    return __getattr__
