"""Indentation-sensitive grammars: NEWLINE/INDENT/DEDENT from line breaks, as Python's tokenizer.

A grammar that declares (``%declare``) ``_NEWLINE``, ``_INDENT`` and ``_DEDENT`` (the built-in ``python``
grammar) uses them as ordinary terminals, but no lexer rule spells them: they are fed to the
Earley parser by :class:`IndentAutomaton`, a post-lexer in the style of Lark's ``Indenter`` and
CPython's tokenizer, from these lexical terminals (added to the grammar's own):

* a line break and the indentation after it (``\\n`` + ``k`` spaces, ``\\n`` + ``t`` tabs, each
  width its own terminal, so the parser knows the width from the lexeme; ``\\r\\n`` and ``\\r``
  count as line breaks); any other whitespace after a break (tabs and spaces mixed, form feeds,
  more than :data:`MAX_SPACES` spaces) is one more terminal whose width is unknown: such a line
  may be blank or comment-only, but a line of code indented so is refused (a known limit);
* ``WS`` (spaces, tabs, form feeds between tokens) and ``LINE_CONT`` (a backslash before a break).

The automaton's states are ``(earley set, indent stack, bracket depth, pending break,
after a continuation)``, interned like Earley sets, with memoised scans, so the compiled
grammar's masks, token tables and fork/rollback work unchanged: the indent stack is part of
the parser state a matcher holds, and each token (whatever whitespace and line breaks it
spans) is decided against it exactly. A break inside brackets is ignored. A break at depth 0
leaves the break *pending* with its width: blank and comment-only lines replace it, and the
next real lexeme first resolves it into ``_NEWLINE`` (when the line had code) and the
``_INDENT``/``_DEDENT`` that CPython emits for that width (a dedent must land on an open level;
tabs compare as CPython does, by columns at tab size 8 and 1 at once). At the end of input a
pending or missing ``_NEWLINE`` and the open levels' ``_DEDENT`` are implied.
"""

from __future__ import annotations

from functools import lru_cache

from ..core.errors import LimitExceededError

INDENT_TERMINALS = ("_NEWLINE", "_INDENT", "_DEDENT")
MAX_SPACES = 160      # widest indentation (spaces) read exactly
MAX_TABS = 24         # deepest indentation (tabs) read exactly
MAX_INDENT = 100      # CPython's MAXINDENT: open indentation levels
MAX_DEPTH = 200       # CPython's MAXLEVEL: open brackets
TAB_SIZE = 8
STATE_BYTES = 400     # an interned state: its key, expected bits, list slots
SCAN_BYTES = 120      # a memoised scan
_BREAK = r"(?:\r\n?|\n)"
_KEY_NEWLINE, _KEY_INDENT, _KEY_DEDENT = -1, -2, -3   # scan memo keys (lexer keys are >= 0)


def lexical_specs():
    """The lexical terminals the indenter reads, as ``(name, regex, priority, width)``; ``width``
    is ``(columns at tab size 8, columns at tab size 1)`` for a line break, None otherwise
    (or for a break followed by whitespace of unknown width)."""
    out = [(f"_NL_S{k}", _BREAK + " " * k, 1, (k, k)) for k in range(MAX_SPACES + 1)]
    out += [(f"_NL_T{t}", _BREAK + r"\t" * t, 1, (TAB_SIZE * t, t)) for t in range(1, MAX_TABS + 1)]
    out.append(("_NL_OTHER", _BREAK + r"[ \t\f]*", 0, None))
    out.append(("_WS", r"[ \t\f]+", 0, None))
    out.append(("_LINE_CONT", r"\\" + _BREAK, 0, None))
    return out


class _Roles:
    """Which terminal ids the indenter treats specially."""

    def __init__(self, n_terms: int, ids: dict[str, int], widths: dict[int, tuple | None],
                 opens: set[int], closes: set[int]):
        self.n_terms = n_terms
        self.newline, self.indent, self.dedent = (ids[n] for n in INDENT_TERMINALS)
        self.ws, self.cont = ids["_WS"], ids["_LINE_CONT"]
        self.widths = widths                          # line-break terminal -> width or None
        self.opens, self.closes = frozenset(opens), frozenset(closes)
        self.nl_bits = sum(1 << t for t in widths)
        self.open_bits = sum(1 << t for t in opens)
        self.virtual_bits = (1 << self.newline) | (1 << self.indent) | (1 << self.dedent)
        self.always_bits = (1 << self.ws) | (1 << self.cont)
        self.lexical = frozenset(widths) | {self.ws, self.cont}


