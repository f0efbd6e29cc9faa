"""Front ends: Lark-style EBNF text and Python regexes -> :class:`CompiledGrammar`.

Lark parses the grammar text (rules, terminals, ``?``/``*``/``+``/``{m,n}``, templates,
``%ignore``, ``%import common.X``) and expands EBNF into BNF; guidewire compiles the
terminals into its byte-level lexer and the rules into its Earley automaton.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from ..core.errors import (GrammarSyntaxError, InexpressibleLiteralError, LimitExceededError, RegexSyntaxError,
                           UnsatisfiableGrammarError, UnsupportedFeatureError)
from ..core.vocab import Vocab
from .compiled import CompiledGrammar
from .earley import CFG, EarleyAutomaton
from .lexer import ByteDFA, Terminal
from .nfagraph import reachable
from .precompute import default_seconds
from .fragments import STORE, FragmentFacts, analyse, capture, splice
from .regex import NFA, RegexFragment, compile_into, literal_into, parse

# common.lark terminals written with lookbehind, and lookaround-free regexes with the same
# language under Lark's (shortest-match) lexing.
_EQUIVALENT_REGEX = {
    r'".*?(?<!\\)(\\\\)*?"': r'"(?:[^"\\\n]|\\[^\n])*"',
}

_RE_FLAGS = {"i": re.IGNORECASE, "s": re.DOTALL, "m": re.MULTILINE, "x": re.VERBOSE, "u": 0, "l": 0}


@dataclass(frozen=True)
class TerminalSpec:
    """A terminal before compilation: a literal string or a regex, with lexer attributes."""

    name: str
    pattern: str
    literal: bool = False
    ignore_case: bool = False
    priority: int = 0
    ignored: bool = False
    flags: int = 0
    family: int = -1
    builder: object = None   # optional callable(nfa) -> RegexFragment building the terminal directly
    key: object = None       # hashable; equal keys mean equal builder automata (shared across compiles)
    origin: str = ""         # where it comes from (a JSON pointer...), named in build errors
    virtual: bool = False    # never lexed: the parser is fed it by a post-lexer (``%declare``d)
    lexical: bool = False    # lexed although no rule uses it (a post-lexer reads it)
    sealed: int = -1         # a class of terminals whose words together are prefix-free (see projection.py)


def assemble(terminals: list[TerminalSpec], rules, start: int, nonterminal_names: list[str],
             vocab: Vocab, *, source: str = "", lazy_terminals: bool = True,
             allow_nullable: bool = False, parser=None) -> CompiledGrammar:
    """Compile terminal specs and BNF rules (symbols: terminal index, or ``len(terminals)+k``).

    ``parser(cfg, dfa)``, when given, builds the parser automaton in place of a plain
    :class:`EarleyAutomaton` (a post-lexer such as the indenter of ``indent.py``).
    """
    n_terms = len(terminals)
    names = [t.name for t in terminals] + list(nonterminal_names)
    nfa = NFA()
    lex_terms: list[Terminal] = []
    empty: set[int] = set()
    placed: list[tuple[int, FragmentFacts]] | None = []   # per terminal: (first NFA state, facts)
    used_in_rules = {s for _lhs, rhs in rules for s in rhs if s < n_terms}
    universal: list[int] = []   # NFA states taking every rest of their terminal's word (see RegexFragment)
    layers: list[tuple[int, bytes, bytes]] = []     # length counters' layers (see RegexFragment)
    for tid, spec in enumerate(terminals):
        first = len(nfa)
        if spec.virtual or (tid not in used_in_rules and not spec.ignored and not spec.lexical):
            s, e = nfa.add_state(), nfa.add_state()  # never matches: keeps ids aligned
            lex_terms.append(Terminal(spec.name, s, e))
            if not spec.virtual:
                empty.add(tid)
            if placed is not None:
                placed.append((first, FragmentFacts(b"\0\1", False, 0)))
            continue
        if spec.literal:
            data = spec.pattern.encode("utf-8")
            if not spec.ignore_case and not vocab.can_spell(data):
                raise InexpressibleLiteralError(
                    f"no sequence of tokens spells the literal {spec.pattern!r} (terminal {spec.name})")
        try:
            frag, facts = _terminal_fragment(nfa, spec)
        except LimitExceededError as exc:
            if not spec.origin or spec.origin in str(exc):
                raise
            raise LimitExceededError(f"{exc} (building terminal {spec.name} for {spec.origin})") from None
        if facts is None:
            placed = None   # a fragment that is not closed: the lexer analyses the whole NFA
        elif placed is not None:
            placed.append((first, facts))
        universal.extend(frag.universal)
        layers.extend(frag.layers)
        if frag.nullable and not allow_nullable:
            raise UnsupportedFeatureError(
                f"terminal {spec.name} matches the empty string; every lexeme must be non-empty")
        lex_terms.append(Terminal(spec.name, frag.start, frag.end, spec.priority, spec.literal,
                                  lazy_terminals and frag.has_lazy, spec.ignored, family=spec.family,
                                  sealed=spec.sealed))
    dfa = ByteDFA(nfa, lex_terms, fragments=placed, universal=universal, layers=layers)
    nfa.freeze()   # frozen after compile (and untracked by the cyclic GC)
    for tid in range(n_terms):
        if tid not in empty and not terminals[tid].virtual and not _has_path(dfa, lex_terms[tid]):
            empty.add(tid)
    cfg = CFG.build(n_terms, rules, start, names, empty_terms=empty)
    automaton = EarleyAutomaton(cfg) if parser is None else parser(cfg, dfa)
    grammar = CompiledGrammar(dfa, automaton, vocab, source=source)
    grammar.check_satisfiable()
    return grammar


def _fragment_key(spec: TerminalSpec):
    """What determines ``spec``'s automaton exactly (None: not shareable across compiles)."""
    if spec.builder is not None:
        return None if spec.key is None else ("builder", spec.key)
    if spec.literal:
        return ("literal", spec.pattern, spec.ignore_case)
    return ("regex", spec.pattern, spec.flags)


