"""Row tables grown in place (``growtable``): the rows written before a growth read the same after
it, the new rows read zero, on the in-place path (the map remapped) and on the copy path (another
view of the table alive), against a plain numpy copy as the oracle."""

import types

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from guidewire.grammar.growtable import MAP_FROM, _map_of, grow_rows, zeroed_table


PATHS = {"in place": 0, "copied": 0}


@settings(max_examples=100, deadline=None, database=None, derandomize=True)
@given(st.one_of(st.integers(1, 1023), st.integers(1024, 3000), st.integers(1024, 3000)), st.integers(1, 4), st.sampled_from([np.int32, np.int64]), st.booleans(),
       st.integers(0, 10**6), st.booleans())
def _grow_case(rows, factor, dtype, hold_view, seed, partial):
    rng = np.random.default_rng(seed)
    width = 256
    owner = types.SimpleNamespace(t=zeroed_table(rows, width, dtype), view=None)
    written = np.unique(rng.integers(0, rows, size=max(1, rows // 7)))
    owner.t[written] = rng.integers(-5, 1 << 20, size=(written.size, width)).astype(dtype)
    oracle = np.zeros((rows * factor + 1, width), dtype=dtype)
    oracle[:rows] = owner.t
    owner.view = owner.t.reshape(-1)   # a second view the owner keeps (dropped and remade)
    outside = owner.t[:1] if hold_view else None   # a view nobody names: forces the copy path
    before = _map_of(owner.t)
    keep = written if partial else None
    grown = grow_rows(owner, "t", rows * factor + 1, views={"view": lambda t: t.reshape(-1)}, keep=keep)
    assert grown is owner.t and grown.shape == (rows * factor + 1, width) and grown.dtype == dtype
    assert owner.view.base is not None and np.shares_memory(owner.view, grown)   # remade on the new table
    if keep is not None and (hold_view or before is None):   # copied: only the kept rows
        expect = np.zeros_like(oracle)
        expect[keep] = oracle[keep]
    else:
        expect = oracle
    assert np.array_equal(grown, expect)
    in_place = before is not None and not hold_view and grown.nbytes >= MAP_FROM
    assert (before is not None and _map_of(grown) is before) == in_place
    PATHS["in place" if in_place else "copied"] += 1
    if outside is not None:
        assert np.array_equal(outside, oracle[:1])   # the old view still reads the old rows
    grown[-1] = 3     # the new rows are writable
    assert grown[-1].sum() == 3 * width


def test_grown_tables_keep_their_rows_and_zero_the_new_ones():
    """Random tables, grown on both paths (a view held outside forces a copy)."""
    _grow_case()
    assert PATHS["in place"] >= 10 and PATHS["copied"] >= 10, PATHS


def test_a_large_table_grows_without_copying():
    """A table past MAP_FROM bytes is remapped, not copied: its map object stays the same."""
    owner = types.SimpleNamespace(t=zeroed_table(8192, 256, np.int32))
    owner.t[8191] = 9
    mm = _map_of(owner.t)
    assert mm is not None
    grow_rows(owner, "t", 65536)
    assert _map_of(owner.t) is mm and owner.t.shape == (65536, 256)
    assert owner.t[8191].tolist() == [9] * 256 and not owner.t[8192:].any()


def test_a_failed_growth_leaves_the_old_table_and_views(monkeypatch):
    """When no new table can be had (no address space left), the owner keeps its table and its
    views, unchanged, and the error propagates: a shared lexer is never left without a table."""
    import guidewire.grammar.growtable as growtable

    owner = types.SimpleNamespace(t=zeroed_table(4096, 256, np.int32), view=None)
    owner.t[7] = 5
    owner.view = owner.t.reshape(-1)
    held = owner.t[:1]    # another view: the map cannot be remapped, so a copy is needed

    def no_room(*_a, **_k):
        raise MemoryError("no room")
    monkeypatch.setattr(growtable, "zeroed_table", no_room)
    try:
        grow_rows(owner, "t", 9000, views={"view": lambda t: t.reshape(-1)})
    except MemoryError:
        pass
    else:
        raise AssertionError("the growth should have failed")
    assert owner.t.shape == (4096, 256) and owner.t[7].tolist() == [5] * 256
    assert owner.view.size == 4096 * 256 and np.shares_memory(owner.view, owner.t) and held[0, 0] == 0


def smollm2_tokens(text: bytes) -> list[int]:
    """A greedy longest-match spelling of ``text`` in SmolLM2's tokens (multi-byte tokens: masks
    of long tokens walk deep into the lexer)."""
    from guidewire.core import Vocab

    b2t = Vocab.load("smollm2").bytes_to_tokens()
    out, i = [], 0
    while i < len(text):
        j = next(j for j in range(min(len(text), i + 16), i, -1) if text[i:j] in b2t)
        out.append(b2t[text[i:j]])
        i = j
    return out


def test_table_builds_never_pin_the_lexer_table(smollm2, monkeypatch):
    """Masks on a lazily built product lexer grow its row table in place: no table build holds a
    view of the lexer's rows across a growth (one did, in the UTF-8 slice checks, and every growth
    past it copied the whole table: 33 ms for 64k rows on Gemma-3)."""
    import guidewire.grammar.lexer as lexer_mod
    import guidewire.grammar.tabletuning as tt
    from guidewire.grammar import compile_json_schema, compiled
    from guidewire.grammar.growtable import _map_of

    grown = []
    real = lexer_mod.grow_rows

    def watch(owner, name, rows, views=None, keep=None):
        before = _map_of(getattr(owner, name))
        out = real(owner, name, rows, views, keep)
        if before is not None:
            grown.append(_map_of(out) is before)
        return out

    monkeypatch.setattr(lexer_mod, "grow_rows", watch)
    monkeypatch.setattr(tt, "MIRROR_ALL_ROWS", 0)
    monkeypatch.setattr(compiled, "EAGER_LEXER_STATES", 1)
    schema = {"type": "object", "properties": {
        "name": {"type": "string", "minLength": 3, "maxLength": 255},
        "title": {"type": "string", "maxLength": 200, "pattern": "^[\\w\\s-]+$"},
        "email": {"type": "string", "format": "email"},
        "when": {"type": "string", "format": "date-time"},
        "host": {"type": "string", "format": "hostname", "maxLength": 60}}}
    g = compile_json_schema(schema, smollm2)
    m = g.matcher()
    text = b'{"name": "Ada Lovelace", "title": "On the Analytical Engine", "email": "ada.l@example.com", '
    for t in smollm2_tokens(text):
        m.current_mask()
        assert m.advance(t)
    assert grown and all(grown), grown
