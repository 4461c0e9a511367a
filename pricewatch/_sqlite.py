"""SQLite plumbing shared by the components that keep their tables in one file."""

from __future__ import annotations

import sqlite3
import time

__all__ = ["use_wal"]


def use_wal(conn: sqlite3.Connection, timeout: float) -> None:
    """Put the file of ``conn`` in WAL mode, waiting up to ``timeout`` seconds for the
    other connections to the file, as every write of the project does.

    The switch upgrades the pragma's own read transaction to a write one, and SQLite
    answers SQLITE_BUSY to such an upgrade at once, without calling the busy handler (the
    connection's ``timeout``): a file still in rollback mode that another component was
    writing to at that moment (a session, a browser route, a drift alarm: they keep their
    tables in the frontier's file) would fail the open with "database is locked". Called
    on the executor thread that owns the connection, never on the event loop."""
    deadline = time.monotonic() + timeout
    pause = 0.005
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            busy = exc.sqlite_errorcode & 0xFF == sqlite3.SQLITE_BUSY
            if not busy or time.monotonic() >= deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.1)
