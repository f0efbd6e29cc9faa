"""A brute-force CFG oracle, written independently of the engine, and a random grammar generator.

The generator builds small grammars as data (rules of items over punctuation literals, letter/digit
"run" terminals given as small regex trees, nonterminal references, ``?``/``*``/``+`` groups,
optionally ``%ignore " "``) and renders them as Lark text for the engine. The oracle expands the
same data into a grammar over single characters and decides, with a plain Earley recogniser over
characters, whether a byte string is a prefix of a sentence (its Earley set is non-empty: every
symbol is productive by construction) and whether it is a sentence.

The engine lexes greedily (maximal munch, no backup; README "Limits"), the oracle does not lex at
all. The generated grammars are built so the two agree: a run terminal is always followed, in its
own rule, by a punctuation literal (so a run ends where its character class ends, never inside
another lexeme of its class); run terminals use letters or digits only, literals only punctuation
(so no lexeme matches both a literal and a regex terminal); multi-character literals start with a
character no other literal uses and the literal set is prefix-free; an ignored space cannot occur
inside any lexeme.
"""

from __future__ import annotations

import random

LETTERS = "abc"
DIGITS = "012"
SINGLES = ["(", ")", ",", ";", "+", "=", "[", "]"]
MULTIS = ["<-", "::", "#a"]  # first characters used by no other literal; prefix-free as a set


# -- regex trees for run terminals: ("chars", str) | ("cat", [t]) | ("alt", [t]) | ("star"|"plus"|"opt", t)
def _rx_nullable(t) -> bool:
    k = t[0]
    if k == "chars":
        return False
    if k == "cat":
        return all(_rx_nullable(x) for x in t[1])
    if k == "alt":
        return any(_rx_nullable(x) for x in t[1])
    if k == "plus":
        return _rx_nullable(t[1])
    return True  # star, opt


def _rx_text(t) -> str:
    k = t[0]
    if k == "chars":
        return t[1] if len(t[1]) == 1 else "[" + t[1] + "]"
    if k == "cat":
        return "".join(_rx_text(x) for x in t[1])
    if k == "alt":
        return "(?:" + "|".join(_rx_text(x) for x in t[1]) + ")"
    return "(?:" + _rx_text(t[1]) + ")" + {"star": "*", "plus": "+", "opt": "?"}[k]


def random_regex(rng: random.Random, alphabet: str, depth: int = 2):
    """A random non-nullable regex tree over ``alphabet`` (one character class)."""
    def gen(d):
        if d == 0 or rng.random() < 0.35:
            return ("chars", "".join(sorted(rng.sample(alphabet, rng.randint(1, len(alphabet))))))
        k = rng.choice(["cat", "alt", "star", "plus", "opt"])
        if k in ("cat", "alt"):
            return (k, [gen(d - 1) for _ in range(rng.randint(2, 3))])
        return (k, gen(d - 1))

    t = gen(depth)
    if _rx_nullable(t):
        t = ("cat", [t, ("chars", rng.choice(alphabet))])
    return t


