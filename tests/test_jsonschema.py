"""JSON Schema compiler against ``jsonschema`` (the oracle) and MaskBench's labelled instances."""

from __future__ import annotations

import glob
import json
import os

import jsonschema
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guidewire.core import allocate_token_bitmask, bitmask_to_bool
from guidewire.core.errors import (GuidewireError, LimitExceededError, UnsatisfiableGrammarError,
                                   UnsupportedFeatureError)
from guidewire.grammar import compile_json_schema
from guidewire.grammar.jsonschema import SchemaError

MASKBENCH = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "maskbench")


def accepts(g, text: str) -> bool:
    """Whole-text acceptance by the compiled grammar (byte level)."""
    r = g.step_bytes(g.earley.initial, 1, text.encode())
    return r is not None and g.can_end(*r)


def token_walk(g, ids) -> tuple[bool, int]:
    """Step a matcher through ``ids`` checking each token's mask bit; (accepted, rejected_at)."""
    m = g.matcher()
    bm = allocate_token_bitmask(1, g.vocab.vocab_size)
    for i, t in enumerate(ids):
        m.fill_bitmask(bm, 0)
        allowed = bool(bitmask_to_bool(bm[0], g.vocab.vocab_size)[t])
        if allowed != m.validate([t]) == 1:
            raise AssertionError("mask bit and advance disagree")
        if not allowed:
            return False, i
        assert m.advance(t)
    m.fill_bitmask(bm, 0)
    eos = any(bitmask_to_bool(bm[0], g.vocab.vocab_size)[e] for e in g.vocab.eos_ids)
    assert eos == m.is_accepting()
    return m.is_accepting(), len(ids)


def _maskbench_sample(n: int):
    files = sorted(glob.glob(os.path.join(MASKBENCH, "*.json")))
    if not files:
        pytest.skip("shared/data/maskbench not present")
    return files[:: max(1, len(files) // n)][:n]


def test_maskbench_sample_is_sound_and_mostly_complete(smollm2, smol_tokenizer):
    """No invalid instance is ever accepted; valid ones are accepted (token by token, with masks)."""
    compiled = valid_total = valid_ok = checked_invalid = 0
    for path in _maskbench_sample(60):
        d = json.load(open(path))
        try:
            g = compile_json_schema(d["schema"], smollm2)
        except GuidewireError:
            continue
        compiled += 1
        for t in d["tests"]:
            for text in (json.dumps(t["data"]), json.dumps(t["data"], separators=(",", ":"))):
                ids = smol_tokenizer.encode(text, add_special_tokens=False)
                if smol_tokenizer.decode(ids) != text:
                    continue
                ok, _ = token_walk(g, ids)
                assert ok == accepts(g, text), path
                if t["valid"]:
                    valid_total += 1
                    valid_ok += ok
                else:
                    checked_invalid += 1
                    assert not ok, f"invalid instance accepted (soundness bug): {path}: {text[:200]}"
    assert compiled >= 45 and checked_invalid > 20
    assert valid_ok >= 0.9 * valid_total


# -- random schemas x random instances, oracle = jsonschema ------------------------------------------
scalar_schemas = st.one_of(
    st.just({"type": "string"}),
    st.builds(lambda lo, n: {"type": "string", "minLength": lo, "maxLength": lo + n},
              st.integers(0, 3), st.integers(0, 3)),
    st.sampled_from([{"type": "string", "pattern": "^[a-c]+$"}, {"type": "string", "pattern": "b"},
                     {"type": "string", "format": "date"}, {"type": "string", "format": "ipv4"},
                     {"type": "string", "enum": ["a", "b\"", "é"]}, {"const": "x"}]),
    st.builds(lambda lo, hi: {"type": "integer", "minimum": min(lo, hi), "maximum": max(lo, hi)},
              st.integers(-120, 120), st.integers(-120, 120)),
    st.builds(lambda lo, ex: {"type": "number", "minimum" if not ex else "exclusiveMinimum": lo},
              st.integers(-5, 5), st.booleans()),
    st.builds(lambda m: {"type": "integer", "multipleOf": m}, st.integers(2, 9)),
    st.sampled_from([{"type": "boolean"}, {"type": "null"}, {"type": ["integer", "null"]}, {"enum": [1, "1", None]},
                     {"anyOf": [{"type": "integer", "maximum": 3}, {"type": "string", "maxLength": 1}]},
                     {"oneOf": [{"type": "boolean"}, {"type": "integer"}]}, {"not": {"type": "string"}}]),
)


def _schemas(depth: int = 2):
    if depth == 0:
        return scalar_schemas
    inner = _schemas(depth - 1)
    return st.one_of(
        scalar_schemas,
        st.builds(lambda it, lo, n: {"type": "array", "items": it, "minItems": lo, "maxItems": lo + n},
                  inner, st.integers(0, 2), st.integers(0, 2)),
        st.builds(lambda props, req, add: {"type": "object", "properties": props,
                                           "required": [k for k in props if k in req],
                                           "additionalProperties": add},
                  st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3),
                  st.sets(st.sampled_from(["a", "b", "c"])), st.one_of(st.booleans(), inner)),
    )


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-200, 200), st.sampled_from([0.5, -1.25, 7.5]),
              st.sampled_from(["", "a", "abc", "b\"", "é", "2024-02-29", "2023-02-29", "10.0.0.1", "x", "bb"])),
    lambda kids: st.one_of(st.lists(kids, max_size=3),
                           st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), kids, max_size=3)),
    max_leaves=6)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema=_schemas(), values=st.lists(json_values, min_size=1, max_size=6))