class _FollowView:
    """The inner CFG, whose FOLLOW sets are restated over the lexer's terminals: a virtual
    terminal stands for what may follow it, and line breaks, ``WS`` and ``LINE_CONT`` may
    follow anything (and be followed by anything)."""

    def __init__(self, cfg, roles: _Roles):
        self._cfg = cfg
        self._roles = roles

    def __getattr__(self, name):
        return getattr(self._cfg, name)

    def follow(self) -> list[int]:
        """Per terminal, a sound over-approximation of the lexer terminals that may come next."""
        r = self._roles
        base = list(self._cfg.follow())
        virtual = (r.newline, r.indent, r.dedent)
        changed = True
        while changed:
            changed = False
            for t, f in enumerate(base):
                add = f
                for v in virtual:
                    if f >> v & 1:
                        add |= base[v]
                if add != f:
                    base[t] = add
                    changed = True
        everything = (1 << r.n_terms) - 1
        lexical = r.nl_bits | r.always_bits
        return [everything if t in r.lexical else (f & ~r.virtual_bits) | lexical
                for t, f in enumerate(base)]


class IndentAutomaton:
    """The Earley automaton of an indentation-sensitive grammar, behind Python's indenter.

    Exposes what :class:`~guidewire.grammar.compiled.CompiledGrammar` reads of a parser
    (``initial``, ``expected``, ``accepting``, ``scan``, ``cfg.follow``, the limits), over
    interned states ``(earley set, indent stack, bracket depth, pending, continued)``:
    ``pending`` is None inside a line, else ``(newline owed, width or None)`` after a line
    break at depth 0 (the width None: whitespace the indenter cannot measure).
    """

    def __init__(self, inner, roles: _Roles):
        self.inner = inner
        self.roles = roles
        self.cfg = _FollowView(inner.cfg, roles)
        self.keys: list[tuple] = []
        self.expected: list[int] = []
        self.accepting: list[bool] = []
        self._index: dict[tuple, int] = {}
        self._memo: dict[tuple[int, int], int] = {}
        self._resolved: dict[tuple, tuple | None] = {}
        self._own_bytes = 0
        self.initial = self._intern((inner.initial, ((0, 0),), 0, (False, (0, 0)), False))

    # what CompiledGrammar sets and reads on a parser
    @property
    def fuel(self):
        """The step budget (shared with the inner Earley automaton)."""
        return self.inner.fuel

    @fuel.setter
    def fuel(self, value) -> None:
        self.inner.fuel = value

    @property
    def max_bytes(self):
        """The bound on :attr:`nbytes` (the inner automaton's sets count against it too)."""
        return self.inner.max_bytes

    @max_bytes.setter
    def max_bytes(self, value) -> None:
        self.inner.max_bytes = value

    @property
    def nbytes(self) -> int:
        """Estimated memory of the inner sets and of these states and scans."""
        return self.inner.nbytes + self._own_bytes

    @property
    def n_sets(self) -> int:
        """Number of distinct states built so far."""
        return len(self.keys)

    def _intern(self, key: tuple) -> int:
        sid = self._index.get(key)
        if sid is not None:
            return sid
        if self.max_bytes is not None and self.nbytes + STATE_BYTES > self.max_bytes:
            raise LimitExceededError(f"the parser's states exceed {self.max_bytes} bytes "
                                     f"({len(self.keys)} indentation states; parser_bytes)")
        if self.inner.fuel is not None:
            self.inner.fuel.spend(1)
        r, inner = self.roles, self.inner
        s, stack, depth, pend, _cont = key
        if pend is None:
            x = inner.expected[s] & ~r.virtual_bits
            if depth or inner.expected[s] >> r.newline & 1:
                x |= r.nl_bits
            if depth >= MAX_DEPTH:
                x &= ~r.open_bits
        else:
            x = r.nl_bits          # a blank or comment-only line may always come first
            res = self._resolve(s, stack, pend)
            if res is not None:
                x |= inner.expected[res[0]] & ~r.virtual_bits
        sid = len(self.keys)
        self._index[key] = sid
        self.keys.append(key)
        self.expected.append(x | r.always_bits)
        self.accepting.append(self._accepts(key))
        self._own_bytes += STATE_BYTES
        return sid

    def _resolve(self, s: int, stack: tuple, pend: tuple):
        """``(earley set, stack)`` after the pending break's NEWLINE/INDENT/DEDENTs; None if refused."""
        key = (s, stack, pend)
        if key in self._resolved:
            return self._resolved[key]
        out = self._resolve_uncached(s, stack, pend)
        self._resolved[key] = out
        self._own_bytes += SCAN_BYTES
        return out

    def _resolve_uncached(self, s: int, stack: tuple, pend: tuple):
        r, inner = self.roles, self.inner
        owed, width = pend
        if width is None:
            return None
        if owed:
            s = inner.scan(s, (r.newline,), _KEY_NEWLINE)
            if s < 0:
                return None
        col, alt = width
        top_col, top_alt = stack[-1]
        if col == top_col:
            return (s, stack) if alt == top_alt else None      # TabError otherwise
        if col > top_col:
            if alt <= top_alt or len(stack) >= MAX_INDENT:
                return None
            s = inner.scan(s, (r.indent,), _KEY_INDENT)
            return None if s < 0 else (s, stack + (width,))
        while len(stack) > 1 and col < stack[-1][0]:
            stack = stack[:-1]
            s = inner.scan(s, (r.dedent,), _KEY_DEDENT)
            if s < 0:
                return None
        return (s, stack) if stack[-1] == width else None    # a dedent to a level never opened

    def _accepts(self, key: tuple) -> bool:
        r, inner = self.roles, self.inner
        s, stack, depth, pend, cont = key
        if cont or depth:
            return False
        if pend is None or pend[0]:
            s = inner.scan(s, (r.newline,), _KEY_NEWLINE)
            if s < 0:
                return False
        for _level in stack[1:]:
            s = inner.scan(s, (r.dedent,), _KEY_DEDENT)
            if s < 0:
                return False
        return inner.accepting[s]

    #: no memo the compiled ``pick_groups`` can read (keys are pairs): it calls :meth:`scan`
    scan_memo = None
    term_bits = None

    def scan(self, sid: int, terms: tuple[int, ...], key: int) -> int:
        """The state after a lexeme whose readings are ``terms`` (lexer set id ``key``); -1 if refused."""
        memo = self._memo.get((sid, key))
        if memo is not None:
            return memo
        out = self._scan(sid, terms, key)
        self._memo[(sid, key)] = out
        self._own_bytes += SCAN_BYTES
        return out

    def _scan(self, sid: int, terms: tuple[int, ...], key: int) -> int:
        r, inner = self.roles, self.inner
        s, stack, depth, pend, cont = self.keys[sid]
        t = terms[0] if len(terms) == 1 else -1
        if t in r.widths:
            if depth:
                return self._intern((s, stack, depth, None, False))
            if pend is None:
                if not inner.expected[s] >> r.newline & 1:
                    return -1
                return self._intern((s, stack, 0, (True, r.widths[t]), False))
            return self._intern((s, stack, 0, (pend[0], r.widths[t]), False))
        if t == r.ws:
            if pend is not None and not cont:   # whitespace opening the first line
                pend = (pend[0], None)
            return self._intern((s, stack, depth, pend, False))
        if t == r.cont:
            return self._intern((s, stack, depth, pend, True))
        if pend is not None:
            res = self._resolve(s, stack, pend)
            if res is None:
                return -1
            s, stack = res
        s = inner.scan(s, terms, key)
        if s < 0:
            return -1
        if t in r.opens:
            if depth >= MAX_DEPTH:
                return -1
            depth += 1
        elif t in r.closes:
            if not depth:
                return -1
            depth -= 1
        return self._intern((s, stack, depth, None, False))


