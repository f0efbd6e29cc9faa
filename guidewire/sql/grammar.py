"""A Lark grammar for SQLite ``SELECT`` statements over one live schema.

Every table name is one of the database's tables and every column name one of its columns
(bare, case-insensitive, where the name is a plain non-keyword word; double-quoted exactly
otherwise), so a generated query can never name a table or column that does not exist.
``table.column`` only pairs a table with its own columns; aliases are Spider's ``T1``, ``t2``...
Which table an *unqualified* or alias-qualified column belongs to depends on the ``FROM``
clause that follows it, which a context-free grammar cannot see: that scoping is checked
after generation (:mod:`guidewire.sql.check`).

Covers the dialect of Spider's gold queries: joins, ``GROUP BY``/``HAVING``, ``ORDER BY``/
``LIMIT``, nested subqueries, ``IN``/``EXISTS``, ``UNION``/``INTERSECT``/``EXCEPT``, aggregates,
``DISTINCT``, ``LIKE``, ``BETWEEN``, ``CASE``, ``CAST``, string (single- or double-quoted, as SQLite
reads an unknown double-quoted name) and number literals; keywords in any case.
"""

from __future__ import annotations

from .schema import Schema, needs_quotes

#: SQLite scalar and aggregate functions the grammar allows (case-insensitive).
FUNCTIONS = ("count", "sum", "avg", "min", "max", "abs", "length", "lower", "upper", "round", "coalesce",
             "ifnull", "substr", "replace", "trim", "instr", "strftime", "date", "julianday", "total")

#: Clauses shared by the plain and the scoped query structure.
_CLAUSES = r"""
table_ref: table_name [["AS"i] ALIAS] | "(" query ")" [["AS"i] ALIAS]
join_op: "," | ["NATURAL"i] ["LEFT"i ["OUTER"i] | "INNER"i | "CROSS"i] "JOIN"i
join_constraint: "ON"i expr

where_clause: "WHERE"i expr
group_by: "GROUP"i "BY"i expr ("," expr)* ["HAVING"i expr]
order_by: "ORDER"i "BY"i ordering_term ("," ordering_term)*
ordering_term: expr ["ASC"i | "DESC"i]
limit_clause: "LIMIT"i NUMBER ["OFFSET"i NUMBER]
"""

_CORE = r"""
start: query [";"]

query: select_core (compound_op select_core)* [order_by] [limit_clause]
compound_op: "UNION"i ["ALL"i] | "INTERSECT"i | "EXCEPT"i
select_core: "SELECT"i ["DISTINCT"i | "ALL"i] result_column ("," result_column)* from_clause [where_clause] [group_by]
result_column: "*" | table_prefix "." "*" | expr

from_clause: "FROM"i table_ref (join_op table_ref [join_constraint])*

"""

#: Query structure when unqualified columns are scoped: a single-table ``SELECT`` is one of the
#: per-table variants ``sc_<i>`` (below), whose every column belongs to that table; a query with
#: a join or a derived table is ``multi_core``, whose columns are checked after generation.
_SCOPED_HEAD = r"""
start: query [";"]

query: select_core (compound_op select_core)+ [order_by] [limit_clause]
     | multi_core [order_by] [limit_clause]
     | single_query
compound_op: "UNION"i ["ALL"i] | "INTERSECT"i | "EXCEPT"i
select_core: multi_core | single_core
multi_core: "SELECT"i [set_quantifier] result_column ("," result_column)* multi_from [where_clause] [group_by]
set_quantifier: "DISTINCT"i | "ALL"i
result_column: "*" | table_prefix "." "*" | expr
multi_from: "FROM"i table_ref (join_op table_ref [join_constraint])+
          | "FROM"i "(" query ")" [["AS"i] ALIAS]
"""

_JOIN_QUERY = 'query: select_core (compound_op select_core)+ [order_by] [limit_clause]\n     | multi_core [order_by] [limit_clause]\n     | single_query'
_SINGLE_ONLY_QUERY = 'query: single_core (compound_op single_core)+ [order_by] [limit_clause]\n     | single_query'

