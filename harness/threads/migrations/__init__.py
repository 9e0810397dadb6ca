"""Alembic migrations of the thread store (`harness.threads.migrate` applies them at start)."""
