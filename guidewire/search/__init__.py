"""Search over the masks: choosing tokens well (code search with a sandbox, PG-TD, AdaDec, beams)."""

from .._lazy import lazy_getattr

__all__ = ["run_tests", "TestRun", "parse_public_tests", "solve", "CodeResult", "CodeTask", "learn_tau"]

__getattr__ = lazy_getattr(__name__, {
    "run_tests": ".sandbox", "TestRun": ".sandbox",
    "parse_public_tests": ".public_tests",
    "solve": ".solve", "CodeResult": ".solve",
    "CodeTask": ".code_search",
    "learn_tau": ".adadec",
})