def compile_indented(specs, rules, start: int, nonterminal_names, vocab, *, source: str = ""):
    """Compile BNF whose ``_NEWLINE``/``_INDENT``/``_DEDENT`` are virtual (see the module doc)."""
    from .frontend import TerminalSpec, assemble

    specs = list(specs)
    ids = {spec.name: i for i, spec in enumerate(specs)}
    widths: dict[int, tuple | None] = {}
    for name, pattern, priority, width in lexical_specs():
        ids[name] = len(specs)
        specs.append(TerminalSpec(name, pattern, priority=priority, lexical=True))
        if name.startswith("_NL_"):
            widths[ids[name]] = width
    n_terms = len(specs)
    old_terms = len(specs) - len(widths) - 2
    shift = n_terms - old_terms             # nonterminal ids move past the added terminals
    rules = [(lhs + shift, tuple(x + shift if x >= old_terms else x for x in rhs)) for lhs, rhs in rules]
    opens = {i for i, sp in enumerate(specs) if sp.literal and sp.pattern in ("(", "[", "{")}
    closes = {i for i, sp in enumerate(specs) if sp.literal and sp.pattern in (")", "]", "}")}
    roles = _Roles(n_terms, ids, widths, opens, closes)
    return assemble(specs, rules, start + shift, nonterminal_names, vocab, source=source,
                    parser=lambda cfg, _dfa: IndentAutomaton(_earley(cfg), roles))


def _earley(cfg):
    from .earley import EarleyAutomaton

    return EarleyAutomaton(cfg)


def compile_python(vocab):
    """The built-in ``python`` grammar (Python 3.11 files, indentation included) for ``vocab``."""
    from .frontend import builtin_grammar, compile_lark

    return compile_lark(builtin_grammar("python"), vocab)


@lru_cache(maxsize=1)
def python_identifier_regex() -> str:
    """A regex for exactly the identifiers CPython's tokenizer accepts: an XID_Start character or
    ``_``, then XID_Continue characters (decided by this Python's own ``str.isidentifier``)."""

    def ranges(pred) -> str:
        out, start = [], None
        for c in range(0x80, 0x110001):
            ok = c < 0x110000 and pred(chr(c))
            if ok and start is None:
                start = c
            elif not ok and start is not None:
                out.append(f"\\U{start:08x}-\\U{c - 1:08x}" if c - 1 > start else f"\\U{start:08x}")
                start = None
        return "".join(out)

    first = "A-Za-z_" + ranges(str.isidentifier)
    rest = "0-9A-Za-z_" + ranges(lambda ch: ("a" + ch).isidentifier())
    return f"[{first}][{rest}]*"