#: One table's single-table query; ``{i}`` is the table's index. ``{alias}``, ``{alias_prefix}`` and
#: ``{outer}`` are :data:`_WITH_ALIASES` in the full grammar and empty in the fallback, whose
#: single-table queries have no aliases and no other table's columns (not even a correlated
#: subquery's outer name), so every column is in scope by construction.
_SINGLE = r"""
sq_{i}: sc_{i} [order_{i}] [limit_clause]
sc_{i}: "SELECT"i [set_quantifier] rcol_{i} ("," rcol_{i})* "FROM"i t{i}{alias} [where_{i}] [group_{i}]
rcol_{i}: "*" | prefix_{i} "." "*" | expr_{i}
prefix_{i}: t{i}{alias_prefix}
colref_{i}: c{i} | prefix_{i} "." c{i}{outer}
where_{i}: "WHERE"i expr_{i}
group_{i}: "GROUP"i "BY"i expr_{i} ("," expr_{i})* ["HAVING"i expr_{i}]
order_{i}: "ORDER"i "BY"i oterm_{i} ("," oterm_{i})*
oterm_{i}: expr_{i} ["ASC"i | "DESC"i]
"""
_WITH_ALIASES = {"alias": ' [["AS"i] ALIAS]', "alias_prefix": " | ALIAS", "outer": " | outer_ref"}
_STRICT = {"alias": "", "alias_prefix": "", "outer": ""}

_EXPR = r"""
?expr{s}: or_expr{s}
?or_expr{s}: and_expr{s} | or_expr{s} "OR"i and_expr{s}
?and_expr{s}: not_expr{s} | and_expr{s} "AND"i not_expr{s}
?not_expr{s}: predicate{s} | "NOT"i not_expr{s}
?predicate{s}: additive{s}
          | additive{s} COMP_OP additive{s}
          | additive{s} ["NOT"i] "IN"i "(" (query | expr{s} ("," expr{s})*) ")"
          | additive{s} ["NOT"i] "LIKE"i additive{s}
          | additive{s} ["NOT"i] "BETWEEN"i additive{s} "AND"i additive{s}
          | additive{s} "IS"i ["NOT"i] "NULL"i
          | "EXISTS"i "(" query ")"
?additive{s}: multiplicative{s} | additive{s} ADD_OP multiplicative{s}
?multiplicative{s}: unary{s} | multiplicative{s} MUL_OP unary{s}
?unary{s}: primary{s} | "-" unary{s}
?primary{s}: literal
        | {col}
        | function_call{s}
        | "(" expr{s} ")"
        | "(" query ")"
        | "CASE"i [expr{s}] ("WHEN"i expr{s} "THEN"i expr{s})+ ["ELSE"i expr{s}] "END"i
        | "CAST"i "(" expr{s} "AS"i type_name ")"
        | word_run
function_call{s}: func_name "(" (["DISTINCT"i] expr{s} ("," expr{s})* | "*") ")"
"""

_TERMINALS = r"""
literal: NUMBER | STRING | "NULL"i | quoted_table

// Words end at a non-word byte: without this terminal the greedy lexer would read "SELECTcount" as
// SELECT + count. WORD_RUN takes the longest run of word bytes (a literal of the same length wins),
// and word_run has an empty language, so a glued run is never allowed.
word_run: WORD_RUN word_run
WORD_RUN: /[A-Za-z0-9_]+/
ALIAS: /[Tt][0-9]{1,2}/
type_name: "INTEGER"i | "REAL"i | "TEXT"i | "NUMERIC"i
COMP_OP: "=" | "==" | "!=" | "<>" | "<" | "<=" | ">" | ">="
ADD_OP: "+" | "-" | "||"
MUL_OP: "*" | "/" | "%"
STRING: /'(?:[^'\n]|'')*'/ | /"(?:[^"\n]|"")*"/
NUMBER: /[0-9]+(?:\.[0-9]+)?/
WS: /[ \t\r\n]+/
%ignore WS
"""


