"""The store: Allotment's state in SQLite (embedded default) or PostgreSQL, through SQLAlchemy 2.0 and
Alembic.

Owns: the schema (tables), engines and sessions (db), migrations (migrate, migrations/), and the
repository functions later layers call with a Session: seeding the fleet and budgets (fleet), ledger
posting, periods, balances, run metering, refunds, burn and usage (accounts, metering), the audit log, job
transitions and engine key/values (records).

Must not: decide anything about scheduling, or import allotment.engine and the layers above it. Accounting
rules come from allotment.ledger; the store only persists them, exactly once.
"""
