"""HumanEval code-search benchmark (greedy, sample+filter, beams, AdaDec, PG-TD); same as
``guidewire bench humaneval``. Example: ``python bench/bench_humaneval.py --limit 40 --budget 8``."""

import sys

from guidewire.search.humaneval_bench import main

if __name__ == "__main__":
    sys.exit(main())
