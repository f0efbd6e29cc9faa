"""Fill-in-the-middle prompts: the FIM format detected from a tokenizer's special tokens.

Four formats, each in prefix-suffix-middle (PSM) order as its model card gives it:

* StarCoder / StarCoder2: ``<fim_prefix>{prefix}<fim_suffix>{suffix}<fim_middle>``
  (other files of the repository before it, each ``<file_sep>{name}\\n{text}``);
* Qwen2.5-Coder: ``<|fim_prefix|>{prefix}<|fim_suffix|>{suffix}<|fim_middle|>``
  (other files each ``<|file_sep|>{name}\\n{text}``);
* CodeLlama: ``<s>▁<PRE> {prefix} ▁<SUF>{suffix} ▁<MID>``, ending at ``▁<EOT>``;
* DeepSeek-Coder: ``<｜fim▁begin｜>{prefix}<｜fim▁hole｜>{suffix}<｜fim▁end｜>``.

Special tokens are placed by id and the text between them is encoded without special tokens,
so code that happens to contain a marker's spelling cannot forge one. A tokenizer without FIM
tokens (SmolLM2) gets the *fallback* prompt: the prefix alone (``"prefix"``), or the suffix first
as a commented block followed by the prefix (``"suffix_comment"``); the model then continues the
prefix, and the suffix is enforced, where a grammar applies, by the suffix gate
(:mod:`guidewire.ide.gate`).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Callable, Sequence

from ..core.errors import GuidewireError


class InfillError(GuidewireError):
    """A fill-in-the-middle request that cannot be served (bad argument, prompt too long, ...)."""


@dataclass(frozen=True)
class FimFormat:
    """The special tokens of one FIM format (token strings as they appear in the vocabulary)."""

    name: str
    prefix: str
    suffix: str
    middle: str
    stops: tuple[str, ...]          # tokens that end the middle (besides the model's EOS)
    file_sep: str | None = None     # separator before each extra file, when the format has one
    space_after_prefix_token: bool = False   # CodeLlama's "<PRE> {prefix}"


FORMATS = (
    FimFormat("qwen", "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>",
              ("<|endoftext|>", "<|fim_pad|>", "<|file_sep|>", "<|repo_name|>", "<|fim_prefix|>", "<|im_end|>"),
              file_sep="<|file_sep|>"),
    FimFormat("starcoder", "<fim_prefix>", "<fim_suffix>", "<fim_middle>",
              ("<|endoftext|>", "<file_sep>", "<fim_prefix>", "<fim_pad>", "<filename>"), file_sep="<file_sep>"),
    FimFormat("deepseek", "<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>",
              ("<｜end▁of▁sentence｜>", "<|EOT|>", "<｜fim▁begin｜>")),
    FimFormat("codellama", "▁<PRE>", "▁<SUF>", "▁<MID>", ("▁<EOT>", "</s>"), space_after_prefix_token=True),
)

FALLBACKS = ("prefix", "suffix_comment")

_COMMENT = {".py": "#", ".pyi": "#", ".sh": "#", ".rb": "#", ".r": "#", ".pl": "#", ".yaml": "#", ".yml": "#",
            ".toml": "#", ".js": "//", ".ts": "//", ".jsx": "//", ".tsx": "//", ".java": "//", ".c": "//",
            ".h": "//", ".cc": "//", ".cpp": "//", ".hpp": "//", ".go": "//", ".rs": "//", ".swift": "//",
            ".kt": "//", ".scala": "//", ".cs": "//", ".php": "//", ".sql": "--", ".lua": "--", ".hs": "--"}


def comment_prefix(path: str | None) -> str:
    """The line-comment marker for ``path``'s language (``#`` when unknown)."""
    if not path:
        return "#"
    return _COMMENT.get(os.path.splitext(str(path))[1].lower(), "#")


