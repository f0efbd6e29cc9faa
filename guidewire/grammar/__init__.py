"""Grammar compilers: Lark EBNF, regexes -> immutable CompiledGrammar -> per-request matchers."""

# ``np.unique`` imports ``numpy.ma`` on its first call (16 ms): imported here, with the package, so
# that the first mask a fresh process computes does not pay it (stop 69 found it in a first mask)
import numpy.ma  # noqa: F401

from .compiled import CompiledGrammar
from .matcher import GrammarMatcher
from .frontend import builtin_grammar, compile_lark, compile_regex
from .indent import compile_python
from .jsonschema import JsonSchemaOptions, compile_json_schema

__all__ = ["CompiledGrammar", "GrammarMatcher", "compile_lark", "compile_regex", "builtin_grammar",
           "compile_json_schema", "JsonSchemaOptions", "compile_python"]
