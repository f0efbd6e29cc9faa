"""guidewire.core.heap: freed memory stays mapped, measured by the kernel's page-fault counter."""

from __future__ import annotations

import json
import platform
import subprocess
import sys

import pytest

from guidewire.core.heap import keep_heap_mapped

_PROBE = """
import json, resource, sys
import numpy as np
from guidewire.core.heap import keep_heap_mapped
kept = keep_heap_mapped() if sys.argv[1] == "keep" else None
faults = []
for _ in range(6):
    a = np.ones(8 << 20)        # 64 MiB: over glibc's default mmap threshold, under the kept one
    del a
    r0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    b = np.ones(8 << 20)
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - r0)
    del b
print(json.dumps({"kept": kept, "faults": faults}))
"""


def _faults(mode: str) -> dict:
    out = subprocess.run([sys.executable, "-c", _PROBE, mode], capture_output=True, text=True, timeout=120, check=True)
    return json.loads(out.stdout)


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc only")
def test_kept_heap_does_not_fault_freed_memory_in_again():
    default, kept = _faults("default"), _faults("keep")
    assert kept["kept"] is True
    # glibc's default unmaps a freed 64 MiB block: the next one faults its pages in again
    # (numpy asks for 2 MiB pages: at least one fault, and 2 MiB zeroed, per huge page)
    assert len(default["faults"]) == 6 and min(default["faults"]) >= 32
    # kept: the freed block is reused in place after the first round
    assert len(kept["faults"]) == 6 and max(kept["faults"][1:]) < 32
    assert max(kept["faults"][1:]) * 8 < min(default["faults"])


def test_bad_thresholds_are_refused_before_anything_changes():
    for bad in (0, -1, 1 << 31, 2.5, True, "1"):
        with pytest.raises(ValueError, match="mmap_threshold"):
            keep_heap_mapped(mmap_threshold=bad)
        with pytest.raises(ValueError, match="trim_threshold"):
            keep_heap_mapped(trim_threshold=bad)


_GROWTH_PROBE = """
import json, resource, sys
import numpy as np
from guidewire.core.heap import HeapReserve, heap_top_bytes, keep_heap_mapped

def minflt():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt

keep_heap_mapped()
reserve = HeapReserve(96 << 20)
out = {"first": reserve.top_up() if sys.argv[1] == "reserve" else None}
out["again"] = reserve.top_up() if sys.argv[1] == "reserve" else None
out["top_mb"] = (heap_top_bytes() or 0) >> 20
f0 = minflt()
live = [np.ones(1 << 17) for _ in range(64)]     # the live set grows by 64 MiB, 1 MiB at a time
out["growth_faults"] = minflt() - f0
out["refill"] = reserve.top_up() if sys.argv[1] == "reserve" else None
out["stats"] = reserve.stats
print(json.dumps(out))
"""


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc only")
def test_heap_reserve_takes_the_faults_of_a_growing_live_set_ahead():
    """A live set growing by 64 MiB faults its 16k pages in as it grows; after a 96 MiB reserve was
    topped up it faults (almost) none, and the next top-up faults the used part in again. The
    kernel's fault counter is the oracle."""
    def probe(mode):
        r = subprocess.run([sys.executable, "-c", _GROWTH_PROBE, mode], capture_output=True, text=True, timeout=120,
                           check=True)
        return json.loads(r.stdout)

    plain, kept = probe("plain"), probe("reserve")
    pages = (64 << 20) // 4096
    assert plain["growth_faults"] >= pages * 0.9, plain
    assert kept["first"] >= pages // 2 and kept["again"] == 0 and kept["top_mb"] >= 96, kept
    assert kept["growth_faults"] <= pages * 0.02, kept
    assert kept["refill"] >= pages * 0.9 and kept["stats"]["top_ups"] == 2, kept


def test_heap_reserve_refuses_bad_sizes():
    from guidewire.core.heap import MMAP_THRESHOLD, HeapReserve

    for bad in (0, -1, MMAP_THRESHOLD, 2.5, True, "1"):
        with pytest.raises(ValueError, match="heap reserve"):
            HeapReserve(bad)
