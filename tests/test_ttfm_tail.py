"""bench/ttfm_tail.py: the counted-Unicode filter on hand-made schemas, the summary against numpy,
and a run on a hand-made data directory (a refused schema has no time; the others each have one)."""

import json

import numpy as np
from bench_scripts import load_bench

tail = load_bench("ttfm_tail")


def test_counted_unicode_filter():
    yes = [{"type": "string", "pattern": "^\\w{0,40}$"},
           {"properties": {"a": {"type": "string", "pattern": "^\\S+$", "maxLength": 100}}},
           {"patternProperties": {"^[^/]{1,64}$": {}}},
           {"anyOf": [{"pattern": "^a.{3,30}$"}]}]
    no = [{"type": "string", "pattern": "^[a-z]{0,40}$"},      # ASCII only
          {"type": "string", "pattern": "^\\w+$"},              # no bound
          {"type": "string", "pattern": "^\\.{0,40}$"},         # an escaped dot is one character
          {"type": "string", "pattern": "^\\S{1,5}$", "maxLength": 29}]
    assert [tail.counted_unicode(s) for s in yes] == [True] * len(yes)
    assert [tail.counted_unicode(s) for s in no] == [False] * len(no)


def test_summary_against_numpy():
    rng = np.random.default_rng(1)
    ms = rng.exponential(20.0, 200)
    times = {"a": {f"f{i}": float(v) for i, v in enumerate(ms)} | {"bad": None}}
    row = tail.summarize(times)["a"]
    assert row["schemas"] == 201 and row["compiled"] == 200
    assert row["p90_ms"] == round(float(np.percentile(ms, 90)), 2) and row["max_ms"] == round(float(ms.max()), 1)
    assert row["slowest"][0] == (float(ms.max()), f"f{int(ms.argmax())}") and len(row["slowest"]) == 5


def test_run_on_a_data_directory(tmp_path, capsys):
    cases = {"a.json": {"type": "object", "properties": {"x": {"type": "string", "pattern": "^\\w{1,40}$"}}},
             "b.json": {"type": "integer", "minimum": 3},
             "c.json": {"type": "string", "pattern": "(a)\\1"}}       # a backreference: refused strictly
    data = tmp_path / "data"
    data.mkdir()
    for name, schema in cases.items():
        (data / name).write_text(json.dumps({"schema": schema, "tests": []}))
    out = tmp_path / "out.json"
    assert tail.main(["--data", str(data), "--tokenizer", "smollm2", "--engines", "guidewire", "--n", "3",
                      "--out", str(out)]) == 0
    got = json.loads(out.read_text())
    times = got["times"]["guidewire"]
    assert sorted(times) == ["a.json", "b.json", "c.json"]
    assert times["c.json"] is None and times["a.json"] > 0 and times["b.json"] > 0
    assert got["summary"]["guidewire"]["compiled"] == 2
    assert "guidewire" in capsys.readouterr().out
    assert tail.main(["--data", str(data), "--tokenizer", "smollm2", "--engines", "guidewire", "--counted-unicode",
                      "--out", str(out)]) == 0
    assert list(json.loads(out.read_text())["times"]["guidewire"]) == ["a.json"]
