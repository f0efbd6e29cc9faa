"""Runtime tests on the real SmolLM2-135M (marked ``model``; few, short generations)."""

from __future__ import annotations

import json
import re

import jsonschema
import pytest
import torch

from guidewire.grammar import compile_regex

pytestmark = pytest.mark.model

PROMPT = "The capital of France is"


def test_loaded_model_is_consistent(smol_model):
    lm = smol_model
    width = lm.module.get_output_embeddings().weight.shape[0]
    assert lm.vocab.vocab_size == width == 49152
    ids = lm.tokenizer.encode(PROMPT)
    assert lm.vocab.decode(ids).decode() == PROMPT  # token bytes agree with the tokenizer
    chat = lm.encode_prompt("hi")
    assert lm.tokenizer.decode(chat).rstrip().endswith("assistant")
    assert lm.encode_prompt(PROMPT, chat=False) == ids


def test_kv_cache_fork_and_truncate_match_fresh_prefill(smol_model):
    tok = smol_model.tokenizer
    prompt = tok.encode(PROMPT)
    a = tok.encode(" Paris, and", add_special_tokens=False)
    b = tok.encode(" a city in", add_special_tokens=False)
    seq = smol_model.sequence()
    full = seq.prefill(prompt)
    assert full.shape == (len(prompt), 49152)
    fork = seq.fork()
    seq.step(a)
    assert seq.length == len(prompt) + len(a)
    seq.truncate(len(prompt))
    got = seq.step(b)
    fresh = smol_model.sequence().prefill(prompt + b)
    assert torch.allclose(got, fresh[len(prompt):], atol=1e-4, rtol=0)
    # the fork taken before `a` was never affected by the original's steps
    got_fork = fork.step(b[:1], last_only=True)
    assert torch.allclose(got_fork[0], fresh[len(prompt)], atol=1e-4, rtol=0)
    # stepping one token at a time equals one multi-token step
    one = smol_model.sequence()
    one.prefill(prompt, last_only=True)
    rows = [one.step([t])[0] for t in b]
    assert torch.allclose(torch.stack(rows), fresh[len(prompt):], atol=1e-4, rtol=0)


def test_batch_model_rows_match_single_sequences(smol_model):
    tok = smol_model.tokenizer
    prompts = [tok.encode(PROMPT), tok.encode("1, 2, 3,"), tok.encode("Hello")]
    batch = smol_model.batch()
    logits = [batch.prefill(prompts)]
    nxt = [[11], [28], [30]]
    for step in range(2):
        logits.append(batch.step([n[step % len(n)] for n in nxt]))
    for r, p in enumerate(prompts):
        seq = smol_model.sequence()
        want = [seq.prefill(p, last_only=True)[0]]
        for step in range(2):
            want.append(seq.step([nxt[r][step % len(nxt[r])]], last_only=True)[0])
        for k in range(3):
            assert torch.allclose(logits[k][r], want[k], atol=2e-3, rtol=0), (r, k)


def test_logits_processor_with_generate(smol_model):
    from guidewire.runtime import GuidewireLogitsProcessor

    lm = smol_model
    pattern = r"[0-9]{3}-[0-9]{4}"  # (\d would also admit other Unicode digits, e.g. U+1FBF8)
    proc = GuidewireLogitsProcessor(compile_regex(pattern, lm.vocab))
    tok = lm.tokenizer
    tok.padding_side = "left"
    for prompts in (["My phone number is", "Call me at"], ["The code is"]):
        enc = tok(prompts, return_tensors="pt", padding=True)
        out = lm.module.generate(**enc, logits_processor=[proc], max_new_tokens=12, do_sample=False,
                                 pad_token_id=tok.pad_token_id or 2)
        for row in out[:, enc["input_ids"].shape[1]:].tolist():
            body = [t for t in row if t not in lm.vocab.eos_ids and t != tok.pad_token_id]
            text = lm.vocab.decode(body).decode()
            assert re.fullmatch(pattern, text), text


def test_generate_regex_and_stream(smol_model):
    from guidewire import generate

    text = generate("What is 2 + 2? Answer with one number.", regex=r"[0-9]{1,2}", model=smol_model,
                    max_tokens=5)
    assert re.fullmatch(r"[0-9]{1,2}", text)
    stream = generate("Is water wet? Answer yes or no.", choices=["yes", "no"], model=smol_model,
                      max_tokens=5, stream=True)
    deltas = list(stream)
    assert "".join(deltas) == stream.result.text and stream.result.text in ("yes", "no")
    r = generate("Count: 1, 2, 3,", model=smol_model, max_tokens=6, chat=False, return_result=True,
                 temperature=0.8, seed=3)
    r2 = generate("Count: 1, 2, 3,", model=smol_model, max_tokens=6, chat=False, return_result=True,
                  temperature=0.8, seed=3)
    assert r.token_ids == r2.token_ids and r.usage.completion_tokens <= 6


