"""A tool-calling agent loop against ``guidewire serve`` with the ``openai`` client.

Two local tools: a calculator (a safe arithmetic evaluator over ``ast``) and a SQLite lookup of
a small in-memory city table. The server enforces each call's arguments with the tool's JSON
Schema, so they always parse and validate; the tools run here and their results go back as
``tool`` messages until the model answers in text (or ``max_rounds`` is reached).

    guidewire serve &            # http://127.0.0.1:8000/v1
    python examples/agent_tools.py "What is the population of Lyon times 2?"
"""

from __future__ import annotations

import ast
import json
import operator
import sqlite3
import sys

TOOLS = [
    {"type": "function", "function": {
        "name": "calculator", "description": "Evaluate an arithmetic expression such as 12 * (3 + 4).",
        "parameters": {"type": "object", "properties": {"expression": {"type": "string", "pattern": r"^[0-9+\-*/(). ]{1,40}$"}},
                       "required": ["expression"], "additionalProperties": False}}},
    {"type": "function", "function": {
        "name": "city_population", "description": "Look up the population of a French city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string", "enum": ["Paris", "Lyon", "Marseille"]}},
                       "required": ["city"], "additionalProperties": False}}},
]

_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.USub: operator.neg, ast.UAdd: operator.pos}


def calculator(expression: str) -> str:
    """Evaluate ``+ - * /`` arithmetic safely (no names, no calls)."""
    def ev(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.operand))
        raise ValueError("unsupported expression")
    try:
        return str(ev(ast.parse(expression, mode="eval").body))
    except (SyntaxError, ValueError, ZeroDivisionError, RecursionError) as exc:
        return f"error: {exc}"


def _db() -> sqlite3.Connection:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE city (name TEXT PRIMARY KEY, population INTEGER)")
    db.executemany("INSERT INTO city VALUES (?, ?)", [("Paris", 2102650), ("Lyon", 522250), ("Marseille", 873076)])
    return db


def city_population(city: str, db=None) -> str:
    """The population of ``city`` from the SQLite table."""
    row = (db or _db()).execute("SELECT population FROM city WHERE name = ?", (city,)).fetchone()
    return str(row[0]) if row else "unknown city"


def run_agent(client, question: str, *, model: str = "smollm2", max_rounds: int = 3, max_tokens: int = 64,
              seed: int = 0) -> dict:
    """Run the loop; returns ``{"answer", "calls": [(name, arguments, result)], "messages"}``."""
    db = _db()
    messages = [{"role": "system", "content": "Use the tools to answer. Reply briefly."},
                {"role": "user", "content": question}]
    calls = []
    for round_ in range(max_rounds):
        last = round_ == max_rounds - 1
        resp = client.chat.completions.create(
            model=model, messages=messages, tools=TOOLS, max_tokens=max_tokens, temperature=0, seed=seed,
            tool_choice="none" if last else ("required" if round_ == 0 else "auto"), parallel_tool_calls=False)
        msg = resp.choices[0].message
        if not msg.tool_calls:
            return {"answer": msg.content, "calls": calls, "messages": messages}
        messages.append({"role": "assistant", "content": msg.content,
                         "tool_calls": [tc.model_dump() for tc in msg.tool_calls]})
        for tc in msg.tool_calls:
            args = json.loads(tc.function.arguments)
            if tc.function.name == "calculator":
                result = calculator(args["expression"])
            else:
                result = city_population(args["city"], db)
            calls.append((tc.function.name, args, result))
            messages.append({"role": "tool", "tool_call_id": tc.id, "content": result})
    return {"answer": None, "calls": calls, "messages": messages}


def main(argv: list[str]) -> int:
    import openai

    client = openai.OpenAI(base_url="http://127.0.0.1:8000/v1", api_key="unused")
    out = run_agent(client, argv[0] if argv else "What is the population of Lyon times 2?")
    for name, args, result in out["calls"]:
        print(f"tool {name}({json.dumps(args)}) -> {result}")
    print("answer:", out["answer"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
