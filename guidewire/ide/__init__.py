"""The IDE backend's building blocks: fill-in-the-middle prompts (:mod:`.fim`), the suffix gate
that keeps a grammar-constrained middle consistent with the text after the cursor (:mod:`.gate`),
the AND of constraints (:mod:`.compose`), code stop rules (:mod:`.stops`) and the language server
(:mod:`.lsp`, ``guidewire lsp``). The front door is :func:`guidewire.complete_code`.
"""

from .._lazy import lazy_getattr

_LAZY = {"build_fim_prompt": ".fim", "detect_fim_format": ".fim", "FimFormat": ".fim", "FimPrompt": ".fim",
         "InfillError": ".fim", "SuffixGate": ".gate", "CodeStops": ".stops"}

__getattr__ = lazy_getattr(__name__, _LAZY)

__all__ = sorted(_LAZY)
