"""The query index's file holds the toolkit's own schema, nothing else.

results/.index.sqlite lies in a results folder that may be someone else's (`report --results DIR`,
`compare --against DIR`): a trigger or view planted in it runs inside the toolkit's own statements, and
SQLite gives no Python signal handler a chance to run while a statement steps, so a trigger that recurses
without end (`WITH RECURSIVE` in an AFTER INSERT trigger) held `toolkit report` for ever, Ctrl-C and
SIGTERM included. An index file is used only while its schema is exactly the one `_TABLES` makes
(`sound`); any other object (a trigger, a view, a table, an index of its own) makes it a file to
rebuild (`drop_all`), as an index of an older fingerprint is.
"""

from __future__ import annotations

import functools
import sqlite3

_MASTER = "SELECT type, name, tbl_name, sql FROM sqlite_master"


@functools.cache
def own_schema(tables: str) -> frozenset[tuple]:
    """sqlite_master's rows (type, name, table name, sql) of a fresh database made by the script `tables`."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.executescript(tables)
        return frozenset(conn.execute(_MASTER).fetchall())
    finally:
        conn.close()


def sound(conn: sqlite3.Connection, tables: str) -> bool:
    """Whether the database of `conn` holds exactly the schema `tables` makes (False for a new file,
    too). Reads sqlite_master only: no statement of the file's own runs."""
    return frozenset(conn.execute(_MASTER).fetchall()) == own_schema(tables)


def drop_all(conn: sqlite3.Connection) -> None:
    """Drop every trigger, view, index and table of the file (triggers first: none fires while the
    tables go), inside the caller's transaction."""
    rows = conn.execute("SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\'")
    objects = rows.fetchall()
    for kind in ("trigger", "view", "index", "table"):
        for t, name in objects:
            if t == kind:
                quoted = name.replace('"', '""')
                conn.execute(f'DROP {kind.upper()} IF EXISTS "{quoted}"')
