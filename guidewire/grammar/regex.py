"""Python ``re`` syntax -> byte-level Thompson NFA (UTF-8 aware).

Parsing uses the standard library's own ``re`` parser (so the accepted syntax and the
error positions are exactly Python's); the tree is turned into a nondeterministic
automaton over *bytes*, each character class expanded into UTF-8 byte-range paths.
Character classes and IGNORECASE follow Python ``re`` exactly (``\\d``, ``\\w``, ``\\s`` as
``re`` defines them, Unicode unless the ASCII flag is set). Lookarounds, backreferences,
word boundaries, atomic groups and possessive repeats cannot be expressed by a
finite automaton over the text and raise :class:`UnsupportedFeatureError`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

try:  # Python >= 3.11
    from re import _compiler
    from re import _constants as C
    from re import _parser as sre_parse
except ImportError:  # pragma: no cover
    import sre_compile as _compiler  # type: ignore
    import sre_constants as C  # type: ignore
    import sre_parse  # type: ignore

from ..core.errors import LimitExceededError, RegexSyntaxError, UnsupportedFeatureError
from . import native
from .charset import (Intervals, case_fold, category, complement, ignorecase_closure, normalize, union,
                      utf8_template)

MAX_NFA_STATES = 250_000
#: (op, repr(av), flags) -> Intervals of a class under IGNORECASE; cleared when it holds more than
#: _IGNORECASE_MEMO_INTERVALS intervals in all (about 100 bytes each: a bound of ~20 MB)
_IGNORECASE_MEMO: dict = {}
_IGNORECASE_MEMO_INTERVALS = 200_000

_CATEGORIES = {
    C.CATEGORY_DIGIT: ("digit", False), C.CATEGORY_NOT_DIGIT: ("digit", True),
    C.CATEGORY_WORD: ("word", False), C.CATEGORY_NOT_WORD: ("word", True),
    C.CATEGORY_SPACE: ("space", False), C.CATEGORY_NOT_SPACE: ("space", True),
}
_START_ANCHORS = {C.AT_BEGINNING, C.AT_BEGINNING_STRING}
_END_ANCHORS = {C.AT_END, C.AT_END_STRING}


class NFA:
    """A byte-level NFA with epsilon moves; many terminals may share one instance."""

    def __init__(self, max_states: int = MAX_NFA_STATES):
        # per-state lists of epsilon targets and of (lo, hi, target) edges: ints only, so the
        # compiled module keeps them out of the cyclic collector (see _grow)
        self.eps: list[list[int]] = []
        self.edges: list[list[tuple[int, int, int]]] = []
        self.max_states = max_states
        self._class_cache: dict = {}  # Intervals -> UTF-8 template (one compile's classes)
        self._grow(0)

    def __len__(self) -> int:
        return len(self.eps)

    def reserve(self, count: int) -> None:
        """Raise :class:`LimitExceededError` unless ``count`` more states fit under ``max_states``."""
        if len(self.eps) + count > self.max_states:
            raise LimitExceededError(
                f"automaton exceeds {self.max_states} NFA states (a very long pattern or large repeat count)")

    def freeze(self) -> None:
        """Make the automaton read-only: its per-state lists become tuples, which the cyclic
        garbage collector stops tracking (a grammar's NFA has tens of thousands of states, and
        each tracked list lengthens every full collection: the pauses were most of the worst
        mask times). Adding states or edges afterwards raises ``AttributeError``."""
        compiled = native.module()
        if compiled is not None:   # in one C pass, untracked (a tuple of tuples stays tracked otherwise)
            self.eps = compiled.freeze_lists(self.eps)
            self.edges = compiled.freeze_lists(self.edges)
        else:
            self.eps = tuple(tuple(e) for e in self.eps)
            self.edges = tuple(tuple(e) for e in self.edges)

    def truncate(self, size: int) -> None:
        """Forget every state from ``size`` on (a build that failed and added edges only from
        states it created itself)."""
        del self.eps[size:]
        del self.edges[size:]

    def _grow(self, count: int) -> None:
        """Append ``count`` fresh states' lists. With the compiled module they (and the two outer
        lists) are untracked by the cyclic collector: they hold only ints and tuples of ints, and a
        large terminal's hundreds of thousands of tracked lists were walked by every full
        collection during its compile."""
        if not isinstance(self.eps, list):
            raise AttributeError("the NFA is frozen: no state can be added")
        grow_state_lists(self.eps, self.edges, count)

    def add_state(self) -> int:
        """A fresh state id."""
        self.reserve(1)
        self._grow(1)
        return len(self.eps) - 1

    def add_chars(self, src: int, dst: int, chars: Intervals) -> None:
        """Edges from ``src`` to ``dst`` consuming one character of ``chars`` as UTF-8."""
        template = self._class_cache.get(chars)
        if template is None:
            template = self._class_cache[chars] = utf8_template(chars)
        self.add_template(src, dst, template)

    def add_template(self, src: int, dst: int, template) -> None:
        """A copy of an acyclic byte automaton (:data:`~.charset.Template`) from ``src`` to ``dst``
        (in C where the compiled module is on: a counted Unicode class copies one per count)."""
        self.reserve(len(template) - 1)
        base = len(self.eps)
        self._grow(len(template) - 1)
        compiled = native.module()
        if compiled is not None:
            compiled.template_into(self.edges, src, dst, base, template)
        else:
            self._add_template_python(src, dst, base, template)

    def _add_template_python(self, src: int, dst: int, base: int, template) -> None:
        """:meth:`add_template`'s edges after its states are grown (the reference of ``template_into``)."""
        ids = [src] + list(range(base, base + len(template) - 1))
        for i, node in enumerate(template):
            out = self.edges[ids[i]]
            for lo, hi, child in node:
                out.append((lo, hi, dst if child < 0 else ids[child]))

    def add_bytes(self, src: int, dst: int, lo: int, hi: int) -> None:
        """An edge consuming one raw byte in ``[lo, hi]``."""
        self.edges[src].append((lo, hi, dst))


