"""MaskBench inputs: schema files, subsets, serializations and tokenization of test instances."""

from __future__ import annotations

import glob
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

_SUBSET_RE = re.compile(r"^(.*?)(?:---.*|_\d+)\.json$")

#: How a test instance is turned into text. ``default`` is what MaskBench itself feeds
#: (``json.dumps(data, indent=None, ensure_ascii=False)``: ``", "`` and ``": "`` separators);
#: ``compact`` drops the spaces.
SERIALIZATIONS: dict[str, Callable[[Any], str]] = {
    "default": lambda data: json.dumps(data, ensure_ascii=False),
    "compact": lambda data: json.dumps(data, ensure_ascii=False, separators=(",", ":")),
    "ascii": lambda data: json.dumps(data),
}
DEFAULT_SERIALIZATIONS = ("default", "compact")


def default_data_dir() -> str:
    """The MaskBench data directory: ``$MASKBENCH_DATA``, else ``shared/data/maskbench`` beside the
    repository root (``<repo>/../shared/data/maskbench``)."""
    env = os.environ.get("MASKBENCH_DATA")
    if env:
        return env
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return os.path.normpath(os.path.join(repo, "..", "shared", "data", "maskbench"))


class UsageError(ValueError):
    """Bad command-line or configuration input (missing files, unknown engine, bad limits)."""


def subset_of(path: str | os.PathLike) -> str:
    """MaskBench subset of a file: the name before ``---`` or before ``_<digits>.json``."""
    name = os.path.basename(str(path))
    m = _SUBSET_RE.match(name)
    return m.group(1) if m else Path(name).stem


def resolve_inputs(patterns: list[str], list_file: str | None = None) -> list[str]:
    """Expand files, directories (``*.json`` inside) and globs, plus the lines of ``list_file``.

    Order is kept, duplicates are dropped; a pattern that matches nothing raises
    :class:`UsageError`.
    """
    items = list(patterns)
    if list_file:
        try:
            text = Path(list_file).read_text()
        except OSError as exc:
            raise UsageError(f"cannot read --list file {list_file!r}: {exc.strerror}") from exc
        items += [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
    out: list[str] = []
    seen: set[str] = set()
    for item in items:
        if os.path.isdir(item):
            found = sorted(glob.glob(os.path.join(item, "*.json")))
        elif os.path.exists(item):
            found = [item]
        else:
            found = sorted(glob.glob(item))
        if not found:
            raise UsageError(f"no schema file matches {item!r}")
        for f in found:
            if f not in seen and not os.path.basename(f).lower() == "readme.md":
                seen.add(f)
                out.append(f)
    return out


@dataclass
class SchemaCase:
    """One MaskBench file: its schema, test instances and metadata."""

    path: str
    schema: Any
    tests: list[dict]
    features: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        """The file's base name (the record key in results)."""
        return os.path.basename(self.path)

    @property
    def subset(self) -> str:
        """The MaskBench subset (file-name prefix)."""
        return subset_of(self.path)


def load_case(path: str) -> SchemaCase:
    """Read one MaskBench JSON file; raises :class:`UsageError` when it is not one."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: not a readable MaskBench JSON file ({exc})") from exc
    if not isinstance(data, dict) or "schema" not in data:
        raise UsageError(f"{path}: no 'schema' key (not a MaskBench file)")
    meta = data.get("meta") or {}
    return SchemaCase(path, data["schema"], list(data.get("tests") or []),
                      list(meta.get("features") or []))


@dataclass
class TokenizerBundle:
    """The HF tokenizer plus guidewire's byte view of it, shared by parent and workers."""

    spec: str
    hf: Any
    vocab: Any

    @property
    def vocab_size(self) -> int:
        """The model's (padded) vocabulary size: the mask width is ``ceil(vocab_size/32)``."""
        return int(self.vocab.vocab_size)

    @property
    def eos_ids(self) -> list[int]:
        """Ids that end a sequence (the same set is given to every engine)."""
        return sorted(int(i) for i in self.vocab.eos_ids)


_BUNDLES: dict[str, TokenizerBundle] = {}


def load_tokenizer(spec: str) -> TokenizerBundle:
    """Load ``smollm2``, ``gemma3`` or a local tokenizer directory (cached per process)."""
    if spec in _BUNDLES:
        return _BUNDLES[spec]
    from guidewire.core import GuidewireError, Vocab

    try:
        if spec in ("smollm2", "gemma3"):
            from guidewire.core.vocab import _named_tokenizer

            hf = _named_tokenizer(spec)[0]
        else:
            if not os.path.isdir(spec):
                raise UsageError(f"--tokenizer {spec!r}: expected smollm2, gemma3 or a tokenizer directory")
            from transformers import AutoTokenizer

            hf = AutoTokenizer.from_pretrained(spec)
        vocab = Vocab.load(spec)
    except GuidewireError as exc:
        raise UsageError(f"--tokenizer {spec!r}: {exc}") from exc
    bundle = TokenizerBundle(spec, hf, vocab)
    _BUNDLES[spec] = bundle
    return bundle


def tokenize_instances(case: SchemaCase, bundle: TokenizerBundle,
                       serializations: tuple[str, ...] = DEFAULT_SERIALIZATIONS) -> list[dict]:
    """Serialize and tokenize every test instance of ``case`` in every serialization.

    Each item is ``{"test", "ser", "valid", "tokens"}``; ``tokens`` is ``None`` when the text
    does not survive a round trip through the tokenizer (the instance is then skipped for
    every engine alike). A serialization whose text equals an earlier one of the same test
    (scalars, empty containers) is not repeated.
    """
    out = []
    for i, test in enumerate(case.tests):
        texts: set[str] = set()
        for ser in serializations:
            text = SERIALIZATIONS[ser](test.get("data"))
            if text in texts:
                continue
            texts.add(text)
            ids = bundle.hf.encode(text, add_special_tokens=False)
            ids = [int(t) for t in ids]
            if bundle.vocab.decode(ids) != text.encode("utf-8") or any(t >= bundle.vocab_size for t in ids):
                ids = None
            out.append({"test": i, "ser": ser, "valid": bool(test.get("valid")), "tokens": ids})
    return out
