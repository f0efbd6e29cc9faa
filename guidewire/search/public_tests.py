"""Public tests from a task's prompt: the docstring's examples turned into assertions.

HumanEval prompts show examples as doctests (``>>> f(x)`` then the expected output on the next
lines) or as prose lines (``f(x) == y``, ``f(x) ➞ y``, ``f(x) => y``, ``f(x) -> y``,
``f(x) should return y``). Each becomes ``assert <call> == <expected>`` (a float tolerance for
float literals, ``is None`` for an empty doctest output). Examples whose call or expected value is
not a closed Python expression (free names such as ``n``, ``true``) are skipped. The hidden ``check()`` of a benchmark is never read here.
"""

from __future__ import annotations

import ast
import builtins
import io
import re
import tokenize

_ARROWS = re.compile(r"\s*(?:==|➞|=>|->|should\s+return|returns?|return)\s*")


def _expr(text: str) -> ast.expr | None:
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError):
        return None
    return tree.body


def _uncomment(text: str) -> str:
    """``text`` without a trailing ``# comment`` (a ``#`` inside a string literal stays)."""
    if "#" not in text:
        return text
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                return text[:tok.start[1]]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return text.split("#", 1)[0]
    return text


def _closed(node: ast.expr, entry_point: str) -> bool:
    """Whether every name the expression reads is the entry point or a builtin (no free names)."""
    return all(n.id == entry_point or hasattr(builtins, n.id)
               for n in ast.walk(node) if isinstance(n, ast.Name))


def _assertion(call: str, expected: str, entry_point: str) -> str | None:
    call, expected = _uncomment(call).strip(), _uncomment(expected).strip().rstrip(".,;")
    cnode = _expr(call)
    if cnode is None or not _closed(cnode, entry_point):
        return None
    if expected == "" and isinstance(cnode, ast.Compare):
        return f"assert {call}"
    if expected in ("", "None"):
        return f"assert ({call}) is None"
    node = _expr(expected)
    if node is None or not _closed(node, entry_point):
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, float):
        return f"assert abs(({call}) - ({expected})) < 1e-6"
    return f"assert ({call}) == ({expected})"


def _calls(node: ast.expr | None, entry_point: str) -> bool:
    return node is not None and any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == entry_point
        for n in ast.walk(node))


def parse_public_tests(prompt: str, entry_point: str) -> list[str]:
    """Assertions (Python source lines) from the examples in ``prompt`` that call ``entry_point``."""
    lines = prompt.splitlines()
    tests: list[str] = []
    i = 0
    while i < len(lines):
        s = lines[i].strip()
        if s.startswith(">>>"):
            call = s[3:].split("#", 1)[0].strip()
            out: list[str] = []
            i += 1
            while i < len(lines):
                nxt = lines[i].strip()
                if not nxt or nxt.startswith(">>>") or nxt.startswith('"""') or nxt.startswith("'''"):
                    break
                out.append(nxt)
                i += 1
            if _calls(_expr(call), entry_point):
                t = _assertion(call, " ".join(out), entry_point)
                if t:
                    tests.append(t)
            continue
        if entry_point + "(" in s:
            t = _prose_example(s, entry_point)
            if t:
                tests.append(t)
        i += 1
    seen: set[str] = set()
    return [t for t in tests if not (t in seen or seen.add(t))]


def _prose_example(line: str, entry_point: str) -> str | None:
    start = line.find(entry_point + "(")
    text = _uncomment(line[start:])
    m = None
    for cand in _ARROWS.finditer(text):  # the first arrow after which the call is balanced
        if _calls(_expr(text[:cand.start()]), entry_point):
            m = cand
            break
    if m is None:
        return None
    call, expected = text[:m.start()], text[m.end():]
    if not expected.strip():
        return None
    return _assertion(call, expected, entry_point)
