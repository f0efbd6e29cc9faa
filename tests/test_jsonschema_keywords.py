"""Exact JSON Schema keywords beyond the basics: ``not``, overlapping ``oneOf``, ``if``/``then``/
``else``, dependencies, ``uniqueItems`` over finite domains, fractional bounds, ``multipleOf``,
overlapping ``patternProperties`` -- each checked against ``jsonschema`` as the oracle."""

from __future__ import annotations

import json

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_jsonschema import accepts, token_walk

from guidewire.core.errors import UnsupportedFeatureError
from guidewire.grammar import compile_json_schema


def _validator(schema):
    cls = jsonschema.validators.validator_for(schema) if isinstance(schema, dict) else jsonschema.Draft202012Validator
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def _texts(v):
    return {json.dumps(v), json.dumps(v, separators=(",", ":")), json.dumps(v, ensure_ascii=False)}


def agree(vocab, schema, values, *, tokenizer=None, expect=None, **options):
    """Every serialization of every value is accepted iff jsonschema says it is valid.

    ``expect`` (one bool per value) guards against a vacuous oracle; with ``tokenizer`` the
    default serialization is also walked token by token through the masks.
    """
    g = compile_json_schema(schema, vocab, **options)
    check = _validator(schema)
    for i, v in enumerate(values):
        valid = check.is_valid(v)
        if expect is not None:
            assert valid == expect[i], (schema, v)
        for text in _texts(v):
            assert accepts(g, text) == valid, (schema, text, valid)
        if tokenizer is not None:
            text = json.dumps(v)
            ids = tokenizer.encode(text, add_special_tokens=False)
            if tokenizer.decode(ids) == text:
                ok, _ = token_walk(g, ids)
                assert ok == valid, (schema, text, valid)
    return g


# -- not --------------------------------------------------------------------------------------------
def test_not_required_rejects_non_objects_and_present_keys(smollm2, smol_tokenizer):
    agree(smollm2, {"not": {"required": ["a"]}}, [{}, {"b": 1}, {"a": 1}, 5, "x", None, []],
          expect=[True, True, False, False, False, False, False], tokenizer=smol_tokenizer)
    agree(smollm2, {"type": "object", "not": {"required": ["a", "b"]}},
          [{}, {"a": 1}, {"b": 1}, {"a": 1, "b": 2}], expect=[True, True, True, False])


def test_not_of_scalars_enums_and_double_negation(smollm2, smol_tokenizer):
    agree(smollm2, {"not": {"enum": ["a", 1, None, True]}},
          ["a", "b", 1, 1.0, 2, 1.5, None, True, False, [], {}], tokenizer=smol_tokenizer)
    agree(smollm2, {"type": "integer", "not": {"enum": [6379, 6380, 43215]}},
          [6379, 6380, 6381, 0, -5, 43215, 43216, 1.5], tokenizer=smol_tokenizer)
    agree(smollm2, {"not": {"not": {"type": "string", "minLength": 2}}}, ["a", "ab", 5, None])
    agree(smollm2, {"not": {"anyOf": [{"type": "integer"}, {"minimum": 2}]}}, [1, 5, 1.5, 2.5, -0.5, "x", None])
    agree(smollm2, {"not": {"type": "string", "maxLength": 3}}, ["abc", "abcd", 1, True])
    agree(smollm2, {"type": "string", "not": {"pattern": "^a*$"}}, ["", "a", "aab", "b", "ba"])
    agree(smollm2, {"not": {"minimum": 3}}, [2, 3, 2.5, 3.5, "x"])


def test_not_integer_leaves_non_integral_numbers(smollm2, smol_tokenizer):
    agree(smollm2, {"type": "number", "not": {"type": "integer"}}, [5, 1.5, 1.0, -0.25, 1e-05, 2.5e-07, "x"],
          expect=[False, True, False, True, True, True, False], tokenizer=smol_tokenizer)
    agree(smollm2, {"type": "integer", "not": {"multipleOf": 3}}, [3, 4, -6, -7, 0])


def test_not_of_objects_and_arrays(smollm2):
    agree(smollm2, {"type": "object", "not": {"properties": {"a": {"type": "string"}}}},
          [{}, {"a": "x"}, {"a": 1}, {"b": "x"}])
    agree(smollm2, {"type": "array", "not": {"items": {"type": "integer"}}}, [[], [1], [1, "x"], ["x"], [1.5]])
    agree(smollm2, {"type": "array", "not": {"contains": {"const": 1}}}, [[], [1], [2, 1], [2]])
    agree(smollm2, {"not": {"maxItems": 1}}, [[], [1], [1, 2], "ab"])


