"""The fast attribute listing (``monitors.jedifast``) against its slow reference,
``jedi.Script.complete``, at random dots of standard-library functions; and its name cache."""

from __future__ import annotations

import ast
import os
import sysconfig
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

jedi = pytest.importorskip("jedi")

from guidewire.monitors.analysis import buffer_path, cursor  # noqa: E402
from guidewire.monitors.jedifast import NameCache, attribute_names  # noqa: E402
from guidewire.monitors.jedistates import InferenceStates  # noqa: E402

# modules whose dots infer to many values (io classes from open(), str|bytes unions, tkinter)
_FILES = ("imghdr.py", "mailbox.py", "json/decoder.py", "email/header.py", "argparse.py",
          "shutil.py", "tarfile.py", "configparser.py", "pathlib.py", "logging/__init__.py")


def _dots(rel: str) -> list[int]:
    """Byte offsets of the dot of every ``NAME.attr`` inside a function body of ``rel``."""
    path = os.path.join(sysconfig.get_paths()["stdlib"], rel)
    with open(path, encoding="utf-8") as f:
        source = f.read()
    raw = source.encode("utf-8")
    starts = [0]
    for ln in raw.splitlines(keepends=True):
        starts.append(starts[-1] + len(ln))
    out = set()
    for fn in ast.walk(ast.parse(source)):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(fn):
                if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                        and node.end_lineno == node.value.end_lineno:
                    dot = starts[node.end_lineno - 1] + node.end_col_offset - len(node.attr.encode()) - 1
                    if raw[dot:dot + 1] == b".":
                        out.add(dot)
    return sorted(out)


_POINTS = {rel: _dots(rel) for rel in _FILES if os.path.exists(os.path.join(sysconfig.get_paths()["stdlib"], rel))}
_CACHE = NameCache()
_STATES = InferenceStates()  # one set of shared inference states across every random query
_RAN: list = []


def _query(rel: str, dot: int):
    path = os.path.join(sysconfig.get_paths()["stdlib"], rel)
    with open(path, encoding="utf-8") as f:
        code = f.read().encode("utf-8")[:dot + 1].decode("utf-8")
    line, col = cursor(code)
    return code, buffer_path(path), line, col


@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(_POINTS)), st.floats(0, 1, exclude_max=True))
def test_attribute_names_match_script_complete(rel, u):
    dots = _POINTS[rel]
    dot = dots[int(u * len(dots))]
    code, path, line, col = _query(rel, dot)
    slow = [c.name for c in jedi.Script(code=code, path=path).complete(line, col)]
    fast = attribute_names(jedi.Script(code=code, path=path), line, col, _CACHE)
    assert sorted(set(fast)) == sorted(set(slow)), (rel, dot)
    assert len(fast) == len(set(fast))
    shared = _STATES.run(code, path, None, lambda s: attribute_names(s, line, col, _CACHE))
    assert sorted(shared) == sorted(fast), (rel, dot)  # the order of values inferred may differ
    _RAN.append((rel, dot, len(slow)))


def test_cases_ran_and_cache_answers_the_same():
    assert len(_RAN) >= 20 and sum(n > 0 for *_, n in _RAN) >= 15  # real listings were compared
    assert len({r for r, *_ in _RAN}) >= 5
    before = _CACHE.hits
    for rel, dot, _ in _RAN[:8]:  # again, the library classes' names now from the cache
        code, path, line, col = _query(rel, dot)
        slow = [c.name for c in jedi.Script(code=code, path=path).complete(line, col)]
        assert sorted(attribute_names(jedi.Script(code=code, path=path), line, col, _CACHE)) == sorted(set(slow))
    assert _CACHE.hits > before
    # states really were shared, across directories too (json/, email/, logging/ and the root
    # resolve imports the same way: packages add nothing to jedi's sys path)
    dirs = {os.path.dirname(r) for r, *_ in _RAN}
    assert _STATES.reused >= 10 and 1 <= _STATES.created < len(dirs), (_STATES.created, dirs)


