"""JSON string lexemes: regexes over the *decoded* string, compiled to bytes of its JSON text.

JSON Schema constrains the decoded value of a string (``pattern``, ``minLength``,
``format``), while the model writes its JSON encoding, where one character may appear
raw (UTF-8), as a short escape (``\\n``, ``\\"``) or as ``\\uXXXX`` (a surrogate pair
above the BMP). This module builds a character-level automaton (:class:`CharNFA`) with
the ordinary regex builder, optionally intersects it with a length counter, and encodes
every character edge as its JSON spellings in the byte-level :class:`NFA`: raw UTF-8, the
short escapes, and ``\\uXXXX`` for control and non-ASCII characters (the spellings
``json.dumps`` produces with or without ``ensure_ascii``); printable ASCII is only raw,
which keeps key and enum automata small.
Patterns use JSON Schema's search semantics: unanchored ends match anything.
"""

from __future__ import annotations

from array import array
from collections import deque
from functools import lru_cache

import numpy as np

from ..core.errors import LimitExceededError
from .charset import MAX_CP, Intervals, complement, digit_dag, intersect, normalize
from .regex import NFA, RegexFragment, _Builder, _reaches, grow_state_lists, parse

MAX_PRODUCT_STATES = 60_000
#: the longest token (in bytes) a counter is elided for when the vocabulary is not known
ELIDE_TOKEN_BYTES = 256
#: layers an elided counter keeps past its repeating run's start beyond two tokens' worth
ELIDE_SLACK = 32
#: the most characters past its floor a counter may take to settle into a repeating run
ELIDE_MAX_SETTLE = 1024
ANY: Intervals = complement(())
_SHORT_ESCAPES = {0x22: ord('"'), 0x5C: ord("\\"), 0x2F: ord("/"), 0x08: ord("b"), 0x0C: ord("f"),
                  0x0A: ord("n"), 0x0D: ord("r"), 0x09: ord("t")}
_RAW_FORBIDDEN: Intervals = ((0x00, 0x1F), (0x22, 0x22), (0x5C, 0x5C))


class CharNFA:
    """An NFA over Unicode characters (edges carry interval sets), same shape as :class:`NFA`."""

    def __init__(self, max_states: int = 100_000):
        self.eps: list[list[int]] = []
        self.edges: list[list[tuple[Intervals, int]]] = []
        self.max_states = max_states

    def __len__(self) -> int:
        return len(self.eps)

    def add_state(self) -> int:
        """A fresh state id (its lists untracked by the cyclic collector where the compiled module
        is on, as :class:`~.regex.NFA`'s: a product of string constraints makes hundreds of
        thousands, and full collections walking them were ~45% of such a compile)."""
        if len(self.eps) >= self.max_states:
            raise LimitExceededError(f"pattern automaton exceeds {self.max_states} states")
        grow_state_lists(self.eps, self.edges, 1)
        return len(self.eps) - 1

    def add_chars(self, src: int, dst: int, chars: Intervals) -> None:
        """An edge consuming one character of ``chars``."""
        if chars:
            self.edges[src].append((chars, dst))


#: prefix (a regex comment) of a pattern to build *relaxed*: a superset language where a construct
#: no finite automaton can enforce is dropped (lenient mode; see :func:`relaxed_constructs`)
RELAXED = "(?#guidewire:relaxed)"


def pattern_automaton(pattern: str, *, search: bool = True) -> tuple[CharNFA, int, int]:
    """Character automaton of a JSON Schema ``pattern`` (unanchored ends match anything); a
    pattern starting with :data:`RELAXED` is built as the closest superset language."""
    cnfa = CharNFA()
    tree = parse(pattern, 0)
    builder = _Builder(cnfa, pattern, search=search, relax=pattern.startswith(RELAXED))
    start, end = builder.seq(list(tree), tree.state.flags, True, True)
    return cnfa, start, end


