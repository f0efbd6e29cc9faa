"""Core types shared by every layer: vocabularies, bitmasks, the Constraint protocol, errors."""

from .bitmask import (allocate_token_bitmask, apply_token_bitmask, bitmask_to_bool, bitmask_to_ids,
                      bitmask_words, bool_to_bitmask, ids_to_bitmask)
from .constraint import Constraint
from .errors import (GrammarSyntaxError, GuidewireError, InexpressibleLiteralError, LimitExceededError,
                     RegexSyntaxError, UnsatisfiableGrammarError, UnsupportedFeatureError, VocabError,
                     WorkLimitExceededError)
from .limits import Limits
from .vocab import Vocab

__all__ = [
    "Vocab", "Constraint", "allocate_token_bitmask", "apply_token_bitmask", "bitmask_to_bool",
    "bitmask_to_ids", "bitmask_words", "bool_to_bitmask", "ids_to_bitmask", "GuidewireError",
    "GrammarSyntaxError", "RegexSyntaxError", "UnsupportedFeatureError", "UnsatisfiableGrammarError",
    "InexpressibleLiteralError", "LimitExceededError", "VocabError", "WorkLimitExceededError", "Limits",
]
