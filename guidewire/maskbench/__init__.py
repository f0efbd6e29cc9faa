"""MaskBench runner: exact token masks from JSON Schemas, checked and timed against peers.

Every schema file of the MaskBench data set (``{"schema", "tests", "meta"}``) is compiled by
each engine (guidewire, llguidance, XGrammar) in an isolated worker process; each test
instance is serialized, tokenized and walked token by token, computing the mask before every
token. Valid instances must be accepted in full, invalid ones rejected somewhere; compile time,
time-to-first-mask (TTFM) and time-between-masks (TBM) are recorded.

    python -m guidewire.maskbench ../shared/data/maskbench --out maskbench-out

See :func:`main` for the command line and :func:`run` for the Python API.
"""

from .cli import main
from .runner import RunConfig, run

__all__ = ["main", "run", "RunConfig"]
