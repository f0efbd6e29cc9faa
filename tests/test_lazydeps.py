"""The deferred ``rfc3987_syntax`` import: jsonschema's IRI format checks answer exactly as without it.

Each side runs in a fresh interpreter (the stand-in only goes in before the first
``import jsonschema`` of a process): one imports ``jsonschema`` plainly, the other through
:func:`guidewire.core.lazydeps.import_jsonschema`; both check the same strings.
"""

import json
import subprocess
import sys

import pytest

pytest.importorskip("rfc3987_syntax")

CASES = ["http://example.com/ä", "https://例え.テスト/パス?q=1#frag", "urn:isbn:0451450523", "not an iri \\ ::",
         "http://[::1]:80/", "http://exa mple.com", "mailto:a@b.c", "", "//relative/only", "http://%zz",
         "ftp://user:pass@host/file;type=a"]

PLAIN = """
import json, sys
import jsonschema
fc = jsonschema.Draft202012Validator.FORMAT_CHECKER
print(json.dumps([[fc.conforms(s, f) for f in ("iri", "iri-reference")] for s in json.loads(sys.argv[1])]))
"""

DEFERRED = """
import json, sys
from guidewire.core.lazydeps import import_jsonschema
jsonschema = import_jsonschema()
before = type(sys.modules["rfc3987_syntax"]).__name__
fc = jsonschema.Draft202012Validator.FORMAT_CHECKER
out = [[fc.conforms(s, f) for f in ("iri", "iri-reference")] for s in json.loads(sys.argv[1])]
print(json.dumps({"before": before, "after": type(sys.modules["rfc3987_syntax"]).__name__, "out": out}))
"""


def _run(code):
    done = subprocess.run([sys.executable, "-c", code, json.dumps(CASES)], capture_output=True, text=True,
                          timeout=120, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_deferred_import_gives_the_same_iri_checks():
    plain = _run(PLAIN)
    deferred = _run(DEFERRED)
    assert deferred["before"] == "_Deferred"      # jsonschema imported without the real package
    assert deferred["after"] == "module"          # the first IRI check brought it in
    assert deferred["out"] == plain
    assert len(plain) == len(CASES) and any(a for a, _ in plain) and not all(a for a, _ in plain)
