"""The :class:`Monitor` protocol implementation shared by every monitor.

A monitor is a forkable token constraint over a *buffer*: the ``prefix`` it was created with plus
the bytes of every token advanced since. It is dormant (every ordinary token and EOS allowed,
except tokens a monitor excludes in every state, see :mod:`.identindex`) until its trigger fires
at the end of the buffer; it then asks a static-analysis back end (under a deadline) and masks
with the answer until a break character, when it is dormant again. When the analysis has no
answer (timeout, error, nothing found) the monitor *abstains* for that trigger: it stays
dormant, and the abstention and its reason are recorded in :attr:`Monitor.stats`.

The analysis of a trigger starts when the trigger fires (when the token that completes ``expr.``
is advanced, or at once for a prefix that ends in one), on a thread, so it runs while the model
computes the next logits (decoding loops ask for the mask after the model call while
:attr:`Monitor.analysis_in_flight`); ``deadline_s`` bounds how long the mask then *waits* for it
(an analysis running ahead is itself bounded by ``AHEAD_S``). ``stats.analysis_s`` records what
each analysis took, ``stats.wait_s`` what decoding waited for it. Forks never start analyses
ahead (they are speculative); they ask when their mask is needed.

Subclasses define the states (immutable values), how bytes move them (``_step``), their masks
(``_row``), and the analysis a pending trigger needs (``_resolve``).
"""

from __future__ import annotations

import hashlib
import threading
import time
from abc import ABC, abstractmethod
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from ..core.bitmask import fill_row, ids_to_bitmask
from ..core.vocab import Vocab
from .analysis import AnalysisError, AnalysisTimeout, Backend

_ANALYSIS_CACHE_ENTRIES = 256
_ROW_CACHE_ENTRIES = 64
_POLL_S = 0.002  # how long a monitor waits, per token, for the late answer of a timed-out trigger


@dataclass(frozen=True)
class Abstention:
    """One trigger the monitor did not mask: ``reason`` (``timeout``; ``no-result``: no names, no
    signature or overloads that differ; ``error``; ``no-match``: the buffer already holds a partial
    name nothing listed starts with), ``offset`` (byte offset of the trigger), ``detail``."""

    reason: str
    offset: int
    detail: str = ""


def validate_on_fork(constraint, tokens: Sequence[int]) -> int:
    """Length of the longest prefix of ``tokens`` that ``constraint`` accepts, found by advancing
    a fork (so the constraint itself is not changed)."""
    f = constraint.fork()
    for i, t in enumerate(tokens):
        if not f.advance(int(t)):
            return i
    return len(tokens)


@dataclass
class MonitorStats:
    """What a monitor did: ``triggers`` (analyses started), ``abstentions`` (each with its
    reason), ``analysis_s`` (wall seconds of every analysis, answered or not), ``masked_steps``
    (masks computed while active), ``late_answers`` (timed-out triggers whose answer arrived while
    the name was still being written, so its remaining tokens were masked), ``wait_s`` (per
    trigger, how long the mask waited for the analysis: less than ``analysis_s`` when it was
    started ahead, at the trigger, and ran while the model did, up to the thread hand-off: the
    moment between the analysis finishing and the waiting thread running again). Forks of one
    monitor share one record."""

    triggers: int = 0
    abstentions: list[Abstention] = field(default_factory=list)
    analysis_s: list[float] = field(default_factory=list)
    wait_s: list[float] = field(default_factory=list)
    masked_steps: int = 0
    late_answers: int = 0

    def abstention_reasons(self) -> dict[str, int]:
        """Count of abstentions per reason."""
        out: dict[str, int] = {}
        for a in self.abstentions:
            out[a.reason] = out.get(a.reason, 0) + 1
        return out


class _Shared:
    """State shared by a monitor and its forks: stats, the analysis cache (LRU, bounded)."""

    def __init__(self):
        self.stats = MonitorStats()
        self.analysis: OrderedDict = OrderedDict()
        self.inflight: dict = {}  # key -> _Prefetch, oldest first

    def cached(self, key):
        hit = self.analysis.get(key, _MISS)
        if hit is not _MISS:
            self.analysis.move_to_end(key)
        return hit

    def store(self, key, value) -> None:
        self.analysis[key] = value
        while len(self.analysis) > _ANALYSIS_CACHE_ENTRIES:
            self.analysis.popitem(last=False)


