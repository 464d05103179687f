"""Alembic migrations for the tracker store."""
