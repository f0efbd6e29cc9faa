"""bench/maskbench_replay.py: the prefix it runs, the masks it probes, and that probing changes no mask."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from guidewire.core import allocate_token_bitmask  # noqa: E402
from guidewire.maskbench.data import load_tokenizer, tokenize_instances  # noqa: E402
from guidewire.maskbench.data import load_case  # noqa: E402
from guidewire.maskbench.engines import EngineContext, build_engine  # noqa: E402
from bench_scripts import load_bench  # noqa: E402

replay_mod = load_bench("maskbench_replay")

SCHEMAS = {
    "a.json": ({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
               [({"n": 3}, True), ({"n": "x"}, False)]),
    "b.json": ({"type": "array", "items": {"type": "string", "maxLength": 4}},
               [(["ab", "cd"], True), (["abcdef"], False)]),
    "c.json": ({"type": "object", "properties": {"s": {"type": "string", "pattern": "^[a-z]+$"}},
                "required": ["s"], "additionalProperties": False},
               [({"s": "abc"}, True), ({"s": "ab1"}, False), ({"t": 1}, False)]),
}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("maskbench")
    for name, (schema, tests) in SCHEMAS.items():
        doc = {"schema": schema, "tests": [{"data": x, "valid": v} for x, v in tests]}
        (d / name).write_text(json.dumps(doc))
    return str(d)


def test_replay_runs_the_prefix_and_probes_every_mask_of_the_target(data_dir):
    report = replay_mod.replay(data_dir, "c.json", prefix=5, reps=2, tokenizer="smollm2",
                               engine_name="guidewire", top=3)
    assert report["prefix"] == 2                 # a.json and b.json come before c.json (5 asked, 2 exist)
    assert len(report["reps"]) == 2
    # the masks a walk takes, counted independently: each instance's tokens up to the first refused
    # one (or all of them and the final mask), plus the first mask evaluate_schema times for TTFM
    tok = load_tokenizer("smollm2")
    case = load_case(os.path.join(data_dir, "c.json"))
    g = build_engine("guidewire", EngineContext("smollm2", tok.vocab_size, tuple(tok.eos_ids))).compile(case.schema)
    bm = allocate_token_bitmask(1, tok.vocab_size)
    expected, walked = 1, 0
    for inst in tokenize_instances(case, tok):
        if inst["tokens"] is None:
            continue
        walked += 1
        m = g.matcher()
        for t in inst["tokens"]:
            expected += 1
            m.fill_bitmask(bm, 0)
            if not (int(bm[0, t // 32]) >> (t % 32)) & 1:
                break
            m.advance(t)
        else:
            expected += 1
    assert walked == 6     # two serialisations of each of the three instances
    for rep in report["reps"]:
        assert rep["status"] == "pass"
        assert rep["masks"] == expected
        assert 1 <= len(rep["slowest"]) <= 3
        times = [s["ms"] for s in rep["slowest"]]
        assert times == sorted(times, reverse=True)
        assert rep["minor_faults"] >= 0 and all(s["minor_faults"] >= 0 for s in rep["slowest"])
    with pytest.raises(SystemExit):
        replay_mod.order_before(["x/a.json"], "zzz.json", 1)
    for bad in (["--heap-reserve-mb", "8"], ["--keep-heap", "--heap-reserve-mb", "300"]):   # refused before any run
        with pytest.raises(SystemExit) as exc:
            replay_mod.main([data_dir, "--target", "c.json", *bad])
        assert exc.value.code == 2


def test_a_probed_matcher_gives_the_same_masks(data_dir):
    tok = load_tokenizer("smollm2")
    engine = build_engine("guidewire", EngineContext("smollm2", tok.vocab_size, tuple(tok.eos_ids)))
    case = load_case(os.path.join(data_dir, "b.json"))
    tokens = tokenize_instances(case, tok)[0]["tokens"]
    log: list = []
    plain = engine.compile(case.schema).matcher()
    probed = replay_mod.ProbedEngine(engine, log).compile(case.schema).matcher()
    a, b = allocate_token_bitmask(1, tok.vocab_size), allocate_token_bitmask(1, tok.vocab_size)
    for t in tokens:
        plain.fill_bitmask(a, 0)
        probed.fill_bitmask(b, 0)
        assert np.array_equal(a, b)
        assert plain.advance(t) and probed.advance(t)
    assert len(log) == len(tokens) and all(len(r) == 4 and r[0] >= 0 for r in log)
