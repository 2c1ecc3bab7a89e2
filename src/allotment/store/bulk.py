"""Writing many new rows of one table at once: a job array's tasks and their first history records, and a batch of
group-committed submissions.

Owns: `bulk_insert`, one executemany INSERT in the caller's transaction; on PostgreSQL, a batch of `COPY_ROWS` rows
or more goes by `COPY … FROM STDIN` through psycopg's copy API instead (10,000 job rows: 1.3 s as an executemany
INSERT, 0.2 s by COPY, on the 2-core development machine; decision 66), with JSON columns serialised as
SQLAlchemy's JSON type does (json.dumps), so a row reads back the same whichever way it was written.

Must not: decide what the rows are (store.jobs does) or commit.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import JSON, Table, insert
from sqlalchemy.orm import Session

COPY_ROWS = 200
"""From this many rows on, PostgreSQL gets them by COPY: below it the executemany INSERT costs little, and COPY's
own round trips are not worth it for the usual group commit of a few submissions."""


def bulk_insert(session: Session, table: Table, rows: Sequence[Mapping[str, Any]]) -> None:
    """Insert `rows` (keyed by column name, every row with the same keys) into `table`, in the session's transaction
    (which it flushes first, so the rows follow what the session holds)."""
    if not rows:
        return
    session.flush()
    connection = session.connection()
    if connection.dialect.name != "postgresql" or len(rows) < COPY_ROWS:
        session.execute(insert(table), list(rows))
        return
    names = list(rows[0])
    as_json = {column.name for column in table.columns if isinstance(column.type, JSON)}
    quote = connection.dialect.identifier_preparer
    statement = f"COPY {quote.format_table(table)} ({', '.join(quote.quote(n) for n in names)}) FROM STDIN"
    driver: Any = connection.connection.driver_connection  # the psycopg connection inside this transaction
    with driver.cursor() as cursor, cursor.copy(statement) as copy:
        for row in rows:
            copy.write_row([json.dumps(row[n]) if n in as_json else row[n] for n in names])
