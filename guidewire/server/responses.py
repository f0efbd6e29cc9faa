"""OpenAI response and chunk shapes, built from scheduler events, for streaming and whole replies.

Both paths run the same :class:`Choice` over the same text deltas, so a streamed reply
(concatenated deltas and tool-call fragments) equals the non-streamed one byte for byte.
"""

from __future__ import annotations

import uuid

from .tools import ToolCallParser


class Choice:
    """One choice's reply: content and tool-call deltas from text deltas (see :mod:`.tools`)."""

    def __init__(self, index: int, tool_mode: str):
        self.index = index
        self.parser = ToolCallParser(calls_only=tool_mode == "calls") if tool_mode != "none" else None
        self.content = ""
        self.calls: list[dict] = []
        self.finish_reason: str | None = None
        self.usage: dict | None = None

    def deltas(self, text: str, final: bool = False) -> list[dict]:
        """Chat ``delta`` objects for the next piece of text (``final``: flush held-back text)."""
        if self.parser is None:
            self.content += text
            return [{"content": text}] if text else []
        out = []
        events = list(self.parser.feed(text)) + (list(self.parser.finish()) if final else [])
        for ev in events:
            if ev[0] == "content":
                self.content += ev[1]
                out.append({"content": ev[1]})
            elif ev[0] == "call":
                call = {"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function",
                        "function": {"name": ev[2], "arguments": ""}}
                self.calls.append(call)
                out.append({"tool_calls": [{"index": ev[1], **call, "function": dict(call["function"])}]})
            else:
                self.calls[ev[1]]["function"]["arguments"] += ev[2]
                out.append({"tool_calls": [{"index": ev[1], "function": {"arguments": ev[2]}}]})
        return out

    def done(self, reason: str, usage: dict) -> None:
        """Record the end of the choice."""
        self.finish_reason = "tool_calls" if self.calls and reason == "stop" else reason
        self.usage = usage

    def message(self) -> dict:
        """The non-streamed ``message``."""
        msg = {"role": "assistant", "content": self.content if (self.content or not self.calls) else None}
        if self.calls:
            msg["tool_calls"] = self.calls
        return msg


def total_usage(choices) -> dict:
    """Usage summed over choices (the prompt counted once)."""
    usages = [c.usage for c in choices if c.usage]
    prompt = usages[0]["prompt_tokens"] if usages else 0
    completion = sum(u["completion_tokens"] for u in usages)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