def relaxed_constructs(pattern: str, *, search: bool = True) -> list[str]:
    """The constructs of ``pattern`` that a relaxed build drops (empty: the pattern is exact).
    Raises :class:`RegexSyntaxError` when the pattern does not parse."""
    tree = parse(pattern, 0)
    builder = _Builder(CharNFA(), pattern, search=search, relax=True)
    builder.seq(list(tree), tree.state.flags, True, True)
    return list(dict.fromkeys(builder.relaxed))


def literal_automaton(text: str) -> tuple[CharNFA, int, int]:
    """Character automaton of exactly the string ``text``: a chain, one state per character."""
    cnfa = CharNFA()
    cur = start = cnfa.add_state()
    for ch in text:
        nxt = cnfa.add_state()
        cnfa.add_chars(cur, nxt, ((ord(ch), ord(ch)),))
        cur = nxt
    return cnfa, start, cur


def any_string_automaton() -> tuple[CharNFA, int, int]:
    """Character automaton of every string."""
    cnfa = CharNFA()
    s = cnfa.add_state()
    cnfa.add_chars(s, s, ANY)
    return cnfa, s, s


def excluding_automaton(names) -> tuple[CharNFA, int, int]:
    """Character automaton of every string *except* the given ones (a trie and its complement)."""
    cnfa = CharNFA()
    root = cnfa.add_state()
    sink = cnfa.add_state()
    end = cnfa.add_state()
    cnfa.add_chars(sink, sink, ANY)
    cnfa.eps[sink].append(end)
    trie: dict[int, dict[int, int]] = {root: {}}
    final: set[int] = set()
    for name in sorted(set(names)):
        node = root
        for ch in name:
            nxt = trie[node].get(ord(ch))
            if nxt is None:
                nxt = trie[node][ord(ch)] = cnfa.add_state()
                trie[nxt] = {}
            node = nxt
        final.add(node)
    for node, children in trie.items():
        for c, child in children.items():
            cnfa.add_chars(node, child, ((c, c),))
        rest = complement(normalize([(c, c) for c in children]))
        cnfa.add_chars(node, sink, rest)
        if node not in final:
            cnfa.eps[node].append(end)
    return cnfa, root, end


def json_counted_into(nfa: NFA, automaton: tuple[CharNFA, int, int], *, min_len: int = 0,
                      max_len: int | None = None, depth: int | None = ELIDE_TOKEN_BYTES) -> RegexFragment:
    """:func:`json_string_into` with the length bounds ``min_len..max_len``, the middle of a long
    counter elided for tokens of at most ``depth`` bytes (the vocabulary's longest; None: never
    elided): where ``max_len - min_len`` passes twice the window (``2 * depth`` layers, plus the
    pattern's longest way to its end and :data:`ELIDE_SLACK`), only the
    layers up to ``top`` (the first layer of the counter's repeating run, plus the window) are
    built, and the fragment's counter records the ``max_len - top`` layers left out; the compiled
    grammar carries them as credit beside its lexer state (see :mod:`~.elision`). A counter whose
    layers do not settle into one repeating shape within :data:`ELIDE_MAX_SETTLE` characters of
    ``min_len`` is built whole, as without elision."""
    if max_len is None or depth is None:
        return json_string_into(nfa, automaton, min_len=min_len, max_len=max_len)
    # the run must hold two tokens beyond its start, and the layers near the top where states die
    # for want of room to finish (as many as the longest shortest way to an end) above them
    window = 2 * depth + _longest_finish(automaton) + ELIDE_SLACK
    if max_len - min_len <= 2 * window:
        return json_string_into(nfa, automaton, min_len=min_len, max_len=max_len)
    mark = len(nfa)
    top = min_len + window
    while True:
        frag = json_string_into(nfa, automaton, min_len=min_len, max_len=top, elided=max_len - top)
        start = repeating_from(np.frombuffer(frag.layers[0][2], dtype=np.int32)) if frag.layers else top
        if start + window <= top:
            return frag
        nfa.truncate(mark)
        top = start + window
        if top - min_len > ELIDE_MAX_SETTLE + window or max_len - top <= window:
            return json_string_into(nfa, automaton, min_len=min_len, max_len=max_len)


