"""The real server on a loopback port, driven by the real ``openai`` client; outputs checked with
``jsonschema`` (and ``json``), errors by their OpenAI error objects, and health after abuse."""

import concurrent.futures as cf
import json
import sys
import threading
import time
from pathlib import Path

import httpx
import jsonschema
import openai
import pytest

from server_harness import RunningServer

PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 120}},
          "required": ["name", "age"], "additionalProperties": False}
COLOR = {"type": "object", "properties": {"color": {"enum": ["red", "green", "blue"]}, "ok": {"type": "boolean"}},
         "required": ["color", "ok"], "additionalProperties": False}
CALC = {"type": "function", "function": {"name": "calc", "description": "Evaluate arithmetic.", "parameters": {
    "type": "object", "properties": {"expr": {"type": "string", "maxLength": 12}}, "required": ["expr"],
    "additionalProperties": False}}}
CITY = {"type": "function", "function": {"name": "city", "description": "Population of a city.", "parameters": {
    "type": "object", "properties": {"name": {"enum": ["Paris", "Lyon"]}, "year": {"type": "integer", "minimum": 1900,
                                                                                   "maximum": 2030}},
    "required": ["name", "year"], "additionalProperties": False}}}
PARAMS = {t["function"]["name"]: t["function"]["parameters"] for t in (CALC, CITY)}
Q = [{"role": "user", "content": "What is 17*23? Use a tool."}]


@pytest.fixture(scope="module")
def srv():
    s = RunningServer(time_limit=120)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def client(srv):
    return srv.client()


def _schema_format(schema):
    return {"type": "json_schema", "json_schema": {"name": "x", "schema": schema, "strict": True}}


def _check_calls(msg, allowed):
    assert msg.tool_calls, msg
    for tc in msg.tool_calls:
        assert tc.type == "function" and tc.function.name in allowed
        jsonschema.validate(json.loads(tc.function.arguments), PARAMS[tc.function.name])
    return len(msg.tool_calls)


def test_json_schema_outputs_validate(client):
    for schema in (PERSON, COLOR):
        r = client.chat.completions.create(model="smollm2", messages=[{"role": "user", "content": "Invent one."}],
                                           max_tokens=40, temperature=0, response_format=_schema_format(schema))
        assert r.choices[0].finish_reason == "stop"
        jsonschema.validate(json.loads(r.choices[0].message.content), schema)
        assert r.usage.completion_tokens > 0 and r.usage.prompt_tokens > 0


def test_json_object_and_vllm_guided_fields(client):
    import re

    ask = [{"role": "user", "content": "Give me something."}]
    r = client.chat.completions.create(model="smollm2", messages=ask, max_tokens=48, temperature=0,
                                       response_format={"type": "json_object"})
    if r.choices[0].finish_reason == "stop":
        assert isinstance(json.loads(r.choices[0].message.content), dict)
    else:  # cut by max_tokens: still a prefix of an object
        assert r.choices[0].message.content.lstrip().startswith("{")
    r = client.chat.completions.create(model="smollm2", messages=ask, max_tokens=48, temperature=0,
                                       extra_body={"guided_json": COLOR})
    jsonschema.validate(json.loads(r.choices[0].message.content), COLOR)
    r = client.chat.completions.create(model="smollm2", messages=ask, max_tokens=16, temperature=0, extra_body={
        "guided_grammar": 'start: NUM "+" NUM\nNUM: /[0-9]{1,3}/'})
    assert re.fullmatch(r"[0-9]{1,3}\+[0-9]{1,3}", r.choices[0].message.content), r.choices[0].message.content
    r = client.chat.completions.create(model="smollm2", messages=ask, max_tokens=16, temperature=0,
                                       extra_body={"guided_choice": ["alpha", "beta"]})
    assert r.choices[0].message.content in ("alpha", "beta")