def detect_fim_format(tokenizer) -> FimFormat | None:
    """The FIM format whose three marker tokens are all in ``tokenizer``'s vocabulary, else ``None``."""
    return _detect(tokenizer.get_vocab())


def _detect(vocab: dict) -> FimFormat | None:
    for fmt in FORMATS:
        if all(t in vocab for t in (fmt.prefix, fmt.suffix, fmt.middle)):
            return fmt
    return None


@dataclass
class FimPrompt:
    """A built prompt: ``ids`` to prefill, ``stop_ids`` that end the middle, what was kept."""

    ids: list[int]
    stop_ids: frozenset[int]
    format: str                     # a FimFormat name, or "fallback:<mode>"
    prefix_tokens: int
    suffix_tokens: int
    extra_tokens: int
    truncated: bool


# Hugging Face fast tokenizers are not safe to call from several threads at once ("Already borrowed").
_TOKENIZER_LOCK = threading.Lock()


def split_encode(tokenizer, text: str) -> list[int]:
    """``text``'s ids with no special token added *or recognised*: a marker's spelling inside the
    code (``"<fim_suffix>"`` in a string literal) is encoded as plain text, never as the marker."""
    if not text:
        return []
    return list(tokenizer.encode(text, add_special_tokens=False, split_special_tokens=True))


def locked_encoder(tokenizer, lock: threading.Lock | None = None) -> Callable[[str], list[int]]:
    """:func:`split_encode` one call at a time across threads (under ``lock``, default this module's)."""
    lock = lock or _TOKENIZER_LOCK

    def encode(text: str) -> list[int]:
        with lock:
            return split_encode(tokenizer, text)

    return encode


def _bos(tokenizer, lock: threading.Lock) -> list[int]:
    """BOS when the tokenizer itself starts an encoded text with it."""
    bos = getattr(tokenizer, "bos_token_id", None)
    if bos is None:
        return []
    with lock:
        ids = tokenizer.encode("a", add_special_tokens=True)
    return [int(bos)] if ids and ids[0] == bos else []


def _adds_dummy_space(tokenizer, encode) -> bool:
    """Whether encoding ``"a"`` already starts with a SentencePiece word boundary (``▁a``)."""
    ids = encode("a")
    first = tokenizer.convert_ids_to_tokens(ids[:1])
    return bool(first) and isinstance(first[0], str) and first[0].startswith("\u2581")


def _check_extra(extra) -> list[tuple[str, str]]:
    out = []
    for i, item in enumerate(extra or ()):
        if isinstance(item, dict):
            name, text = item.get("filename", ""), item.get("text")
        elif isinstance(item, (tuple, list)) and len(item) == 2:
            name, text = item
        else:
            raise InfillError(f"extra[{i}] must be {{'filename': str, 'text': str}} or a (filename, text) pair")
        if not isinstance(name, str) or not isinstance(text, str):
            raise InfillError(f"extra[{i}]: filename and text must be strings")
        out.append((name, text))
    return out


