"""Whether Triton can run here, and launching one kernel body on any device.

A kernel body is a plain Python function written in ``triton.language``; :class:`TritonKernel`
compiles it with ``triton.jit`` for CUDA tensors and runs it through Triton's interpreter for
tensors elsewhere (the CPU), whatever ``TRITON_INTERPRET`` said when this module was imported.
Kernel bodies call ``tl.reduce`` / ``tl.associative_scan`` with Triton's own combine functions
(``tl.standard._sum_combine`` ...) rather than ``tl.sum`` / ``tl.max`` / ``tl.cumsum``: those are
``@triton.jit`` helpers that the interpreter can only run when ``TRITON_INTERPRET=1`` was set before
Triton was first imported, while the builtins work either way. Kernel modules use
``from __future__ import annotations`` so that ``tl.constexpr`` annotations are strings (Triton
reads them as such), and declare ``tl = None``: the launcher binds ``triton.language`` there on
first launch, so importing them never imports Triton.
"""

from __future__ import annotations

import functools
import importlib
import os

import torch


@functools.lru_cache(maxsize=None)
def triton_importable() -> bool:
    """Whether ``import triton`` succeeds."""
    try:
        importlib.import_module("triton.language")  # a broken install fails here, not just a missing one
    except Exception:  # ImportError, or a broken install
        return False
    return True


def interpret_mode() -> bool:
    """Whether ``TRITON_INTERPRET`` is set to a true value (Triton then runs kernels on the CPU)."""
    return os.environ.get("TRITON_INTERPRET", "0").strip().lower() in ("1", "true", "on", "yes")


def triton_available() -> bool:
    """Whether Triton kernels can run: Triton imports and (CUDA is available or ``TRITON_INTERPRET=1``)."""
    return triton_importable() and (torch.cuda.is_available() or interpret_mode())


def use_triton(backend: str, device: torch.device) -> bool:
    """Resolve a ``backend`` argument ("auto", "torch" or "triton") for tensors on ``device``.

    "auto" picks Triton for CUDA tensors when Triton imports, torch otherwise.
    """
    if backend == "torch":
        return False
    if backend == "triton":
        if not triton_importable():
            raise RuntimeError("backend='triton' but triton is not installed")
        return True
    if backend != "auto":
        raise ValueError(f"backend must be 'auto', 'torch' or 'triton', got {backend!r}")
    return device.type == "cuda" and triton_importable()


def next_pow2(n: int) -> int:
    """The smallest power of two >= ``max(n, 1)``."""
    return 1 << max(int(n) - 1, 0).bit_length()


class TritonKernel:
    """A ``triton.language`` function, compiled on first use for the device it is launched on.

    ``kernel.on(device)[grid](*args)`` launches it: compiled with ``triton.jit`` for CUDA tensors
    (unless ``TRITON_INTERPRET=1``), interpreted by Triton on the CPU otherwise.
    """

    def __init__(self, fn):
        self.fn = fn
        self.__doc__ = fn.__doc__
        self._compiled = None
        self._interpreted = None

    def on(self, device: torch.device):
        """The launchable kernel for tensors on ``device`` (index it with the grid)."""
        if self.fn.__globals__.get("tl") is None:
            import triton.language

            self.fn.__globals__["tl"] = triton.language
        if device.type == "cuda" and not interpret_mode():
            if self._compiled is None:
                import triton

                self._compiled = triton.jit(self.fn)
            return self._compiled
        if self._interpreted is None:
            from triton.runtime.interpreter import InterpretedFunction

            self._interpreted = InterpretedFunction(self.fn)
        return self._interpreted

    def launch(self, device: torch.device, grid: tuple, *args, **kwargs) -> None:
        """Run the kernel over ``grid`` for tensors on ``device``.

        Interpreted runs silence NumPy's floating-point warnings (``-inf - -inf`` in a branch that
        ``tl.where`` discards is normal kernel code).
        """
        fn = self.on(device)
        if fn is self._interpreted:
            import numpy as np

            with np.errstate(all="ignore"):
                fn[grid](*args, **kwargs)
        else:
            fn[grid](*args, **kwargs)


def triton_kernel(fn) -> TritonKernel:
    """Decorator: wrap a kernel body in a :class:`TritonKernel` (no Triton import until launch)."""
    return TritonKernel(fn)
