"""``POST /infill`` (llama.cpp's shape) and ``/v1/completions`` with ``suffix``, through a real server
on 127.0.0.1 with httpx and the openai client."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("fastapi")
pytestmark = pytest.mark.model

POINT = "class Point:\n    def __init__(self, x, y):\n        self.x = x\n        self."


@pytest.fixture(scope="module")
def srv():
    from server_harness import RunningServer

    s = RunningServer()
    s.base = s.url[:-len("/v1")]
    yield s
    s.stop()


def _post(srv, body, **kw):
    import httpx

    return httpx.post(srv.base + "/infill", json=body, timeout=300, **kw)


def test_infill_reply_shape_and_stops(srv):
    r = _post(srv, {"input_prefix": POINT, "input_suffix": "\n", "n_predict": 12, "temperature": 0})
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["stop"] is True and out["content"] and "\n" not in out["content"]   # in-line: ends at the line
    assert out["stop_type"] in ("eos", "limit", "word") and out["fim_format"] == "fallback:prefix"
    assert 1 <= out["tokens_predicted"] <= 12 and out["tokens_evaluated"] > 10 and out["truncated"] is False
    assert {"prompt_n", "prompt_ms", "predicted_n", "predicted_ms", "predicted_per_second"} <= set(out["timings"])
    # a stop word: the content ends before its first occurrence
    free = _post(srv, {"input_prefix": "numbers = [", "n_predict": 16, "temperature": 0, "stop": []}).json()
    assert "," in free["content"], free
    cut = _post(srv, {"input_prefix": "numbers = [", "n_predict": 16, "temperature": 0, "stop": [","]}).json()
    assert cut["content"] == free["content"][:free["content"].index(",")]
    assert cut["stop_type"] == "word" and cut["stopping_word"] == ","


def test_infill_stream_equals_whole(srv):
    import httpx

    body = {"input_prefix": "def mean(xs):\n    ", "input_suffix": "\n", "n_predict": 20, "temperature": 0,
            "input_extra": [{"filename": "util.py", "text": "def total(xs):\n    return sum(xs)\n"}]}
    whole = _post(srv, body).json()
    pieces, finals = [], []
    with httpx.stream("POST", srv.base + "/infill", json={**body, "stream": True}, timeout=300) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("data: "):
                ev = json.loads(line[6:])
                pieces.append(ev["content"])
                finals.append(ev["stop"])
    assert finals and finals[-1] is True and not any(finals[:-1])
    assert "".join(pieces) == whole["content"]


@pytest.mark.parametrize("body,param", [
    ({"input_prefix": 3}, "input_prefix"),
    ({"input_prefix": "x", "n_predict": 0}, "n_predict"),
    ({"input_prefix": "x", "input_extra": [{"filename": "a"}]}, "input_extra[0]"),
    ({"input_prefix": "x", "stop": [1]}, "stop"),
    ({"input_prefix": "x", "temperature": 9}, "temperature"),
    ({"input_prefix": "x", "monitors": "dereference"}, "monitors"),
    ({"input_prefix": "", "input_suffix": ""}, "input_prefix"),
])
def test_infill_validation_errors(srv, body, param):
    r = _post(srv, body)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == param and err["type"] == "invalid_request_error", err


def test_infill_rejects_a_non_json_body(srv):
    r = _post(srv, None, content=b"{nope")
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_json"


def test_completions_with_suffix(srv):
    c = srv.client()
    r = c.completions.create(model="smollm2", prompt="def add(a, b):\n    return", suffix="\n\nprint(add(1, 2))\n",
                             max_tokens=8, temperature=0, stop=["\n"])
    text = r.choices[0].text
    assert text and "\n" not in text and r.choices[0].finish_reason in ("stop", "length")


LIST_GRAMMAR = 'start: "xs = [" NUM (", " NUM)* "]\\n"\nNUM: /[0-9]+/\n'


def test_infill_guided_grammar_keeps_the_suffix_consistent(srv):
    import re

    prefix, suffix = "xs = [1, 2, 3, ", "]\n"
    r = _post(srv, {"input_prefix": prefix, "input_suffix": suffix, "n_predict": 12, "temperature": 0,
                    "stop": [","], "guided_grammar": LIST_GRAMMAR})
    out = r.json()
    assert r.status_code == 200 and out["suffix_fits"] is True, out
    assert re.fullmatch(r"xs = \[\d+(, \d+)*\]\n", prefix + out["content"] + suffix), out
    r = _post(srv, {"input_prefix": "xs = (", "guided_grammar": LIST_GRAMMAR})
    assert r.status_code == 400 and r.json()["error"]["param"] == "input_prefix", r.text
    assert "line 1, column 6" in r.json()["error"]["message"]
    r = _post(srv, {"input_prefix": "x", "guided_grammar": "start: ("})
    assert r.status_code == 400 and r.json()["error"]["param"] == "guided_grammar", r.text
