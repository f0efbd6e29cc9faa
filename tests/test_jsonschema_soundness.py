"""Soundness regressions (issue 17 s.2, issue 24 items 6-8), each checked against an independent
oracle: ``jsonschema`` for values, Python ``re`` for patterns, the grammar text for positions.

* boolean subschemas in every position a schema can appear;
* ``\\w``/``\\d``/``\\s`` follow Python ``re`` inside a schema ``pattern``;
* a ``jsonschema`` check that cannot decide never fails open;
* long length bounds, lookarounds and bad regexes give pointed errors, lenient over-approximations.
"""

from __future__ import annotations

import json

import jsonschema
import pytest
from test_jsonschema import accepts, token_walk

from guidewire.core.errors import GrammarSyntaxError, LimitExceededError, RegexSyntaxError, UnsupportedFeatureError
from guidewire.grammar import compile_json_schema, compile_lark

F, T = False, True
D7 = "http://json-schema.org/draft-07/schema#"

#: every place a boolean subschema can stand, true and false, alone and next to other keywords
BOOLEAN_SCHEMAS = [
    {"patternProperties": {"b.*": F}},
    {"patternProperties": {"f.*": T, "b.*": F}},
    {"patternProperties": {"f.*": {"type": "integer"}, "b.*": F}, "additionalProperties": F},
    {"patternProperties": {"^a": {"type": "integer"}, "b$": {"type": "string"}}},
    {"patternProperties": {"a": {"type": "integer"}, "b": {"type": "string"}, "^x": F}},
    {"patternProperties": {"b": F}, "properties": {"bar": T}},
    {"allOf": [{"patternProperties": {"b": F}}, {"properties": {"bar": T}}]},
    {"allOf": [{"patternProperties": {"b": T}}, {"additionalProperties": F}]},
    {"properties": {"foo": F}}, {"properties": {"foo": T, "bar": F}, "additionalProperties": F},
    {"additionalProperties": F}, {"additionalProperties": F, "properties": {"a": T}},
    {"additionalProperties": T, "properties": {"a": F}},
    {"items": F}, {"items": T}, {"prefixItems": [T, F]}, {"prefixItems": [F]}, {"prefixItems": [T], "items": F},
    {"$schema": D7, "items": [T, F]}, {"$schema": D7, "items": [T], "additionalItems": F},
    {"contains": F}, {"contains": T}, {"propertyNames": F}, {"propertyNames": T},
    {"dependentSchemas": {"a": F}}, {"dependentSchemas": {"a": T}}, {"$schema": D7, "dependencies": {"a": F}},
    {"not": F}, {"if": F, "then": F}, {"if": {"type": "string"}, "then": F, "else": T},
    {"if": {"type": "string"}, "then": T, "else": F}, {"if": T, "then": {"type": "integer"}},
    {"anyOf": [F, {"type": "integer"}]}, {"oneOf": [T, {"type": "integer"}]}, {"oneOf": [F, T]}, {"allOf": [T, T]},
    {"$defs": {"x": F}, "properties": {"a": {"$ref": "#/$defs/x"}}},
    {"$defs": {"x": T}, "properties": {"a": {"$ref": "#/$defs/x"}}, "additionalProperties": F},
    {"properties": {"a": {"not": F}}, "additionalProperties": {"not": T}},
    {"type": "object", "not": {"patternProperties": {"b": F}}},
    {"not": {"additionalProperties": F}}, {"not": {"items": F}}, {"not": {"contains": T}},
    {"not": {"propertyNames": F}}, {"not": {"prefixItems": [F]}},
]
INSTANCES = [None, 0, 1.5, "s", True, [], [1], [1, 2], ["a", 1, None], {}, {"a": 1}, {"bar": 2}, {"foobar": 1},
             {"foo": 1}, {"ab": 1}, {"ab": "x"}, {"a": "x", "b": 2}, {"x": None}, {"a": 1, "bar": None},
             {"xb": 1}]


def _validator(schema):
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def test_boolean_subschemas_everywhere_agree_with_jsonschema(smollm2):
    """``{"patternProperties": {"f.*": true, "b.*": false}}`` used to accept ``{"bar": 2}``: a key class
    whose schema is ``false`` fell through to additionalProperties."""
    ran = invalid = 0
    for schema in BOOLEAN_SCHEMAS:
        g = compile_json_schema(schema, smollm2)
        check = _validator(schema)
        for value in INSTANCES:
            valid = check.is_valid(value)
            for text in (json.dumps(value), json.dumps(value, separators=(",", ":"))):
                assert accepts(g, text) == valid, (schema, text, valid)
                ran += 1
                invalid += not valid
    assert ran == 2 * len(BOOLEAN_SCHEMAS) * len(INSTANCES) and invalid > 300