# -- grammar data: rules[name] = list of alternatives; an alternative is a list of items
# item: ("lit", s) | ("run", term_name) + implicit following literal | ("ref", rule) | (op, [items]) op in ?,*,+
class RandomGrammar:
    """A random grammar as data, with its Lark text (:attr:`lark`) and its char-level oracle."""

    def __init__(self, seed: int, n_rules: int | None = None):
        rng = random.Random(seed)
        self.seed = seed
        self.ignore_space = rng.random() < 0.3
        n_runs = rng.randint(1, 3)
        self.runs = {}
        for i in range(n_runs):
            self.runs[f"R{i}"] = random_regex(rng, rng.choice([LETTERS, DIGITS]), depth=rng.randint(0, 2))
        lits = rng.sample(SINGLES, rng.randint(3, 6)) + rng.sample(MULTIS, rng.randint(0, 2))
        n_rules = n_rules or rng.randint(1, 4)
        names = ["start"] + [f"r{i}" for i in range(1, n_rules)]
        self.rules: dict[str, list[list]] = {}

        def item(owner_idx, allow_ref, depth):
            roll = rng.random()
            if roll < 0.3:
                return ("lit", rng.choice(lits))
            if roll < 0.55:  # a run terminal, always followed by a punctuation literal
                return ("run", rng.choice(list(self.runs)), rng.choice([s for s in lits if s in SINGLES]))
            if roll < 0.75 and allow_ref:
                return ("ref", rng.choice(names))
            if depth > 0:
                op = rng.choice(["?", "*", "+"])
                return (op, [item(owner_idx, allow_ref, depth - 1) for _ in range(rng.randint(1, 2))])
            return ("lit", rng.choice(lits))

        for i, name in enumerate(names):
            alts = []
            # the first alternative only refers to later rules: every rule is productive
            first = []
            for _ in range(rng.randint(1, 3)):
                it = item(i, False, 1)
                first.append(it)
            if i + 1 < len(names) and rng.random() < 0.7:
                first.insert(rng.randint(0, len(first)), ("ref", names[rng.randint(i + 1, len(names) - 1)]))
            alts.append(first)
            for _ in range(rng.randint(0, 2)):
                alts.append([item(i, True, 1) for _ in range(rng.randint(1, 3))])
            self.rules[name] = alts
        self.lark = self._render()
        self._build_char_grammar()

    # -- Lark text ---------------------------------------------------------------------------
    def _render_item(self, it) -> str:
        k = it[0]
        if k == "lit":
            return '"' + it[1] + '"'
        if k == "run":
            return f'{it[1]} "{it[2]}"'
        if k == "ref":
            return it[1]
        return "(" + " ".join(self._render_item(x) for x in it[1]) + ")" + k

    def _render(self) -> str:
        lines = []
        for name, alts in self.rules.items():
            lines.append(f"{name}: " + " | ".join(" ".join(self._render_item(x) for x in alt) for alt in alts))
        for name, t in self.runs.items():
            lines.append(f"{name}: /{_rx_text(t)}/")
        if self.ignore_space:
            lines.append('%ignore " "')
        return "\n".join(lines) + "\n"

    # -- char-level grammar -------------------------------------------------------------------
    def _build_char_grammar(self) -> None:
        self.prods: dict[str, list[tuple]] = {}
        self._n = 0

        def fresh(prefix):
            self._n += 1
            return f"{prefix}#{self._n}"

        ws = None
        if self.ignore_space:  # spaces before every lexeme and at the end
            ws = "WS*"
            self.prods[ws] = [(), (ws, " ")]   # left-recursive list of spaces

        def lexeme(chars_seq: tuple) -> tuple:
            return ((ws,) if ws else ()) + chars_seq

        def rx(t) -> str:
            name = fresh("rx")
            k = t[0]
            if k == "chars":
                self.prods[name] = [(c,) for c in t[1]]
            elif k == "cat":
                self.prods[name] = [tuple(rx(x) for x in t[1])]
            elif k == "alt":
                self.prods[name] = [(rx(x),) for x in t[1]]
            elif k == "opt":
                self.prods[name] = [(), (rx(t[1]),)]
            elif k == "star":
                inner = rx(t[1])
                self.prods[name] = [(), (name, inner)]
            else:  # plus
                inner = rx(t[1])
                self.prods[name] = [(inner,), (name, inner)]
            return name

        run_nt = {}
        for rname, t in self.runs.items():
            run_nt[rname] = rx(t)

        def item(it) -> tuple:
            k = it[0]
            if k == "lit":
                return lexeme(tuple(it[1]))
            if k == "run":
                return lexeme((run_nt[it[1]],)) + lexeme(tuple(it[2]))
            if k == "ref":
                return (it[1],)
            body = tuple(s for x in it[1] for s in item(x))
            name = fresh("grp")
            if k == "?":
                self.prods[name] = [(), body]
            elif k == "*":
                self.prods[name] = [(), (name,) + body]
            else:
                self.prods[name] = [body, (name,) + body]
            return (name,)

        for name, alts in self.rules.items():
            self.prods[name] = [tuple(s for it in alt for s in item(it)) for alt in alts]
        self.prods["S'"] = [("start",) + ((ws,) if ws else ())]
        self.nullable = self._nullable()
        self.alphabet = set(LETTERS + DIGITS + "".join(SINGLES) + "".join(MULTIS) + (" " if ws else ""))

    def _nullable(self) -> set:
        out: set = set()
        changed = True
        while changed:
            changed = False
            for a, rhss in self.prods.items():
                if a not in out and any(all(s in out for s in rhs) for rhs in rhss):
                    out.add(a)
                    changed = True
        return out

    # -- Earley over characters ---------------------------------------------------------------
    def _closure(self, chart: list, items: set) -> frozenset:
        """Predict and complete within the newest set (Aycock-Horspool for nullable symbols)."""
        k = len(chart)
        todo = list(items)
        done = set(items)

        def add(x):
            if x not in done:
                done.add(x)
                todo.append(x)

        while todo:
            a, alt, dot, origin = todo.pop()
            rhs = self.prods[a][alt]
            if dot < len(rhs):
                sym = rhs[dot]
                if sym in self.prods:
                    for j in range(len(self.prods[sym])):
                        add((sym, j, 0, k))
                    if sym in self.nullable:
                        add((a, alt, dot + 1, origin))
            else:
                # complete: advance the items of set `origin` waiting for `a`
                source = done if origin == k else chart[origin]
                for (b, balt, bdot, borigin) in list(source):
                    brhs = self.prods[b][balt]
                    if bdot < len(brhs) and brhs[bdot] == a:
                        add((b, balt, bdot + 1, borigin))
        return frozenset(done)

    def initial(self) -> tuple:
        """The chart before any character: one Earley set."""
        start = {("S'", 0, 0, 0)}
        return (self._closure([], start),)

    def step(self, chart: tuple, ch: str) -> tuple | None:
        """The chart after one more character, or None when no item scans it (not a viable prefix)."""
        last = chart[-1]
        moved = set()
        for (a, alt, dot, origin) in last:
            rhs = self.prods[a][alt]
            if dot < len(rhs) and rhs[dot] == ch:
                moved.add((a, alt, dot + 1, origin))
        if not moved:
            return None
        return chart + (self._closure(list(chart), moved),)

    def accepting(self, chart: tuple) -> bool:
        """Whether the text read so far is a sentence (the start item is complete over all of it)."""
        full = len(self.prods["S'"][0])
        return any(a == "S'" and dot == full and origin == 0 for (a, alt, dot, origin) in chart[-1])


class PrefixOracle:
    """Memoised viable-prefix decisions of one :class:`RandomGrammar` over byte strings."""

    def __init__(self, grammar: RandomGrammar):
        self.g = grammar
        self.memo: dict[bytes, tuple | None] = {b"": grammar.initial()}

    def chart(self, data: bytes):
        """The chart after ``data`` or None when ``data`` is not a viable prefix."""
        got = self.memo.get(data, False)
        if got is not False:
            return got
        prev = self.chart(data[:-1])
        out = None
        if prev is not None:
            ch = data[-1]
            out = self.g.step(prev, chr(ch)) if ch < 128 else None
        self.memo[data] = out
        return out

    def viable(self, data: bytes) -> bool:
        """Whether ``data`` is a prefix of some sentence."""
        return self.chart(data) is not None

    def sentence(self, data: bytes) -> bool:
        """Whether ``data`` is a sentence."""
        c = self.chart(data)
        return c is not None and self.g.accepting(c)