def test_tool_calls_required_named_auto(client):
    r = client.chat.completions.create(model="smollm2", messages=Q, tools=[CALC, CITY], tool_choice="required",
                                       parallel_tool_calls=False, max_tokens=64, temperature=0)
    assert r.choices[0].finish_reason == "tool_calls" and r.choices[0].message.content is None
    assert _check_calls(r.choices[0].message, {"calc", "city"}) == 1
    r = client.chat.completions.create(model="smollm2", messages=Q, tools=[CALC, CITY], parallel_tool_calls=False,
                                       tool_choice={"type": "function", "function": {"name": "city"}},
                                       max_tokens=64, temperature=0)
    assert r.choices[0].finish_reason == "tool_calls"
    assert _check_calls(r.choices[0].message, {"city"}) == 1
    kinds = set()
    for seed in range(3):
        r = client.chat.completions.create(model="smollm2", messages=Q, tools=[CALC], tool_choice="auto", max_tokens=64,
                                           temperature=1.0, seed=seed, parallel_tool_calls=False)
        m = r.choices[0].message
        if m.tool_calls:
            _check_calls(m, {"calc"})
            kinds.add("call")
        else:
            assert isinstance(m.content, str) and not m.content.startswith("<tool_call>")
            kinds.add("text")
    assert kinds


def _stream(client, **kw):
    content, calls, finish, usage = "", {}, None, None
    for ch in client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kw):
        if ch.usage is not None:
            usage = ch.usage
        for c in ch.choices:
            d = c.delta
            content += d.content or ""
            for tc in d.tool_calls or []:
                e = calls.setdefault(tc.index, {"name": "", "arguments": ""})
                e["name"] += (tc.function.name or "") if tc.function else ""
                e["arguments"] += (tc.function.arguments or "") if tc.function else ""
            finish = c.finish_reason or finish
    return content, [calls[i] for i in sorted(calls)], finish, usage


@pytest.mark.parametrize("kind", ["json_schema", "tools", "text"])
def test_stream_equals_whole_for_same_seed(client, kind):
    kw = dict(model="smollm2", max_tokens=64, temperature=0.9, seed=11,
              messages=[{"role": "user", "content": "Invent a person."}])
    if kind == "json_schema":
        kw["response_format"] = _schema_format(PERSON)
    elif kind == "tools":
        kw.update(messages=Q, tools=[CALC, CITY], tool_choice="required")
    whole = client.chat.completions.create(**kw)
    content, calls, finish, usage = _stream(client, **kw)
    m = whole.choices[0].message
    assert content == (m.content or "")
    assert calls == [{"name": t.function.name, "arguments": t.function.arguments} for t in (m.tool_calls or [])]
    assert finish == whole.choices[0].finish_reason
    assert usage.completion_tokens == whole.usage.completion_tokens
    if kind == "tools":
        assert calls


def _err(srv, body, raw=None):
    r = httpx.post(srv.url + "/chat/completions", content=raw if raw is not None else json.dumps(body),
                   headers={"content-type": "application/json"}, timeout=120)
    return r.status_code, r.json()["error"]


def test_errors_are_openai_error_objects(srv, client):
    base = {"model": "smollm2", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    cases = [
        (None, b"{not json", "invalid_json", None),
        ({**base, "response_format": _schema_format({"type": "array", "items": {"type": "string"}, "uniqueItems": True})},
         None, "unsupported_schema_feature", "uniqueItems"),
        ({**base, "response_format": _schema_format({"type": "object", "properties": {"a": {"$ref": "#/nope"}}})},
         None, "invalid_schema", None),
        ({**base, "tools": [CALC], "tool_choice": {"type": "function", "function": {"name": "nope"}}}, None,
         "unknown_tool", "nope"),
        ({**base, "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "strange"}}}],
          "tool_choice": "required"}, None, None, None),
        ({**base, "messages": [{"role": "user", "content": "word " * 9000}]}, None, "context_length_exceeded", None),
        ({**base, "messages": [{"role": "wizard", "content": "x"}]}, None, None, "role"),
        ({**base, "temperature": 9}, None, None, "temperature"),
        ({**base, "guided_regex": "(unclosed"}, None, None, None),
        ({**base, "stop": ["x"], "guided_choice": ["a", "b"]}, None, None, "stop"),
        ({**base, "messages": [{"role": "assistant", "tool_calls": [{"type": "function"}]}]}, None, None, "tool_calls"),
    ]
    for body, raw, code, needle in cases:
        status, err = _err(srv, body, raw)
        assert status == 400, (body, err)
        assert set(err) == {"message", "type", "param", "code"} and err["type"] == "invalid_request_error"
        if code:
            assert err["code"] == code, err
        if needle:
            assert needle in err["message"], err
    assert len(cases) == 11
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="smollm2", messages=[{"role": "user", "content": "x"}], tools=[CALC],
                                       tool_choice={"type": "function", "function": {"name": "zzz"}})


