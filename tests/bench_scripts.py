"""Load a script of ``bench/`` as a module, for the tests of the bench tools."""

from __future__ import annotations

import importlib.util
import os

BENCH = os.path.join(os.path.dirname(__file__), "..", "bench")


def load_bench(name: str):
    """The module ``bench/<name>.py``, executed once per call."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(BENCH, f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
