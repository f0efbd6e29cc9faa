"""The MaskBench runner: classification, worker isolation (timeout, memory cap), outputs, CLI."""

import json
import mmap
import os
import platform
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guidewire.maskbench import RunConfig, main, run
from guidewire.maskbench.data import SchemaCase, UsageError, load_tokenizer, subset_of, tokenize_instances
from guidewire.maskbench.engines import EngineContext, engine_available
from guidewire.maskbench.evaluate import evaluate_schema
from guidewire.maskbench.fake import AcceptAllEngine, RejectAllEngine

from guidewire.maskbench.data import default_data_dir
from guidewire.maskbench.runner import select_files

DATA = default_data_dir()
SMALL = ["Github_trivial---o76869.json", "Github_easy---o71308.json", "Kubernetes---kb_959_Normalized.json",
         "Snowplow---sp_74_Normalized.json", "Glaiveai2K---calculate_shipping_cost_a0a6e23e.json"]
CTX = EngineContext("smollm2", 49152, (0, 2))


def _instances():
    return [{"test": 0, "ser": "default", "valid": True, "tokens": [90, 91, 92]},
            {"test": 1, "ser": "default", "valid": False, "tokens": [90, 93]},
            {"test": 2, "ser": "default", "valid": True, "tokens": None}]


def _write_case(tmp_path, name, schema, tests):
    path = tmp_path / name
    path.write_text(json.dumps({"description": "", "meta": {"features": ["type"]}, "schema": schema,
                                "tests": tests}))
    return str(path)


def test_subset_names():
    assert subset_of("/x/Github_easy---o123.json") == "Github_easy"
    assert subset_of("BFCL_simple_12.json") == "BFCL_simple"
    assert subset_of("JsonSchemaStore---a_b_1.json") == "JsonSchemaStore"


def test_accept_all_engine_gives_invalidation_errors():
    res = evaluate_schema(AcceptAllEngine(CTX), {}, _instances())
    assert res["status"] == "invalidation_error"
    results = [(o["valid"], o["result"], o["ok"]) for o in res["instances"]]
    assert results == [(True, "accept", True), (False, "accept", False), (True, "skipped_untokenizable", None)]
    assert len(res["tbm_us"]) == 3 + 1 + 2 + 1  # a mask before each token and one at the end
    assert res["ttfm_ms"] >= res["compile_ms"] >= 0


def test_reject_all_engine_gives_validation_errors():
    res = evaluate_schema(RejectAllEngine(CTX), {}, _instances())
    assert res["status"] == "validation_error"
    valid = res["instances"][0]
    assert valid["result"] == "reject" and valid["pos"] == 0 and valid["ok"] is False
    assert res["instances"][1]["ok"] is True  # the invalid one is rightly rejected


def test_empty_instance_is_decided_by_the_final_mask():
    inst = [{"test": 0, "ser": "default", "valid": False, "tokens": []}]
    assert evaluate_schema(RejectAllEngine(CTX), {}, inst)["instances"][0]["pos"] == 0
    assert evaluate_schema(AcceptAllEngine(CTX), {}, inst)["status"] == "invalidation_error"


def test_compile_failure_is_a_compile_error():
    class Broken(AcceptAllEngine):
        def compile(self, schema):
            raise ValueError("nope")

    res = evaluate_schema(Broken(CTX), {}, _instances())
    assert res["status"] == "compile_error" and "ValueError: nope" in res["error"]


def test_untokenizable_text_is_skipped():
    bundle = load_tokenizer("smollm2")
    case = SchemaCase("x.json", {}, [{"valid": True, "data": "<|im_end|>"}, {"valid": True, "data": [1, 2]}])
    inst = tokenize_instances(case, bundle)
    assert [i["tokens"] is None for i in inst] == [True, False, False]  # "<|im_end|>" is a special token


def test_timeout_kills_the_worker_and_the_run_goes_on(tmp_path):
    tests = [{"description": "", "valid": True, "data": {"a": 1}}, {"description": "", "valid": False, "data": 5}]
    files = [_write_case(tmp_path, "Handwritten---a.json", {"type": "object"}, tests),
             _write_case(tmp_path, "Handwritten---b.json", {"type": "object", "x-fake-sleep": 60}, tests),
             _write_case(tmp_path, "Handwritten---c.json", {"type": "object"}, tests)]
    t0 = time.monotonic()
    summary = run(RunConfig(files=files, out=str(tmp_path / "out"), engines=["fake-sleep"], timeout=2.0,
                            progress=False, plots=False))
    assert time.monotonic() - t0 < 40
    recs = [json.loads(line) for line in open(tmp_path / "out" / "results.jsonl")]
    assert [(os.path.basename(r["file"]), r["status"]) for r in recs] == [
        ("Handwritten---a.json", "invalidation_error"), ("Handwritten---b.json", "timeout"),
        ("Handwritten---c.json", "invalidation_error")]
    assert summary["engines"]["fake-sleep"]["timeout"] == 1