def _health_idle(srv, wait=20.0):
    """/health once no row is running (a finished row leaves the batch at the scheduler's next iteration)."""
    deadline = time.monotonic() + wait
    while True:
        h = httpx.get(srv.url.replace("/v1", "") + "/health", timeout=30).json()
        if h["running"] == 0 or time.monotonic() > deadline:
            assert h["running"] == 0, h
            return h
        time.sleep(0.1)


def test_load_burst_and_abuse(srv, client):
    """16 clients x 2 requests with different schemas/tools, plus malformed requests and
    mid-stream disconnects; each response valid against its own request; healthy afterwards."""
    schemas = [PERSON, COLOR] + [{"type": "object", "properties": {f"k{i}": {"type": "integer", "minimum": i,
                                                                             "maximum": i + 9}},
                                  "required": [f"k{i}"], "additionalProperties": False} for i in range(6)]

    def worker(w):
        out = []
        for j in range(2):
            if (w + j) % 3 == 0:
                tool = [CALC, CITY][(w + j) % 2]
                r = client.chat.completions.create(model="smollm2", messages=Q, tools=[CALC, CITY], max_tokens=64,
                                                   tool_choice={"type": "function", "function": {"name": tool["function"]["name"]}},
                                                   parallel_tool_calls=False, temperature=0.7, seed=w)
                _check_calls(r.choices[0].message, {tool["function"]["name"]})
                out.append("tool")
            else:
                schema = schemas[(w * 2 + j) % len(schemas)]
                r = client.chat.completions.create(model="smollm2", messages=[{"role": "user", "content": f"Fill it ({w})."}],
                                                   max_tokens=40, temperature=0.7, seed=w, response_format=_schema_format(schema))
                assert r.choices[0].finish_reason == "stop"
                jsonschema.validate(json.loads(r.choices[0].message.content), schema)
                out.append("json")
        return out

    def abuse(k):
        if k == 0:
            return _err(srv, None, b"]]")[0]
        if k == 1:
            return _err(srv, {"model": "m", "messages": [{"role": "user", "content": "x"}],
                              "response_format": _schema_format({"type": 3})})[0]
        if k == 2:  # huge max_tokens is clamped to the context window, and the client leaves mid-stream
            with httpx.stream("POST", srv.url + "/chat/completions", timeout=120,
                              json={"model": "m", "messages": [{"role": "user", "content": "Tell a long story."}],
                                    "max_tokens": 10**9, "stream": True}) as r:
                for i, _line in enumerate(r.iter_lines()):
                    if i > 3:
                        break
            return r.status_code
        raise AssertionError(k)

    cancelled0 = srv.scheduler.stats["cancelled"]
    with cf.ThreadPoolExecutor(20) as ex:
        futs = [ex.submit(worker, w) for w in range(16)] + [ex.submit(abuse, k) for k in range(3)]
        results = [f.result() for f in futs]
    kinds = [k for r in results[:16] for k in r]
    assert len(kinds) == 32 and "tool" in kinds and "json" in kinds
    assert results[16:] == [400, 400, 200]
    health = _health_idle(srv)
    assert health["status"] == "ok" and health["queued"] == 0
    assert srv.scheduler.stats["cancelled"] > cancelled0   # the disconnected stream left the batch
    r = client.chat.completions.create(model="smollm2", messages=[{"role": "user", "content": "Invent one."}],
                                       max_tokens=40, temperature=0, response_format=_schema_format(COLOR))
    jsonschema.validate(json.loads(r.choices[0].message.content), COLOR)


def test_queue_full_gives_429_with_retry_after():
    s = RunningServer(max_batch=1, max_queue=1)
    try:
        body = {"model": "m", "messages": [{"role": "user", "content": "Count to fifty."}], "max_tokens": 24,
                "temperature": 0}
        with cf.ThreadPoolExecutor(5) as ex:
            rs = list(ex.map(lambda _: httpx.post(s.url + "/chat/completions", json=body, timeout=120), range(5)))
        codes = sorted(r.status_code for r in rs)
        assert 200 in codes and 429 in codes, codes
        r429 = next(r for r in rs if r.status_code == 429)
        assert r429.headers["retry-after"] and r429.json()["error"]["type"] == "rate_limit_error"
    finally:
        s.stop()


def test_time_limit_gives_408_and_frees_the_row():
    s = RunningServer(time_limit=1.0)
    try:
        r = httpx.post(s.url + "/chat/completions", timeout=120, json={
            "model": "m", "messages": [{"role": "user", "content": "Write letters."}], "max_tokens": 400,
            "guided_regex": "[a-z ]{600}"})
        assert r.status_code == 408 and r.json()["error"]["code"] == "time_limit", r.text
        assert _health_idle(s)["status"] == "ok"
    finally:
        s.stop()


