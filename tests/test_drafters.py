"""Drafters of the speculative runtime: prompt lookup, suffix automaton, forced text, draft model, chain."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from guidewire.core.bitmask import ids_to_bitmask
from guidewire.runtime.drafters import (DraftModelDrafter, DrafterChain, ForcedTextDrafter,
                                        PromptLookupDrafter, SuffixAutomatonDrafter, make_drafter,
                                        make_drafters)
from guidewire.runtime.drafters._common import DrafterBase
from guidewire.runtime.drafters.forced import complete_utf8
from guidewire.runtime.drafting import Drafter
from guidewire.runtime.masking import apply_bitmask_
from guidewire.runtime.sampling import SamplingParams, sampling_probs
from runtime_fakes import EOS, FakeModel, byte_id, tiny_vocab

PERSON = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
          "required": ["name", "age"], "additionalProperties": False}


class AllowSet:
    """A fake constraint allowing a fixed token set (and EOS once ``accepting``)."""

    def __init__(self, allowed, vocab_size, eos=(EOS,), accepting=True):
        self.allowed, self.vocab_size = set(allowed), vocab_size
        self.eos, self.accepting = set(eos), accepting
        self.consumed = []

    def _ok(self, t):
        return t in self.allowed or (self.accepting and t in self.eos)

    def fill_bitmask(self, bitmask, row=0):
        ids = sorted(self.allowed | (self.eos if self.accepting else set()))
        bitmask[row] = ids_to_bitmask(ids, self.vocab_size)

    def advance(self, t):
        if not self._ok(t):
            return False
        self.consumed.append(t)
        return True

    def validate(self, tokens):
        n = 0
        for t in tokens:
            if not self._ok(t):
                break
            n += 1
        return n

    def rollback(self, n):
        del self.consumed[len(self.consumed) - n:]

    def is_accepting(self):
        return self.accepting

    def is_terminated(self):
        return bool(self.consumed) and self.consumed[-1] in self.eos

    def forced_tokens(self):
        return []

    def fork(self):
        c = AllowSet(self.allowed, self.vocab_size, self.eos, self.accepting)
        c.consumed = list(self.consumed)
        return c


# -- brute-force references -----------------------------------------------------------------------
def brute_repeat(h):
    """Longest l such that the length-l suffix of ``h`` also ends at an earlier position; the
    earlier end positions."""
    size = len(h)
    for n in range(size - 1, 0, -1):
        ends = [j for j in range(n - 1, size - 1) if h[j - n + 1:j + 1] == h[size - n:]]
        if ends:
            return n, ends
    return 0, []


def brute_copy(ext, start, k):
    out = []
    for j in range(k):
        i = start + j
        out.append(ext[i] if i < len(ext) else out[i - len(ext)])
    return out


def test_drafters_follow_the_protocol():
    vocab = tiny_vocab()
    ds = [PromptLookupDrafter(), SuffixAutomatonDrafter(), ForcedTextDrafter(None, vocab),
          DraftModelDrafter(FakeModel(vocab.vocab_size), vocab), DrafterChain([PromptLookupDrafter()])]
    for d in ds:
        assert isinstance(d, Drafter) and d.name
        assert (d.calls, d.proposed, d.accepted) == (0, 0, 0)


# -- suffix automaton -----------------------------------------------------------------------------
@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=1, max_size=40), st.data())
def test_sam_matches_brute_force(tokens, data):
    cut = data.draw(st.integers(0, len(tokens)))
    sam = SuffixAutomatonDrafter(max_draft=6)
    sam.begin(tokens[:cut])
    pos = cut
    while True:
        h = tokens[:pos]
        assert sam.history == h
        if h:
            assert sam.num_states <= max(2 * len(h), 2)
        n, end = sam.match()
        want, ends = brute_repeat(h)
        assert n == want
        if n:
            assert end in ends  # an occurrence ending at an earlier position
            draft = sam.propose(None, 6)
            assert draft.tokens == brute_copy(h, end + 1, 6) and draft.probs is None
        else:
            assert end == -1 and sam.propose(None, 6).tokens == []
        if pos == len(tokens):
            break
        step = data.draw(st.integers(1, len(tokens) - pos))
        sam.extend(tokens[pos:pos + step])
        pos += step


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=1, max_size=30), st.lists(st.integers(0, 3), min_size=1, max_size=6))
def test_sam_prefix_matches_brute_force(history, prefix):
    sam = SuffixAutomatonDrafter(max_draft=5)
    sam.begin(history)
    ext = history + prefix
    n, end = sam.match(prefix)
    # longest suffix of history + prefix that occurs inside the history
    want = max((m for m in range(1, min(len(ext), len(history)) + 1)
                if any(history[j - m + 1:j + 1] == ext[-m:] for j in range(m - 1, len(history)))), default=0)
    assert n == want
    if n:
        assert end < len(history) and history[end - n + 1:end + 1] == ext[-n:]
        assert sam.propose(None, 5, prefix=prefix).tokens == brute_copy(ext, end + 1, 5)
    assert sam.history == history  # proposing from a prefix changes nothing


def test_sam_prefers_recent_occurrence_and_long_history_is_cheap():
    sam = SuffixAutomatonDrafter(max_draft=3)
    sam.begin([5, 1, 2, 7, 1, 2, 8, 1, 2])
    assert sam.match() == (2, 5) and sam.propose(None, 3).tokens == [8, 1, 2]
    sam.begin([9] * 5000)  # deep suffix-link chains: construction stays linear
    assert sam.num_states <= 10000
    assert sam.match() == (4999, 4998)
    assert sam.propose(None, 8).tokens == [9, 9, 9]


# -- prompt lookup --------------------------------------------------------------------------------
def test_lookup_crafted_histories():
    d = PromptLookupDrafter(max_ngram=3, min_ngram=1, max_draft=4)
    d.begin([1, 2, 3, 4, 5, 9, 2, 3, 6, 7, 0, 1, 2, 3])
    # suffix 3-gram [1, 2, 3] occurred at the start (followed by 4 5 9 2); the 2-gram [2, 3]
    # more recently (followed by 6) -- the longest n-gram wins
    assert d.find() == (3, 3)
    assert d.propose(None, 8).tokens == [4, 5, 9, 2]
    assert d.propose(None, 2).tokens == [4, 5]
    d.extend([8])  # no earlier [.., 3, 8] or [8]
    assert d.find() is None and d.propose(None, 4).tokens == []
    d.extend([2, 3])  # [8, 2, 3] unseen; [2, 3] last seen at 12..13, followed by 8 (position 14)
    assert d.find() == (2, 14) and d.propose(None, 3).tokens == [8, 2, 3]
    # hypothetical prefix [6]: history + [6] ends with [2, 3, 6], seen at 6..8, followed by 7
    assert d.find(prefix=[6]) == (3, 9) and d.propose(None, 2, prefix=[6]).tokens == [7, 0]
    assert d.history[-3:] == [8, 2, 3]  # the prefix did not change the history


def test_lookup_min_ngram_and_repeats():
    d = PromptLookupDrafter(max_ngram=4, min_ngram=2, max_draft=5)
    d.begin([1, 2, 9, 3])
    assert d.propose(None, 5).tokens == []  # no 2-gram repeats
    d.begin([4, 4, 4])
    assert d.find() == (2, 2) and d.propose(None, 5).tokens == [4, 4, 4, 4, 4]  # LZ-style copy


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=1, max_size=30), st.lists(st.integers(0, 3), max_size=5))
def test_lookup_matches_brute_force(history, prefix):
    d = PromptLookupDrafter(max_ngram=3, min_ngram=1, max_draft=4)
    d.begin(history[:len(history) // 2])
    d.extend(history[len(history) // 2:])
    ext = history + prefix
    want = None
    for n in range(min(3, len(ext) - 1), 0, -1):
        ends = [j for j in range(n - 1, len(ext) - 1) if ext[j - n + 1:j + 1] == ext[len(ext) - n:]]
        if ends:
            want = (n, max(ends) + 1)
            break
    assert d.find(prefix) == want
    got = d.propose(None, 4, prefix=prefix).tokens
    assert got == (brute_copy(ext, want[1], 4) if want else [])


def test_lookup_and_sam_stop_at_eos_and_at_rejected_tokens():
    vocab = tiny_vocab()
    a, b, c, e = (byte_id(x) for x in (b"a", b"b", b"c", b"e"))
    hist = [a, b, c, EOS, a, b]
    for d in (PromptLookupDrafter(vocab=vocab), SuffixAutomatonDrafter(vocab=vocab)):
        d.begin(hist)
        assert d.propose(None, 8).tokens == [c]  # EOS is never proposed
        d.begin([a, b, c, e, a, b])
        assert d.propose(None, 5).tokens == [c, e, a, b, c]
        assert d.propose(AllowSet({a, b}, vocab.vocab_size), 8).tokens == []  # cut at the first rejected token
        assert d.propose(AllowSet({c}, vocab.vocab_size), 8).tokens == [c]
        assert d.propose(AllowSet({a, b, c, e}, vocab.vocab_size), 3).tokens == [c, e, a]
        assert d.calls == 5 and d.proposed == 1 + 5 + 0 + 1 + 3
        assert d.propose(None, 0).tokens == []


# -- forced text ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def person(smollm2):
    from guidewire.grammar import compile_json_schema

    return compile_json_schema(PERSON, smollm2, whitespace="compact")


@pytest.fixture(scope="module")
def chat_prefix(smol_tokenizer):
    return smol_tokenizer.encode("<|im_start|>assistant\n", add_special_tokens=False)


def _spell(vocab, ids):
    return b"".join(vocab.token_bytes[i] for i in ids)


def test_forced_draft_is_canonical(smollm2, smol_tokenizer, person, chat_prefix):
    tok = smol_tokenizer
    m = person.matcher()
    d = ForcedTextDrafter(tok, smollm2, backoff=0)
    d.begin(chat_prefix)
    draft = d.propose(m, 8)
    want = tok.encode('{"name":"', add_special_tokens=False)
    assert draft.tokens == want and draft.probs is None and draft.source == "forced"
    assert m.validate(draft.tokens) == len(draft.tokens)
    assert m.num_tokens == 0  # the constraint was not advanced
    # backoff drops the boundary token (it may merge with the name the model picks)
    d1 = ForcedTextDrafter(tok, smollm2)  # backoff=1
    d1.begin(chat_prefix)
    assert d1.propose(m, 8).tokens == want[:-1]
    assert d1.propose(m, 1).tokens == want[:1]
    # inside the string the model emits '","' (canonical); the tail + forced 'age":' re-produce it
    full = tok.encode('{"name":"Bob","age":', add_special_tokens=False)
    assert _spell(smollm2, full[4:5]) == b'","'
    c = m.fork()
    for t in full[:5]:
        assert c.advance(t)
    assert c.forced_bytes() == b'age":'
    d.begin(chat_prefix + full[:5])
    draft = d.propose(c, 8)
    assert draft.tokens == full[5:]
    assert c.validate(draft.tokens) == len(draft.tokens)
    # a '"' emitted alone crosses the canonical '","': the draft resyncs after it
    quote = smollm2.bytes_to_tokens()[b'"']
    c = m.fork()
    for t in full[:4] + [quote]:
        assert c.advance(t)
    d.begin(chat_prefix + full[:4] + [quote])
    draft = d.propose(c, 8)
    assert _spell(smollm2, draft.tokens) == b',"age":' and draft.tokens[1:] == full[5:]
    assert c.validate(draft.tokens) == len(draft.tokens)


def test_forced_after_a_non_canonical_boundary(smollm2, smol_tokenizer, person, chat_prefix):
    tok, m = smol_tokenizer, person.matcher()
    brace = smollm2.bytes_to_tokens()[b"{"]  # canonically '{"' is one token: '{' alone crosses it
    assert m.advance(brace)
    d = ForcedTextDrafter(tok, smollm2, backoff=0)
    d.begin(chat_prefix + [brace])
    draft = d.propose(m, 8)
    assert _spell(smollm2, draft.tokens) == b'"name":"'
    assert draft.tokens == tok.encode('"name":"', add_special_tokens=False)
    assert m.validate(draft.tokens) == len(draft.tokens)
    strict = ForcedTextDrafter(tok, smollm2, backoff=0, resync=False)
    strict.begin(chat_prefix + [brace])
    assert strict.propose(m, 8).tokens == []  # back off entirely


def test_forced_no_backoff_where_the_grammar_ends(smollm2, smol_tokenizer, chat_prefix):
    from guidewire.grammar import compile_json_schema

    g = compile_json_schema({"type": "object", "properties": {"a": {"const": "x"}}, "required": ["a"],
                             "additionalProperties": False}, smollm2, whitespace="compact")
    m = g.matcher()
    d = ForcedTextDrafter(smol_tokenizer, smollm2, backoff=2)
    d.begin(chat_prefix)
    draft = d.propose(m, 16)
    assert draft.tokens == smol_tokenizer.encode('{"a":"x"}', add_special_tokens=False)
    c = m.fork()
    for t in draft.tokens:
        assert c.advance(t)
    assert c.is_accepting()
    # truncated by max_tokens, the draft is cut but nothing else changes
    assert d.propose(m, 2).tokens == draft.tokens[:2]


def test_forced_callable_encoder_mid_character_and_no_tokenizer(smollm2, smol_tokenizer, person):
    from guidewire.grammar import compile_regex

    assert complete_utf8(b"ab\xc3") == b"ab" and complete_utf8("é".encode()) == "é".encode()
    m = compile_regex("abcd(é|è)", smollm2).matcher()  # forced bytes end mid-character
    assert m.forced_bytes() == b"abcd\xc3"
    d = ForcedTextDrafter(lambda s: smol_tokenizer.encode(s, add_special_tokens=False), smollm2, backoff=0)
    d.begin([])
    draft = d.propose(m, 8)
    assert _spell(smollm2, draft.tokens) == b"abcd"
    assert draft.tokens == smol_tokenizer.encode("abcd", add_special_tokens=False)
    # no tokenizer: the grammar's own forced tokens, less the backoff
    m = person.matcher()
    plain = ForcedTextDrafter(None, smollm2, backoff=1)
    plain.begin([])
    forced = m.forced_tokens()
    assert plain.propose(m, 8).tokens == forced[:-1]
    assert ForcedTextDrafter(None, smollm2, backoff=0).propose(m, 8).tokens == forced
    # nothing forced / no constraint
    m.advance(smollm2.bytes_to_tokens()[b'{"'])
    m.advance(smollm2.bytes_to_tokens()[b"name"])
    m.advance(smollm2.bytes_to_tokens()[b'":"'])
    assert d.propose(m, 8).tokens == [] and d.propose(None, 8).tokens == []


def test_forced_with_prefix(smollm2, smol_tokenizer, person, chat_prefix):
    m = person.matcher()
    d = ForcedTextDrafter(smol_tokenizer, smollm2, backoff=0)
    d.begin(chat_prefix)
    pre = smol_tokenizer.encode('{"name":"Al"', add_special_tokens=False)
    draft = d.propose(m, 8, prefix=pre)
    assert _spell(smollm2, draft.tokens) == b',"age":'
    assert m.validate(pre + draft.tokens) == len(pre) + len(draft.tokens)
    assert d.propose(m, 8, prefix=[smollm2.bytes_to_tokens()[b"x"]]).tokens == []  # invalid prefix


# -- draft model ----------------------------------------------------------------------------------
def _masked_argmax(model, prefix, cons, vocab):
    bm = np.zeros((1, (vocab.vocab_size + 31) // 32), dtype=np.int32)
    cons.fill_bitmask(bm, 0)
    x = model.logits_for(prefix).unsqueeze(0)
    apply_bitmask_(x, bm)
    return int(x.argmax())


def test_draft_model_greedy_equals_masked_argmax_and_resyncs():
    vocab = tiny_vocab()
    allowed = {byte_id(bytes([c])) for c in b"abcdefgh"}
    cons = AllowSet(allowed, vocab.vocab_size, accepting=False)
    model = FakeModel(vocab.vocab_size)
    oracle = FakeModel(vocab.vocab_size)
    d = DraftModelDrafter(model, vocab, SamplingParams(temperature=0.0), k=4)
    prompt = [byte_id(b"x"), byte_id(b"y")]
    d.begin(prompt)
    assert model.tokens == prompt
    draft = d.propose(cons, 8)
    assert len(draft) == 4 and draft.probs.shape == (4, vocab.vocab_size) and draft.source == "model"
    prefix = list(prompt)
    for i, t in enumerate(draft.tokens):
        assert t == _masked_argmax(oracle, prefix, cons, vocab)
        row = draft.probs[i]
        assert torch.allclose(row.sum(), torch.tensor(1.0)) and row[t] == 1.0
        prefix.append(t)
    assert cons.consumed == []  # the constraint itself was not advanced
    # the verifier accepts 2 draft tokens and adds its own: one 1-token step re-syncs
    model.step_sizes.clear()
    hist_add = draft.tokens[:2] + [byte_id(b"a")]
    d.extend(hist_add)
    draft2 = d.propose(cons, 2)
    assert model.step_sizes[0] == 1 and model.tokens[:5] == prompt + hist_add
    assert draft2.tokens[0] == _masked_argmax(oracle, prompt + hist_add, cons, vocab)
    assert d.propose(cons, 3, prefix=[1]).tokens == []  # no continuation after a prefix


def test_draft_model_sampled_rows_are_distributions_over_allowed_tokens():
    vocab = tiny_vocab()
    allowed = {byte_id(bytes([c])) for c in b"0123456789"}
    cons = AllowSet(allowed, vocab.vocab_size, accepting=True)
    sp = SamplingParams(temperature=1.5, top_k=6, seed=7)
    d = DraftModelDrafter(FakeModel(vocab.vocab_size, scale=0.5), vocab, sp, k=5)
    d.begin([byte_id(b"q")])
    draft = d.propose(cons, 5)
    assert draft.probs is not None and draft.probs.shape == (len(draft), vocab.vocab_size)
    oracle = FakeModel(vocab.vocab_size, scale=0.5)
    prefix = [byte_id(b"q")]
    disallowed = torch.ones(vocab.vocab_size, dtype=torch.bool)
    disallowed[sorted(allowed)] = False
    for t, row in zip(draft.tokens, draft.probs):
        assert t in allowed and t != EOS
        assert torch.allclose(row.sum(), torch.tensor(1.0), atol=1e-5)
        assert (row >= 0).all() and row[disallowed].sum() == 0 and row[t] > 0
        # the row is q with EOS removed and renormalised
        bm = np.zeros((1, (vocab.vocab_size + 31) // 32), dtype=np.int32)
        cons.fill_bitmask(bm, 0)
        x = oracle.logits_for(prefix).unsqueeze(0)
        apply_bitmask_(x, bm)
        q = sampling_probs(x, sp)[0]
        q[EOS] = 0
        assert torch.allclose(row, q / q.sum(), atol=1e-6)
        prefix.append(t)
    # same seed -> same draft
    d2 = DraftModelDrafter(FakeModel(vocab.vocab_size, scale=0.5), vocab, sp, k=5)
    d2.begin([byte_id(b"q")])
    assert d2.propose(cons, 5).tokens == draft.tokens


def test_draft_model_stops_at_eos():
    vocab = tiny_vocab()
    bias = torch.zeros(vocab.vocab_size)
    bias[EOS] = 100.0  # the model wants to stop
    d = DraftModelDrafter(FakeModel(vocab.vocab_size, bias=bias), vocab, SamplingParams(), k=4)
    d.begin([byte_id(b"a")])
    assert d.propose(None, 4).tokens == []
    only_eos = AllowSet(set(), vocab.vocab_size, accepting=True)
    d = DraftModelDrafter(FakeModel(vocab.vocab_size), vocab, SamplingParams(), k=4)
    d.begin([byte_id(b"a")])
    draft = d.propose(only_eos, 4)
    assert draft.tokens == [] and draft.probs.shape[0] == 0
    assert d.propose(None, 4).tokens and d.calls == 2


# -- chain and factory ----------------------------------------------------------------------------
class Fixed(DrafterBase):
    def __init__(self, name, tokens):
        super().__init__()
        self.name, self.tokens = name, tokens
        self.seen = []

    def begin(self, prompt_ids):
        self.seen = list(prompt_ids)

    def extend(self, tokens):
        self.seen += list(tokens)

    def propose(self, constraint, max_tokens):
        self.calls += 1
        return self._emit(self.tokens[:max_tokens])


def test_chain_first_non_empty_and_forwarding():
    a, b = Fixed("a", []), Fixed("b", [5, 6])
    chain = DrafterChain([a, b])
    chain.begin([1, 2])
    chain.extend([3])
    assert a.seen == b.seen == [1, 2, 3]
    draft = chain.propose(None, 4)
    assert draft.tokens == [5, 6] and draft.source == "b" and chain.last_parts == [(b, 2)]
    assert (a.calls, b.calls, chain.calls, chain.proposed) == (1, 1, 1, 2)
    chain.record_accepted(1)
    assert b.accepted == 1 and chain.accepted == 1
    b.record_accepted("b", 2)
    assert b.accepted == 3 and b.stats()["acceptance"] == 3 / 2
    assert DrafterChain([a]).propose(None, 4).tokens == []


def test_chain_forced_then_lookup(smollm2, smol_tokenizer, person, chat_prefix):
    tok = smol_tokenizer
    example = tok.encode('Example: {"name":"Bob","age":42}\n', add_special_tokens=False)
    forced, lookup = make_drafters("forced, lookup", tokenizer=tok, vocab=smollm2)
    chain = DrafterChain([forced, lookup])
    chain.begin(example + chat_prefix)
    m = person.matcher()
    draft = chain.propose(m, 8)
    assert draft.source == "forced+lookup"
    head = tok.encode('{"name":"', add_special_tokens=False)[:-1]  # backoff 1
    assert draft.tokens[:len(head)] == head and len(draft) > len(head)
    assert m.validate(draft.tokens) == len(draft.tokens)
    assert _spell(smollm2, draft.tokens).startswith(b'{"name":"Bob')
    assert chain.last_parts == [(forced, len(head)), (lookup, len(draft) - len(head))]
    chain.record_accepted(draft.source, len(head) + 1)  # as the verifier calls it
    assert forced.accepted == len(head) and lookup.accepted == 1
    stats = chain.stats()
    assert [s["name"] for s in stats["members"]] == ["forced", "lookup"]


def test_make_drafters():
    vocab = tiny_vocab()
    ds = make_drafters("forced,lookup,sam", vocab=vocab)
    assert [d.name for d in ds] == ["forced", "lookup", "sam"]
    assert [d.name for d in make_drafters(["sam", "model"], vocab=vocab,
                                          draft_model=FakeModel(vocab.vocab_size))] == ["sam", "model"]
    with pytest.raises(ValueError, match="'ngram'"):
        make_drafters("lookup,ngram", vocab=vocab)
    with pytest.raises(ValueError, match="draft_model"):
        make_drafters("model", vocab=vocab)
    with pytest.raises(ValueError, match="vocab"):
        make_drafters("forced")
    assert make_drafter("sam", vocab=vocab).name == "sam"
    chain = make_drafter("forced,lookup", vocab=vocab)
    assert isinstance(chain, DrafterChain) and [d.name for d in chain.drafters] == ["forced", "lookup"]


def test_chain_pieces_stay_valid_along_a_walk(smollm2, smol_tokenizer, person, chat_prefix):
    """At every position of a real output the (possibly multi-piece) draft is accepted whole by the
    constraint; both forced keys and copied values are proposed."""
    tok = smol_tokenizer
    example = tok.encode('Text: Bob is 42. Ann is 7.\n', add_special_tokens=False)
    chain = make_drafter("forced,copy,lookup,sam", tokenizer=tok, vocab=smollm2)
    out = tok.encode('{"name":"Ann","age":7}', add_special_tokens=False)
    chain.begin(example + chat_prefix)
    m = person.matcher()
    sources = set()
    for t in out:
        draft = chain.propose(m, 12)
        assert m.validate(draft.tokens) == len(draft.tokens)
        sources.add(draft.source)
        assert m.advance(t)
        chain.extend([t])
    assert {"forced", "copy"} <= sources, sources


def test_text_copy_matches_bytes_across_token_splits(smollm2, smol_tokenizer, person, chat_prefix):
    """A value written in the prompt as ' Mateo Nakamura' is copied into '"Mateo Nakamura' although
    the token splits differ; the match is the longest earlier byte suffix (brute-force check)."""
    tok = smol_tokenizer
    prompt = tok.encode("Text: Mateo Nakamura is 37 years old.\n", add_special_tokens=False) + chat_prefix
    copy = make_drafter("copy", tokenizer=tok, vocab=smollm2)
    copy.begin(prompt)
    m = person.matcher()
    out = tok.encode('{"name":"Mat', add_special_tokens=False)
    for t in out:
        assert m.advance(t)
    copy.extend(out)
    draft = copy.propose(m, 10)
    text = _spell(smollm2, draft.tokens)
    assert text.startswith(b"eo Nak") and m.validate(draft.tokens) == len(draft.tokens)
    full = _spell(smollm2, out)
    assert (_spell(smollm2, out + draft.tokens)).startswith(b'{"name":"Mateo Nakamura')
    # brute force: the longest suffix (>= 3 bytes) of the history text that occurs earlier
    hist = bytes(copy.text)
    want = max((n for n in range(3, 65) if hist.rfind(hist[-n:], 0, len(hist) - 1) >= 0), default=0)
    assert copy.match(hist)[0] == want and want >= len(b'"Mat') - 1
    assert full.endswith(b"Mat")
    # a special token (spelled as the separator) is never inside a match: here the longest earlier
    # suffix is "foo<sep>bar" (7 bytes), but only "bar" (3 bytes, ending at 7) may be matched
    sep = b"\x00"
    for text, want in [(b"foo" + sep + b"bar baz foo" + sep + b"bar", (3, 7)),
                       (b"xyzab" + sep + b"q xyzab" + sep, (0, -1)),
                       (b"hello world" + sep + b" hello world", (11, 11))]:
        assert copy.match(text) == want, text
        n = want[0]  # brute force agrees: the longest separator-free suffix (>= 3) occurring earlier
        assert n == max((k for k in range(3, 65) if sep not in text[-k:] and text.rfind(text[-k:], 0, len(text) - 1)
                         >= 0), default=0)


def test_text_copy_starts_a_value_at_a_word_start(smollm2, smol_tokenizer, person, chat_prefix):
    tok = smol_tokenizer
    prompt = tok.encode("Text: Mateo Nakamura is 37 years old.\n", add_special_tokens=False) + chat_prefix
    copy = make_drafter("copy", tokenizer=tok, vocab=smollm2)
    copy.begin(prompt)
    m = person.matcher()
    out = tok.encode('{"name":"M', add_special_tokens=False)
    for t in out:
        assert m.advance(t)
    copy.extend(out)
    assert copy.match(bytes(copy.text))[0] == 0  # '"M' is too short a suffix
    draft = copy.propose(m, 6)
    assert _spell(smollm2, out + draft.tokens).startswith(b'{"name":"Mateo')