_MISS = object()
AHEAD_S = 5.0  # the bound of an analysis started ahead at its trigger
_INFLIGHT = 8  # analyses started ahead and not consumed (a rolled-back trigger's is dropped)


class _Prefetch:
    """One analysis running ahead on a thread: ``query(deadline_s)``'s value or error, and its
    wall time from the start."""

    def __init__(self, query, deadline_s: float):
        self.t0 = time.perf_counter()
        self.deadline_s = deadline_s
        self.done = threading.Event()
        self.value = self.error = None
        self.elapsed = 0.0
        threading.Thread(target=self._run, args=(query,), name="guidewire-monitor-prefetch",
                         daemon=True).start()

    def _run(self, query) -> None:
        try:
            self.value = query(self.deadline_s)
        except BaseException as exc:  # noqa: BLE001 -- handed to the monitor that consumes it
            self.error = exc
        finally:
            self.elapsed = time.perf_counter() - self.t0
            self.done.set()

    def age(self) -> float:
        """Seconds since the analysis started."""
        return time.perf_counter() - self.t0


class Monitor(ABC):
    """A constraint that is dormant until its trigger fires (see the module docstring).

    Implements the grammar-matcher protocol of :class:`guidewire.core.Constraint`:
    ``fill_bitmask``, ``advance``, ``validate``, ``rollback``, ``fork``, ``is_accepting``,
    ``is_terminated``, ``forced_tokens``; plus :attr:`stats` and :attr:`text` (the buffer).
    """

    name = "monitor"

    def __init__(self, vocab: Vocab, prefix: str, *, suffix: str = "", path: str | None = None,
                 backend: Backend, deadline_s: float = 0.5, prefetch: bool = True):
        if not isinstance(prefix, str) or not isinstance(suffix, str):
            raise TypeError(f"prefix and suffix must be str, got {type(prefix).__name__} and "
                            f"{type(suffix).__name__}")
        if not deadline_s > 0:
            raise ValueError(f"deadline_s must be > 0, got {deadline_s}")
        self.vocab = vocab
        self.suffix = suffix
        self.path = path
        self.backend = backend
        self.deadline_s = float(deadline_s)
        self._shared = _Shared()
        self._buf = bytearray(prefix.encode("utf-8"))
        self._hist: list[tuple[int, object]] = []
        self._rows: OrderedDict = OrderedDict()
        self._prefetching = bool(prefetch)
        self._ahead = None  # (pending state, analysis key) of the trigger last started ahead
        self._state = self._initial_state(bytes(self._buf))
        self._prefetch()

    # -- subclass hooks ---------------------------------------------------------------------------
    @abstractmethod
    def _initial_state(self, buf: bytes):
        """The state for a fresh buffer (may be a pending trigger)."""

    @abstractmethod
    def _step(self, state, data: bytes, buf: bytes):
        """State after ``data`` was appended (``buf`` is the buffer including ``data``)."""

    @abstractmethod
    def _row(self, state) -> np.ndarray:
        """Packed int32 mask row of a resolved state."""

    def _pending(self, state) -> bool:
        """Whether ``state`` is a trigger that still needs its analysis."""
        return False

    def _resolve(self, state, buf: bytes):
        """The resolved state of a pending trigger (runs the analysis through :meth:`_analyse`)."""
        return state

    def _accepting(self, state) -> bool:
        """Whether EOS is allowed in a resolved state."""
        return True

    # -- shared machinery -------------------------------------------------------------------------
    @property
    def stats(self) -> MonitorStats:
        """The :class:`MonitorStats` record (shared with forks)."""
        return self._shared.stats

    @property
    def text(self) -> str:
        """The buffer: the prefix plus the text of the tokens advanced so far."""
        return self._buf.decode("utf-8", errors="replace")

    @property
    def active(self) -> bool:
        """Whether the monitor is masking now (a trigger fired and the analysis answered)."""
        return not self._dormant(self._current())

    def _dormant(self, state) -> bool:
        return True

    def _in_segment(self, state) -> bool:
        """Whether ``state`` masks a short segment worth a segment search (a name being written)."""
        return False

    @property
    def segment_open(self) -> bool:
        """Whether the monitor is masking a short segment (a listed name being written), without
        running a pending analysis: a new trigger not yet resolved counts as closed."""
        return self._in_segment(self._state)

    def _query_for(self, state, buf: bytes):
        """``(kind, offset, query)`` of the analysis a pending ``state`` needs (None: none)."""
        return None

    @property
    def analysis_in_flight(self) -> bool:
        """Whether the current trigger's analysis was started ahead and has not answered yet (a
        decoding loop may then run the model first and ask for the mask after)."""
        ahead = self._ahead
        if ahead is None or ahead[0] is not self._state:  # not the trigger started ahead
            return False
        pre = self._shared.inflight.get(ahead[1])
        return pre is not None and not pre.done.is_set()

    def _prefetch(self) -> None:
        """Start the analysis of a trigger that just fired, on a thread, so that it runs while
        the model does (only the monitor decoding uses does this, never its forks)."""
        if not self._prefetching or not self._pending(self._state):
            return
        spec = self._query_for(self._state, bytes(self._buf))
        if spec is None:
            return
        kind, offset, query = spec
        key = self._key(kind, offset)
        self._ahead = (self._state, key)
        sh = self._shared
        if key in sh.inflight or sh.cached(key) is not _MISS:
            return
        # ahead of the mask, the query may take longer than the deadline (which bounds the wait
        # once the mask is asked for); past its own bound it ends, and a late answer is kept
        sh.inflight[key] = _Prefetch(query, max(self.deadline_s, AHEAD_S))
        while len(sh.inflight) > _INFLIGHT:
            sh.inflight.pop(next(iter(sh.inflight)))

    def _trigger_text(self, offset: int) -> bytes:
        """The buffer an analysis of the trigger at byte ``offset`` sees (through that byte)."""
        return bytes(self._buf[:offset + 1])

    def _key(self, kind: str, offset: int) -> bytes:
        h = hashlib.blake2b(digest_size=16)
        for part in (kind.encode(), self._trigger_text(offset), b"\0", self.suffix.encode(), b"\0",
                     str(self.path).encode()):
            h.update(part)
        return h.digest()  # a digest, not the buffer: the cache stays small (entries x answer size)

    def _late_answer(self, kind: str, offset: int, query):
        """The answer of a trigger whose analysis timed out, if it has arrived since: from the
        analysis started ahead when there was one, else a poll of at most ``_POLL_S`` (only for
        back ends that keep late answers); None when it has not come."""
        key = self._key(kind, offset)
        hit = self._shared.cached(key)
        if hit is not _MISS:
            return hit
        pre = self._shared.inflight.get(key)
        if pre is not None:  # started ahead and still running at the deadline: its answer is here
            if not pre.done.is_set():
                return None
            self._shared.inflight.pop(key, None)
            value = pre.value if pre.error is None else None
            self._shared.store(key, value or None)
            if value:
                self._shared.stats.late_answers += 1
            return value or None
        if not getattr(self.backend, "keeps_late_answers", False):
            return None
        try:
            value = query(_POLL_S)
        except (AnalysisTimeout, AnalysisError):
            return None
        self._shared.store(key, value or None)
        if value:
            self._shared.stats.late_answers += 1
        return value or None

    def _analyse(self, kind: str, offset: int, query):
        """Run ``query(deadline_s)`` for the trigger at byte ``offset``; cached per buffer text.

        Returns the answer, or None after recording an abstention (timeout, error, no result).
        """
        key = self._key(kind, offset)
        hit = self._shared.cached(key)
        if hit is not _MISS:
            return hit
        st = self._shared.stats
        st.triggers += 1
        t0 = time.perf_counter()
        pre = self._shared.inflight.get(key)
        try:
            if pre is None:
                value = query(self.deadline_s)
            else:  # started ahead: decoding waits at most the deadline from now
                if not pre.done.wait(self.deadline_s):
                    raise AnalysisTimeout(f"analysis did not finish within {self.deadline_s:.3f} s of "
                                          f"the mask being asked for ({pre.age():.3f} s after its trigger)")
                if pre.error is not None:
                    raise pre.error
                value = pre.value
            reason = None if value else "no-result"
            detail = ""
        except AnalysisTimeout as exc:
            value, reason, detail = None, "timeout", str(exc)
        except AnalysisError as exc:
            value, reason, detail = None, "error", str(exc)
        wait = time.perf_counter() - t0
        if pre is not None and pre.done.is_set():
            self._shared.inflight.pop(key, None)  # else kept: a late answer may still come from it
        st.analysis_s.append(pre.elapsed if pre is not None and pre.done.is_set() else wait)
        st.wait_s.append(wait)
        if reason is not None:
            st.abstentions.append(Abstention(reason, offset, detail))
            value = None
        if reason != "timeout":  # a timeout may answer next time; anything else is final
            self._shared.store(key, value)
        return value

    def _current(self):
        if self._pending(self._state):
            self._state = self._resolve(self._state, bytes(self._buf))
        return self._state

    def current_mask(self) -> np.ndarray:
        """The packed int32 mask row of the current state."""
        state = self._current()
        row = self._rows.get(state)
        if row is None:
            row = self._row(state)
            if not self._dormant(state):
                self._shared.stats.masked_steps += 1
            self._rows[state] = row
            while len(self._rows) > _ROW_CACHE_ENTRIES:
                self._rows.popitem(last=False)
        return row

    def fill_bitmask(self, bitmask, row: int = 0) -> None:
        """Write the allowed-token bits for the current state into ``bitmask[row]``."""
        fill_row(bitmask, row, self.current_mask())

    def allows(self, token_id: int) -> bool:
        """Whether ``token_id`` is allowed now."""
        if not 0 <= token_id < self.vocab.vocab_size:
            return False
        words = self.current_mask()
        return bool((int(words[token_id >> 5]) >> (token_id & 31)) & 1)

    def advance_bytes(self, data: bytes) -> None:
        """Append raw text without a mask check (for a composition that gives the monitor part
        of a token); undone by one :meth:`rollback` step like a token."""
        state = self._current()
        self._hist.append((len(self._buf), state))
        self._buf.extend(data)
        self._state = self._step(state, data, bytes(self._buf))
        self._prefetch()

    def _free_row(self) -> np.ndarray:
        """Every ordinary token and EOS (the row of a switched-off monitor)."""
        row = self.vocab._cache.get("monitor_free_row")
        if row is None:
            row = ids_to_bitmask(self.vocab.normal_ids, self.vocab.vocab_size) | \
                ids_to_bitmask(sorted(self.vocab.eos_ids), self.vocab.vocab_size)
            self.vocab._cache["monitor_free_row"] = row
        return row

    def advance(self, token_id: int) -> bool:
        """Consume ``token_id``; False and no state change if it is not allowed."""
        if not self.allows(token_id) or token_id in self.vocab.eos_ids:
            return False
        data = self.vocab.token_bytes[token_id] if token_id < len(self.vocab.token_bytes) else b""
        self._hist.append((len(self._buf), self._state))
        self._buf.extend(data)
        self._state = self._step(self._state, data, bytes(self._buf))
        self._prefetch()
        return True

    def validate(self, tokens: Sequence[int]) -> int:
        """Length of the longest accepted prefix of ``tokens``; the state is not changed."""
        return validate_on_fork(self, tokens)

    def rollback(self, n: int = 1) -> None:
        """Undo the last ``n`` advanced tokens."""
        if n < 0 or n > len(self._hist):
            raise ValueError(f"cannot roll back {n} tokens, {len(self._hist)} were advanced")
        for _ in range(n):
            size, state = self._hist.pop()
            del self._buf[size:]
            self._state = state

    @property
    def num_tokens(self) -> int:
        """Number of tokens advanced (and not rolled back)."""
        return len(self._hist)

    def is_accepting(self) -> bool:
        """Whether EOS is allowed now (always while dormant)."""
        return self._accepting(self._current())

    def is_terminated(self) -> bool:
        """Always False: a monitor never ends the text by itself."""
        return False

    def forced_tokens(self, limit: int = 64) -> list[int]:
        """Tokens forced from here (each the only allowed token in turn, EOS not allowed)."""
        f = self.fork()
        out: list[int] = []
        while len(out) < limit:
            words = f.current_mask().view(np.uint32)
            nz = np.flatnonzero(words)
            if nz.size != 1 or (int(words[nz[0]]) & (int(words[nz[0]]) - 1)):
                break
            tok = int(nz[0]) * 32 + int(words[nz[0]]).bit_length() - 1
            if tok in self.vocab.eos_ids or not f.advance(tok):
                break
            out.append(tok)
        return out

    def fork(self) -> "Monitor":
        """An independent copy of this monitor's state (stats and analysis cache shared)."""
        f = object.__new__(type(self))
        f.__dict__.update(self.__dict__)
        f._buf = bytearray(self._buf)
        f._hist = list(self._hist)
        f._rows = OrderedDict(self._rows)
        f._prefetching = False  # forks are speculative: their triggers are analysed when asked
        return f

    def __repr__(self) -> str:
        return f"{type(self).__name__}(state={self._state!r}, tokens={self.num_tokens})"
