"""The versioned schema migrations of the store, one ``.sql`` file per version under
``pricewatch/storage/migrations/<backend>/NNNN_name.sql``, applied in order and recorded
in the ``store_migrations`` table (its own name, so the store can share one SQLite file
with the frontier)."""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from importlib import resources

_NAME = re.compile(r"(\d{4})_(\w+)\.sql")


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: str


def migrations(backend: str) -> list[Migration]:
    """The migrations of ``backend`` (``sqlite`` or ``postgresql``), oldest first."""
    folder = resources.files("pricewatch.storage") / "migrations" / backend
    found = []
    for item in folder.iterdir():
        match = _NAME.fullmatch(item.name)
        if match:
            found.append(Migration(int(match[1]), match[2], item.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    return found


def sqlite_statements(sql: str) -> list[str]:
    """Split a SQLite script into complete statements (``executescript`` would commit)."""
    statements, buffer = [], ""
    for line in sql.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            if buffer.strip():
                statements.append(buffer.strip())
            buffer = ""
    if buffer.strip() and not all(
        part.strip().startswith("--") or not part.strip() for part in buffer.splitlines()
    ):
        raise ValueError(f"incomplete SQL statement at the end of a migration: {buffer!r}")
    return statements