def build_fim_prompt(tokenizer, prefix: str, suffix: str = "", *, extra: Sequence = (), path: str | None = None,
                     budget: int | None = None, fallback: str = "prefix",
                     lock: threading.Lock | None = None) -> FimPrompt:
    """Prompt ids for filling the middle between ``prefix`` and ``suffix``.

    ``extra``: other files as ``{"filename", "text"}`` dicts or ``(filename, text)`` pairs (context
    before the current file). ``budget``: most prompt tokens; the prefix keeps its end, the suffix
    its start, extra files are dropped last-first, and ``truncated`` says whether anything was cut.
    ``fallback`` (models without FIM tokens): ``"prefix"`` or ``"suffix_comment"``. Every call
    to the tokenizer holds ``lock`` (default this module's; a server passes the one its other
    prompts use: fast tokenizers are not thread-safe).
    """
    lock = lock or _TOKENIZER_LOCK
    encode = locked_encoder(tokenizer, lock)
    if not isinstance(prefix, str) or not isinstance(suffix, str):
        raise InfillError("prefix and suffix must be strings")
    if fallback not in FALLBACKS:
        raise InfillError(f"fallback must be one of {FALLBACKS}, got {fallback!r}")
    extra = _check_extra(extra)
    if budget is not None and budget < 8:
        raise InfillError(f"the prompt budget of {budget} tokens is too small for a completion prompt")
    with lock:
        vocab = tokenizer.get_vocab()
    fmt = _detect(vocab)
    eos = getattr(tokenizer, "eos_token_id", None)
    stop_ids = {int(eos)} if eos is not None else set()
    if fmt is None:
        return _fallback_prompt(tokenizer, encode, lock, prefix, suffix, extra, path, budget, fallback, stop_ids)
    stop_ids.update(vocab[t] for t in fmt.stops if t in vocab)
    if fmt.space_after_prefix_token and prefix and not _adds_dummy_space(tokenizer, encode):
        prefix = " " + prefix
    pre, suf = encode(prefix), encode(suffix)
    sep = vocab.get(fmt.file_sep) if fmt.file_sep else None
    extra_ids: list[int] = []
    if extra:
        if sep is not None:
            for name, text in extra:
                extra_ids += [sep] + encode(f"{name}\n{text}\n")
            if path:
                extra_ids += [sep] + encode(f"{path}\n")
        else:
            c = comment_prefix(path)
            extra_ids = encode("".join(f"{c} {name}\n{text}\n\n" for name, text in extra))
    head = _bos(tokenizer, lock)
    fixed = len(head) + 3
    pre, suf, extra_ids, truncated = _fit(pre, suf, extra_ids, budget, fixed)
    ids = head + extra_ids + [vocab[fmt.prefix]] + pre + [vocab[fmt.suffix]] + suf + [vocab[fmt.middle]]
    return FimPrompt(ids, frozenset(stop_ids), fmt.name, len(pre), len(suf), len(extra_ids), truncated)


def _fit(pre: list[int], suf: list[int], extra: list[int], budget: int | None, fixed: int):
    """Cut the pieces to ``budget`` tokens: extra context first, then the suffix's end, then the
    prefix's start (the text next to the cursor is kept longest)."""
    if budget is None or fixed + len(pre) + len(suf) + len(extra) <= budget:
        return pre, suf, extra, False
    room = budget - fixed
    keep_pre = min(len(pre), max(room // 2, room - len(suf)))
    keep_suf = min(len(suf), room - keep_pre)
    keep_extra = min(len(extra), room - keep_pre - keep_suf)
    return (pre[len(pre) - keep_pre:], suf[:keep_suf], extra[len(extra) - keep_extra:] if keep_extra > 0 else [],
            True)


def _fallback_prompt(tokenizer, encode, lock, prefix, suffix, extra, path, budget, mode, stop_ids) -> FimPrompt:
    c = comment_prefix(path)
    context = "".join(f"{c} {name}\n{text}\n\n" for name, text in extra)
    shown = ""
    if mode == "suffix_comment" and suffix.strip():
        lines = "".join(f"{c} {line}\n" for line in suffix.strip("\n").splitlines())
        shown = f"{c} The code after the part being written:\n{lines}\n"
    head = _bos(tokenizer, lock)
    extra_ids = encode(context)
    shown_ids = encode(shown)
    pre = encode(prefix)
    pre, shown_ids, extra_ids, truncated = _fit(pre, shown_ids, extra_ids, budget, len(head))
    if not pre and not head and not extra_ids and not shown_ids:
        raise InfillError("an empty prefix needs a tokenizer with a BOS token (nothing to condition on)")
    ids = head + extra_ids + shown_ids + pre
    return FimPrompt(ids, frozenset(stop_ids), f"fallback:{mode}", len(pre), len(shown_ids), len(extra_ids),
                     truncated)
