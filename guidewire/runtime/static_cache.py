"""One sequence's KV cache preallocated on the device, and a CUDA graph of its one-token step.

Eager decoding of a small model on a GPU is bound by kernel launches: SmolLM2-135M in float32
runs ~1,400 kernels a token (30 layers, ~46 each), and on the H200 it was first measured on an
eager token took ~24 ms where the kernels' own GPU time is ~2.3 ms (``bench/cuda_step_profile.py``).
A ``StaticCache`` keeps the cache tensors at fixed addresses, so the one-token step (ids,
position, cache in place, logits out) can be captured once as a CUDA graph and replayed per
token: one launch instead of ~1,400 (16.5 ms a token there: each graph node still costs that
virtualised GPU ~12 us). Positions past the sequence's length hold stale keys that the causal
mask (built from ``cache_position``) never lets a query see, so truncating is forgetting the
length, and prefill simply overwrites. The cache writes where each layer's device-side counter
(``cumulative_length``) says, and the graph advances it; it is set to the step's position
whenever that differs from what the last step left (after a prefill, a truncation, the capture).

:class:`StaticDecoder` is used by :class:`~guidewire.runtime.model.HFModel` on CUDA devices
(``GUIDEWIRE_CUDA_GRAPHS=0`` keeps the dynamic cache; ``GUIDEWIRE_STATIC_CACHE_TOKENS`` sizes
the cache). Steps of several tokens (prefill, speculative verification) run eagerly on the same
cache. A fork gets an ordinary dynamic cache holding a copy of the kept positions. A dropped
sequence's decoder (cache and graph) is kept for the next sequence of the same model
(:func:`acquire` / :func:`release`, at most :data:`POOL_SIZE` idle), so capturing is paid once.
"""

from __future__ import annotations

import threading
from typing import Sequence

import torch

from ..core.limits import env_number

STATIC_CACHE_TOKENS = 4096   # default cache length (positions) of a sequence on a CUDA device
WARMUP_STEPS = 2             # eager runs of the step on a side stream before it is captured
POOL_SIZE = 4                # idle decoders (cache + graph) kept per model for the next sequences

_POOL_ATTR = "_guidewire_static_decoders"   # the idle decoders, kept on the module itself (a cycle
_pool_lock = threading.Lock()               # the collector frees with the module, unlike a global map)


def acquire(module, max_len: int, *, graph: bool) -> "StaticDecoder":
    """An idle decoder of ``module`` with ``max_len`` positions (its cache and captured graph
    reused: a sequence's first token then costs no capture), or a new one."""
    with _pool_lock:
        idle = module.__dict__.get(_POOL_ATTR, [])
        for i, dec in enumerate(idle):
            if dec.max_len == max_len and dec.graph_wanted_at_start == graph:
                return idle.pop(i)
    return StaticDecoder(module, max_len, graph=graph)


def release(module, decoder: "StaticDecoder") -> None:
    """Give ``decoder`` back for the next sequence of ``module`` (dropped past :data:`POOL_SIZE`).
    Its stale positions are never seen: a sequence starts with a prefill from position 0."""
    with _pool_lock:
        idle = module.__dict__.setdefault(_POOL_ATTR, [])
        if len(idle) < POOL_SIZE:
            idle.append(decoder)


def static_cache_tokens(module) -> int:
    """Positions a static cache holds: ``$GUIDEWIRE_STATIC_CACHE_TOKENS`` or
    :data:`STATIC_CACHE_TOKENS`, at most the model's context length."""
    n = int(env_number("GUIDEWIRE_STATIC_CACHE_TOKENS", STATIC_CACHE_TOKENS, int))
    ctx = getattr(module.config, "max_position_embeddings", None)
    return min(n, int(ctx)) if ctx else n