def test_random_schemas_agree_with_jsonschema(smollm2, schema, values):
    """With any property order, acceptance of json.dumps(v) equals jsonschema validity, both ways.

    (Integral floats such as 3.0 are left out: integers are generated without ".0", see README.)
    """
    try:
        g = compile_json_schema(schema, smollm2, any_order=True)
    except UnsatisfiableGrammarError:
        return
    checker = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
    for v in values:
        expected = checker.is_valid(v)
        for text in (json.dumps(v), json.dumps(v, separators=(",", ":")), json.dumps(v, ensure_ascii=False)):
            assert accepts(g, text) == expected, (schema, text)


# -- options ---------------------------------------------------------------------------------------------
PERSON = {"type": "object", "properties": {"name": {"type": "string"}, "tags": {"type": "array", "items":
          {"type": "integer"}}}, "required": ["name", "tags"], "additionalProperties": False}
DOC = {"name": "Ada", "tags": [1, 2]}


def test_layouts(smollm2):
    """compact / separators / indent accept exactly json.dumps's layout; flexible bounds whitespace."""
    g = compile_json_schema(PERSON, smollm2, whitespace="compact")
    assert accepts(g, json.dumps(DOC, separators=(",", ":")))
    assert not accepts(g, json.dumps(DOC))
    g = compile_json_schema(PERSON, smollm2, separators=(", ", ": "))
    assert accepts(g, json.dumps(DOC)) and not accepts(g, json.dumps(DOC, separators=(",", ":")))
    g = compile_json_schema(PERSON, smollm2, indent=2)
    assert accepts(g, json.dumps(DOC, indent=2))
    assert not accepts(g, json.dumps(DOC)) and not accepts(g, json.dumps(DOC, indent=4))
    g = compile_json_schema(PERSON, smollm2)
    assert accepts(g, json.dumps(DOC, indent=4))
    assert not accepts(g, '{"name":' + " " * 40 + '"Ada", "tags": []}')
    # schema order by default, any order on request
    swapped = '{"tags": [1], "name": "Ada"}'
    assert not accepts(g, swapped)
    assert accepts(compile_json_schema(PERSON, smollm2, any_order=True), swapped)


def test_flexible_whitespace_run_is_bounded_in_every_gap(smollm2):
    """Each gap between lexemes takes at most ``max_whitespace`` characters, wherever it is."""
    schema = {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}},
                                               "b": {"enum": [[], {"k": [1]}]}, "c": {"type": "object"}},
              "additionalProperties": False}
    gaps = ["", "{", '"a"', ":", "[", "1", ",", "2", "]", ",", '"b"', ":", "[", "]", ",", '"c"', ":", "{", "}", "}"]
    check = jsonschema.Draft202012Validator(schema)
    for limit in (24, 3):
        g = compile_json_schema(schema, smollm2, max_whitespace=limit)
        for gap in range(1, len(gaps)):
            for n, ws in ((limit, " \n\t\r" * limit), (limit + 1, "\n" + " " * limit)):
                text = "".join(gaps[:gap]) + ws[:n] + "".join(gaps[gap:])
                assert check.is_valid(json.loads(text))
                assert accepts(g, text) == (n <= limit), (limit, gap, n, text)


def test_strict_openai_requires_all_properties(smollm2):
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}}
    g = compile_json_schema(schema, smollm2, strict_openai=True)
    assert accepts(g, '{"a": 1, "b": "x"}')
    assert not accepts(g, '{"a": 1}') and not accepts(g, '{"a": 1, "b": "x", "c": 2}')


