"""Enum values checked against their source schemas: the fast paths against plain ``jsonschema``.

The compiler drops an ``enum`` value that fails a schema it was merged from, asking ``jsonschema``
(``guidewire.grammar.jsonschema._validator``). Two shortcuts keep that from being quadratic: a large
enum is tested by canonical keys in a set, and ``anyOf``/``oneOf`` branches that only list values
are folded into one enum (``enumfold``). Here both are compared with ``jsonschema`` itself on the
unfolded schema, on random schemas and values chosen where JSON equality is subtle (``1`` and
``1.0``, ``true`` and ``1``, nested arrays and objects), and string constants (built as a chain of
characters, not a regex) are checked end to end against ``json.loads``.
"""

from __future__ import annotations

import json
from collections import Counter

import jsonschema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_jsonschema import accepts

from guidewire.grammar import compile_json_schema
from guidewire.grammar.jsonschema import ENUM_SET_FROM, _validator
from guidewire.grammar.jsonschema.enumfold import FOLD_FROM, fold_enum_branches
from guidewire.grammar.jsonschema.flatten import Flattener
from guidewire.grammar.jsonschema.negate import json_key
from guidewire.grammar.jsonschema.resolve import Resolver, draft_of

VALUES = [None, True, False, 0, 1, 1.0, 2, -1, 0.5, "1", "a", "b", "é", "", [1], [1.0], [True], ["a", 1],
          {"a": 1}, {"a": 1.0}, {"a": True}, {"b": [1]}, [], {}]


def _values():
    return st.sampled_from(VALUES)


def _enum_branch():
    """A branch listing values, sometimes with annotations or unknown keywords beside them (which
    ``jsonschema`` ignores), sometimes with a validating keyword (which must stop the fold)."""
    harmless = [{}, {"description": "d"}, {"doNotSuggest": False, "ignoreCase": "value"}]
    extra = st.sampled_from(harmless * 30 + [{"type": "string"}, {"minLength": 1}, {"title": "t", "type": "integer"}])
    return st.builds(lambda vs, ex: {**ex, "enum": vs}, st.lists(_values(), min_size=1, max_size=3), extra)


def _schemas():
    many = st.lists(_enum_branch(), min_size=FOLD_FROM - 1, max_size=FOLD_FROM + 4)
    big_enum = st.lists(_values(), min_size=ENUM_SET_FROM, max_size=ENUM_SET_FROM + 8)
    leaf = st.one_of(
        st.builds(lambda bs: {"anyOf": bs}, many),
        st.builds(lambda bs: {"oneOf": bs}, many),
        st.builds(lambda vs: {"enum": vs}, big_enum),
        # one value a branch (annotated): anyOf always folds; oneOf over distinct JSON values too
        st.builds(lambda k, vs: {k: [{"description": "d", "enum": [v]} for v in vs]}, st.sampled_from(["anyOf", "oneOf"]),
                  st.lists(_values(), min_size=FOLD_FROM, max_size=FOLD_FROM + 6, unique_by=json_key)),
        st.builds(lambda vs, t: {"enum": vs, "type": t}, big_enum, st.sampled_from(["string", "number", "array"])),
    )
    return st.one_of(leaf, st.recursive(leaf, lambda inner: st.one_of(
        st.builds(lambda bs: {"allOf": bs}, st.lists(inner, min_size=1, max_size=2)),
        st.builds(lambda s: {"not": s}, inner),
        st.builds(lambda bs: {"anyOf": bs}, st.lists(inner, min_size=1, max_size=2))), max_leaves=3))


def _checker(root):
    return _validator(root, Flattener(Resolver(root), draft_of(root), strict=True, notes=[]))


def test_fast_checks_agree_with_jsonschema():
    stats: Counter = Counter()
    validating = frozenset(jsonschema.Draft202012Validator.VALIDATORS)

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), database=None,
              derandomize=True)
    @given(_schemas(), st.lists(_values(), min_size=6, max_size=12))
    def run(schema, values):
        root = {"$schema": "https://json-schema.org/draft/2020-12/schema", "properties": {"x": schema}}
        sub = root["properties"]["x"]
        check = _checker(root)
        plain = jsonschema.Draft202012Validator(root).evolve(schema=sub)
        stats["folded"] += fold_enum_branches(sub, validating) is not sub
        stats["set"] += len(sub.get("enum", ())) >= ENUM_SET_FROM
        for v in values + [v for b in sub.get("anyOf", sub.get("oneOf", [])) if isinstance(b, dict)
                           for v in b.get("enum", [])]:
            stats["checks"] += 1
            stats["valid"] += plain.is_valid(v)
            assert check(sub, v) == plain.is_valid(v), (schema, v)

    run()
    # the shortcuts ran, on both verdicts
    assert stats["folded"] >= 25 and stats["set"] >= 25, stats
    assert stats["checks"] >= 1000 and 100 <= stats["valid"] <= stats["checks"] - 100, stats


def test_no_fold_past_a_validating_keyword_or_a_shared_value():
    validating = frozenset(jsonschema.Draft202012Validator.VALIDATORS)
    branches = [{"enum": [i]} for i in range(FOLD_FROM)]
    folded = fold_enum_branches({"anyOf": branches}, validating)
    assert folded["anyOf"] == [{"enum": list(range(FOLD_FROM))}]
    assert fold_enum_branches({"anyOf": branches + [{"enum": [1], "type": "integer"}]}, validating)["anyOf"][0] \
        == branches[0]                          # a validating keyword: left as it is
    shared = branches + [{"enum": [1.0]}]       # 1 and 1.0 are one JSON value: oneOf rejects it
    assert fold_enum_branches({"oneOf": shared}, validating)["oneOf"] == shared
    assert fold_enum_branches({"anyOf": shared}, validating)["anyOf"] == [{"enum": list(range(FOLD_FROM)) + [1.0]}]
    node = {"allOf": [{"not": {"anyOf": branches}}]}
    assert fold_enum_branches(node, validating)["allOf"][0]["not"]["anyOf"] == [{"enum": list(range(FOLD_FROM))}]
    assert node["allOf"][0]["not"]["anyOf"] is branches      # the source schema is never changed


STRINGS = st.text(alphabet=st.sampled_from(list("ab\"\\/\n\t\x00\x1fé€😀 -")), min_size=0, max_size=6)


def test_string_constants_in_every_spelling(smollm2):
    seen: Counter = Counter()

    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), database=None,
              derandomize=True)
    @given(st.lists(STRINGS, min_size=1, max_size=ENUM_SET_FROM + 6, unique=True), st.lists(STRINGS, max_size=6),
           st.sampled_from([[], [1, 1.0, True, None]]))
    def run(members, others, scalars):
        schema = {"type": "string", "enum": members + scalars}   # the scalars fail "type": dropped by the check
        g = compile_json_schema(schema, smollm2)
        check = jsonschema.Draft202012Validator(schema)
        for v in members + others + scalars:
            for text in {json.dumps(v), json.dumps(v, ensure_ascii=False)}:
                seen["texts"] += 1
                seen["accepted"] += accepts(g, text)
                assert accepts(g, text) == check.is_valid(json.loads(text)), (schema, text)

    run()
    # (how many examples Hypothesis draws varies with the machine's load: 273 texts and more were seen)
    assert seen["texts"] >= 200 and 50 <= seen["accepted"] <= seen["texts"] - 30, seen
