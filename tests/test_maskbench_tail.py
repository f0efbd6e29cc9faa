"""bench/maskbench_tail.py on a hand-made run directory: percentiles and counts against numpy on
the same samples, the peer's p99 from its own samples, and the slow-mask summaries (collections,
CPU time) against sums written out by hand."""

import json
import os

import numpy as np
from bench_scripts import load_bench

tail_mod = load_bench("maskbench_tail")


def test_tail_of_a_run(tmp_path):
    rng = np.random.default_rng(3)
    ours = rng.exponential(50.0, 5000)
    ours[:3] = [25_000.0, 40_000.0, 150_000.0]
    peer = rng.exponential(40.0, 5000)
    os.makedirs(tmp_path / "samples")
    np.save(tmp_path / "samples" / "tbm_us_guidewire.npy", ours)
    np.save(tmp_path / "samples" / "tbm_us_llguidance.npy", peer)
    slow = [{"us": 25_000.0, "cpu_us": 24_000.0, "full_gc_us": 0.0, "gc_us": 0.0},
            {"us": 40_000.0, "cpu_us": 2_000.0, "full_gc_us": 0.0, "gc_us": 1_500.0},
            {"us": 150_000.0, "cpu_us": 149_000.0, "full_gc_us": 30_000.0, "gc_us": 30_000.0}]
    with open(tmp_path / "results.jsonl", "w") as f:
        f.write(json.dumps({"engine": "guidewire", "slow_masks": slow[:2]}) + "\n")
        f.write(json.dumps({"engine": "llguidance", "slow_masks": None}) + "\n")
        f.write(json.dumps({"engine": "guidewire", "slow_masks": slow[2:]}) + "\n")
    out = tail_mod.tail(str(tmp_path))
    assert out["masks"] == 5000
    assert out["p99_us"] == round(float(np.percentile(ours, 99)), 1)
    assert out["max_us"] == 150_000.0 and out["over_20ms"] == 3 and out["over_100ms"] == 1
    p99 = float(np.percentile(peer, 99))
    assert out["share_over_3x_llguidance_p99"] == round(float((ours > 3 * p99).mean()), 5)
    assert out["slow_masks_recorded"] == 3 and out["slow_masks_with_full_gc"] == 1
    assert out["slow_masks_with_gc_over_1ms"] == 2
    assert out["slow_masks_max_less_gc_us"] == 120_000.0
    # on a CPU: 24 ms and 149 ms are over 20 ms, the 40 ms mask waited 38 ms
    assert out["slow_masks_over_20ms_on_cpu"] == 2
    assert out["slow_masks_max_cpu_us"] == 149_000.0
    assert out["slow_masks_cpu_share"] == round(175_000 / 215_000, 3)
    assert "slow_masks_max_outside_kernel_us" not in out      # no kernel counters in these records


def test_tail_splits_kernel_time_from_the_engines(tmp_path):
    os.makedirs(tmp_path / "samples")
    np.save(tmp_path / "samples" / "tbm_us_guidewire.npy", np.array([5.0, 25_000.0, 62_000.0, 30_000.0]))
    k = {"full_gc_us": 0.0, "gc_us": 0.0, "major_faults": 0}
    slow = [{"us": 25_000.0, "cpu_us": 24_000.0, "sys_us": 0.0, "minor_faults": 3, "preempted": 0, **k},
            {"us": 62_000.0, "cpu_us": 61_000.0, "sys_us": 52_000.0, "minor_faults": 9_000, "preempted": 0, **k},
            {"us": 30_000.0, "cpu_us": 2_000.0, "sys_us": 0.0, "minor_faults": 0, "preempted": 4, **k}]
    with open(tmp_path / "results.jsonl", "w") as f:
        f.write(json.dumps({"engine": "guidewire", "slow_masks": slow}) + "\n")
    out = tail_mod.tail(str(tmp_path))
    assert out["slow_masks_over_20ms_on_cpu"] == 2
    # outside the kernel: 24 ms, 9 ms and 2 ms, so only the first is the engine's over 20 ms
    assert out["slow_masks_over_20ms_outside_kernel"] == 1
    assert out["slow_masks_max_outside_kernel_us"] == 24_000.0
    assert out["slow_masks_kernel_share_of_cpu"] == round(52_000 / 87_000, 3)
    assert out["slow_masks_minor_faults"] == 9_003 and out["slow_masks_major_faults"] == 0
    assert out["slow_masks_preempted"] == 1


def test_runs_before_cpu_time_report_none(tmp_path):
    os.makedirs(tmp_path / "samples")
    np.save(tmp_path / "samples" / "tbm_us_guidewire.npy", np.array([1.0, 30_000.0]))
    with open(tmp_path / "results.jsonl", "w") as f:
        f.write(json.dumps({"engine": "guidewire", "slow_masks": [{"us": 30_000.0, "full_gc_us": 0.0}]}) + "\n")
    out = tail_mod.tail(str(tmp_path))
    assert out["slow_masks_recorded"] == 1 and "slow_masks_max_cpu_us" not in out
    assert "share_over_3x_llguidance_p99" not in out     # no peer samples: no ratio
