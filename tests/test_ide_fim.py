"""FIM prompts from synthetic character-level tokenizers carrying each format's special tokens.

The expected token sequences are written out literally from the model cards (StarCoder,
Qwen2.5-Coder, CodeLlama, DeepSeek-Coder), not produced by guidewire's format table.
"""

from __future__ import annotations

import string
from types import SimpleNamespace

import pytest

from guidewire.ide.fim import InfillError, build_fim_prompt, detect_fim_format

CHARS = sorted(set(string.printable) | set("▁｜é"))


def char_tokenizer(specials: list[str], *, bos: str | None = None, eos: str = "</eos>"):
    """A fast tokenizer that spells text one character per token, with ``specials`` as special tokens."""
    from tokenizers import Tokenizer, models, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0}
    for c in CHARS:
        vocab.setdefault(c, len(vocab))
    tk = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    all_specials = [eos] + ([bos] if bos else []) + specials
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="<unk>", eos_token=eos, bos_token=bos,
                                  additional_special_tokens=[s for s in all_specials if s not in (eos, bos)])
    if bos:
        tok.backend_tokenizer.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", special_tokens=[(bos, tok.convert_tokens_to_ids(bos))])
    return tok


STARCODER = ["<fim_prefix>", "<fim_middle>", "<fim_suffix>", "<fim_pad>", "<file_sep>", "<|endoftext|>"]
QWEN = ["<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>",
        "<|endoftext|>", "<|im_end|>"]
CODELLAMA = ["▁<PRE>", "▁<MID>", "▁<SUF>", "▁<EOT>"]
DEEPSEEK = ["<｜fim▁hole｜>", "<｜fim▁begin｜>", "<｜fim▁end｜>", "<|EOT|>"]

PREFIX = "def f(x):\n    s = '<fim_suffix><|fim_middle|>▁<SUF><｜fim▁hole｜>'\n    return "
SUFFIX = "\n\nprint(f(2))\n"


def _case(name):
    if name == "starcoder":
        tok = char_tokenizer(STARCODER, eos="<|endoftext|>")
        want = ["<fim_prefix>", *PREFIX, "<fim_suffix>", *SUFFIX, "<fim_middle>"]
        ends = {"<|endoftext|>", "<file_sep>", "<fim_prefix>", "<fim_pad>"}
    elif name == "qwen":
        tok = char_tokenizer(QWEN, eos="<|endoftext|>")
        want = ["<|fim_prefix|>", *PREFIX, "<|fim_suffix|>", *SUFFIX, "<|fim_middle|>"]
        ends = {"<|endoftext|>", "<|fim_pad|>", "<|file_sep|>", "<|repo_name|>", "<|fim_prefix|>", "<|im_end|>"}
    elif name == "codellama":
        tok = char_tokenizer(CODELLAMA, bos="<s>", eos="</s>")
        # Meta's reference: [BOS, <PRE>] + encode(" " + prefix) + [<SUF>] + encode(suffix) + [<MID>]
        want = ["<s>", "▁<PRE>", " ", *PREFIX, "▁<SUF>", *SUFFIX, "▁<MID>"]
        ends = {"▁<EOT>", "</s>"}
    else:
        tok = char_tokenizer(DEEPSEEK, bos="<｜begin▁of▁sentence｜>", eos="<｜end▁of▁sentence｜>")
        want = ["<｜begin▁of▁sentence｜>", "<｜fim▁begin｜>", *PREFIX, "<｜fim▁hole｜>", *SUFFIX, "<｜fim▁end｜>"]
        ends = {"<｜end▁of▁sentence｜>", "<|EOT|>", "<｜fim▁begin｜>"}
    return tok, want, ends


