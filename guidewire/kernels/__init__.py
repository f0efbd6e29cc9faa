"""Token-level kernels, each a torch reference plus a Triton kernel with the same results.

* :mod:`.bitmask` -- :func:`apply_token_bitmask_inplace`: int32 token bitmask -> ``-inf`` logits
  (a drop-in for ``xgrammar.apply_token_bitmask_inplace``).
* :mod:`.sampling` -- :func:`masked_softmax` and :func:`sample_masked` (inverse CDF with
  caller-given uniforms).
* :mod:`.speculative` -- :func:`speculative_accept`: modified rejection sampling of drafts.
* :mod:`.tree_attention` -- :func:`tree_attention_mask`, :func:`tree_position_ids` and
  :class:`DraftTree` for verifying a tree of drafts in one forward pass.

Every public kernel takes ``backend="auto"`` (Triton for CUDA tensors when Triton imports, torch
otherwise), ``"torch"`` or ``"triton"`` (on the CPU, Triton's interpreter: slow, for testing).
Only torch is needed to import this package; it does not import :mod:`guidewire.runtime`.
"""

from ._triton import interpret_mode, triton_available, triton_importable
from .bitmask import (apply_token_bitmask_inplace, apply_token_bitmask_inplace_torch,
                      apply_token_bitmask_inplace_triton, bitmask_ceiling, unpack_bits)
from .sampling import (inverse_cdf, masked_softmax, masked_softmax_torch, masked_softmax_triton, sample_masked,
                       sample_masked_torch, sample_masked_triton)
from .speculative import (greedy_accept, speculative_accept, speculative_accept_batch, speculative_accept_torch,
                          speculative_accept_triton)
from .tree_attention import (DraftTree, tree_ancestors, tree_attention_mask, tree_attention_mask_torch,
                             tree_attention_mask_triton, tree_position_ids)

__all__ = [
    "triton_available", "triton_importable", "interpret_mode",
    "apply_token_bitmask_inplace", "apply_token_bitmask_inplace_torch", "apply_token_bitmask_inplace_triton",
    "unpack_bits", "bitmask_ceiling",
    "masked_softmax", "masked_softmax_torch", "masked_softmax_triton", "sample_masked", "sample_masked_torch",
    "sample_masked_triton", "inverse_cdf",
    "speculative_accept", "speculative_accept_batch", "speculative_accept_torch", "speculative_accept_triton",
    "greedy_accept",
    "DraftTree", "tree_ancestors", "tree_attention_mask", "tree_attention_mask_torch", "tree_attention_mask_triton",
    "tree_position_ids",
]
