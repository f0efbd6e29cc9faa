"""Print README.md's test command: the bash block that follows the line "Run the tests:".

``.ci/run`` evaluates exactly this line in a fresh virtualenv, so README and CI cannot drift.
"""

import pathlib
import re
import sys

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"


def readme_test_command(text: str) -> str:
    """The single command line of the first ```bash block after "Run the tests:"."""
    m = re.search(r"^Run the tests:\s*\n+```bash\n(.*?)\n```", text, re.S | re.M)
    if m is None:
        raise SystemExit("README.md has no ```bash block after 'Run the tests:'")
    lines = [ln for ln in m.group(1).splitlines() if ln.strip()]
    if len(lines) != 1 or "pytest" not in lines[0]:
        raise SystemExit(f"README.md's test block must be one command line that runs pytest, got {lines!r}")
    return lines[0]


if __name__ == "__main__":
    sys.stdout.write(readme_test_command(README.read_text(encoding="utf-8")) + "\n")