def _terminal_fragment(nfa: NFA, spec: TerminalSpec) -> tuple[RegexFragment, FragmentFacts | None]:
    """Build ``spec`` into ``nfa`` (or copy it from the fragment store); its facts if it is closed."""
    key = _fragment_key(spec)
    stored = None if key is None else STORE.get(key)
    if stored is not None:
        return splice(nfa, stored), stored.facts
    first = len(nfa)
    if spec.builder is not None:
        frag = spec.builder(nfa)
    elif spec.literal:
        frag = literal_into(nfa, spec.pattern, spec.ignore_case)
    else:
        frag = compile_into(nfa, _EQUIVALENT_REGEX.get(spec.pattern, spec.pattern), spec.flags)
    facts = analyse(nfa, first, frag)
    if facts is not None and key is not None and STORE.accepts(len(nfa) - first):
        STORE.put(key, capture(nfa, first, frag, facts))
    return frag, facts


def _has_path(dfa: ByteDFA, term: Terminal) -> bool:
    return bool(dfa.live[term.start])


def compile_regex(pattern: str, vocab: Vocab, *, flags: int = 0) -> CompiledGrammar:
    """Compile a Python ``re`` pattern; the language is the set of strings it *fully* matches.

    Anchors ``^``/``$``/``\\A``/``\\Z`` are accepted at the start/end; lazy quantifiers have
    their ordinary (full-match) meaning here.
    """
    frag_nfa = NFA()
    frag = compile_into(frag_nfa, pattern, flags)
    if frag.end not in reachable(frag_nfa, frag.start):
        raise UnsatisfiableGrammarError(f"regex {pattern!r} matches no string")
    spec = TerminalSpec("REGEX", pattern, flags=flags)
    rules = [(1, (0,))]
    if frag.nullable:  # the empty string is a sentence: start -> <empty>
        rules.append((1, ()))
    return assemble([spec], rules, 1, ["start"], vocab, source=pattern, lazy_terminals=False,
                    allow_nullable=True)


def compile_lark(grammar_text: str, vocab: Vocab, *, start: str = "start",
                 precompute: float | None = None) -> CompiledGrammar:
    """Compile Lark EBNF text. Syntax errors raise :class:`GrammarSyntaxError` with line/column.

    ``precompute`` is the wall-clock budget in seconds for building token tables before the first
    mask (a fixed grammar is compiled once and shared; see :mod:`guidewire.grammar.precompute`):
    None takes the default (``GUIDEWIRE_PRECOMPUTE_SECONDS``, else 1 s), 0 leaves every table lazy.
    The summary of what was built is the grammar's ``precomputed`` attribute.

    A grammar that declares (``%declare``) ``_NEWLINE``, ``_INDENT`` and ``_DEDENT`` is indentation-
    sensitive: they come from line breaks and the whitespace after them, as Python's tokenizer
    makes them (see ``indent.py``; the built-in ``python`` grammar is one).
    """
    specs, rules, start_id, nt_names, declared = _lark_to_bnf(grammar_text, start)
    if declared:
        from .indent import INDENT_TERMINALS, compile_indented

        if set(declared) != set(INDENT_TERMINALS):
            raise GrammarSyntaxError(
                f"%declare supports exactly {', '.join(INDENT_TERMINALS)} (an indentation-sensitive "
                f"grammar); got {', '.join(sorted(declared))}", *_locate(grammar_text, "%declare"))
        grammar = compile_indented(specs, rules, start_id, nt_names, vocab, source=grammar_text)
    else:
        grammar = assemble(specs, rules, start_id, nt_names, vocab, source=grammar_text)
    seconds = default_seconds() if precompute is None else precompute
    if seconds:
        grammar.precomputed = grammar.precompute(seconds)
    return grammar