# -- oneOf --------------------------------------------------------------------------------------------
def test_one_of_with_overlapping_required_branches(smollm2, smol_tokenizer):
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
              "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}
    agree(smollm2, schema, [{"a": 1}, {"b": 1}, {"a": 1, "b": 2}, {}, {"c": 1}],
          expect=[True, True, False, False, False], tokenizer=smol_tokenizer)
    # without a type, non-objects satisfy both branches and fail oneOf
    agree(smollm2, {"oneOf": [{"required": ["a"]}, {"required": ["b"]}]}, [{"a": 1}, {"a": 1, "b": 1}, 5, "x"])


def test_one_of_numbers_enums_and_closed_objects(smollm2, smol_tokenizer):
    agree(smollm2, {"oneOf": [{"type": "number", "minimum": 0}, {"type": "integer"}]},
          [1, -1, 1.5, -1.5, 0, "x"], expect=[False, True, True, False, False, False], tokenizer=smol_tokenizer)
    agree(smollm2, {"oneOf": [{"enum": ["a", "b"]}, {"enum": ["b", "c"]}]}, ["a", "b", "c", "d"])
    agree(smollm2, {"oneOf": [{"type": "string", "maxLength": 3}, {"type": "string", "pattern": "^a"}]},
          ["a", "abcd", "bcd", "bcde", "abc"])
    closed = {"oneOf": [
        {"type": "object", "properties": {"set": {"type": "object"}, "delete": {"type": "array"}},
         "additionalProperties": False},
        {"type": "object", "properties": {"replace": {"type": "object"}}, "additionalProperties": False}]}
    agree(smollm2, closed, [{}, {"set": {}}, {"replace": {}}, {"set": {}, "replace": {}}, {"delete": []}])
    shapes = {"type": "object", "oneOf": [
        {"properties": {"kind": {"const": "circle"}, "r": {"type": "number"}}, "required": ["kind", "r"]},
        {"properties": {"kind": {"const": "square"}, "side": {"type": "number"}}, "required": ["kind", "side"]}]}
    agree(smollm2, shapes, [{"kind": "circle", "r": 1}, {"kind": "square", "side": 2}, {"kind": "circle", "side": 2},
                            {"kind": "oval", "r": 1}], tokenizer=smol_tokenizer)


# -- if / then / else -----------------------------------------------------------------------------------
def test_if_then_else_on_a_discriminator(smollm2, smol_tokenizer):
    schema = {"type": "object", "properties": {"kind": {"enum": ["a", "b"]}, "x": {}, "y": {}},
              "if": {"properties": {"kind": {"const": "a"}}, "required": ["kind"]},
              "then": {"required": ["x"]}, "else": {"required": ["y"]}}
    agree(smollm2, schema, [{"kind": "a", "x": 1}, {"kind": "a", "y": 1}, {"kind": "b", "y": 1},
                            {"kind": "b", "x": 1}, {"y": 1}, {}],
          expect=[True, False, True, False, True, False], tokenizer=smol_tokenizer)
    agree(smollm2, {"if": {"type": "string"}, "then": {"minLength": 2}}, ["a", "ab", 1, None])
    agree(smollm2, {"if": {"minimum": 10}, "else": {"multipleOf": 2}}, [11, 10, 3, 4, "x"])


# -- dependencies -------------------------------------------------------------------------------------------
DEP_VALUES = [{}, {"a": 1}, {"a": 1, "b": 1}, {"b": 1, "c": 1}, {"a": 1, "b": 1, "c": 1}, {"b": 1}, {"c": 1},
              {"a": 1, "c": 1}]


def test_dependent_required_in_schema_order_and_any_order(smollm2, smol_tokenizer):
    schema = {"type": "object", "properties": {"a": {}, "b": {}, "c": {}},
              "dependentRequired": {"a": ["b"], "c": ["a"]}}
    agree(smollm2, schema, DEP_VALUES, tokenizer=smol_tokenizer)
    agree(smollm2, schema, DEP_VALUES + [{"c": 1, "a": 1, "b": 1}, {"b": 2, "a": 1}], any_order=True)
    # a dependency that can never appear forbids its trigger
    closed = {"type": "object", "properties": {"a": {}}, "additionalProperties": False,
              "dependentRequired": {"a": ["zz"]}}
    agree(smollm2, closed, [{}, {"a": 1}], expect=[True, False])