class StaticDecoder:
    """A ``StaticCache`` of ``max_len`` positions for one sequence of ``module``, and (with
    ``graph``, on CUDA) a CUDA graph of the one-token step, captured at the first such step.

    ``forward(tokens, start, last_only)`` runs ``tokens`` at positions ``start...`` and returns
    float32 logits for each (or the last). Where capturing fails the step stays eager (the
    reason is kept in ``graph_error``)."""

    def __init__(self, module, max_len: int, *, graph: bool):
        from transformers import StaticCache

        self.module = module
        self.max_len = int(max_len)
        self.device = next(module.parameters()).device
        self.cache = StaticCache(config=module.config, max_cache_len=self.max_len)
        self.graph_wanted = graph and self.device.type == "cuda"
        self.graph_wanted_at_start = graph
        self.graph: torch.cuda.CUDAGraph | None = None
        self.graph_error: str | None = None
        self.replays = 0
        self._ids = torch.zeros((1, 1), dtype=torch.long, device=self.device)
        self._pos = torch.zeros(1, dtype=torch.long, device=self.device)
        self._out: torch.Tensor | None = None
        self._counter: int | None = 0       # what every layer's write counter holds (None: unknown)

    def _at(self, start: int) -> None:
        """Make every layer write its next key/value at position ``start``."""
        if self._counter == start:
            return
        for layer in self.cache.layers:
            counter = getattr(layer, "cumulative_length", None)
            if isinstance(counter, torch.Tensor):
                counter.fill_(start)
        self._counter = start

    def _run(self, ids: torch.Tensor, pos: torch.Tensor, last_only: bool) -> torch.Tensor:
        out = self.module(input_ids=ids, past_key_values=self.cache, cache_position=pos,
                          position_ids=pos.unsqueeze(0), use_cache=True, logits_to_keep=1 if last_only else 0)
        return out.logits[0].float()

    def _capture(self) -> None:
        """Capture the one-token step. Warm-up and capture write their key/value at the last
        position, which every real query before it masks out and a real token there overwrites."""
        self.graph_wanted = False
        try:
            last = self.max_len - 1
            self._ids.zero_()
            self._pos.fill_(last)
            side = torch.cuda.Stream(self.device)
            side.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(side), torch.no_grad():
                for _ in range(WARMUP_STEPS):
                    self._counter = None
                    self._at(last)
                    self._run(self._ids, self._pos, True)
            torch.cuda.current_stream(self.device).wait_stream(side)
            self._counter = None
            self._at(last)
            graph = torch.cuda.CUDAGraph()
            # thread-local: other threads' work on the device neither breaks nor joins the capture
            with torch.cuda.graph(graph, capture_error_mode="thread_local"), torch.no_grad():
                self._out = self._run(self._ids, self._pos, True)
            self.graph = graph
        except Exception as exc:  # noqa: BLE001 - any capture failure: stay eager, say why
            self.graph, self._out = None, None
            self.graph_error = f"{type(exc).__name__}: {exc}"
            torch.cuda.synchronize(self.device)
        self._counter = None     # the warm-ups moved the counters

    def forward(self, tokens: Sequence[int], start: int, last_only: bool) -> torch.Tensor:
        """Logits after each of ``tokens`` (or the last) fed at positions ``start, start + 1, ...``."""
        n = len(tokens)
        if start + n > self.max_len:
            raise ValueError(f"static cache of {self.max_len} positions cannot take position {start + n - 1}")
        if n == 1 and start < self.max_len - 1:
            if self.graph is None and self.graph_wanted:
                self._capture()
            if self.graph is not None:
                self._at(start)
                self._ids.fill_(int(tokens[0]))
                self._pos.fill_(start)
                self._counter = None        # unknown until the step has run (it may raise)
                self.graph.replay()
                self._counter = start + 1
                self.replays += 1
                return self._out.clone()
        ids = torch.tensor([list(tokens)], dtype=torch.long, device=self.device)
        pos = torch.arange(start, start + n, dtype=torch.long, device=self.device)
        self._at(start)
        self._counter = None                # a step that raises leaves the counters unknown
        with torch.no_grad():
            out = self._run(ids, pos, last_only)
        self._counter = start + n
        return out

    def to_dynamic(self, length: int):
        """A ``DynamicCache`` holding copies of the first ``length`` positions."""
        from .model import _new_cache

        dyn = _new_cache(self.module)
        if length:
            for i, layer in enumerate(self.cache.layers):
                dyn.update(layer.keys[:, :, :length].clone(), layer.values[:, :, :length].clone(), i)
        return dyn
