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
