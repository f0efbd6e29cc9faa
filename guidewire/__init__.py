"""guidewire: structured and code-generation decoding, right by construction.

Front door: :func:`generate_json` and :func:`generate` (models and compiled grammars are cached
per process); the layers underneath are :mod:`guidewire.core`, :mod:`guidewire.grammar` and
:mod:`guidewire.runtime`. Importing this package is cheap: torch and transformers load on first use.
"""

__version__ = "0.1.0"

__all__ = ["generate_json", "generate", "load_model", "GuidewireError", "IncompleteOutputError",
           "OutputValidationError", "DeadEndError", "text_to_sql", "complete_code", "CodeCompletion", "ModelLoadError", "ContextLengthError",
           "__version__"]

from ._lazy import lazy_getattr  # noqa: E402
from .core.errors import GuidewireError  # noqa: E402

_LAZY = {
    "generate_json": "guidewire.api", "generate": "guidewire.api",
    "load_model": "guidewire.runtime.loading",
    "IncompleteOutputError": "guidewire.runtime.errors", "OutputValidationError": "guidewire.runtime.errors",
    "DeadEndError": "guidewire.runtime.errors", "ModelLoadError": "guidewire.runtime.errors",
    "ContextLengthError": "guidewire.runtime.errors",
    "text_to_sql": "guidewire.sql",
    "complete_code": "guidewire.code_completion", "CodeCompletion": "guidewire.code_completion",
}

__getattr__ = lazy_getattr(__name__, _LAZY)
