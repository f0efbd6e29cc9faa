"""Prompts from OpenAI messages: the model's chat template, tools in the generic format, FIM.

Messages are normalised first: content parts are joined (text parts only), an assistant
message's ``tool_calls`` are rendered in the tool-call format of :mod:`.tools`, and ``tool``
messages become user turns wrapped in ``<tool_response>`` (chat templates without tool support,
such as SmolLM2's and Gemma-3's, know no ``tool`` role). The tool list goes into the system
message, Hermes style.
"""

from __future__ import annotations

import json
import threading
from typing import Sequence

from .errors import APIError
from .tools import render_call

_TOOLS_PROMPT = (
    "You may call one or more functions to assist with the user query. The functions, one JSON "
    "object per line:\n<tools>\n{tools}\n</tools>\nTo call a function, reply with its name and "
    "arguments as JSON inside <tool_call></tool_call> tags:\n<tool_call>\n"
    '{{"name": <function-name>, "arguments": <arguments-json-object>}}\n</tool_call>')
# Hugging Face fast tokenizers are not safe to call from several threads at once ("Already borrowed").
_TOKENIZER_LOCK = threading.Lock()


def _text(content, where: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for i, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise APIError(f"{where}.content[{i}]: only text parts are supported", param=f"{where}.content")
            parts.append(part["text"])
        return "".join(parts)
    raise APIError(f"{where}.content must be a string or a list of text parts", param=f"{where}.content")


def normalise_messages(messages: Sequence[dict], tools: Sequence[dict] | None) -> list[dict]:
    """Plain ``{"role", "content"}`` messages for any chat template (see the module docstring)."""
    out: list[dict] = []
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        role = m.get("role")
        if role in ("system", "developer"):
            out.append({"role": "system", "content": _text(m.get("content"), where)})
        elif role == "user":
            out.append({"role": "user", "content": _text(m.get("content"), where)})
        elif role == "assistant":
            text = _text(m.get("content"), where)
            calls = []
            for j, c in enumerate(m.get("tool_calls") or []):
                f = c.get("function") if isinstance(c, dict) else None
                if not isinstance(f, dict) or not isinstance(f.get("name"), str) \
                        or not isinstance(f.get("arguments", "{}"), (str, dict)):
                    raise APIError(f"{where}.tool_calls[{j}] must be {{'type': 'function', 'function': "
                                   "{'name': str, 'arguments': str}}", param=f"{where}.tool_calls")
                calls.append(render_call(f["name"], f.get("arguments", "{}")))
            out.append({"role": "assistant", "content": "\n".join(([text] if text else []) + calls)})
        elif role == "tool":
            out.append({"role": "user",
                        "content": f"<tool_response>\n{_text(m.get('content'), where)}\n</tool_response>"})
        else:
            raise APIError(f"{where}.role must be system, developer, user, assistant or tool, got {role!r}",
                           param=f"{where}.role")
    if tools:
        listing = _TOOLS_PROMPT.format(tools="\n".join(json.dumps({"type": "function", "function": t})
                                                       for t in tools))
        if out and out[0]["role"] == "system":
            out[0] = {"role": "system", "content": out[0]["content"] + "\n\n" + listing}
        else:
            out.insert(0, {"role": "system", "content": listing})
    return out


def chat_prompt_ids(lm, messages: list[dict]) -> list[int]:
    """Token ids of ``messages`` under the model's chat template, with the generation prompt."""
    tok = lm.tokenizer
    if not getattr(tok, "chat_template", None):
        raise APIError(f"model {lm.name!r} has no chat template; use /v1/completions", param="messages")
    try:
        text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    except Exception as exc:  # noqa: BLE001 - jinja errors of the template (e.g. role order)
        raise APIError(f"the model's chat template rejects these messages: {exc}", param="messages") from None
    return _encode(tok, text, special=False)


def _encode(tok, text: str, *, special: bool) -> list[int]:
    with _TOKENIZER_LOCK:
        return list(tok.encode(text, add_special_tokens=special))


def completion_prompt_ids(lm, prompt: str, suffix: str | None) -> tuple[list[int], frozenset[int]]:
    """Token ids for /v1/completions and the extra ids that end the text. With ``suffix``: the
    model's FIM format (StarCoder, Qwen2.5-Coder, CodeLlama, DeepSeek-Coder; its end-of-middle
    tokens end the text), else the prefix-only fallback (SmolLM2 has no FIM tokens)."""
    from ..ide.fim import InfillError, build_fim_prompt

    tok = lm.tokenizer
    if suffix is None:
        return _encode(tok, prompt, special=True), frozenset()
    try:
        fp = build_fim_prompt(tok, prompt, suffix, lock=_TOKENIZER_LOCK)
    except InfillError as exc:
        raise APIError(str(exc), param="suffix") from None
    return fp.ids, fp.stop_ids - lm.vocab.eos_ids