def grow_state_lists(eps: list, edges: list, count: int) -> None:
    """Append ``count`` fresh states' lists to an automaton's ``eps`` and ``edges`` (an :class:`NFA`'s
    or a character automaton's): untracked by the cyclic collector with the compiled module
    (``grow_states``: they hold only ints and tuples of ints), plain lists without it."""
    compiled = native.module()
    if compiled is not None:
        compiled.grow_states(eps, edges, count)
    else:
        eps.extend([] for _ in range(count))
        edges.extend([] for _ in range(count))


@dataclass(frozen=True)
class RegexFragment:
    """Result of compiling a pattern into an :class:`NFA`: entry and exit states.

    ``universal``: states of the fragment from which every continuation of the word read so far
    is in the language (a JSON string's body after an unanchored pattern has matched; see
    :func:`~.jsonstring.json_string_into`); the lexer drops the fragment's other states from a
    set holding one of them (see :meth:`~.lexer.ByteDFA._closure`). ``layers``: the fragment's
    length counters, each ``(lo, layer, shape, elided)``: NFA states ``lo ..`` and, per state, the count
    of characters read before it (int32 bytes, -1 outside the counter), per count the shape of its
    layer (int32 bytes; see :func:`~.jsonstring._counter_layers`), so that token tables can be
    shared between count positions far from the bounds (see :mod:`~.layerfold`), and how many
    layers were left out of its middle (see :mod:`~.elision`; 0: none)."""

    start: int
    end: int
    has_lazy: bool
    nullable: bool
    universal: tuple[int, ...] = ()
    layers: tuple[tuple[int, bytes, bytes, int], ...] = ()