def _longest_finish(automaton: tuple[CharNFA, int, int]) -> int:
    """The most characters any state of the automaton needs at least to reach its end (states that
    cannot reach it left out)."""
    cnfa, _start, end = automaton
    back: list[list[tuple[int, int]]] = [[] for _ in range(len(cnfa))]    # target -> (source, cost)
    for c in range(len(cnfa)):
        for t in cnfa.eps[c]:
            back[t].append((c, 0))
        for _chars, t in cnfa.edges[c]:
            back[t].append((c, 1))
    dist = {end: 0}
    queue = deque([end])
    while queue:        # 0-1 breadth-first search backwards from the end
        t = queue.popleft()
        for c, cost in back[t]:
            d = dist[t] + cost
            if d < dist.get(c, d + 1):
                dist[c] = d
                queue.appendleft(c) if cost == 0 else queue.append(c)
    return max(dist.values())


def repeating_from(shape: np.ndarray) -> int:
    """The first layer of the run of layers of one shape that ends just below the top layer
    (``shape``: per layer, its shape number; the top layer, which reads nothing more, is apart)."""
    below = shape[:-1]
    if below.size == 0:
        return 0
    other = np.flatnonzero(below != below[-1])
    return int(other[-1]) + 1 if other.size else 0


def json_string_into(nfa: NFA, automaton: tuple[CharNFA, int, int], *, min_len: int = 0,
                     max_len: int | None = None, quoted: bool = True, elided: int = 0) -> RegexFragment:
    """Add the JSON spellings of the automaton's strings, with ``min_len..max_len`` characters.

    The length counter is intersected with the character automaton (product states are
    bounded by :data:`MAX_PRODUCT_STATES`). With ``quoted`` the surrounding ``"`` are included.
    ``elided``: layers left out of the counter's middle (see :func:`json_counted_into`), recorded
    in its :attr:`~.regex.RegexFragment.layers` entry.
    """
    cnfa, c_start, c_end = automaton
    cap = max_len if max_len is not None else min_len
    if cap * max(1, len(cnfa)) > 4 * MAX_PRODUCT_STATES and max_len is not None:
        raise LimitExceededError(f"string length bound {cap} with a pattern of {len(cnfa)} states is too large")
    index: dict[tuple[int, int], int] = {}
    first = nfa.add_state()
    final = nfa.add_state()
    # a queue per count, emptied in order of count and, within one, of creation: layers of the
    # same shape are then made by the same steps, their states in the same order (see _counter_layers)
    work: dict[int, deque] = {}

    def state(c: int, k: int) -> int:
        key = (c, k)
        sid = index.get(key)
        if sid is None:
            if len(index) >= MAX_PRODUCT_STATES:
                raise LimitExceededError(
                    f"string constraint needs more than {MAX_PRODUCT_STATES} automaton states")
            sid = index[key] = nfa.add_state()
            work.setdefault(k, deque()).append(c)
        return sid

    shared: dict = {}       # spellings by (class, target): see json_chars_into
    universal = _universal_states(cnfa, c_end) if max_len is None else set()
    begin = state(c_start, 0)
    if quoted:
        nfa.add_bytes(first, begin, 0x22, 0x22)
    else:
        nfa.eps[first].append(begin)
    spans: list[tuple[int, int, int]] = []     # (first, end, count) of the states each item made
    k, started = 0, -1
    while work:
        queue = work.get(k)
        if not queue:
            work.pop(k, None)
            k += 1
            continue
        if started != k:
            # a layer's states reached from the one before are taken in order of character state:
            # two layers reaching the same set then make the next in the same order (else the
            # order can rotate for ever, and no two layers would have one shape)
            queue = work[k] = deque(sorted(queue))
            started = k
        c = queue.popleft()
        sid = index[(c, k)]
        mark = len(nfa)
        for t in cnfa.eps[c]:
            nfa.eps[sid].append(state(t, k))
        if max_len is None or k < max_len:
            k2 = k + 1 if (max_len is not None or k < min_len) else k
            for chars, t in cnfa.edges[c]:
                json_chars_into(nfa, sid, state(t, k2), chars, shared)
        if c == c_end and k >= min_len:
            if quoted:
                nfa.add_bytes(sid, final, 0x22, 0x22)
            else:
                nfa.eps[sid].append(final)
        if len(nfa) > mark:
            spans.append((mark, len(nfa), k))
    # a state reading any characters to the end, past the length floor, takes every spelled rest
    marked = tuple(sorted(sid for (c, k), sid in index.items() if c in universal and k >= min_len))
    layers = (((*_counter_layers(first, len(nfa), index, spans, min_len, max_len, universal), elided),)
              if cap >= 2 else ())
    return RegexFragment(first, final, False, (not quoted) and _reaches(nfa, first, final), marked, layers)


