"""diagnoses: run events carry a diagnosis code and a key that makes them idempotent

Revision ID: 0008_diagnoses
Revises: 0007_run_logs
Create Date: 2026-12-10 05:30:00.000000

A diagnosis (``kind = 'diagnosis'``) is recorded once per run and ``dedupe_key`` (its code
and metric, ``nonfinite:loss``): the unique index makes re-running the doctor -- in several
housekeeping processes at once -- update the row instead of adding another. Other events
leave both columns NULL, which a unique index never compares. ``code`` lets the run search
(``diagnosis == "memory_growth"``) match without parsing the key.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008_diagnoses"
down_revision: str | None = "0007_run_logs"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("run_events", schema=None) as batch_op:
        batch_op.add_column(sa.Column("code", sa.String(length=40), nullable=True))
        batch_op.add_column(sa.Column("dedupe_key", sa.String(length=300), nullable=True))
        batch_op.create_index("uq_run_events_run_dedupe_key", ["run_id", "dedupe_key"], unique=True)
        batch_op.create_index("ix_run_events_code", ["code"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("run_events", schema=None) as batch_op:
        batch_op.drop_index("ix_run_events_code")
        batch_op.drop_index("uq_run_events_run_dedupe_key")
        batch_op.drop_column("dedupe_key")
        batch_op.drop_column("code")