_UNIONS = {  # dots whose expression infers to several classes (and duplicates of them)
    "open": ("def f(name):\n    with open(name) as fh:\n        fh.", {"read", "close", "seek"}),
    "str|bytes": ("def f(flag):\n    data = 'a' if flag else b'b'\n    data = data.strip()\n    data.",
                  {"decode", "encode", "isdecimal"}),
    "list|dict|set": ("def f(k):\n    x = [] if k == 1 else {} if k == 2 else set()\n    x.",
                      {"append", "keys", "add"}),
}


@pytest.mark.parametrize("case", sorted(_UNIONS))
def test_several_classes_list_every_class_once(case):
    code, must = _UNIONS[case]
    line, col = cursor(code)
    slow = [c.name for c in jedi.Script(code=code).complete(line, col)]
    names = attribute_names(jedi.Script(code=code), line, col, NameCache())
    assert must <= set(names) and sorted(names) == sorted(set(slow))
    assert len(names) == len(set(names))


def test_buffer_classes_are_not_cached():
    cache = NameCache()
    for attr in ("alpha", "beta"):  # the same class position, edited between queries
        code = f"class K:\n    def __init__(self):\n        self.{attr} = 1\n\ndef g(k: K):\n    k."
        line, col = cursor(code)
        names = attribute_names(jedi.Script(code=code), line, col, cache)
        assert attr in names and ({"alpha", "beta"} - {attr}).isdisjoint(names)


def test_name_cache_is_bounded_in_bytes():
    cache = NameCache(max_bytes=2000)
    for i in range(100):
        cache.put(("k", i), tuple((f"name{i}_{j}", False) for j in range(10)))
        assert cache.nbytes <= 2000
    assert cache.get(("k", 99)) is not None and cache.get(("k", 0)) is None
    cache.put(("huge",), tuple((f"n{j}", False) for j in range(1000)))  # larger than the bound
    assert cache.get(("huge",)) is None and cache.nbytes <= 2000


def test_literals_at_one_position_keep_their_own_names():
    cache = NameCache()  # one cache across buffers whose literal sits at the same position
    for lit, must in (("[]", "append"), ("{1}", "add"), ("(1,)", "index"), ("{}", "keys")):
        code = f"def f():\n    x = {lit}\n    x."
        line, col = cursor(code)
        slow = [c.name for c in jedi.Script(code=code).complete(line, col)]
        names = attribute_names(jedi.Script(code=code), line, col, cache)
        assert must in names and sorted(names) == sorted(set(slow)), lit
    assert cache.hits == 0  # four kinds, four keys


def _write(path, text, mtime_ns):
    with open(path, "w") as f:
        f.write(text)
    os.utime(path, ns=(mtime_ns, mtime_ns))


def test_shared_state_sees_a_module_edited_on_disk(tmp_path):
    states = InferenceStates()
    # a module name of its own: parso's disk cache outlives the temp dir, and a path it has seen
    # (pytest numbers its temp dirs from 0 again on a machine whose /tmp was emptied) with a later
    # mtime would be served from that cache
    name = f"shapes_{uuid.uuid4().hex}"
    mod = tmp_path / f"{name}.py"
    buf = str(tmp_path / "__guidewire_buffer__main.py")
    code = f"import {name}\n\ndef f():\n    {name}.Box()."
    line, col = cursor(code)
    seen = []
    for i, attr in enumerate(("width", "height", "depth")):
        _write(mod, f"class Box:\n    def __init__(self):\n        self.{attr} = 1\n", 10**18 + i * 10**9)
        names = states.run(code, buf, None, lambda s: attribute_names(s, line, col, NameCache()))
        seen.append(names)
        assert attr in names and not ({"width", "height", "depth"} - {attr}) & set(names), (attr, names)
    assert states.stale == 2 and states.created == 3
    # unchanged on disk: the state is reused, and still answers the same
    again = states.run(code, buf, None, lambda s: attribute_names(s, line, col, NameCache()))
    assert sorted(again) == sorted(seen[-1]) and states.reused == 1


