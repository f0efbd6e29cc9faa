"""Text-to-SQL over a live database (front-door layer).

:func:`text_to_sql` reads the schema from the database (:mod:`.schema`), builds a grammar whose
identifiers are exactly its tables and columns (:mod:`.grammar`), prompts the model with compact
``CREATE TABLE`` lines (:mod:`.prompt`), checks every query with sqlglot (:mod:`.check`) and runs
it in a read-only sandbox (:mod:`.execute`); with several candidates it chooses by execution
outcome (:mod:`.pipeline`). ``guidewire bench spider`` is :mod:`.bench`.
"""

from .._lazy import lazy_getattr
from .errors import DatabaseError, EmptySchemaError, UnsafeQueryError

_LAZY = {"text_to_sql": ".pipeline", "SQLResult": ".pipeline", "Candidate": ".pipeline", "SQLSession": ".pipeline",
         "read_schema": ".schema", "Schema": ".schema"}

__getattr__ = lazy_getattr(__name__, _LAZY)

__all__ = ["text_to_sql", "SQLResult", "Candidate", "SQLSession", "read_schema", "Schema", "DatabaseError",
           "EmptySchemaError", "UnsafeQueryError"]
