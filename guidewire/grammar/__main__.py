"""``python -m guidewire.grammar``: check text against a grammar, token by token, with a model's vocabulary.

Prints, for every token of the text (as the model's tokenizer splits it), how many tokens
the mask allowed and whether the token was one of them, then whether the text is a
complete sentence. Grammar: a built-in name (json, sql, arithmetic), a .lark file, or
``--regex``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def main(argv=None) -> int:
    """Entry point; returns the process exit code (0: accepted, 1: rejected, 2: bad input)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from ..core import GuidewireError, Vocab, bitmask_to_bool
    from ..core.vocab import _named_tokenizer
    from . import builtin_grammar, compile_lark, compile_regex

    ap = argparse.ArgumentParser(prog="python -m guidewire.grammar", description=__doc__.splitlines()[0])
    ap.add_argument("text", help="the text to check")
    ap.add_argument("--grammar", default="json", help="json | sql | arithmetic | path/to/file.lark")
    ap.add_argument("--regex", default=None, help="check against this regex instead")
    ap.add_argument("--vocab", default="smollm2", help="smollm2 (default, the embedded model) or gemma3")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    print(f"loading the {args.vocab} tokenizer ...", file=sys.stderr, flush=True)
    vocab = Vocab.load(args.vocab)
    tokenizer = _named_tokenizer(args.vocab)[0]
    try:
        if args.regex is not None:
            grammar = compile_regex(args.regex, vocab)
        elif os.path.exists(args.grammar):
            with open(args.grammar, encoding="utf-8") as f:
                grammar = compile_lark(f.read(), vocab)
        else:
            grammar = compile_lark(builtin_grammar(args.grammar), vocab)
    except (GuidewireError, KeyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"compiled in {(time.perf_counter() - t0) * 1e3:.0f} ms (load included)", file=sys.stderr)
    matcher = grammar.matcher()
    for tok in tokenizer.encode(args.text, add_special_tokens=False):
        allowed = bitmask_to_bool(matcher.current_mask(), vocab.vocab_size)
        ok = matcher.advance(tok)
        print(f"{vocab.token_bytes[tok]!r:>24}  allowed {int(allowed.sum()):6d} tokens  {'ok' if ok else 'REJECTED'}")
        if not ok:
            return 1
    complete = matcher.is_accepting()
    print("complete sentence" if complete else "valid prefix, not complete")
    return 0 if complete else 1


if __name__ == "__main__":
    sys.exit(main())