def test_idle_hook_runs_when_decoding_stops_and_its_errors_stay_out():
    """``on_idle`` runs on the scheduler thread after the last row finishes; a hook that raises is
    counted and decoding goes on (the next request is answered)."""
    calls = []

    def hook():
        calls.append(threading.current_thread().name)
        raise RuntimeError("housekeeping failed")

    s = RunningServer(on_idle=hook)
    try:
        body = {"model": "m", "prompt": "One, two,", "max_tokens": 3, "temperature": 0}
        for _ in range(2):
            r = httpx.post(s.url + "/completions", json=body, timeout=120)
            assert r.status_code == 200, r.text
            health = _health_idle(s)
        deadline = time.monotonic() + 30
        while s.scheduler.stats["idle_errors"] < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert s.scheduler.stats["idle_errors"] == len(calls) == 2 and s.scheduler.stats["idle_runs"] == 0, calls
        assert set(calls) == {"guidewire-scheduler"} and health["status"] == "ok"
    finally:
        s.stop()


def test_completions_models_and_fim(srv, client):
    assert [m.id for m in client.models.list().data] == ["smollm2"]
    r = client.completions.create(model="smollm2", prompt="The capital of France is", max_tokens=6, temperature=0)
    assert r.choices[0].text and r.usage.completion_tokens <= 6
    r = client.completions.create(model="smollm2", prompt="Answer: ", max_tokens=8, temperature=0,
                                  extra_body={"guided_choice": ["yes", "no"]})
    assert r.choices[0].text in ("yes", "no")
    r = client.completions.create(model="smollm2", prompt="def add(a, b):\n    return ", suffix="\n\nprint(add(1, 2))",
                                  max_tokens=8, temperature=0, extra_body={"guided_regex": r"a \+ b"})
    assert r.choices[0].text == "a + b"
    r = client.chat.completions.create(model="smollm2", messages=[{"role": "user", "content": "Say hi"}], max_tokens=12,
                                       temperature=0, stop=["\n", "."], n=2)
    assert len(r.choices) == 2 and all("\n" not in c.message.content and "." not in c.message.content for c in r.choices)


def test_agent_example_runs(srv, client):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
    import agent_tools

    out = agent_tools.run_agent(client, "What is the population of Lyon times 2?", max_rounds=2, max_tokens=48)
    assert out["calls"], out
    for name, args, result in out["calls"]:
        jsonschema.validate(args, next(t["function"]["parameters"] for t in agent_tools.TOOLS
                                       if t["function"]["name"] == name))
        assert result
    assert out["messages"][-1]["role"] == "tool"
    assert agent_tools.calculator("2 * (3 + 4)") == "14" and agent_tools.city_population("Lyon") == "522250"


def test_serve_command_starts_a_working_server():
    """``guidewire serve`` as a user starts it: a separate process, /health and /v1/models answer."""
    import os
    import subprocess

    from server_harness import free_port

    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "guidewire.cli", "serve", "--port", str(port), "--threads", "1",
                             "--max-batch", "4"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 180
        while True:
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).json()
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "server did not come up"
                time.sleep(0.5)
        assert health["status"] == "ok" and health["model"] == "smollm2"
        models = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=5).json()
        assert [m["id"] for m in models["data"]] == ["smollm2"]
        # a request, then idle: the scheduler thread tops up the heap reserve (on_idle) once decoding stops
        r = httpx.post(f"http://127.0.0.1:{port}/v1/completions", timeout=120,
                       json={"model": "smollm2", "prompt": "One, two,", "max_tokens": 4, "temperature": 0})
        assert r.status_code == 200, r.text
        while (health := httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).json())["idle_runs"] < 1:
            assert time.monotonic() < deadline, health
            time.sleep(0.1)
        assert health["idle_errors"] == 0
    finally:
        proc.terminate()
        proc.wait(30)


def test_serve_command_rejects_bad_flags(capsys):
    from guidewire.cli import main

    assert main(["serve", "--port", "70000"]) == 2
    assert "--port" in capsys.readouterr().err
    assert main(["serve", "--heap-reserve-mb", "-1"]) == 2
    assert "--heap-reserve-mb" in capsys.readouterr().err