def test_memory_cap_turns_a_huge_allocation_into_a_memory_status(tmp_path):
    tests = [{"description": "", "valid": True, "data": 1}]
    files = [_write_case(tmp_path, "Handwritten---big.json", {"x-fake-alloc-mb": 8000}, tests),
             _write_case(tmp_path, "Handwritten---small.json", {}, tests)]
    run(RunConfig(files=files, out=str(tmp_path / "out"), engines=["fake-accept"], memory_mb=1500,
                  progress=False, plots=False))
    recs = [json.loads(line) for line in open(tmp_path / "out" / "results.jsonl")]
    assert [r["status"] for r in recs] == ["memory", "pass"]


def test_cli_rejects_bad_input(tmp_path, capsys):
    f = _write_case(tmp_path, "Handwritten---a.json", {}, [])
    assert main([]) == 2
    assert main([str(tmp_path / "missing*.json")]) == 2
    assert main([f, "--engines", "nope"]) == 2
    assert main([f, "--timeout", "0"]) == 2
    assert main([f, "--serializations", "pretty"]) == 2
    assert "unknown serialization" in capsys.readouterr().err


@pytest.mark.parametrize("engine", ["llguidance", "guidewire"])
def test_real_engine_on_small_maskbench_files(tmp_path, engine):
    reason = engine_available(engine)
    if reason:
        pytest.skip(reason)
    files = [os.path.join(DATA, f) for f in SMALL]
    if not all(os.path.exists(f) for f in files):
        pytest.skip("MaskBench data not present")
    out = tmp_path / "out"
    summary = run(RunConfig(files=files, out=str(out), engines=[engine], progress=False))
    recs = [json.loads(line) for line in open(out / "results.jsonl")]
    assert len(recs) == len(files) and {r["engine"] for r in recs} == {engine}
    s = summary["engines"][engine]
    statuses = ("passing", "compile_error", "validation_error", "invalidation_error", "timeout", "memory", "error")
    assert s["schemas"] == len(files) == sum(s[k] for k in statuses)
    assert s["passing"] == sum(r["status"] == "pass" for r in recs)
    assert s["tbm_us"]["count"] == sum(r["tbm_us"]["count"] for r in recs)
    on_disk = json.loads((out / "summary.json").read_text())
    assert on_disk["engines"][engine]["passing"] == s["passing"]
    report = (out / "report.md").read_text()
    for subset in ("Github_trivial", "Kubernetes", "Snowplow", "Glaiveai2K"):
        assert subset in report
    for png in ("ttfm_cdf.png", "tbm_cdf.png"):
        assert (out / png).stat().st_size > 1000 and f"]({png})" in report
    if engine == "llguidance":
        assert s["passing"] == len(files) and s["invalidation_error"] == 0


def test_parallel_jobs_process_every_schema_once(tmp_path):
    tests = [{"description": "", "valid": False, "data": 1}]
    files = [_write_case(tmp_path, f"Synthesized---{i}.json", {}, tests) for i in range(5)]
    summary = run(RunConfig(files=files, out=str(tmp_path / "out"), engines=["fake-accept", "fake-reject"],
                            jobs=2, progress=False, plots=False))
    recs = [json.loads(line) for line in open(tmp_path / "out" / "results.jsonl")]
    assert sorted((r["engine"], r["file"]) for r in recs) == sorted(
        (e, f) for e in ("fake-accept", "fake-reject") for f in files)
    assert summary["engines"]["fake-accept"]["invalidation_error"] == 5
    assert summary["engines"]["fake-reject"]["passing"] == 5
    assert "more than one job" in (tmp_path / "out" / "report.md").read_text()


