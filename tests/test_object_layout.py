"""The default object layout (named properties in schema order, extra keys anywhere) against
``jsonschema`` plus the order rule, and the size of its Earley sets as members are written.

The oracle of the layout's language is independent of the grammar: an instance is in it exactly
when ``jsonschema`` accepts it and its named keys come in the order the schema lists them.
"""

from __future__ import annotations

import json

import jsonschema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_jsonschema import accepts

from guidewire.core.errors import UnsatisfiableGrammarError
from guidewire.grammar import compile_json_schema

NAMES = [f"p{i}" for i in range(6)]
EXTRA = ["x", "y", "zz"]
VALUES = {"integer": st.integers(-2, 3), "string": st.sampled_from(["", "a"]), "boolean": st.booleans()}


@st.composite
def object_schemas(draw):
    """An object schema: named properties (some required), extra keys closed, open or typed,
    and sometimes property counts and dependentRequired."""
    names = NAMES[:draw(st.integers(1, len(NAMES)))]
    props = {n: {"type": draw(st.sampled_from(sorted(VALUES)))} for n in names}
    schema = {"type": "object", "properties": props,
              "required": draw(st.lists(st.sampled_from(names), unique=True, max_size=2)),
              "additionalProperties": draw(st.sampled_from([True, False, {"type": "boolean"},
                                                            {"type": "integer"}]))}
    if draw(st.booleans()):
        lo = draw(st.integers(0, 3))
        schema["minProperties"] = lo
        if draw(st.booleans()):
            schema["maxProperties"] = lo + draw(st.integers(0, 3))
    if draw(st.booleans()) and len(names) >= 2:
        a, b = draw(st.lists(st.sampled_from(names), unique=True, min_size=2, max_size=2))
        schema["dependentRequired"] = {a: [b]}
    return schema


def members(schema: dict):
    """Members for ``schema``, mostly in its language's neighbourhood: named keys in schema order
    (sometimes swapped), extra keys inserted anywhere, values mostly of the declared type."""
    names = list(schema["properties"])

    @st.composite
    def draw_members(draw):
        keys = [k for k in names if draw(st.booleans())]
        if len(keys) >= 2 and draw(st.integers(0, 4)) == 0:
            i = draw(st.integers(0, len(keys) - 2))
            keys[i], keys[i + 1] = keys[i + 1], keys[i]
        for x in draw(st.lists(st.sampled_from(EXTRA), unique=True, max_size=3)):
            keys.insert(draw(st.integers(0, len(keys))), x)
        pairs = []
        extra = schema["additionalProperties"]
        for k in keys:
            if k in schema["properties"]:
                kind = schema["properties"][k]["type"]
            else:
                kind = extra["type"] if isinstance(extra, dict) else draw(st.sampled_from(sorted(VALUES)))
            if draw(st.integers(0, 7)) == 0:
                kind = draw(st.sampled_from(sorted(VALUES)))
            pairs.append((k, draw(VALUES[kind])))
        return pairs

    return draw_members()


def in_layout(schema: dict, pairs: list) -> bool:
    """The oracle: valid by ``jsonschema`` and the named keys in schema order."""
    order = [k for k, _ in pairs if k in schema["properties"]]
    index = list(schema["properties"])
    valid = jsonschema.Draft202012Validator(schema).is_valid(dict(pairs))
    return valid and [index.index(k) for k in order] == sorted(index.index(k) for k in order)


def test_schema_order_layout_is_exactly_jsonschema_plus_the_order_rule(smollm2):
    """Random object schemas x random members: the grammar accepts a text exactly when the oracle
    does (both directions), with extra keys before, between and after named ones."""
    ran = []

    @settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                       HealthCheck.data_too_large])
    @given(object_schemas(), st.data())
    def check(schema, data):
        try:
            g = compile_json_schema(schema, smollm2)
        except UnsatisfiableGrammarError:   # no instance in the layout: the oracle must agree
            g = None
        for _ in range(6):
            pairs = data.draw(members(schema))
            if g is None:
                assert not in_layout(schema, pairs), (schema, pairs)
                continue
            text = "{" + ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in pairs) + "}"
            want = in_layout(schema, pairs)
            assert accepts(g, text) == want, (schema, text, want)
            interleaved = any(k in EXTRA for k, _ in pairs[1:-1]) and sum(k in NAMES for k, _ in pairs) >= 2
            ran.append((want, interleaved))

    check()
    assert len(ran) >= 600, len(ran)
    assert sum(w for w, _ in ran) >= 100 and sum(not w for w, _ in ran) >= 200, sum(w for w, _ in ran)
    assert sum(1 for w, i in ran if w and i) >= 10, sum(1 for w, i in ran if w and i)


def test_earley_sets_stay_small_as_members_are_written(smollm2):
    """An object of 150 optional properties and open extra keys: writing 40 extra keys, then 10
    named properties in order with extra keys between them, keeps every Earley set's core small.
    Extra keys read at every skip level made each set hold every level's completion, ~2n items
    more per extra key written (o9981, eslint's 230 rules: 20k items after 45 members)."""
    n = 150
    schema = {"type": "object", "properties": {f"k{i}": {"type": "integer"} for i in range(n)},
              "additionalProperties": {"type": "integer"}}
    g = compile_json_schema(schema, smollm2)
    pairs = [(f"extra{j}", j) for j in range(40)]
    for j in range(10):
        pairs += [(f"k{10 * j}", j), (f"more{j}", -j)]
    text = "{" + ", ".join(f"{json.dumps(k)}: {v}" for k, v in pairs) + "}"
    assert jsonschema.Draft202012Validator(schema).is_valid(dict(pairs))
    assert accepts(g, text)
    sizes = [len(core) for core in g.earley.items]
    assert len(sizes) >= 60 and max(sizes) <= 200, (len(sizes), max(sizes))
