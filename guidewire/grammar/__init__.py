"""Grammar compilers: Lark EBNF, regexes -> immutable CompiledGrammar -> per-request matchers."""

from .compiled import CompiledGrammar
from .matcher import GrammarMatcher
from .frontend import builtin_grammar, compile_lark, compile_regex
from .indent import compile_python
from .jsonschema import JsonSchemaOptions, compile_json_schema

__all__ = ["CompiledGrammar", "GrammarMatcher", "compile_lark", "compile_regex", "builtin_grammar",
           "compile_json_schema", "JsonSchemaOptions", "compile_python"]
