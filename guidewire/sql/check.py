"""Static checks of a generated query with ``sqlglot`` (an independent parser).

:func:`analyze` parses the query, checks it is one read-only ``SELECT`` and resolves every table
and column: *unknown* names are not in the database at all; *scoping* problems name a real
column that no table in scope (the ``FROM`` clause of its ``SELECT`` or an enclosing one) has,
an alias that is not defined, or an unqualified column that several tables in scope share.
A double-quoted name that is no column in scope is a string, as SQLite reads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .schema import Schema

_WRITE_NODES = ("Insert", "Update", "Delete", "Create", "Drop", "Alter", "Command", "Pragma", "Attach",
                "Detach", "Merge", "TruncateTable", "Into", "Set", "Transaction", "Commit", "Rollback", "Use")


@dataclass
class QueryCheck:
    """Outcome of :func:`analyze`: ``parsed``, ``read_only`` and the reference problems found.

    ``compile_error`` is set by a caller that also asked the database to compile the query
    (:func:`guidewire.sql.execute.compile_error`): the database's message, or ``None``.
    """

    sql: str
    parsed: bool = False
    read_only: bool = False
    parse_error: str | None = None
    unknown: list[str] = field(default_factory=list)
    scoping: list[str] = field(default_factory=list)
    compile_error: str | None = None

    @property
    def real_references(self) -> bool:
        """Parsed, and every table and column named exists in the database."""
        return self.parsed and not self.unknown

    @property
    def ok(self) -> bool:
        """Parsed, read-only, every name real and in scope, and (where asked) compiled by the database."""
        return (self.parsed and self.read_only and not self.unknown and not self.scoping
                and self.compile_error is None)

    def problem(self) -> str | None:
        """A one-line description of the first problem, or ``None``."""
        if not self.parsed:
            return f"does not parse: {self.parse_error}"
        if not self.read_only:
            return "not a single read-only SELECT"
        if self.unknown:
            return "unknown " + ", ".join(self.unknown)
        if self.scoping:
            return self.scoping[0]
        if self.compile_error is not None:
            return f"the database cannot compile it: {self.compile_error}"
        return None


def _dialect(schema: Schema) -> str:
    return {"postgresql": "postgres"}.get(schema.dialect, schema.dialect)


def parse_one(sql: str, dialect: str = "sqlite"):
    """The single statement of ``sql`` parsed by sqlglot; raises ``ValueError`` otherwise."""
    import sqlglot
    from sqlglot.errors import SqlglotError

    try:
        trees = [t for t in sqlglot.parse(sql, read=dialect) if t is not None]
    except SqlglotError as exc:
        raise ValueError(str(exc).splitlines()[0]) from None
    if len(trees) != 1:
        raise ValueError(f"expected one statement, found {len(trees)}")
    return trees[0]


def is_read_only(tree) -> bool:
    """Whether a parsed statement is a query (``SELECT``, set operation) with no writing node inside."""
    from sqlglot import exp

    if not isinstance(tree, (exp.Select, exp.Union, exp.Intersect, exp.Except, exp.Subquery)):
        return False
    names = set(_WRITE_NODES)
    return not any(type(node).__name__ in names for node in tree.walk())


def _scope_sources(scope, schema: Schema):
    """Alias/table name (lower) -> ('table', Table) | ('derived', set of output names | None)."""
    from sqlglot import exp

    out = {}
    for name, src in scope.sources.items():
        if isinstance(src, exp.Table):
            out[name.lower()] = ("table", schema.table(src.name))
        else:  # a derived table or CTE: its output column names
            sel = getattr(src, "expression", None)
            names = None
            if isinstance(sel, exp.Select):
                names = {e.alias_or_name.lower() for e in sel.expressions}
                if "*" in names:
                    names = None
            out[name.lower()] = ("derived", names)
    return out


def _has(entry, column: str) -> bool:
    kind, obj = entry
    if kind == "table":
        return obj is not None and obj.column(column) is not None
    return obj is None or column.lower() in obj


def analyze(sql: str, schema: Schema) -> QueryCheck:
    """Parse ``sql`` with sqlglot and check it against ``schema`` (see the module docstring)."""
    from sqlglot import exp
    from sqlglot.optimizer.scope import traverse_scope

    result = QueryCheck(sql)
    try:
        tree = parse_one(sql, _dialect(schema))
    except ValueError as exc:
        result.parse_error = str(exc)
        return result
    result.parsed = True
    result.read_only = is_read_only(tree)
    all_columns = {c.name.lower() for t in schema.tables for c in t.columns}
    for table in tree.find_all(exp.Table):
        if schema.table(table.name) is None:
            result.unknown.append(f"table {table.name!r}")
    try:
        scopes = list(traverse_scope(tree))
    except Exception as exc:  # sqlglot raises OptimizeError and others on odd scopes
        result.scoping.append(f"cannot resolve scopes: {exc}")
        return result
    for scope in scopes:
        chain, s = [], scope
        while s is not None:
            chain.append(_scope_sources(s, schema))
            s = s.parent
        outputs = set()
        if isinstance(scope.expression, exp.Select):
            outputs = {e.alias.lower() for e in scope.expression.expressions if e.alias}
        elif isinstance(scope.expression, (exp.Union, exp.Intersect, exp.Except)):
            first = scope.expression  # a compound's ORDER BY names the first SELECT's output columns
            while isinstance(first, (exp.Union, exp.Intersect, exp.Except)):
                first = first.this
            if isinstance(first, exp.Select):
                outputs = {e.alias_or_name.lower() for e in first.expressions}
        for col in scope.columns:
            name, qual = col.name, col.table
            if name == "*":
                continue
            owner = col.find_ancestor(exp.Select)
            if owner is not None and owner is not scope.expression:
                continue  # a subquery's column, listed again in its parent: checked in its own scope
            quoted = col.this.args.get("quoted", False) if isinstance(col.this, exp.Identifier) else False
            if qual:
                entry = next((srcs[qual.lower()] for srcs in chain if qual.lower() in srcs), None)
                if entry is None:
                    result.scoping.append(f"{qual}.{name}: {qual!r} is no table or alias in scope")
                elif not _has(entry, name):
                    if name.lower() not in all_columns:
                        result.unknown.append(f"column {qual}.{name}")
                    else:
                        result.scoping.append(f"{qual}.{name}: {qual!r} has no column {name!r}")
                continue
            if name.lower() in outputs:
                continue
            found = False
            for srcs in chain:
                owners = [k for k, e in srcs.items() if _has(e, name)]
                if len(owners) > 1 and srcs is chain[0]:
                    result.scoping.append(f"{name}: ambiguous between {', '.join(owners)}")
                if owners:
                    found = True
                    break
            if found:
                continue
            if quoted and not col.table:
                continue  # SQLite reads a double-quoted non-column as a string
            if name.lower() not in all_columns:
                result.unknown.append(f"column {name!r}")
            else:
                result.scoping.append(f"{name}: no table in scope has this column")
    return result