def test_shared_state_survives_parsos_eviction_of_its_trees(tmp_path):
    """parso drops parse trees unused for 10 minutes once it holds 600 modules; jedi reads a
    loaded module's tree back from that cache (``KeyError`` when it is gone). A state marks its
    modules' trees used at each query, and is dropped as stale when one is gone anyway."""
    from pathlib import Path

    from parso.cache import parser_cache

    (tmp_path / "shapes.py").write_text("class Box:\n    def __init__(self):\n        self.width = 1\n")
    buf = str(tmp_path / "__guidewire_buffer__main.py")
    code = "import shapes\n\ndef f():\n    shapes.Box()."
    line, col = cursor(code)
    states = InferenceStates()
    ask = lambda s: attribute_names(s, line, col, NameCache())  # noqa: E731
    assert "width" in states.run(code, buf, None, ask)
    tree = Path(tmp_path / "shapes.py")
    items = [c[tree] for c in parser_cache.values() if tree in c]
    assert len(items) == 1 and states.trees() >= 1
    items[0].last_used = 0.0   # as if unused for a long time
    assert "width" in states.run(code, buf, None, ask)
    assert items[0].last_used > 0.0 and states.reused == 1  # the query marked it used
    for c in parser_cache.values():  # evicted all the same (parso's rule, applied by hand)
        c.pop(tree, None)
    names = states.run(code, buf, None, ask)   # raised KeyError inside jedi before the fix
    assert "width" in names and states.stale == 1 and states.created == 2


def test_shared_state_finds_a_module_created_after_a_failed_import(tmp_path):
    states = InferenceStates()
    buf = str(tmp_path / "__guidewire_buffer__main.py")
    code = "import helpers\n\ndef f():\n    helpers.Tool()."
    line, col = cursor(code)
    assert states.run(code, buf, None, lambda s: attribute_names(s, line, col)) == []  # no such module yet
    (tmp_path / "helpers.py").write_text("class Tool:\n    def hammer(self):\n        pass\n")
    names = states.run(code, buf, None, lambda s: attribute_names(s, line, col))
    assert "hammer" in names and states.reused == 1


def test_shared_state_forgets_each_buffer(tmp_path):
    states = InferenceStates()
    buf = str(tmp_path / "__guidewire_buffer__main.py")
    first = "class Foo:\n    bar = 1\n\nFoo."
    names = states.run(first, buf, None, lambda s: attribute_names(s, *cursor(first)))
    assert "bar" in names
    second = "import __guidewire_buffer__main as m\nm.Foo."  # the old buffer is not importable
    names = states.run(second, buf, None, lambda s: attribute_names(s, *cursor(second)))
    assert "bar" not in names and states.reused == 1
    # a query that raises drops its state
    with pytest.raises(ZeroDivisionError):
        states.run(first, buf, None, lambda s: 1 / 0)
    assert states.dropped == 1
    states.run(first, buf, None, lambda s: attribute_names(s, *cursor(first)))
    assert states.created == 2


