"""bench/first_tables.py: the slowest masks it reports, parts that nest inside them, and wrappers
that change no mask and are removed afterwards."""

from __future__ import annotations

import json
import os

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from guidewire.core import allocate_token_bitmask  # noqa: E402
from guidewire.grammar import compile_json_schema, tableslices, tabletrie  # noqa: E402
from guidewire.maskbench.data import load_tokenizer  # noqa: E402
from bench_scripts import load_bench  # noqa: E402

first_tables = load_bench("first_tables")

SCHEMAS = {
    "a.json": ({"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                                 "n": {"type": "integer"}}, "required": ["name"]},
               [({"name": "Ada Lovelace", "n": 3}, True), ({"name": "x" * 20}, False)]),
    "b.json": ({"type": "array", "items": {"type": "string", "pattern": "^[a-z]+@[a-z]+$"}},
               [(["ab@cd", "x@y"], True), (["AB@cd"], False)]),
}
TOL_MS = 0.5    # a part is timed inside its mask; the wrappers' own overhead lies between them


def _walk_masks(compiled, tokens, vocab_size: int) -> list[bytes]:
    bm = allocate_token_bitmask(1, vocab_size)
    m = compiled.matcher()
    out = []
    for t in tokens:
        m.fill_bitmask(bm, 0)
        out.append(np.asarray(bm).tobytes())
        if not m.advance(t):
            break
    return out


def test_reports_the_slowest_masks_with_nested_parts(tmp_path):
    for name, (schema, tests) in SCHEMAS.items():
        doc = {"schema": schema, "tests": [{"data": x, "valid": v} for x, v in tests]}
        (tmp_path / name).write_text(json.dumps(doc))
    out = tmp_path / "parts.json"
    before = (tabletrie.TrieTables._trie_table, tableslices.SliceShortcuts._slice_plan)
    assert first_tables.main(["a.json", "b.json", "--data", str(tmp_path), "--tokenizer", "smollm2",
                              "--top", "2", "--out", str(out), "--no-gc-freeze"]) == 0
    # the wrappers are gone: nothing leaks into the rest of the process
    assert (tabletrie.TrieTables._trie_table, tableslices.SliceShortcuts._slice_plan) == before
    rows = json.loads(out.read_text())["masks"]
    assert [r["schema"] for r in rows] == ["a.json", "a.json", "b.json", "b.json"]
    assert all(r["status"] == "pass" for r in rows)
    for a, b in zip(rows[::2], rows[1::2]):
        assert a["ms"] >= b["ms"]                      # slowest first
    built = 0
    for r in rows:
        parts = r["parts_ms"]
        assert all(v <= r["ms"] + TOL_MS for v in parts.values()), r
        if "trie_table" in parts:
            assert parts["trie_table"] <= parts["table_entry"] + TOL_MS, r
        built += "table_entry" in parts
    assert built >= 2       # each schema's slowest mask builds a token table, and it was timed


def test_instrumented_masks_equal_plain_ones():
    tok = load_tokenizer("smollm2")
    schema, tests = SCHEMAS["b.json"]
    tokens = tok.hf.encode(json.dumps(tests[0][0]), add_special_tokens=False)
    unwrap = first_tables.instrument()     # first, so that its walk builds the tables itself
    first_tables.SPENT.clear()
    try:
        timed = _walk_masks(compile_json_schema(schema, tok.vocab), tokens, tok.vocab_size)
        assert first_tables.SPENT["table_entry"] > 0     # the parts were timed
    finally:
        unwrap()
    plain = _walk_masks(compile_json_schema(schema, tok.vocab), tokens, tok.vocab_size)
    assert len(plain) == len(tokens) and timed == plain