def _counter_layers(first: int, end: int, index: dict, spans: list, min_len: int, max_len: int | None,
                    universal: set) -> tuple[int, bytes, bytes]:
    """``(first, layer, shape)`` of a counted string's states ``first .. end - 1`` (see
    :attr:`~.regex.RegexFragment.layers`): a state ``(c, k)`` of the product is in layer ``k``, a
    state inside a character's spelling in the layer of the state it was made from (the one before
    the character), the fragment's entry and exit in none (-1). ``shape`` numbers each layer's
    shape: its product states' characters states ``c`` in the order they were made, whether it reads
    a further character and may close the string, whether it holds a universal state, and its size.
    Layers are built in order, each state's edges in one pass (see :func:`json_string_into`), so two
    layers of one shape are the same automaton, state for state in the order of their ids, except
    for where their edges lead: the same places one layer on."""
    layer = array("i", [-1]) * (end - first)
    for lo, hi, k in spans:
        layer[lo - first:hi - first] = array("i", [k]) * (hi - lo)
    heads: dict[int, list] = {}
    for (c, k), sid in sorted(index.items(), key=lambda item: item[1]):
        layer[sid - first] = k
        heads.setdefault(k, []).append(c)
    sizes = np.bincount(np.frombuffer(layer, dtype=np.int32) + 1).tolist()[1:]     # states per layer
    shapes: dict[tuple, int] = {}
    shape = array("i", [shapes.setdefault(
        (tuple(cs), max_len is None or k < max_len, k >= min_len, k >= min_len and not universal.isdisjoint(cs),
         sizes[k]), len(shapes)) for k, cs in sorted(heads.items())])
    return first, layer.tobytes(), shape.tobytes()


def _universal_states(cnfa: CharNFA, end: int) -> set[int]:
    """The states of ``cnfa`` whose language is every string: they loop on every character and
    reach ``end`` by epsilon moves (the tail of an unanchored pattern once it has matched)."""
    out = set()
    for c in range(len(cnfa)):
        loops = [iv for chars, t in cnfa.edges[c] if t == c for iv in chars]
        if loops and normalize(loops) == ANY and _reaches(cnfa, c, end):
            out.add(c)
    return out


def json_chars_into(nfa: NFA, src: int, dst: int, chars: Intervals, shared: dict | None = None) -> None:
    """Edges ``src -> dst`` spelling one character of ``chars`` in JSON string syntax.

    ``shared``: spellings already made in this NFA, by ``(chars, dst)``. Past the first byte a
    spelling depends on ``chars`` and ``dst`` only, so another source of the same class and target
    gets the first byte's edges into the states made before, not a copy of them (a minimal DFA's
    states share a class such as "any other character" towards one target: a copy per state was
    most of its spelled size)."""
    key = (chars, dst)
    made = shared.get(key) if shared is not None else None
    if made is not None:
        first, back = made
        nfa.edges[src].extend(first)
        nfa.add_bytes(src, back, 0x5C, 0x5C)
        return
    raw, letters, escaped = _spelling(chars)
    at = len(nfa.edges[src])
    if raw:
        nfa.add_chars(src, dst, raw)
    back = nfa.add_state()
    if shared is not None:
        shared[key] = (tuple(nfa.edges[src][at:]), back)
    nfa.add_bytes(src, back, 0x5C, 0x5C)
    for letter in letters:
        nfa.add_bytes(back, dst, letter, letter)
    if escaped is None:
        return
    u = nfa.add_state()
    nfa.add_bytes(back, u, ord("u"), ord("u"))
    nfa.add_template(u, dst, escaped)