def test_dependencies_draft7_and_dependent_schemas(smollm2):
    d7 = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
          "properties": {"a": {}, "b": {}}, "dependencies": {"b": ["a"], "a": {"required": ["z"]}}}
    agree(smollm2, d7, [{}, {"a": 1}, {"a": 1, "z": 1}, {"a": 1, "b": 1, "z": 2}, {"b": 1}, {"z": 1}, 3])
    ds = {"type": "object", "dependentSchemas": {"card": {"properties": {"billing": {"type": "string"}},
                                                          "required": ["billing"]}}}
    agree(smollm2, ds, [{}, {"card": 1}, {"card": 1, "billing": "x"}, {"card": 1, "billing": 2}, {"billing": 2}],
          any_order=True)


# -- uniqueItems ------------------------------------------------------------------------------------------------
def test_unique_items_over_finite_domains(smollm2, smol_tokenizer):
    agree(smollm2, {"type": "array", "items": {"enum": ["x", "y", "z"]}, "uniqueItems": True},
          [[], ["x"], ["x", "x"], ["x", "y", "z"], ["z", "y"], ["x", "y", "x"], ["w"]], tokenizer=smol_tokenizer)
    agree(smollm2, {"type": "array", "items": {"type": "boolean"}, "uniqueItems": True, "minItems": 1},
          [[], [True], [True, False], [False, False], [True, False, True]])
    agree(smollm2, {"type": "array", "items": {"enum": [1, 1.0, 2, True]}, "uniqueItems": True},
          [[1, 2], [1, 1.0], [1, True], [True, True], [2, 1, True]])


def test_unique_items_over_open_domains_stays_typed(smollm2):
    schema = {"type": "array", "items": {"type": "string"}, "uniqueItems": True}
    with pytest.raises(UnsupportedFeatureError, match=r"'uniqueItems' at #"):
        compile_json_schema(schema, smollm2)
    g = compile_json_schema(schema, smollm2, lenient=True)
    assert any("uniqueItems" in n for n in g.notes)
    assert accepts(g, '["a", "a"]')  # over-approximation, as documented


# -- numbers -----------------------------------------------------------------------------------------------------
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lo=st.sampled_from([None, 0, 0.5, -2.25, 0.1, 1e-06, -459.67]),
       span=st.sampled_from([None, 0.01, 1, 1.5, 10.75]),
       lo_x=st.booleans(), hi_x=st.booleans(),
       values=st.lists(st.one_of(st.floats(-600, 600, allow_nan=False),
                                 st.decimals(-600, 600, places=3).map(float),
                                 st.integers(-600, 600), st.sampled_from([0.5, 1.5, 0.1, 0.3, 1e-05, -1e-05])),
                       min_size=5, max_size=12))
def test_fractional_bounds_agree_with_jsonschema(smollm2, lo, span, lo_x, hi_x, values):
    schema = {"type": "number"}
    if lo is not None:
        schema["exclusiveMinimum" if lo_x else "minimum"] = lo
    if span is not None:
        schema["exclusiveMaximum" if hi_x else "maximum"] = (lo or 0) + span
    g = compile_json_schema(schema, smollm2)
    check = _validator(schema)
    for v in values:
        for text in _texts(v):
            got = accepts(g, text)
            if got:  # sound: never accept what jsonschema rejects
                assert check.is_valid(v), (schema, text)
            elif len(text.lstrip("-").replace(".", "").lstrip("0")) <= 15 and "e" not in text:
                assert not check.is_valid(v), (schema, text)  # complete for plain short spellings


def test_multiple_of_follows_jsonschema_float_semantics(smollm2):
    # jsonschema divides floats: 0.07 / 0.01 is not integral, so 0.07 is invalid
    agree(smollm2, {"type": "number", "multipleOf": 0.01, "minimum": 0, "maximum": 1},
          [0.07, 0.5, 1, 0, 0.333, 0.29, 0.3, 0.01, 1.5], expect=[False, True, True, True, False, False, True,
                                                                  True, False])
    agree(smollm2, {"multipleOf": 5}, [10, 10.0, 11, 2.5, -15, "x"])
    agree(smollm2, {"type": "number", "multipleOf": 0.25, "minimum": -3, "maximum": 3}, [0.25, 0.3, -2.75, 3.25])
    agree(smollm2, {"type": "integer", "multipleOf": 2.5, "minimum": 0, "maximum": 100}, [5, 2, 10, 0, 100])
    with pytest.raises(UnsupportedFeatureError, match="multipleOf"):
        compile_json_schema({"type": "number", "multipleOf": 0.01}, smollm2)
    with pytest.raises(UnsupportedFeatureError, match="multipleOf"):
        compile_json_schema({"type": "integer", "multipleOf": 0.1}, smollm2)