def parse(pattern: str, flags: int = 0):
    """Parse with Python's ``re`` parser; syntax errors become :class:`RegexSyntaxError`."""
    try:
        return sre_parse.parse(pattern, flags)
    except re.error as exc:
        line = getattr(exc, "lineno", None)
        col = getattr(exc, "colno", None)
        raise RegexSyntaxError(f"{exc.msg} in {pattern!r}", line, col) from None
    except (OverflowError, RecursionError, ValueError) as exc:
        raise RegexSyntaxError(f"{exc} in {pattern!r}") from None


class _Builder:
    def __init__(self, nfa, pattern: str, *, search: bool = False, relax: bool = False):
        self.nfa = nfa
        self.pattern = pattern
        self.has_lazy = False
        self.search = search  # unanchored ends match anything (JSON Schema ``pattern``)
        # relax: build a superset language instead of refusing (assertions dropped, a
        # backreference read as any text, atomic/possessive parts as ordinary ones)
        self.relax = relax
        self.relaxed: list[str] = []
        self._charsets: dict = {}   # (op, repr(av), flags) -> Intervals: a class repeated {0,254} is made once

    def unsupported(self, what: str):
        raise UnsupportedFeatureError(f"{what} in regex {self.pattern!r} cannot be enforced by a finite automaton")

    def _relaxed(self, what: str) -> bool:
        """In relax mode record ``what`` and return True; otherwise refuse it."""
        if not self.relax:
            self.unsupported(what)
        self.relaxed.append(what)
        return True

    # -- character sets --------------------------------------------------------------------
    def charset(self, op, av, flags: int) -> Intervals:
        """The codepoints one character node matches, exactly as Python ``re`` does (IGNORECASE
        included: settled by ``re`` itself on the codepoints whose case can matter)."""
        if op is C.LITERAL:
            base = ((av, av),)
        else:
            key = (op, repr(av), flags & (re.ASCII | re.DOTALL))
            base = self._charsets.get(key)
            if base is None:
                base = self._charsets[key] = self._charset(op, av, flags)
        if not flags & re.IGNORECASE or op is C.ANY:
            return base
        key = (op, repr(av), flags & (re.IGNORECASE | re.ASCII))
        hit = _IGNORECASE_MEMO.get(key)
        if hit is None:
            mode = re.IGNORECASE | (re.ASCII if flags & re.ASCII else re.UNICODE)
            rx = _compiler.compile(sre_parse.SubPattern(sre_parse.State(), [(op, av)]), mode)
            hit = ignorecase_closure(base, lambda ch: rx.fullmatch(ch) is not None)
            if sum(len(v) for v in _IGNORECASE_MEMO.values()) + len(hit) > _IGNORECASE_MEMO_INTERVALS:
                _IGNORECASE_MEMO.clear()
            _IGNORECASE_MEMO[key] = hit
        return hit

    def _charset(self, op, av, flags: int) -> Intervals:
        """The codepoints ``op`` matches ignoring IGNORECASE."""
        ascii_only = bool(flags & re.ASCII)
        if op is C.LITERAL:
            return ((av, av),)
        if op is C.NOT_LITERAL:
            return complement(((av, av),))
        if op is C.ANY:
            return complement(()) if flags & re.DOTALL else complement(((10, 10),))
        if op is C.IN:
            negate = False
            parts = []
            for sub_op, sub_av in av:
                if sub_op is C.NEGATE:
                    negate = True
                elif sub_op is C.LITERAL:
                    parts.append(((sub_av, sub_av),))
                elif sub_op is C.RANGE:
                    parts.append(((sub_av[0], sub_av[1]),))
                elif sub_op is C.CATEGORY:
                    parts.append(self.category(sub_av, ascii_only))
                else:
                    self.unsupported(f"class item {sub_op}")
            iv = union(*parts) if parts else ()
            return complement(iv) if negate else iv
        if op is C.CATEGORY:
            return normalize(self.category(av, ascii_only))
        raise AssertionError(op)  # pragma: no cover - guarded by caller

    def category(self, cat, ascii_only: bool) -> Intervals:
        if cat not in _CATEGORIES:
            self.unsupported(f"category {cat}")
        name, neg = _CATEGORIES[cat]
        iv = category(name, ascii_only)
        return complement(iv) if neg else iv

    # -- structure ------------------------------------------------------------------------
    def seq(self, items, flags: int, at_start: bool, at_end: bool) -> tuple[int, int]:
        nfa = self.nfa
        start = nfa.add_state()
        cur = start
        items = list(items)
        zero = [op is C.AT for op, _ in items]
        if self.search and (at_start or at_end):
            cur = self._search_ends(items, zero, at_start, at_end, start)
            if cur is None:
                return start, self._search_tail(start)
        for i, (op, av) in enumerate(items):
            first = at_start and all(zero[:i])
            last = at_end and all(zero[i + 1:])
            if op is C.AT:
                if (av in _START_ANCHORS and first) or (av in _END_ANCHORS and last):
                    continue
                if av in _START_ANCHORS or av in _END_ANCHORS:
                    self._relaxed("an anchor (^, $, \\A, \\Z) that is not at the start or end")
                else:
                    self._relaxed(f"the zero-width assertion {av}")
                continue  # relaxed: the assertion is dropped
            if self.search:  # an explicit anchor here already fixed this end
                first = first and self._end_kind(items, zero, reverse=False) != "anchor"
                last = last and self._end_kind(items, zero, reverse=True) != "anchor"
            s, e = self.node(op, av, flags, first, last)
            nfa.eps[cur].append(s)
            cur = e
        if self.search and at_end and self._end_kind(items, zero, reverse=True) == "any":
            cur = self._search_tail(cur)
        return start, cur

    # -- search semantics (an unanchored end matches any text) ------------------------------
    def _end_kind(self, items, zero, reverse: bool) -> str:
        """How one end of a sequence is fixed: ``anchor``, ``delegate`` (a group decides), ``any``."""
        order = range(len(items) - 1, -1, -1) if reverse else range(len(items))
        anchors = _END_ANCHORS if reverse else _START_ANCHORS
        for i in order:
            op, av = items[i]
            if zero[i]:
                if av in anchors:
                    return "anchor"
                continue
            return "delegate" if op in (C.SUBPATTERN, C.BRANCH) else "any"
        return "any"

    def _search_ends(self, items, zero, at_start: bool, at_end: bool, start: int):
        if not any(not z for z in zero) and not any(av in _START_ANCHORS | _END_ANCHORS
                                                     for op, av in items if op is C.AT):
            return None  # an empty (sub)pattern: matches anywhere
        if at_start and self._end_kind(items, zero, reverse=False) == "any":
            return self._search_tail(start)
        return start

    def _search_tail(self, cur: int) -> int:
        loop = self.nfa.add_state()
        self.nfa.eps[cur].append(loop)
        self.nfa.add_chars(loop, loop, complement(()))
        return loop

    def node(self, op, av, flags: int, at_start: bool, at_end: bool) -> tuple[int, int]:
        nfa = self.nfa
        if op in (C.LITERAL, C.NOT_LITERAL, C.ANY, C.IN, C.CATEGORY):
            s, e = nfa.add_state(), nfa.add_state()
            nfa.add_chars(s, e, self.charset(op, av, flags))
            return s, e
        if op is C.SUBPATTERN:
            _group, add_flags, del_flags, sub = av
            return self.seq(sub, (flags | add_flags) & ~del_flags, at_start, at_end)
        if op is C.BRANCH:
            s, e = nfa.add_state(), nfa.add_state()
            for alt in av[1]:
                a, b = self.seq(alt, flags, at_start, at_end)
                nfa.eps[s].append(a)
                nfa.eps[b].append(e)
            return s, e
        if op in (C.MAX_REPEAT, C.MIN_REPEAT):
            if op is C.MIN_REPEAT:
                self.has_lazy = True
            lo, hi, sub = av
            return self.repeat(lo, hi, sub, flags)
        if op is C.POSSESSIVE_REPEAT:
            self._relaxed("a possessive repeat (*+, ++, ?+)")
            lo, hi, sub = av
            return self.repeat(lo, hi, sub, flags)
        if op is C.ATOMIC_GROUP:
            self._relaxed("an atomic group (?>...)")
            return self.seq(av, flags, at_start, at_end)
        if op in (C.ASSERT, C.ASSERT_NOT):
            self._relaxed("a lookaround (?=, ?!, ?<=, ?<!)")
            s = nfa.add_state()
            return s, s
        if op is C.GROUPREF:
            self._relaxed("a backreference")
            s = nfa.add_state()
            return s, self._search_tail(s)
        if op is C.GROUPREF_EXISTS:
            self._relaxed("a conditional group (?(n)...|...)")
            _group, yes, no = av
            s, e = nfa.add_state(), nfa.add_state()
            for alt in (yes, no):
                if alt is None:
                    nfa.eps[s].append(e)
                    continue
                a, b = self.seq(alt, flags, at_start, at_end)
                nfa.eps[s].append(a)
                nfa.eps[b].append(e)
            return s, e
        self.unsupported(f"the construct {op}")
        raise AssertionError  # unreachable

    def repeat(self, lo: int, hi, sub, flags: int) -> tuple[int, int]:
        nfa = self.nfa
        unbounded = hi is C.MAXREPEAT or hi == C.MAXREPEAT
        if lo > 100_000 or (not unbounded and hi > 100_000):
            raise LimitExceededError(f"repeat count {{{lo},{hi}}} too large in regex {self.pattern!r}")
        start = nfa.add_state()
        cur = start
        for _ in range(lo):
            a, b = self.seq(sub, flags, False, False)
            nfa.eps[cur].append(a)
            cur = b
        if unbounded:
            a, b = self.seq(sub, flags, False, False)
            nfa.eps[cur].append(a)
            nfa.eps[b].append(a)
            end = nfa.add_state()
            nfa.eps[cur].append(end)
            nfa.eps[b].append(end)
            return start, end
        end = nfa.add_state()
        nfa.eps[cur].append(end)
        for _ in range(hi - lo):
            a, b = self.seq(sub, flags, False, False)
            nfa.eps[cur].append(a)
            nfa.eps[b].append(end)
            cur = b
        return start, end