def test_interrupt_summarises_the_finished_schemas(tmp_path, monkeypatch):
    """Ctrl-C in a long run keeps and summarises what finished (TBM samples included)."""
    from guidewire.maskbench import runner

    tests = [{"description": "", "valid": False, "data": 1}]
    files = [_write_case(tmp_path, f"Synthesized---{i}.json", {}, tests) for i in range(6)]
    record = runner._Run.record

    def record_then_interrupt(self, *args, **kwargs):
        out = record(self, *args, **kwargs)
        if len(self.records) == 3:
            raise KeyboardInterrupt
        return out

    monkeypatch.setattr(runner._Run, "record", record_then_interrupt)
    summary = run(RunConfig(files=files, out=str(tmp_path / "out"), engines=["fake-accept"],
                            progress=False, plots=False))
    assert summary["run"]["interrupted"] is True
    assert summary["engines"]["fake-accept"]["schemas"] == 3
    assert summary["engines"]["fake-accept"]["tbm_us"]["count"] > 0
    assert len(open(tmp_path / "out" / "results.jsonl").readlines()) == 3
    assert json.load(open(tmp_path / "out" / "summary.json"))["engines"]["fake-accept"]["schemas"] == 3


def test_merge_runs_of_different_engines(tmp_path):
    tests = [{"description": "", "valid": True, "data": 1}]
    files = [_write_case(tmp_path, f"Synthesized---{i}.json", {}, tests) for i in range(2)]
    for engine in ("fake-accept", "fake-reject"):
        run(RunConfig(files=files, out=str(tmp_path / engine), engines=[engine], progress=False, plots=False))
    out = tmp_path / "merged"
    assert main(["--merge", str(tmp_path / "fake-accept"), str(tmp_path / "fake-reject"), "--out", str(out),
                 "--no-plots"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["run"]["engines"] == ["fake-accept", "fake-reject"]
    assert summary["engines"]["fake-accept"]["passing"] == 2
    assert summary["engines"]["fake-reject"]["validation_error"] == 2
    assert len((out / "results.jsonl").read_text().splitlines()) == 4
    # per-engine run facts come from each engine's own run, not the first run's
    assert set(summary["run"]["warm_up"]) == {"fake-accept", "fake-reject"}
    if summary["run"]["heap_reserve"]:      # glibc: each worker's top-ups are on record
        assert set(summary["run"]["heap_reserve"]) == {"fake-accept", "fake-reject"}


def test_fresh_worker_mode_gives_every_schema_a_new_process(tmp_path):
    """fake-oneshot refuses a second compile in one process: warm mode shows it, cold mode must not."""
    tests = [{"description": "", "valid": True, "data": 1}]
    files = [_write_case(tmp_path, f"Synthesized---{i}.json", {}, tests) for i in range(3)]
    warm = run(RunConfig(files=files, out=str(tmp_path / "warm"), engines=["fake-oneshot"], progress=False,
                         plots=False))
    assert warm["engines"]["fake-oneshot"]["compile_error"] == 2  # one worker served all three
    cold = run(RunConfig(files=files, out=str(tmp_path / "cold"), engines=["fake-oneshot"], progress=False,
                         plots=False, fresh_workers=True))
    assert cold["engines"]["fake-oneshot"]["passing"] == 3 and cold["engines"]["fake-oneshot"]["schemas"] == 3
    assert "fresh worker per schema" in (tmp_path / "cold" / "report.md").read_text()


def test_a_warm_worker_warms_its_engine_up_before_the_first_schema_and_a_cold_one_does_not(tmp_path):
    """One small compile before the freeze (lazy imports are start-up, as in ``guidewire serve``);
    the cold-process mode leaves it out, its first compile must pay for them."""
    tests = [{"description": "", "valid": True, "data": 1}]
    files = [_write_case(tmp_path, f"Synthesized---{i}.json", {"x-fake-need-warm-up": True}, tests)
             for i in range(2)]
    warm = run(RunConfig(files=files, out=str(tmp_path / "warm"), engines=["fake-accept"], progress=False,
                         plots=False))
    assert warm["engines"]["fake-accept"]["passing"] == 2 and warm["run"]["warm_up"] == {"fake-accept": "done"}
    assert "warm-up compile before the heap freeze: fake-accept done" in (tmp_path / "warm" / "report.md").read_text()
    cold = run(RunConfig(files=files, out=str(tmp_path / "cold"), engines=["fake-accept"], progress=False,
                         plots=False, fresh_workers=True))
    assert cold["engines"]["fake-accept"]["compile_error"] == 2 and cold["run"]["warm_up"] == {"fake-accept": "off"}


def test_a_worker_whose_warm_up_fails_still_serves_and_says_so(tmp_path):
    """A warm-up that raises, or that kills the worker, costs no schema: the worker serves (started
    again without the warm-up when it died) and the run records what happened."""
    tests = [{"description": "", "valid": True, "data": 1}]
    files = [_write_case(tmp_path, f"Synthesized---{i}.json", {}, tests) for i in range(2)]
    for engine, said in (("fake-warm-raises", "failed: RuntimeError"), ("fake-warm-dies", "failed at start-up")):
        got = run(RunConfig(files=files, out=str(tmp_path / engine), engines=[engine], progress=False, plots=False))
        assert got["engines"][engine]["passing"] == 2, (engine, got["engines"][engine])
        assert got["run"]["warm_up"][engine].startswith(said), got["run"]["warm_up"]


def test_worker_freezes_its_start_up_heap_unless_told_not_to(tmp_path):
    """The worker freezes its heap once the engine is built (as ``guidewire serve`` does); the flag keeps it."""
    tests = [{"description": "", "valid": True, "data": 1}]
    files = [_write_case(tmp_path, f"Synthesized---{i}.json", {"x-fake-need-frozen-heap": True}, tests)
             for i in range(2)]
    frozen = run(RunConfig(files=files, out=str(tmp_path / "frozen"), engines=["fake-accept"], progress=False,
                           plots=False))
    assert frozen["engines"]["fake-accept"]["schemas"] == 2 and frozen["engines"]["fake-accept"]["passing"] == 2
    kept = run(RunConfig(files=files, out=str(tmp_path / "kept"), engines=["fake-accept"], progress=False,
                         plots=False, freeze_heap=False))
    assert kept["engines"]["fake-accept"]["compile_error"] == 2


def _knob_run(tmp_path, knob: str, n: int):
    """``n`` one-instance schemas carrying the fake engine's ``knob``, and a function that runs
    fake-accept over them into ``tmp_path / out`` with the given settings."""
    tests = [{"description": "", "valid": True, "data": 1}]
    files = [_write_case(tmp_path, f"Synthesized---{i}.json", {knob: True}, tests) for i in range(n)]

    def go(out: str, **settings) -> dict:
        return run(RunConfig(files=files, out=str(tmp_path / out), engines=["fake-accept"], progress=False,
                             plots=False, **settings))

    return go


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc only")
def test_worker_keeps_freed_memory_mapped_unless_told_not_to(tmp_path):
    """Every engine's worker keeps glibc's freed memory mapped (as ``guidewire serve`` does): a freed
    64 MiB block is allocated again without a page fault there, and faults in again with the flag off."""
    go = _knob_run(tmp_path, "x-fake-need-kept-heap", 2)
    kept = go("kept")
    assert kept["engines"]["fake-accept"]["passing"] == 2 and kept["run"]["keep_heap"] is True
    returned = go("given", keep_heap=False)
    assert returned["engines"]["fake-accept"]["compile_error"] == 2 and returned["run"]["keep_heap"] is False


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc only")
def test_worker_tops_up_its_heap_reserve_between_schemas(tmp_path):
    """Each schema grows the worker's live set by 64 MiB (a memo filling up): with the default
    reserve topped up after the warm-up and after each schema, no schema faults a tenth of those
    pages in (kernel fault counter, inside the fake engine), and the records say what each
    top-up faulted in; without a reserve every schema does."""
    go = _knob_run(tmp_path, "x-fake-need-faulted-top", 3)
    kept = go("reserve")
    assert kept["engines"]["fake-accept"]["passing"] == 3 and kept["run"]["heap_reserve_mb"] == 128
    recs = [json.loads(x) for x in open(tmp_path / "reserve" / "results.jsonl")]
    assert len(recs) == 3 and all(r["heap_reserve_pages"] >= (48 << 20) // 4096 for r in recs), recs
    assert kept["run"]["heap_reserve"]["fake-accept"]["pages"] == sum(r["heap_reserve_pages"] for r in recs)
    none = go("none", heap_reserve_mb=0)
    assert none["engines"]["fake-accept"]["compile_error"] == 3 and none["run"]["heap_reserve"] == {}


def test_worker_collects_and_freezes_between_schemas(tmp_path):
    """Each schema leaves 20,000 live lists behind (a memo filling up): after each schema, outside
    its timings, the worker collects and freezes them, so the next schema finds none of them in
    the collector's generations (a full collection inside its masks would walk them all), and the
    records and the summary say what the collections took; with --no-gc-freeze the second and
    third schemas find them unfrozen."""
    go = _knob_run(tmp_path, "x-fake-need-frozen-leftovers", 3)
    frozen = go("frozen")
    assert frozen["engines"]["fake-accept"]["passing"] == 3 and frozen["run"]["gc_freeze"] is True
    recs = [json.loads(x) for x in open(tmp_path / "frozen" / "results.jsonl")]
    assert len(recs) == 3 and all(r["gc_between_ms"] >= 0 and isinstance(r["gc_between_full"], bool)
                                  for r in recs), recs
    totals = frozen["run"]["gc_between"]["fake-accept"]
    assert totals["collections"] == 3 and totals["full"] == sum(r["gc_between_full"] for r in recs)
    assert totals["ms"] == pytest.approx(sum(r["gc_between_ms"] for r in recs), abs=1e-2)
    loose = go("loose", freeze_heap=False)
    eng = loose["engines"]["fake-accept"]
    assert eng["passing"] == 1 and eng["compile_error"] == 2 and loose["run"]["gc_between"] == {}


def test_heap_reserve_settings_are_checked():
    assert RunConfig(files=["a"], keep_heap=False).heap_reserve_mb is None
    for cfg in (RunConfig(files=["a"], heap_reserve_mb=256), RunConfig(files=["a"], heap_reserve_mb=-1),
                RunConfig(files=["a"], keep_heap=False, heap_reserve_mb=64)):
        with pytest.raises(UsageError, match="heap-reserve-mb"):
            cfg.validate()
    cfg = RunConfig(files=["a"], keep_heap=False)
    cfg.validate()
    assert cfg.heap_reserve_mb == 0


def test_sample_is_seeded_ordered_and_within_limit():
    files = [f"f{i:03d}.json" for i in range(100)]
    a = select_files(files, None, 10, 0)
    assert len(a) == 10 == len(set(a)) and a == sorted(a) and a == select_files(files, None, 10, 0)
    assert a != select_files(files, None, 10, 1)
    assert set(select_files(files, 20, 5, 0)) <= set(files[:20])
    assert select_files(files, 7, None, 0) == files[:7] and select_files(files, None, 500, 0) == files


def _jsonschema_verdicts(path):
    """Every test instance of a MaskBench file judged by the ``jsonschema`` package (the oracle)."""
    import jsonschema

    case = json.load(open(path))
    cls = jsonschema.validators.validator_for(case["schema"], default=jsonschema.Draft202012Validator)
    v = cls(case["schema"], format_checker=cls.FORMAT_CHECKER)
    return [v.is_valid(t["data"]) for t in case["tests"]]


def test_guidewire_masks_accept_valid_and_reject_invalid_maskbench_instances(tmp_path):
    """guidewire's own correctness on real files, not just bookkeeping: every tokenizable valid
    instance accepted in full, every invalid one rejected, with counts checked against the files'
    labels and against ``jsonschema``."""
    reason = engine_available("guidewire")
    if reason:
        pytest.skip(reason)
    files = [os.path.join(DATA, f) for f in SMALL + ["Github_medium---o10505.json", "Github_medium---o10527.json",
                                                     "Github_medium---o10079.json"]]
    if not all(os.path.exists(f) for f in files):
        pytest.skip("MaskBench data not present")
    labels = {f: [bool(t["valid"]) for t in json.load(open(f))["tests"]] for f in files}
    for f in files:  # the labels themselves agree with an independent validator
        assert _jsonschema_verdicts(f) == labels[f], f
    out = tmp_path / "out"
    run(RunConfig(files=files, out=str(out), engines=["guidewire"], progress=False, plots=False))
    recs = {r["file"]: r for r in map(json.loads, open(out / "results.jsonl"))}
    assert set(recs) == set(files)
    n_valid = n_invalid = 0
    for f in files:
        r = recs[f]
        assert r["status"] == "pass", (f, r["status"], r.get("error"))
        seen = {(o["test"], o["ser"]) for o in r["instances"]}
        for o in r["instances"]:
            if o["result"] == "skipped_untokenizable":
                continue
            assert o["valid"] == labels[f][o["test"]]
            want = "accept" if o["valid"] else "reject"
            assert o["result"] == want, (f, o)
            n_valid += o["valid"]
            n_invalid += not o["valid"]
        assert {t for t, _ in seen} == set(range(len(labels[f])))  # every test instance was walked
    assert n_valid >= 12 and n_invalid >= 25, (n_valid, n_invalid)


def test_slow_masks_report_the_full_collections_inside_them(monkeypatch):
    """A mask over the slow threshold is reported with the time CPython's collections took
    inside it: a mask that runs a full one reports it (within the mask's own time) as full and
    as any, one that runs only a young one reports it as any, one that only waits reports none,
    and masks under the threshold are not reported at all. Each also carries the thread's CPU
    time: a mask that sleeps reports little of it, one that computes reports its own; and the
    kernel's thread counters: a mask that touches fresh pages reports their faults."""
    import gc

    from guidewire.maskbench import evaluate as ev

    class Matcher:
        def __init__(self):
            self.k = 0

        def fill_bitmask(self, bitmask, row=0):
            self.k += 1
            if self.k == 1:
                gc.collect()          # a full collection inside the first mask
            elif self.k == 2:
                time.sleep(0.03)      # slow, but no collection
            elif self.k == 3:
                gc.collect(1)         # a young collection only
            elif self.k == 4:
                t0 = time.thread_time_ns()
                while time.thread_time_ns() - t0 < 25_000_000:    # 25 ms on a CPU
                    pass
            else:                     # 2,048 fresh pages touched: minor faults inside the mask
                with mmap.mmap(-1, 2048 * mmap.PAGESIZE) as mem:
                    for page in range(2048):
                        mem[page * mmap.PAGESIZE] = 1
            bitmask[row, :] = -1

        def advance(self, token_id):
            return True

        def is_accepting(self):
            return True

    class Compiled:
        def matcher(self):
            return Matcher()

    class Engine(AcceptAllEngine):
        def compile(self, schema):
            return Compiled()

    monkeypatch.setattr(ev, "SLOW_MASK_NS", 20_000_000)
    res = evaluate_schema(Engine(CTX), {}, [{"test": 0, "ser": "default", "valid": True, "tokens": [90, 91, 92]}])
    assert res["status"] == "pass" and len(res["tbm_us"]) == 4
    slow = res["slow_masks"]
    # the sleeping mask is always over 20 ms, with no collection inside; the collecting one only
    # if the heap makes it so
    assert any(s["full_gc_us"] == 0 and s["us"] >= 20_000 for s in slow), slow
    monkeypatch.setattr(ev, "SLOW_MASK_NS", 0)   # every mask reported
    res = evaluate_schema(Engine(CTX), {}, [{"test": 0, "ser": "default", "valid": True, "tokens": [90, 91, 92, 93]}])
    slow = res["slow_masks"]
    assert len(slow) == 5
    assert 0 < slow[0]["full_gc_us"] <= slow[0]["gc_us"] <= slow[0]["us"]   # the first mask's collection, inside it
    assert [s["full_gc_us"] for s in slow[1:]] == [0, 0, 0, 0]
    assert slow[1]["gc_us"] == 0 and 0 < slow[2]["gc_us"] <= slow[2]["us"]   # the young one counts as any
    assert slow[1]["cpu_us"] < 15_000 <= 30_000 <= slow[1]["us"]    # 30 ms asleep: waited, not computed
    assert 25_000 <= slow[3]["cpu_us"] <= slow[3]["us"] + 1000       # 25 ms computing (clock grain aside)
    # the kernel's thread counters: the busy mask faults (almost) nothing, the page-touching one
    # at least once per page it touched; neither reads from disk
    assert slow[3]["minor_faults"] < 50 <= 2048 <= slow[4]["minor_faults"], slow
    assert slow[3]["major_faults"] == slow[4]["major_faults"] == 0
    assert 0 <= slow[3]["sys_us"] <= slow[3]["cpu_us"] + 10_000 and slow[1]["sys_us"] < 15_000
    assert all(s["preempted"] >= 0 for s in slow)
    monkeypatch.setattr(ev, "SLOW_MASK_NS", 20_000_000)
    assert "slow_masks" not in evaluate_schema(AcceptAllEngine(CTX), {}, _instances())


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 50), st.integers(1, 50)), max_size=30), st.booleans(),
       st.integers(0, 3000), st.integers(0, 300))
def test_collection_time_inside_a_mask_matches_the_linear_sum(gaps, dangling, t0, width):
    """The bisected sum of collection time inside ``[t0, t1]`` against summing every pair (a start
    without its stop, a collection still running, ignored alike)."""
    from array import array

    from guidewire.maskbench.evaluate import _gc_within

    g, t = array("q"), 0
    for before, length in gaps:
        t += before
        g.extend([t, t + length])
        t += length
    if dangling:
        g.append(t + 1)
    t1 = t0 + width
    ref = sum(max(0, min(t1, g[i + 1]) - max(t0, g[i])) for i in range(0, len(g) - 1, 2))
    assert _gc_within(g, t0, t1) == ref