@pytest.mark.parametrize("value", [{"bar": 2}, {"foobar": 1}, {"foo": 1, "b": None}])
def test_pattern_properties_false_rejects_matching_keys_token_by_token(smollm2, smol_tokenizer, value):
    schema = {"patternProperties": {"f.*": True, "b.*": False}}
    g = compile_json_schema(schema, smollm2)
    ids = smol_tokenizer.encode(json.dumps(value), add_special_tokens=False)
    assert smol_tokenizer.decode(ids) == json.dumps(value)
    assert not _validator(schema).is_valid(value)
    assert token_walk(g, ids)[0] is False


@pytest.mark.parametrize("pattern,text", [("^\\w+$", "a\u0300"), ("^\\d+$", "\u00b2"), ("^\\s$", "\u200b"),
                                          ("^\\w+$", "ab_\u00e9"), ("^[\\w-]+$", "\u0e31")])
def test_pattern_classes_follow_python_re(smollm2, pattern, text):
    """``\\w`` used to follow the ``regex`` package, which accepts U+0300 (jsonschema does not)."""
    schema = {"type": "string", "pattern": pattern}
    g = compile_json_schema(schema, smollm2)
    valid = _validator(schema).is_valid(text)
    for s in (json.dumps(text), json.dumps(text, ensure_ascii=False)):
        assert accepts(g, s) == valid, (pattern, s)


def test_an_undecidable_check_refuses_in_strict_mode_and_is_noted_in_lenient(smollm2):
    """The enum filter used to keep a value whenever jsonschema raised (fail-open): ``"ABC"`` passed."""
    schema = {"properties": {"x": {"enum": ["abc", "ABC"], "pattern": "^\\p{Ll}+$"}}}
    with pytest.raises((UnsupportedFeatureError, RegexSyntaxError)) as info:
        compile_json_schema(schema, smollm2)
    assert "'pattern'" in str(info.value) and "#/properties/x/pattern" in str(info.value)
    g = compile_json_schema(schema, smollm2, lenient=True)
    assert any("#/properties/x/pattern" in n for n in g.notes)
    assert accepts(g, '{"x": "abc"}')  # over-approximation: both kept, listed in notes


@pytest.mark.parametrize("strict", [True, False])
def test_the_validator_check_never_fails_open(strict):
    """The check itself (the second line behind the pattern checks): an exception inside jsonschema
    refuses (strict) or keeps the value with a note (lenient), naming the keyword and pointer."""
    from guidewire.grammar.jsonschema import _validator
    from guidewire.grammar.jsonschema.flatten import Flattener
    from guidewire.grammar.jsonschema.resolve import Resolver

    root = {"properties": {"x": {"enum": ["abc", "ABC"], "pattern": "^\\p{Ll}+$"}}}
    notes: list[str] = []
    check = _validator(root, Flattener(Resolver(root), "2020-12", strict=strict, notes=notes))
    sub = root["properties"]["x"]
    assert check(sub, 5) is False  # decided without the pattern (not in the enum)
    if strict:
        with pytest.raises(UnsupportedFeatureError, match="#/properties/x/pattern"):
            check(sub, "ABC")
    else:
        assert check(sub, "ABC") is True and any("#/properties/x/pattern" in n for n in notes)


def test_property_names_check_that_cannot_decide_is_not_fail_open(smollm2):
    schema = {"properties": {"a": {}, "B": {}}, "propertyNames": {"pattern": "^\\p{Ll}$"}}
    with pytest.raises(UnsupportedFeatureError) as info:
        compile_json_schema(schema, smollm2)
    assert "#/propertyNames/pattern" in str(info.value)


# -- issue 24 item 6: long length bounds ----------------------------------------------------------------
def test_max_length_10000_is_enforced_exactly(smollm2):
    """Used to fail with ``automaton exceeds 250000 NFA states`` (no pointer) from about 5,500 up."""
    g = compile_json_schema({"type": "string", "maxLength": 10_000}, smollm2)
    assert accepts(g, json.dumps("x" * 10_000)) and accepts(g, json.dumps("\u00e9" * 10_000, ensure_ascii=False))
    assert not accepts(g, json.dumps("x" * 10_001))