def test_shared_states_are_bounded():
    stdlib = sysconfig.get_paths()["stdlib"]
    states = InferenceStates(max_bytes=40 * 1024, entry_bytes=1024, max_states=2)
    ran = 0
    for rel in ("json/decoder.py", "email/header.py", "logging/__init__.py", "argparse.py"):
        dots = _POINTS.get(rel)
        if not dots:
            continue
        code, path, line, col = _query(rel, dots[len(dots) // 2])
        states.run(code, path, None, lambda s: attribute_names(s, line, col))
        assert states.nbytes <= 40 * 1024 and len(states._states) <= 2
        ran += 1
    assert ran >= 3 and states.dropped >= 1


def test_shared_state_answers_the_same_buffer_again_and_again():
    # jedi counts inferences per node and gives up past 300: per query, never across queries
    # (these two files' dots were answered empty the second time before the count was reset)
    states, ran = InferenceStates(), 0
    stdlib = sysconfig.get_paths()["stdlib"]
    for rel in ("lib2to3/fixes/fix_input.py", "curses/has_key.py", "json/decoder.py"):
        if not os.path.exists(os.path.join(stdlib, rel)):
            continue
        for dot in _dots(rel)[:4]:
            code, path, line, col = _query(rel, dot)
            for k in range(3):  # the buffer being edited after the cursor (parso's diff parser)
                text = code + "\n" * k
                ref = {c.name for c in jedi.Script(code=text, path=path).complete(line, col)}
                got = states.run(text, path, None, lambda s: attribute_names(s, line, col))
                assert set(got) == ref, (rel, dot, k)
                ran += bool(ref)
    assert ran >= 12 and states.reused >= 10


_ATTRS = ("alpha", "beta", "gamma", "__secret", "_half", "__dunder__", "data", "value")


@st.composite
def _class_module(draw):
    """A module of a few classes (class attributes, methods, ``self.x`` in methods, nested classes,
    bases among the earlier classes, the same name in several scopes) and the expression listed."""
    lines, names = [], []
    for c in range(draw(st.integers(1, 3))):
        base = draw(st.sampled_from([""] + [f"(C{b})" for b in range(c)]))
        lines.append(f"class C{c}{base}:")
        for _ in range(draw(st.integers(1, 4))):
            kind = draw(st.sampled_from(["attr", "method", "nested", "self"]))
            a = draw(st.sampled_from(_ATTRS))
            if kind == "attr":
                lines.append(f"    {a} = 1")
            elif kind == "method":
                lines.append(f"    def {a}(self):\n        return 1")
            elif kind == "nested":
                lines.append(f"    class {a.strip('_').title()}:\n        {draw(st.sampled_from(_ATTRS))} = 2")
            else:
                b = draw(st.sampled_from(_ATTRS))
                lines.append(f"    def m_{a.strip('_')}(self, other):\n        self.{a} = 1\n        other.{b} = 2")
        names.append(f"C{c}")
    if draw(st.booleans()):
        lines.append(f"{draw(st.sampled_from(_ATTRS))} = 3")  # a module-level name of the same key
    target = draw(st.sampled_from(names))
    if draw(st.booleans()):  # inside a subclass's method: private names of that class are visible
        return "\n".join(lines) + f"\n\nclass D({target}):\n    __own = 1\n    def f(self):\n        self.", 1
    expr = draw(st.sampled_from([f"{target}()", target, "open('f')"]))
    return "\n".join(lines) + f"\n\ndef use():\n    x = {expr}\n    x.", len(names)


_SYNTH: list = []


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(_class_module())
def test_indexed_filters_list_what_jedi_lists(case):
    code, _ = case
    line, col = cursor(code)
    slow = [c.name for c in jedi.Script(code=code).complete(line, col)]
    fast = attribute_names(jedi.Script(code=code), line, col, NameCache())
    assert sorted(fast) == sorted(set(slow)), code
    _SYNTH.append(len(set(slow)))


def test_indexed_filter_cases_ran():
    assert len(_SYNTH) >= 30 and sum(n > 23 for n in _SYNTH) >= 15, str(_SYNTH)  # beyond object.s names


# -- the collector's policy ---------------------------------------------------------------------------
class _Cycle:
    """An object in a reference cycle (only the cycle collector frees it)."""

    def __init__(self):
        self.me = self


def test_frozen_heap_keeps_a_dropped_cycle_until_its_full_collection():
    import gc
    import weakref

    from guidewire.monitors.jedistates import FrozenHeap

    states = InferenceStates()
    heap = FrozenHeap(states, growth=1e9)  # only the dropped-bytes rule can call a full collection
    try:
        keep = [_Cycle()]
        ref = weakref.ref(keep[0])
        heap.after_query()  # the first one is full; the cycle survives it (reachable) and is frozen
        assert (heap.collections, heap.full) == (1, 1) and gc.get_freeze_count() > 0
        keep.clear()  # garbage now, but frozen: ordinary collections never look at it
        gc.collect()
        heap.after_query()
        assert ref() is not None and heap.full == 1
        states.dropped_bytes += heap.max_dropped_bytes + 1  # as if states of that size were dropped
        heap.after_query()
        assert heap.full == 2 and ref() is None
        assert heap.seconds >= heap.max_s > 0
    finally:
        gc.unfreeze()


def test_frozen_heap_collects_in_full_once_the_frozen_set_grew():
    import gc

    from guidewire.monitors.jedistates import FrozenHeap

    heap = FrozenHeap(InferenceStates(), growth=1.5)
    try:
        heap.after_query()
        base = gc.get_freeze_count()
        keep = [[i] for i in range(base // 4)]  # a quarter more: not yet
        heap.after_query()
        assert heap.full == 1
        keep += [[i] for i in range(base // 2)]  # three quarters more in all: past 1.5x
        heap.after_query()
        assert heap.full == 2
        del keep
    finally:
        gc.unfreeze()
    with pytest.raises(ValueError):
        FrozenHeap(InferenceStates(), growth=1.0)


def test_the_in_process_backend_tidies_the_heap_after_each_answer(tmp_path):
    import gc

    from guidewire.monitors.analysis import JediBackend

    path = tmp_path / "m.py"
    be = JediBackend(str(tmp_path))
    off = JediBackend(str(tmp_path), freeze_heap=False)
    before = be.heap.collections  # one heap for the process: earlier back ends' queries counted too
    try:
        for i in range(3):
            code = f"import os\nx{i} = os.path.\n"
            names = be.attributes(code, 2, len(f"x{i} = os.path."), path=str(path), deadline_s=30)
            assert "join" in names
        assert be.heap.collections - before == 3 and gc.get_freeze_count() > 0
        assert off.heap is None and JediBackend().heap is be.heap
        assert "join" in off.attributes("import os\nos.path.\n", 2, 8, path=str(path), deadline_s=30)
    finally:
        gc.unfreeze()


def test_shared_states_follow_the_sys_path_not_the_directory(tmp_path):
    # two script directories (not packages: jedi puts them on the sys path) each with its own
    # helper.py, and a package whose modules resolve like the project root's: the scripts must see
    # their own helper (separate states), the package's buffers share the root's state
    proj = tmp_path / "proj"
    for d, attr in (("tools", "from_tools"), ("bin", "from_bin")):
        (proj / d).mkdir(parents=True)
        (proj / d / "helper.py").write_text(f"{attr} = 1\n")
    (proj / "pkg").mkdir()
    (proj / "pkg" / "__init__.py").write_text("")
    (proj / "setup.py").write_text("")
    project = jedi.Project(str(proj))
    states = InferenceStates()
    code = "import helper\nhelper."
    line, col = cursor(code)
    got = {}
    for d in ("tools", "bin", "tools"):
        path = buffer_path(str(proj / d / "main.py"))
        got[d] = states.run(code, path, project, lambda s: attribute_names(s, line, col))
        slow = [c.name for c in jedi.Script(code=code, path=path, project=project).complete(line, col)]
        assert sorted(got[d]) == sorted(slow)
    assert "from_tools" in got["tools"] and "from_tools" not in got["bin"] and "from_bin" in got["bin"]
    assert states.created == 2 and states.reused == 1
    code = "import os\nos.path."
    line, col = cursor(code)
    for where in (proj / "a.py", proj / "pkg" / "b.py"):
        assert "join" in states.run(code, buffer_path(str(where)), project, lambda s: attribute_names(s, line, col))
    assert states.created == 3 and states.reused == 2  # the package shares the root's state