def _lark_literal(text: str, ignore_case: bool) -> str:
    body = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{body}"' + ("i" if ignore_case else "")


def _name_alternatives(name: str, dialect: str = "sqlite") -> list[str]:
    """Lark literals that spell identifier ``name``: bare (any case) where SQL allows, and quoted (exact)."""
    quoted = _lark_literal('"' + name.replace('"', '""') + '"', False)
    if needs_quotes(name, dialect):
        return [quoted]
    return [_lark_literal(name, True), quoted]


def _rule(name: str, alternatives: list[str]) -> str:
    seen = list(dict.fromkeys(a.lower() if a.endswith('"i') else a for a in alternatives))
    return f"{name}: " + "\n    | ".join(seen)


def schema_grammar(schema: Schema, *, scoped: bool = True, joins: bool = True) -> str:
    """Lark text of the ``SELECT`` grammar whose identifiers are exactly ``schema``'s tables and columns.

    ``scoped``: in a single-table ``SELECT`` (no join, no derived table) every bare or
    ``alias.column`` column must be one of that table's, enforced by one variant of the query rules
    per table; ``other_table.column`` stays allowed there (a correlated subquery names its outer
    table so). Queries with joins, and those outer names, are scoped by the check after generation.
    ``joins=False`` (with ``scoped``) leaves only single-table queries without aliases or other
    tables' columns (so no correlated subqueries), every column in scope by construction: the
    pipeline's fallback when no generated query passes the checks.
    """
    if not schema.tables:
        raise ValueError("a schema grammar needs at least one table")
    d = schema.dialect
    if scoped:
        head = _SCOPED_HEAD if joins else _SCOPED_HEAD.replace(_JOIN_QUERY, _SINGLE_ONLY_QUERY)
        parts = [head, _CLAUSES, _EXPR.format(s="", col="column_ref")]
        parts.append(_rule("single_query", [f"sq_{i}" for i in range(len(schema.tables))]))
        parts.append(_rule("single_core", [f"sc_{i}" for i in range(len(schema.tables))]))
        variant = _WITH_ALIASES if joins else _STRICT
        for i in range(len(schema.tables)):
            parts.append(_SINGLE.format(i=i, **variant))
            parts.append(_EXPR.format(s=f"_{i}", col=f"colref_{i}"))
    else:
        parts = [_CORE, _CLAUSES, _EXPR.format(s="", col="column_ref")]
    parts.append(_TERMINALS)
    table_alts, column_alts, qualified = [], [], []
    for i, table in enumerate(schema.tables):
        parts.append(_rule(f"t{i}", _name_alternatives(table.name, d)))
        parts.append(_rule(f"c{i}", [a for c in table.columns for a in _name_alternatives(c.name, d)]))
        table_alts.append(f"t{i}")
        qualified.append(f't{i} "." c{i}')
        column_alts.extend(a for c in table.columns for a in _name_alternatives(c.name, d))
    parts.append(_rule("table_name", table_alts))
    # SQLite reads a double-quoted name that is no column in scope as a string; a table's quoted
    # name is a literal terminal (it beats STRING in the lexer), so it is allowed as a string here
    parts.append(_rule("quoted_table", [_name_alternatives(t.name, d)[-1] for t in schema.tables]))
    parts.append(_rule("table_prefix", table_alts + ["ALIAS"]))
    parts.append(_rule("column_name", column_alts))
    parts.append(_rule("column_ref", ["column_name", 'ALIAS "." column_name'] + qualified))
    # a correlated subquery names an outer table's column by the table's name
    parts.append(_rule("outer_ref", qualified))
    parts.append(_rule("func_name", [_lark_literal(f, True) for f in FUNCTIONS]))
    return "\n".join(parts) + "\n"