def test_a_bound_too_long_for_the_automaton_names_the_pointer_or_relaxes_in_lenient_mode(smollm2):
    # bounds this close are unrolled whole (not elided): 3,000 copies of \w's ~820 NFA states
    schema = {"properties": {"bio": {"type": "string", "pattern": "^\\w*$", "minLength": 2_900, "maxLength": 3_000}}}
    with pytest.raises(LimitExceededError) as info:
        compile_json_schema(schema, smollm2)
    msg = str(info.value)
    assert "#/properties/bio" in msg and "maxLength 3000" in msg and "lenient=True" in msg
    g = compile_json_schema(schema, smollm2, lenient=True)
    assert any("maxLength 3000 at #/properties/bio" in n and "not enforced" in n for n in g.notes)
    short, long_, bad = {"bio": "x" * 2_950}, {"bio": "x" * 3_050}, {"bio": "x-y"}
    assert accepts(g, json.dumps(short)) and _validator(schema).is_valid(short)
    assert not accepts(g, json.dumps(bad))  # the pattern is still enforced
    # over-approximation: the mask accepts what the output check (jsonschema) then rejects
    assert accepts(g, json.dumps(long_)) and not _validator(schema).is_valid(long_)


def test_a_long_max_length_is_elided_and_exact(smollm2):
    """The same pattern under ``maxLength`` alone: its middle is elided, and the bound is exact."""
    schema = {"properties": {"bio": {"type": "string", "pattern": "^\\w*$", "maxLength": 3_000}}}
    g = compile_json_schema(schema, smollm2)
    assert g._elision is not None and not g.notes
    assert accepts(g, json.dumps({"bio": "x" * 3_000})) and not accepts(g, json.dumps({"bio": "x" * 3_001}))
    assert not accepts(g, json.dumps({"bio": "x-y"}))


def test_bounds_above_max_string_length_relax_in_lenient_mode(smollm2):
    schema = {"type": "string", "minLength": 50_000}
    with pytest.raises(LimitExceededError, match="#"):
        compile_json_schema(schema, smollm2)
    g = compile_json_schema(schema, smollm2, lenient=True)
    assert g.notes and accepts(g, '"abc"')
    assert not compile_json_schema({"type": "string", "maxLength": 50_000}, smollm2).notes   # elided, exact


def test_a_relaxed_bound_is_not_reused_by_a_strict_compile(smollm2):
    """Fragments are shared across compiles by key: a lenient fallback must never stand in for the
    bounded automaton of a strict compile."""
    schema = {"type": "string", "pattern": "^\\w*$", "minLength": 2_400, "maxLength": 2_500}
    compile_json_schema(schema, smollm2, lenient=True)
    with pytest.raises(LimitExceededError):
        compile_json_schema(schema, smollm2)


# -- issue 24 item 7: lookarounds --------------------------------------------------------------------
@pytest.mark.parametrize("pattern,fits", [
    ("(?<=x)a", ["a", "xa", "ba"]),
    ("^foo(?!bar)", ["foo", "foobaz", "foobar"]),
    ("\\bcat\\b", ["cat", "a cat!", "concatenate"]),
    ("^(a)\\1$", ["aa", "ab"]),
    ("^(?>ab|a)c$", ["abc", "ac"]),
])
def test_lookarounds_are_refused_with_a_pointer_and_relaxed_in_lenient_mode(smollm2, pattern, fits):
    schema = {"properties": {"p": {"type": "string", "pattern": pattern}}}
    with pytest.raises(UnsupportedFeatureError) as info:
        compile_json_schema(schema, smollm2)
    assert "#/properties/p/pattern" in str(info.value)
    g = compile_json_schema(schema, smollm2, lenient=True)
    assert any("#/properties/p/pattern" in n for n in g.notes)
    check = _validator(schema)
    for s in fits:  # a superset: every valid value is still accepted
        value = {"p": s}
        if check.is_valid(value):
            assert accepts(g, json.dumps(value)), (pattern, s)
    assert not accepts(g, json.dumps({"p": 1}))


def test_a_negated_lookaround_pattern_relaxes_to_any_string(smollm2):
    schema = {"type": "string", "not": {"pattern": "^a(?=b)"}}
    with pytest.raises(UnsupportedFeatureError, match="#/not/pattern"):
        compile_json_schema(schema, smollm2)
    g = compile_json_schema(schema, smollm2, lenient=True)
    for s in ("ab", "ac", "b", ""):
        if _validator(schema).is_valid(s):
            assert accepts(g, json.dumps(s))
    assert not accepts(g, "1")


