"""Public tests from a task's prompt: the docstring's examples turned into assertions.

HumanEval-style prompts show examples as doctests (``>>> f(x)`` then the expected output on the
next lines), as prose lines (``f(x) == y``, ``f(x) ➞ y``, ``f(x) ==> y``, ``f(x) => y``,
``f(x) -> y``, ``f(x) should return y``, ``f(x)  # returns y``), as ``Input:`` / ``Output:``
blocks (``Input: arr = [1, 2], k = 1``, a bare ``Input: [1, 2]``, or one ``name : value`` per
line) and as ``For x = 1, y = 2 the output should be z`` sentences; named inputs are passed by
keyword when they are the function's parameter names, else positionally when there is one per
parameter. Each becomes ``assert <call> == <expected>`` (a float tolerance for float literals,
``is None`` for an empty doctest output; a bare ``true`` / ``false`` is read as a bool). Examples
whose call or expected value is not a closed Python expression (free names such as ``n``) are
skipped. A line that is itself an ``assert`` statement calling the function (MBPP-style tasks:
``assert f(2) == 4``, ``assert not f([])``, ``assert math.isclose(f(2), 12.56, rel_tol=1e-3)``) is
kept as it is, with an ``import`` for each standard-library module it names. The hidden ``check()``
of a benchmark is never read here.
"""

from __future__ import annotations

import ast
import builtins
import io
import re
import sys
import tokenize

_ARROWS = re.compile(r"\s*(?:==>|==|➞|=>|->|#\s*returns?|should\s+return|returns?|return)\s*")
_INPUT = re.compile(r"^\s*Input\s*:\s*(.*)$", re.I)
_OUTPUT = re.compile(r"^\s*Output\s*:\s*(.*)$", re.I)
_FOR = re.compile(r"^\s*For\s+(.+?)\s*,?\s+the\s+(?:output|result|answer|return\s+value)\s+"
                  r"(?:should\s+be|will\s+be|is)\s+(.+)$", re.I)
_BOOLS = {"true": "True", "false": "False"}


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
    expected = _BOOLS.get(expected, expected)
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
    params = _parameters(prompt, entry_point)
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
        m = _INPUT.match(lines[i])
        if m:
            t, i = _input_output(lines, i, m.group(1), entry_point, params)
            if t:
                tests.append(t)
            continue
        m = _FOR.match(lines[i])
        if m and entry_point + "(" not in s:
            t = _example_call(_named_inputs(m.group(1)), entry_point, params)
            if t:
                t = _assertion(t, m.group(2), entry_point)
            if t:
                tests.append(t)
        elif entry_point + "(" in s:
            t = _assert_statement(s, entry_point) or _prose_example(s, entry_point)
            if t:
                tests.append(t)
        i += 1
    seen: set[str] = set()
    return [t for t in tests if not (t in seen or seen.add(t))]


def _assert_statement(line: str, entry_point: str) -> str | None:
    """``line`` when it is one ``assert`` statement whose test calls ``entry_point`` and reads no
    free name but builtins and standard-library modules (imported in front of it), else None."""
    text = _uncomment(line).strip()
    if not text.startswith("assert"):
        return None
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Assert) or not _calls(tree.body[0].test, entry_point):
        return None
    names = [n for n in ast.walk(tree) if isinstance(n, ast.Name)]
    bound = {n.id for n in names if isinstance(n.ctx, ast.Store)}   # comprehension variables
    free = {n.id for n in names if isinstance(n.ctx, ast.Load)} - bound - {entry_point}
    modules = sorted(x for x in free if not hasattr(builtins, x) and x in sys.stdlib_module_names)
    if any(not hasattr(builtins, x) and x not in modules for x in free):
        return None
    return "; ".join([f"import {m}" for m in modules] + [ast.unparse(tree.body[0])])


def _prose_example(line: str, entry_point: str) -> str | None:
    start = line.find(entry_point + "(")
    text = line[start:]  # a comment may hold the answer (``f(x)  # returns y``): _assertion strips it
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


def _parameters(prompt: str, entry_point: str) -> list[str] | None:
    """The positional parameter names of ``entry_point`` as the prompt defines it (None: unknown)."""
    try:
        tree = ast.parse(prompt)
    except (SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == entry_point:
            return [a.arg for a in node.args.posonlyargs + node.args.args]
    return None


def _named_inputs(text: str) -> list[tuple[str | None, str]] | None:
    """``x = 1, y = [2, 3]`` -> ``[("x", "1"), ("y", "[2, 3]")]``; a bare ``[1, 2]`` -> one
    unnamed input; the longest leading run of comma-separated parts that parses (prose may follow
    the inputs); None when nothing parses."""
    text = text.strip().rstrip(".,;")
    parts = text.split(",")
    for n in range(len(parts), 0, -1):
        head = ",".join(parts[:n]).strip()
        if not head:
            continue
        src = f"_f({head})"
        try:
            call = ast.parse(src, mode="eval").body
        except (SyntaxError, ValueError):
            continue
        if not isinstance(call, ast.Call) or any(isinstance(a, ast.Starred) for a in call.args):
            continue
        if any(k.arg is None for k in call.keywords) or (call.args and call.keywords):
            continue
        if call.keywords:
            return [(k.arg, ast.get_source_segment(src, k.value)) for k in call.keywords]
        return [(None, ast.get_source_segment(src, a)) for a in call.args]
    return None


def _example_call(inputs, entry_point: str, params: list[str] | None) -> str | None:
    """The call of ``entry_point`` on ``inputs``: by keyword when every input is named by a
    parameter, positionally when unnamed or when there is one input per parameter."""
    if not inputs:
        return None
    names = [k for k, _ in inputs]
    values = [v for _, v in inputs]
    if all(k is not None for k in names) and params is not None and set(names) <= set(params) \
            and len(set(names)) == len(names):
        return f"{entry_point}(" + ", ".join(f"{k}={v}" for k, v in inputs) + ")"
    if all(k is None for k in names) or (params is not None and len(params) == len(inputs)):
        return f"{entry_point}(" + ", ".join(values) + ")"
    return None


def _input_output(lines: list[str], i: int, first: str, entry_point: str,
                  params: list[str] | None) -> tuple[str | None, int]:
    """An ``Input:`` block at line ``i`` (its inputs on that line, or one ``name : value`` /
    ``name = value`` per following line) and its ``Output:`` line: the assertion (or None) and
    the index of the line after the block."""
    held = [first.strip()] if first.strip() else []
    j = i + 1
    while j < len(lines) and not _OUTPUT.match(lines[j]):
        s = lines[j].strip()
        if not s or _INPUT.match(lines[j]) or j - i > 8:
            return None, j
        held.append(s)
        j += 1
    if j >= len(lines):
        return None, j
    expected = _OUTPUT.match(lines[j]).group(1)
    text = ", ".join(re.sub(r"^([A-Za-z_]\w*)\s*:\s*", r"\1 = ", h) for h in held)
    call = _example_call(_named_inputs(text), entry_point, params)
    if call is None or not expected.strip():
        return None, j + 1
    return _assertion(call, expected, entry_point), j + 1