@pytest.mark.parametrize("name", ["starcoder", "qwen", "codellama", "deepseek"])
def test_fim_prompt_in_the_model_cards_order(name):
    tok, want, ends = _case(name)
    assert detect_fim_format(tok).name == name
    fp = build_fim_prompt(tok, PREFIX, SUFFIX)
    assert tok.convert_ids_to_tokens(fp.ids) == want
    # the markers' spellings inside the code stay plain characters: no forged special token
    specials = set(tok.all_special_ids)
    assert sum(i in specials for i in fp.ids) == sum(t in tok.all_special_tokens for t in want) == len(
        [t for t in want if len(t) > 1])
    assert {tok.convert_ids_to_tokens(i) for i in fp.stop_ids} == ends
    assert fp.format == name and not fp.truncated


def test_extra_files_with_the_file_separator():
    tok, _, _ = _case("qwen")
    fp = build_fim_prompt(tok, "x = ", "\n", extra=[{"filename": "a.py", "text": "A = 1"}], path="b.py")
    assert tok.convert_ids_to_tokens(fp.ids) == ["<|file_sep|>", *"a.py\nA = 1\n", "<|file_sep|>", *"b.py\n",
                                                 "<|fim_prefix|>", *"x = ", "<|fim_suffix|>", "\n",
                                                 "<|fim_middle|>"]
    tok, _, _ = _case("deepseek")   # no separator token: the files become comment blocks before the prompt
    fp = build_fim_prompt(tok, "x = ", "", extra=[("a.py", "A = 1")], path="b.py")
    text = "".join(t for t in tok.convert_ids_to_tokens(fp.ids) if len(t) == 1)
    assert text == "# a.py\nA = 1\n\nx = "


def test_budget_keeps_the_text_next_to_the_cursor():
    tok, _, _ = _case("qwen")
    prefix, suffix = "".join(f"line{i}\n" for i in range(40)), "".join(f"tail{i}\n" for i in range(40))
    fp = build_fim_prompt(tok, prefix, suffix, budget=100)
    toks = tok.convert_ids_to_tokens(fp.ids)
    assert len(fp.ids) <= 100 and fp.truncated
    p = "".join(toks[toks.index("<|fim_prefix|>") + 1:toks.index("<|fim_suffix|>")])
    s = "".join(toks[toks.index("<|fim_suffix|>") + 1:toks.index("<|fim_middle|>")])
    assert prefix.endswith(p) and suffix.startswith(s) and len(p) >= 40 and len(s) >= 40


def test_fallback_without_fim_tokens():
    tok = char_tokenizer([], bos="<s>")
    assert detect_fim_format(tok) is None
    fp = build_fim_prompt(tok, "x = 1\ny = ", "\nprint(y)\n")
    assert tok.convert_ids_to_tokens(fp.ids) == ["<s>", *"x = 1\ny = "] and fp.format == "fallback:prefix"
    fp = build_fim_prompt(tok, "y = ", "\nprint(y)\n", fallback="suffix_comment", path="m.py")
    assert "".join(tok.convert_ids_to_tokens(fp.ids)[1:]) == \
        "# The code after the part being written:\n# print(y)\n\ny = "
    with pytest.raises(InfillError, match="fallback"):
        build_fim_prompt(tok, "a", "b", fallback="middle")
    with pytest.raises(InfillError, match=r"extra\[0\]"):
        build_fim_prompt(tok, "a", "b", extra=[{"filename": "x"}])


def test_completions_suffix_uses_the_fim_format_and_its_end_tokens():
    from guidewire.core import Vocab
    from guidewire.server.chat import completion_prompt_ids

    tok, want, ends = _case("qwen")
    toks = tuple(b"" if t in tok.all_special_tokens else t.encode() for t in
                 tok.convert_ids_to_tokens(list(range(len(tok)))))
    eos = tok.convert_tokens_to_ids("<|endoftext|>")
    lm = SimpleNamespace(tokenizer=tok, vocab=Vocab(toks, frozenset(tok.all_special_ids), frozenset({eos}),
                                                    len(toks), "qwen-chars"))
    ids, end_ids = completion_prompt_ids(lm, PREFIX, SUFFIX)
    assert tok.convert_ids_to_tokens(ids) == want
    assert {tok.convert_ids_to_tokens(i) for i in end_ids} == ends - {"<|endoftext|>"}