def test_a_pattern_properties_lookaround_is_pointed_and_widened(smollm2):
    schema = {"patternProperties": {"(?<=x)a": {"type": "integer"}, "^b": {"type": "string"}},
              "additionalProperties": False}
    with pytest.raises(UnsupportedFeatureError, match="#/patternProperties/"):
        compile_json_schema(schema, smollm2)
    g = compile_json_schema(schema, smollm2, lenient=True)
    check = _validator(schema)
    for value in ({"a": 1}, {"xa": 2}, {"b": "s"}, {"b": 1}, {"c": 1}):
        if check.is_valid(value):
            assert accepts(g, json.dumps(value)), value
    assert not accepts(g, json.dumps({"c": 1})) and not accepts(g, json.dumps({"b": 1}))


def test_a_pattern_re_cannot_parse_names_its_pointer(smollm2):
    schema = {"properties": {"p": {"type": "string", "pattern": "^\\p{L}+$"}}}
    with pytest.raises(RegexSyntaxError, match="#/properties/p/pattern"):
        compile_json_schema(schema, smollm2)
    g = compile_json_schema(schema, smollm2, lenient=True)
    assert any("#/properties/p/pattern" in n for n in g.notes)


# -- issue 24 item 8: a bad regex in a .lark file -------------------------------------------------------
@pytest.mark.parametrize("text,name,at", [
    ('start: A B\nA: "x"\nB: /ab(c/\n', "terminal B", "(c/"),
    ('start: "x" /q[z/ \n', "an inline regex", "[z/"),
    ('// comment\n\nstart: NUM WORD\nNUM: /[0-9]+/\n  WORD.2: /[a-z]+(?P<x/i\n', "terminal WORD", "x/i"),
    ('start: NUM\nNUM: /[0-9]+/ /(x/\n', "terminal NUM", None),
    ('start: NUM\nNUM: /-?[0-9]+(\\.[0-9]+/\n', "terminal NUM", "(\\.[0-9]+/"),
])
def test_a_bad_lark_regex_is_located_in_the_grammar_text(smollm2, text, name, at):
    with pytest.raises(GrammarSyntaxError) as info:
        compile_lark(text, smollm2)
    err = info.value
    assert name in str(err) and err.line is not None
    line = text.split("\n")[err.line - 1]
    if at is not None:
        assert line[err.column - 1:].startswith(at), (line, err.column)
    else:  # Lark joined two regexes into one: the terminal's definition
        assert line[err.column - 1:].startswith("NUM:"), (line, err.column)


# -- found by the differential fuzzer (test_jsonschema_fuzz.py) ----------------------------------------
FUZZ_FOUND = [
    # a counted string bound of 0 (maxLength 0) was once built unbounded
    ({"propertyNames": {"maxLength": 0}}, [{"": 1}, {"bar": 1}, {}, 3]),
    # dependentSchemas / dependencies constrain objects only: other values used to be rejected
    ({"dependentSchemas": {"ab": {"type": "array"}}}, [2.0, "x", [], None, {}, {"ab": 1}]),
    ({"$schema": D7, "dependencies": {"a": {"required": ["b"]}}}, [1, "s", [1], {"a": 1}, {"a": 1, "b": 2}]),
    ({"oneOf": [{"dependentSchemas": {"a": {"if": True, "then": {"type": "string"}}}}]}, [{"A": 1}, {"a": 1}, 5]),
]


@pytest.mark.parametrize("schema,values", FUZZ_FOUND)
def test_fuzzer_findings_agree_with_jsonschema(smollm2, schema, values):
    g = compile_json_schema(schema, smollm2, any_order=True)
    check = _validator(schema)
    assert {check.is_valid(v) for v in values} == {True, False}
    for value in values:
        assert accepts(g, json.dumps(value)) == check.is_valid(value), (schema, value)


def test_property_names_errors_name_their_own_pointer(smollm2):
    """``propertyNames`` errors used to say ``#/propertyNames`` wherever the keyword stood."""
    schema = {"properties": {"o": {"type": "object", "propertyNames": {"not": {"anyOf": [
        {"pattern": "^a"}, {"maxLength": 1, "minLength": 1, "pattern": "b"}]}}}}}
    with pytest.raises(UnsupportedFeatureError) as info:
        compile_json_schema(schema, smollm2)
    assert "#/properties/o/propertyNames" in str(info.value)