def _lark_to_bnf(grammar_text: str, start: str = "start"):
    """Lark EBNF text -> ``(terminal specs, BNF rules, start id, nonterminal names, declared)``:
    ``declared`` names the ``%declare``-d terminals, which are virtual specs at the end of the list."""
    from lark.exceptions import GrammarError, LarkError, UnexpectedInput
    from lark.load_grammar import load_grammar

    try:
        grammar, _ = load_grammar(grammar_text, "<grammar>", [], False)
        lark_terms, lark_rules, ignore = grammar.compile([start], set())
    except UnexpectedInput as exc:
        raise GrammarSyntaxError(_first_line(str(exc)), exc.line, exc.column) from None
    except GrammarError as exc:
        line, col = _locate(grammar_text, str(exc))
        raise GrammarSyntaxError(str(exc), line, col) from None
    except LarkError as exc:
        line, col = _locate(grammar_text, str(exc))
        raise GrammarSyntaxError(str(exc), line, col) from None
    declared = [name for name, (tree, _p) in grammar.term_defs if tree is None]
    term_index = {t.name: i for i, t in enumerate(lark_terms)}
    specs = []
    for t in lark_terms:
        pat = t.pattern
        flags = 0
        for f in pat.flags:
            flags |= _RE_FLAGS.get(f, 0)
        if type(pat).__name__ == "PatternStr":
            specs.append(TerminalSpec(t.name, pat.value, literal=True, ignore_case=bool(flags & re.I),
                                      priority=t.priority, ignored=t.name in ignore))
        else:
            try:
                parse(_EQUIVALENT_REGEX.get(pat.value, pat.value), flags)
            except RegexSyntaxError as exc:
                raise _regex_error_in_grammar(grammar_text, t.name, pat.value, exc) from None
            specs.append(TerminalSpec(t.name, pat.value, priority=t.priority, ignored=t.name in ignore,
                                      flags=flags))
    for name in declared:
        term_index[name] = len(specs)
        specs.append(TerminalSpec(name, "", virtual=True))
    nt_index: dict[str, int] = {}
    n_terms = len(specs)

    def sym(s) -> int:
        if s.is_term:
            if s.name not in term_index:
                raise GrammarSyntaxError(f"terminal {s.name} is used but not defined",
                                         *_locate(grammar_text, s.name))
            return term_index[s.name]
        if s.name not in nt_index:
            nt_index[s.name] = n_terms + len(nt_index)
        return nt_index[s.name]

    rules = []
    for r in lark_rules:
        lhs = sym(r.origin)
        rules.append((lhs, tuple(sym(s) for s in r.expansion)))
    if start not in nt_index:
        raise GrammarSyntaxError(f"the start rule {start!r} is not defined")
    start_id = nt_index[start]
    nt_names = sorted(nt_index, key=nt_index.get)
    return specs, rules, start_id, nt_names, declared


def _regex_error_in_grammar(text: str, name: str, pattern: str, exc: RegexSyntaxError) -> GrammarSyntaxError:
    """``exc`` (positioned inside ``pattern``) re-positioned in the grammar text, naming the terminal:
    at the offending character when the ``/.../`` literal is found verbatim, else at the terminal's
    definition."""
    what = "an inline regex" if name.startswith("__") else f"terminal {name}"
    msg = exc.args[0].split(": ", 1)[-1]
    defn = re.search(r"^[ \t]*" + re.escape(name) + r"(?:\.-?\d+)?[ \t]*:", text, re.M)
    begin = defn.start() if defn else 0
    at = -1
    for raw in (pattern, pattern.replace("/", "\\/")):
        at = text.find("/" + raw + "/", begin)
        if at >= 0:
            break
    if at >= 0:
        lines = pattern.split("\n")
        line_no, col = exc.line or 1, exc.column or 1
        offset = at + 1 + sum(len(x) + 1 for x in lines[:line_no - 1]) + col - 1
    elif defn:
        offset = defn.start() + len(defn.group(0)) - len(defn.group(0).lstrip())
    else:
        return GrammarSyntaxError(f"bad regex in {what}: {msg}")
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return GrammarSyntaxError(f"bad regex in {what}: {msg}", line, column)


def _first_line(msg: str) -> str:
    return msg.strip().splitlines()[0] if msg.strip() else msg


def _locate(text: str, message: str) -> tuple[int | None, int | None]:
    """Best-effort line/column for a Lark error that names a symbol but carries no position."""
    names = re.findall(r"'([^']+)'", message) or [message]
    for name in names:
        m = re.search(r"(?<![\w.])" + re.escape(name) + r"(?!\w)", text)
        if m:
            line = text.count("\n", 0, m.start()) + 1
            col = m.start() - (text.rfind("\n", 0, m.start()) + 1) + 1
            return line, col
    return None, None


@lru_cache(maxsize=None)
def builtin_grammar(name: str) -> str:
    """Text of a grammar that ships with guidewire: ``json``, ``sql``, ``arithmetic``, ``python``."""
    try:
        text = resources.files("guidewire.grammar.grammars").joinpath(f"{name}.lark").read_text()
    except FileNotFoundError:
        raise KeyError(f"no built-in grammar {name!r}; available: json, sql, arithmetic, python") from None
    if name == "python":   # identifiers exactly as CPython reads them, from Python's own tables
        from .indent import python_identifier_regex

        text = text.replace(_APPROX_PYTHON_NAME, "NAME: /" + python_identifier_regex() + "/")
    return text


_APPROX_PYTHON_NAME = "NAME: /[^\\W\\d]\\w*/"