def compile_into(nfa: NFA, pattern: str, flags: int = 0) -> RegexFragment:
    """Add ``pattern`` (Python ``re`` syntax, ``re`` flags) to ``nfa``; return its entry/exit."""
    tree = parse(pattern, flags)
    builder = _Builder(nfa, pattern)
    start, end = builder.seq(list(tree), tree.state.flags | flags, True, True)
    return RegexFragment(start, end, builder.has_lazy, _reaches(nfa, start, end))


def literal_into(nfa: NFA, text: str, ignore_case: bool = False) -> RegexFragment:
    """Add an exact string (optionally case-insensitive) to ``nfa``.

    A case-insensitive literal (Lark's ``"select"i``) folds an ASCII letter to its ASCII pair
    only, as SQL and most languages read keywords; Python's ``re`` would also let ``ſ`` match
    ``s`` and the Kelvin sign ``K`` match ``k``. Non-ASCII characters fold as ``re`` does.
    """
    start = nfa.add_state()
    cur = start
    for ch in text:
        nxt = nfa.add_state()
        iv = ((ord(ch), ord(ch)),)
        if ignore_case and ch.isascii() and ch.isalpha():
            iv = tuple(sorted({(ord(ch.lower()),) * 2, (ord(ch.upper()),) * 2}))
        elif ignore_case:
            iv = case_fold(iv)
        nfa.add_chars(cur, nxt, iv)
        cur = nxt
    return RegexFragment(start, cur, False, not text)


def _reaches(nfa: NFA, start: int, end: int) -> bool:
    seen = {start}
    stack = [start]
    while stack:
        s = stack.pop()
        if s == end:
            return True
        for t in nfa.eps[s]:
            if t not in seen:
                seen.add(t)
                stack.append(t)
    return False
