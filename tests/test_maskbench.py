"""The MaskBench runner: classification, worker isolation (timeout, memory cap), outputs, CLI."""

import json
import os
import time

import pytest

from guidewire.maskbench import RunConfig, main, run
from guidewire.maskbench.data import SchemaCase, load_tokenizer, subset_of, tokenize_instances
from guidewire.maskbench.engines import EngineContext, engine_available
from guidewire.maskbench.evaluate import evaluate_schema
from guidewire.maskbench.fake import AcceptAllEngine, RejectAllEngine

DATA = "/work/shared/data/maskbench"
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