# -- objects ------------------------------------------------------------------------------------------------------
def test_overlapping_pattern_properties_and_all_of_merges(smollm2):
    agree(smollm2, {"patternProperties": {"^x": {"type": "integer"}, "y": {"minimum": 3}},
                    "additionalProperties": False},
          [{"xa": 1}, {"xy": 4}, {"xy": 2}, {"y": 2}, {"y": "s"}, {"b": 1}, {}])
    agree(smollm2, {"allOf": [{"patternProperties": {"^x": {"type": "integer"}}, "additionalProperties":
                               {"type": "string"}},
                              {"patternProperties": {"a$": {"minimum": 3}}, "additionalProperties": {"maxLength": 2}}]},
          [{"xa": 1}, {"xa": 4}, {"b": "abc"}, {"b": "ab"}, {"xb": "a"}, {"xb": 5}, {"ba": 4}, {"ba": "x"}])
    agree(smollm2, {"allOf": [{"patternProperties": {"^x": {}}}, {"additionalProperties": False}]},
          [{"xa": 1}, {}], expect=[False, True])
    agree(smollm2, {"allOf": [{"prefixItems": [{"type": "string"}]}, {"items": {"maxLength": 1}}]},
          [["a"], ["ab"], ["a", "b"], ["a", "bc"]])


def test_a_property_name_is_still_a_string_value(smollm2):
    schema = {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"}},
                                               "recipe": {"type": "string"}}, "additionalProperties": False}
    agree(smollm2, schema, [{"tags": ["recipe"]}, {"recipe": "tags"}, {"tags": ["x"], "recipe": "recipe"}])


def test_not_of_key_conditions_needs_some_key(smollm2, smol_tokenizer):
    values = [{}, {"a": 1}, {"ab": "x"}, {"ab": 1}, {"b": "x", "ab": 2}, {"xab": "y"}, 5, {"cd": None}]
    agree(smollm2, {"not": {"patternProperties": {"^a": {"type": "integer"}}}}, values, tokenizer=smol_tokenizer)
    agree(smollm2, {"type": "object", "not": {"properties": {"b": {}}, "additionalProperties": {"type": "string"}}},
          values)
    agree(smollm2, {"type": "object", "not": {"propertyNames": {"maxLength": 1}}}, values)
    agree(smollm2, {"type": "object", "not": {"propertyNames": {"pattern": "^a"}}}, values, any_order=True)
    agree(smollm2, {"type": "object", "propertyNames": {"not": {"const": "0"}}}, [{}, {"a": 1}, {"0": 1}])
    agree(smollm2, {"type": "object", "propertyNames": {"enum": ["a", "b"]}}, [{}, {"a": 1}, {"b": 1, "a": 2}, {"c": 1}],
          any_order=True)


def test_inexpressible_negations_stay_typed(smollm2):
    schema = {"not": {"type": "array", "uniqueItems": True}}
    with pytest.raises(UnsupportedFeatureError, match=r"'not' at #/not"):
        compile_json_schema(schema, smollm2)
    g = compile_json_schema(schema, smollm2, lenient=True)
    assert any("'not'" in n for n in g.notes)
    with pytest.raises(UnsupportedFeatureError, match=r"'oneOf' at #/oneOf/1"):
        compile_json_schema({"oneOf": [{"type": "array"}, {"type": "array", "uniqueItems": True,
                                                             "items": {"type": "string"}}]}, smollm2)


def test_checkable_formats_are_enforced_or_refused(smollm2):
    """json-pointer formats agree with jsonschema's checker; uri-reference refuses "://";
    formats that are not regular (``regex``) raise in strict mode and are noted in lenient mode."""
    for fmt, values in {"json-pointer": ["", "/a~0b/c", "/", "a", "/~2", "/x~"],
                        "relative-json-pointer": ["0", "0#", "1/a", "01/a", "#", "2/~1"]}.items():
        agree(smollm2, {"type": "string", "format": fmt}, values)
    g = compile_json_schema({"type": "string", "format": "uri-reference"}, smollm2)
    assert accepts(g, json.dumps("../a/b?c#d")) and accepts(g, json.dumps("x/y:z"))
    assert not accepts(g, json.dumps("://")) and not accepts(g, json.dumps("a%zz"))
    with pytest.raises(UnsupportedFeatureError, match="format"):
        compile_json_schema({"type": "string", "format": "regex"}, smollm2)
    g = compile_json_schema({"type": "string", "format": "regex"}, smollm2, lenient=True)
    assert any("regex" in n for n in g.notes) and accepts(g, json.dumps("*"))