def test_extra_properties_false_generates_a_valid_subset(smollm2):
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "t": {
        "type": "array", "prefixItems": [{"type": "string"}]}, "m": {"type": "object", "minProperties": 1}},
        "required": ["a", "r"], "patternProperties": {"^x_": {"type": "boolean"}}}
    g = compile_json_schema(schema, smollm2, extra_properties=False)
    check = jsonschema.Draft202012Validator(schema)
    ok = [{"a": 1, "r": None}, {"a": 1, "t": ["s"], "r": [1], "x_y": True}, {"a": 1, "m": {"k": 1}, "r": 0}]
    unnamed = [{"a": 1, "r": 0, "z": 1}, {"a": 1, "t": ["s", 1], "r": 0}]
    for v in ok:
        assert check.is_valid(v) and accepts(g, json.dumps(v)), v
    for v in unnamed:  # valid under the schema, but not generated in this mode
        assert check.is_valid(v) and not accepts(g, json.dumps(v)), v
    assert not accepts(g, json.dumps({"a": "1", "r": 0}))  # still enforces the schema
    assert accepts(compile_json_schema(schema, smollm2), json.dumps(unnamed[0]))  # default: exact


def test_recursive_ref_and_pydantic(smollm2):
    tree = {"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"}, "kids": {
        "type": "array", "items": {"$ref": "#/$defs/node"}}}, "required": ["v"], "additionalProperties": False}},
        "$ref": "#/$defs/node"}
    g = compile_json_schema(tree, smollm2)
    assert accepts(g, json.dumps({"v": 1, "kids": [{"v": 2, "kids": [{"v": 3}]}]}))
    assert not accepts(g, json.dumps({"v": 1, "kids": [{"kids": []}]}))
    pydantic = pytest.importorskip("pydantic")

    class Point(pydantic.BaseModel):
        x: int
        y: float
        label: str | None = None

    g = compile_json_schema(Point, smollm2)
    assert accepts(g, json.dumps({"x": 1, "y": 2.5, "label": None}))
    assert not accepts(g, json.dumps({"x": 1.5, "y": 2}))


def test_extra_keys_never_shadow_named_properties(smollm2):
    """An open object must not accept a named property's key as an 'extra' with the wrong value."""
    schema = {"type": "object", "properties": {"n": {"type": "integer"}, "gone": {"type": "object", "enum": ["x"]}}}
    g = compile_json_schema(schema, smollm2)
    assert accepts(g, '{"n": 1, "other": "x"}')
    assert not accepts(g, '{"n": "1"}')
    assert not accepts(g, '{"n": 1, "n": "x"}')
    assert not accepts(g, '{"gone": "x"}')


def test_bad_schemas_raise_typed_errors(smollm2):
    with pytest.raises(SchemaError, match="not valid JSON"):
        compile_json_schema('{"type": ', smollm2)
    with pytest.raises(SchemaError, match="unknown type 'strng'"):
        compile_json_schema({"type": "strng"}, smollm2)
    with pytest.raises(SchemaError, match="dangling"):
        compile_json_schema({"$ref": "#/definitions/missing"}, smollm2)
    with pytest.raises(UnsatisfiableGrammarError):
        compile_json_schema({"type": "integer", "minimum": 5, "maximum": 1}, smollm2)
    with pytest.raises(UnsatisfiableGrammarError):
        compile_json_schema({"allOf": [{"type": "string"}, {"type": "integer"}]}, smollm2)
    unique_objects = {"type": "array", "items": {"type": "object"}, "uniqueItems": True}
    with pytest.raises(UnsupportedFeatureError, match=r"'uniqueItems' at #"):
        compile_json_schema(unique_objects, smollm2)
    g = compile_json_schema(unique_objects, smollm2, lenient=True)
    assert any("'uniqueItems'" in n for n in g.notes)
    with pytest.raises(LimitExceededError):
        compile_json_schema({"type": "string", "minLength": 10 ** 6}, smollm2)
    with pytest.raises(UnsupportedFeatureError, match="lookaround"):
        compile_json_schema({"type": "string", "pattern": "^(?!x)"}, smollm2)


def test_format_and_unicode_escapes(smollm2):
    g = compile_json_schema({"type": "string", "format": "date-time"}, smollm2)
    assert accepts(g, '"2024-02-29T10:00:00Z"') and not accepts(g, '"2023-02-29T10:00:00Z"')
    g = compile_json_schema({"type": "string", "pattern": "^[é-ü]{2}$"}, smollm2)
    assert accepts(g, json.dumps("éü")) and accepts(g, json.dumps("éü", ensure_ascii=False))
    assert not accepts(g, json.dumps("ea"))
    g = compile_json_schema({"type": "string", "maxLength": 1}, smollm2)
    assert accepts(g, json.dumps("😀")) and accepts(g, json.dumps("😀", ensure_ascii=False))
    assert not accepts(g, json.dumps("😀a"))
