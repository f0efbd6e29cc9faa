"""Generation-mode bounds (issue 24, item 12): ``default_max_items`` / ``default_max_length``.

The compiled language must be exactly "valid for the original schema (jsonschema) AND within the
default bounds": checked by whole-text acceptance against that independent predicate on random
schemas and instances (hypothesis), and the bounds never apply where the schema sets its own.
"""

from __future__ import annotations

import json

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guidewire.grammar import compile_json_schema
from runtime_fakes import tiny_vocab

CAP_ITEMS, CAP_LEN = 3, 4
_compiled: dict = {}


def accepts(g, text: str) -> bool:
    r = g.step_bytes(g.earley.initial, 1, text.encode())
    return r is not None and g.can_end(*r)


def compiled(schema: dict):
    key = json.dumps(schema, sort_keys=True)
    if key not in _compiled:
        _compiled[key] = compile_json_schema(schema, tiny_vocab(), whitespace="compact",
                                             default_max_items=CAP_ITEMS, default_max_length=CAP_LEN)
    return _compiled[key]


item_schemas = st.sampled_from([
    {"type": "string"},                                  # plain: capped at CAP_LEN characters
    {"type": "string", "maxLength": 6},                  # own bound: kept
    {"type": "string", "pattern": "^a*$"},               # pattern: never capped
    {"type": "string", "minLength": 6},                  # cap below minLength: minLength wins
    {"type": "integer"},
])


@st.composite
def array_schemas(draw):
    schema = {"type": "array", "items": draw(item_schemas)}
    if draw(st.booleans()):
        schema["minItems"] = draw(st.integers(0, 5))
    if draw(st.booleans()):
        schema["maxItems"] = draw(st.integers(schema.get("minItems", 0), 6))
    if draw(st.booleans()):
        schema["prefixItems"] = [{"type": "integer"}] * draw(st.integers(1, 5))
    return schema


values = st.one_of(st.text(alphabet="ab", max_size=8), st.integers(-5, 5))


def within_bounds(schema: dict, instance: list) -> bool:
    n_prefix = len(schema.get("prefixItems", []))
    if "maxItems" not in schema and len(instance) > max(CAP_ITEMS, schema.get("minItems", 0), n_prefix):
        return False
    item = schema["items"]
    plain = item.get("type") == "string" and not {"maxLength", "pattern", "format"} & set(item)
    cap = max(CAP_LEN, item.get("minLength", 0))
    return not (plain and any(isinstance(v, str) and len(v) > cap for v in instance[n_prefix:]))


counted = {"cases": 0, "accepted": 0, "capped": 0}


def typed_values(item: dict):
    """Mostly values of the item's type (so many instances are valid), sometimes anything."""
    own = (st.integers(0, 8).flatmap(lambda k: st.text(alphabet="ab", min_size=k, max_size=k))
           if item["type"] == "string" else st.integers(-5, 5))
    return st.one_of(own, own, own, values)


@settings(max_examples=250, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_bounds_give_exactly_the_valid_instances_within_them(data):
    schema = data.draw(array_schemas())
    n_prefix = len(schema.get("prefixItems", []))
    head = data.draw(st.lists(st.integers(-5, 5), min_size=n_prefix, max_size=n_prefix))
    size = data.draw(st.integers(0, 8))  # uniform lengths: many instances cross the bound
    instance = head + data.draw(st.lists(typed_values(schema["items"]), min_size=size, max_size=size))
    g = compiled(schema)
    valid = jsonschema.Draft202012Validator(schema).is_valid(instance)
    bounded = within_bounds(schema, instance)
    got = accepts(g, json.dumps(instance, separators=(",", ":")))
    assert got == (valid and bounded), (schema, instance, valid, bounded)
    counted["cases"] += 1
    counted["accepted"] += got
    counted["capped"] += valid and not bounded


def test_the_random_cases_covered_both_sides():
    # runs after the property test (file order): it must have seen accepted and capped instances
    assert counted["cases"] >= 200 and counted["accepted"] >= 20 and counted["capped"] >= 10, counted


def test_bounds_at_the_edges():
    g = compiled({"type": "array", "items": {"type": "string"}})
    assert accepts(g, '["aaaa","b","c"]') and not accepts(g, '["a","b","c","d"]') and not accepts(g, '["aaaaa"]')
    g = compiled({"type": "array", "items": {"type": "string", "minLength": 6}, "minItems": 5})
    assert accepts(g, json.dumps(["abcdef"] * 5, separators=(",", ":")))
    assert not accepts(g, json.dumps(["abcdef"] * 6, separators=(",", ":")))
    assert not accepts(g, json.dumps(["abcdefg"] * 5, separators=(",", ":")))
    g = compiled({"type": "array", "items": {"type": "string"}, "maxItems": 6})  # its own bound wins
    assert accepts(g, json.dumps(["x"] * 6, separators=(",", ":")))


def test_bounds_are_off_by_default_and_checked():
    g = compile_json_schema({"type": "array", "items": {"type": "integer"}}, tiny_vocab(), whitespace="compact")
    assert accepts(g, json.dumps(list(range(40)), separators=(",", ":")))
    for bad in (0, -1, True, 2.0):
        with pytest.raises(ValueError, match="default_max_items"):
            compile_json_schema({"type": "array"}, tiny_vocab(), default_max_items=bad)


def test_front_door_generation_defaults():
    from guidewire.api import GENERATION_SCHEMA_OPTIONS, generation_schema_options

    assert GENERATION_SCHEMA_OPTIONS == {"extra_properties": False, "whitespace": "compact", "default_max_items": 8}
    assert generation_schema_options({}) == GENERATION_SCHEMA_OPTIONS
    assert generation_schema_options({"default_max_items": None})["default_max_items"] is None
    laid_out = generation_schema_options({"indent": 2})
    assert "whitespace" not in laid_out and laid_out["indent"] == 2
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    g = compile_json_schema(schema, tiny_vocab(), **laid_out)
    assert accepts(g, json.dumps({"a": 1}, indent=2))  # json.dumps(indent=2) spacing, ": " included
    g = compile_json_schema(schema, tiny_vocab(), **generation_schema_options({}))
    assert accepts(g, '{"a":1}') and not accepts(g, '{"a": 1}') and not accepts(g, '{"a":1,"b":2}')
