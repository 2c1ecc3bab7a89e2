"""Tests of allotment.store on SQLite and PostgreSQL."""
