"""Stop strings over a stream of text deltas: text that could still begin a stop string is held
back, so a streamed output and a whole one are cut at exactly the same place."""

from __future__ import annotations

from typing import Sequence

from ..runtime.streaming import held_stop_prefix


class StopStrings:
    """Feed text deltas; get the text safe to emit and whether a stop string was hit.

    The output ends just before the earliest occurrence of any stop string (OpenAI semantics:
    the stop string itself is not returned).
    """

    def __init__(self, stops: Sequence[str] = ()):
        self.stops = tuple(s for s in stops if s)
        self._held = ""
        self.stopped = False

    def feed(self, delta: str) -> str:
        """Text that can be emitted after ``delta`` (sets ``stopped`` when a stop string is found)."""
        if self.stopped:
            return ""
        if not self.stops:
            return delta
        text = self._held + delta
        cut = min((i for i in (text.find(s) for s in self.stops) if i >= 0), default=-1)
        if cut >= 0:
            self.stopped = True
            self._held = ""
            return text[:cut]
        keep = held_stop_prefix(text, self.stops)
        self._held = text[len(text) - keep:] if keep else ""
        return text[:len(text) - keep]

    def flush(self) -> str:
        """The held-back text at the end of the output."""
        held, self._held = self._held, ""
        return "" if self.stopped else held