def _has_json_schema():
    import guidewire.grammar as g

    return hasattr(g, "compile_json_schema")


@pytest.mark.skipif(not _has_json_schema(), reason="guidewire.grammar.compile_json_schema not available yet")
def test_generate_json_small_schemas(smol_model):
    from guidewire import IncompleteOutputError, generate_json

    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                               "age": {"type": "integer", "minimum": 0, "maximum": 120}},
              "required": ["name", "age"], "additionalProperties": False}
    value = generate_json(schema, "Invent a person. Reply in JSON.", model=smol_model, max_tokens=40)
    jsonschema.validate(value, schema)  # independent oracle
    colors = {"type": "array", "items": {"enum": ["red", "green", "blue"]}, "minItems": 2, "maxItems": 2}
    value = generate_json(json.dumps(colors), "Two colors as a JSON array.", model=smol_model, max_tokens=20,
                          temperature=0.8, seed=1)
    jsonschema.validate(value, colors)
    with pytest.raises(IncompleteOutputError):
        generate_json(schema, "Invent a person. Reply in JSON.", model=smol_model, max_tokens=4)


@pytest.mark.skipif(not _has_json_schema(), reason="guidewire.grammar.compile_json_schema not available yet")
def test_cli_json(smol_model, tmp_path, capsys, monkeypatch):
    from guidewire import api
    from guidewire.runtime import registry
    from guidewire.cli import main

    registry._models[registry.model_key("smollm2")] = smol_model  # reuse the session's model
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"],
              "additionalProperties": False}
    path = tmp_path / "s.json"
    path.write_text(json.dumps(schema))
    assert main(["json", str(path), "Is the sky blue? Answer in JSON.", "--max-tokens", "20", "-q"]) == 0
    jsonschema.validate(json.loads(capsys.readouterr().out), schema)
    monkeypatch.delenv("GUIDEWIRE_DEVICE", raising=False)   # --device sets it for the process
    assert main(["json", str(path), "Is the sky blue? Answer in JSON.", "--max-tokens", "20", "-q",
                 "--speculative", "--device", "cpu"]) == 0
    jsonschema.validate(json.loads(capsys.readouterr().out), schema)
    assert main(["json", str(path), "Is the sky blue?", "--max-tokens", "2", "-q"]) == 2
    assert "IncompleteOutputError" in capsys.readouterr().err


def test_speculative_greedy_output_equals_plain_on_extraction(smol_model):
    """Lossless on the real model: the same bytes as plain constrained decoding, fewer forwards."""
    from guidewire.api import generate

    text = ("Invoice INV-2024-0192 was issued by Acme Robotics to Dana Quinn on 2024-03-14 for "
            "3 standing desks at 412.5 each.")
    schema = {"type": "object", "properties": {
        "invoice": {"type": "string"}, "vendor": {"type": "string"}, "customer": {"type": "string"},
        "quantity": {"type": "integer"}}, "required": ["invoice", "vendor", "customer", "quantity"],
        "additionalProperties": False}
    prompt = f"Extract JSON matching {json.dumps(schema)} from: {text}"
    plain = generate(prompt, json_schema=schema, model=smol_model, max_tokens=60, return_result=True)
    spec = generate(prompt, json_schema=schema, model=smol_model, max_tokens=60, return_result=True,
                    speculative=True)
    assert spec.token_ids == plain.token_ids and spec.finish_reason == plain.finish_reason
    assert spec.usage.model_calls < plain.usage.model_calls
    if spec.finish_reason == "stop":
        jsonschema.validate(json.loads(spec.text), schema)
    # a regex constraint and a plain (unconstrained) prompt, with a chosen drafter list
    for kwargs in ({"regex": r"INV-\d{4}-\d{4}"}, {}):
        a = generate("Repeat: INV-2024-0192 INV-2024-0192", model=smol_model, max_tokens=12,
                     return_result=True, **kwargs)
        b = generate("Repeat: INV-2024-0192 INV-2024-0192", model=smol_model, max_tokens=12,
                     return_result=True, speculative="copy,lookup", **kwargs)
        assert a.token_ids == b.token_ids


def test_context_window_is_enforced_before_prefill(smol_model):
    from guidewire import api
    from guidewire.runtime import registry
    from guidewire.runtime import ContextLengthError

    assert smol_model.max_context == 8192  # SmolLM2's max_position_embeddings
    assert api.fit_context(100, 256, 8192) == 256
    assert api.fit_context(8000, 256, 8192) == 192  # clamped: the run ends with finish "length"
    assert api.fit_context(100, 256, None) == 256
    with pytest.raises(ContextLengthError, match="8192"):
        api.fit_context(8192, 1, 8192)
    long_prompt = "word " * 9000  # > 8192 tokens: a typed error, not a silent O(n^2) prefill
    with pytest.raises(ContextLengthError, match="context window is 8192"):
        api.generate(long_prompt, regex="[a-z]+", model=smol_model, max_tokens=4)
