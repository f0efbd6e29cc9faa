"""Decoding runtime: model loading, KV-cached sequences, masking, sampling, the decoding loop,
streaming, a ``transformers`` LogitsProcessor adapter, and lossless
speculative decoding (:mod:`.speculative`, drafters in :mod:`.drafters`). Depends only on
:mod:`guidewire.core` (the ``Constraint`` protocol) and :mod:`guidewire.kernels`, never on the
grammar layer.
"""

from .decode import (GenerationResult, TextStream, Usage, decode, decode_batch, iter_decode,
                     stream_decode)
from .errors import (ConstraintViolationError, ContextLengthError, DeadEndError, IncompleteOutputError, ModelLoadError,
                     OutputValidationError)
from .hf_processor import GuidewireLogitsProcessor
from .loading import DEFAULT_MODEL, LoadedModel, load_model
from .masking import apply_bitmask_, unpack_bitmask
from .model import BatchModel, HFBatchModel, HFModel, Model
from .sampling import Sampler, SamplingParams, sampling_probs
from .streaming import TextDeltaDecoder, decode_text
from .drafting import Draft, Drafter
from .speculative import DraftPolicy, SpeculationStats, iter_speculative_decode, speculative_decode

__all__ = [
    "load_model", "LoadedModel", "DEFAULT_MODEL", "Model", "BatchModel", "HFModel", "HFBatchModel",
    "apply_bitmask_", "unpack_bitmask", "Sampler", "SamplingParams", "sampling_probs", "decode",
    "decode_batch", "iter_decode", "stream_decode", "GenerationResult", "TextStream", "Usage",
    "TextDeltaDecoder", "decode_text", "GuidewireLogitsProcessor", "ModelLoadError", "DeadEndError",
    "ConstraintViolationError", "ContextLengthError", "IncompleteOutputError", "OutputValidationError", "Draft", "Drafter",
    "DraftPolicy", "SpeculationStats", "speculative_decode", "iter_speculative_decode",
]