@lru_cache(maxsize=256)  # a class's parts: its intervals twice and a template (see _escape_template)
def _spelling(chars: Intervals):
    """How one character of ``chars`` is spelled in a JSON string, by the class alone: ``(raw,
    letters, escaped)``: the characters written raw (UTF-8), the letters of the short escapes
    (``\\n``...) it holds, and the template of the hex digits after ``\\u`` (None when no character
    is ``\\u``-escaped). A counted class (``[\\w.-]{0,254}``) is spelled once per count position:
    the interval arithmetic on a Unicode class of hundreds of intervals was most of its compile."""
    raw = _minus(chars, _RAW_FORBIDDEN)
    letters = tuple(letter for c, letter in _SHORT_ESCAPES.items() if _contains(chars, c))
    bmp = intersect(chars, ((0, 0x1F), (0x7F, 0xFFFF)))   # printable ASCII is never \u-escaped
    astral = intersect(chars, ((0x10000, MAX_CP),))
    return raw, letters, (_escape_template(bmp, astral) if bmp or astral else None)


@lru_cache(maxsize=256)  # a template is at most a few thousand edges: bounded at a few MB
def _escape_template(bmp: Intervals, astral: Intervals):
    """The hex digits after ``\\u`` spelling ``bmp`` (4 digits) and ``astral`` (a surrogate pair:
    4 digits, ``\\u``, 4 digits) as one minimal acyclic automaton."""
    parts = []
    if bmp:
        parts.append((_hex_bytes, 4, bmp))
    if astral:
        pairs = []
        for lo, hi in astral:
            for (h_lo, h_hi), (l_lo, l_hi) in _surrogate_blocks(lo, hi):
                pairs += [((h << 16) | l_lo, (h << 16) | l_hi) for h in range(h_lo, h_hi + 1)]
        parts.append((_hex_bytes, 8, tuple(pairs)))
    return digit_dag(parts, 16, _hex_bytes, separators={4: (0x5C, ord("u"))} if astral else None)


def _hex_bytes(a: int, b: int) -> list[tuple[int, int]]:
    """Byte ranges of the hex digits ``a..b`` (either case)."""
    out = []
    if a <= 9:
        out.append((0x30 + a, 0x30 + min(b, 9)))
    if b >= 10:
        x, y = max(a, 10) - 10, b - 10
        out += [(ord("a") + x, ord("a") + y), (ord("A") + x, ord("A") + y)]
    return out


def _surrogate_blocks(lo: int, hi: int):
    """(high-surrogate range, low-surrogate range) blocks spelling code points ``lo..hi``."""
    a, b = lo - 0x10000, hi - 0x10000
    ha, la, hb, lb = a >> 10, a & 0x3FF, b >> 10, b & 0x3FF
    if ha == hb:
        return [((0xD800 + ha, 0xD800 + ha), (0xDC00 + la, 0xDC00 + lb))]
    out = []
    if la != 0:
        out.append(((0xD800 + ha, 0xD800 + ha), (0xDC00 + la, 0xDFFF)))
        ha += 1
    tail = []
    if lb != 0x3FF:
        tail.append(((0xD800 + hb, 0xD800 + hb), (0xDC00, 0xDC00 + lb)))
        hb -= 1
    if ha <= hb:
        out.append(((0xD800 + ha, 0xD800 + hb), (0xDC00, 0xDFFF)))
    return out + tail


def _contains(iv: Intervals, c: int) -> bool:
    return any(a <= c <= b for a, b in iv)


def _minus(x: Intervals, y: Intervals) -> Intervals:
    return intersect(x, complement(normalize(y)))
