"""runs.notes, runs.starred: a run's notes and star, edited in the dashboard and the CLI

Revision ID: 0020_run_annotations
Revises: 0019_job_tokens
Create Date: 2026-12-05 04:10:00.000000

``runs.notes``: free text (Markdown shown as text) that a person writes about a run; NULL
when none. The MLflow-compatible API reads and writes it as the tag ``mlflow.note.content``
(what the MLflow UI calls a run's description), so both sides see one note.

A note an MLflow client set before this revision sits in the run's config (MLflow's own tags,
``_mlflow_tags``): the upgrade moves it into ``runs.notes``; the downgrade moves notes back
there, so no note is lost either way (stars are).

``runs.starred``: a person's mark on a run worth keeping an eye on; false for every run
already stored. Indexed: ``starred`` in the query language and the runs table's star filter
pick the few starred runs out of thousands.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0020_run_annotations"
down_revision: str | None = "0019_job_tokens"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


NOTE_TAG = "mlflow.note.content"
SYSTEM_TAGS_KEY = "_mlflow_tags"
_JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
_runs = sa.table(
    "runs",
    sa.column("id", sa.Integer()),
    sa.column("config", _JSON),
    sa.column("notes", sa.Text()),
)


def _config(raw: Any) -> dict[str, Any]:
    return json.loads(raw) if isinstance(raw, str) else dict(raw or {})


def _move_notes(to_column: bool) -> None:
    """MLflow notes kept in the config -> runs.notes (``to_column``), or back."""
    conn = op.get_bind()
    if to_column:  # a cheap text pre-filter; the JSON decides
        where = sa.cast(_runs.c.config, sa.Text).like(f"%{NOTE_TAG}%")
    else:
        where = _runs.c.notes.is_not(None)
    rows = conn.execute(sa.select(_runs.c.id, _runs.c.config, _runs.c.notes).where(where)).all()
    for run_id, raw, notes in rows:
        config = _config(raw)
        system = dict(config.get(SYSTEM_TAGS_KEY) or {})
        if to_column:
            if NOTE_TAG not in system:
                continue
            notes = str(system.pop(NOTE_TAG))
        else:
            system[NOTE_TAG] = notes
            notes = None
        if system:
            config[SYSTEM_TAGS_KEY] = system
        else:
            config.pop(SYSTEM_TAGS_KEY, None)
        conn.execute(
            sa.update(_runs).where(_runs.c.id == run_id).values(config=config, notes=notes)
        )


def upgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("notes", sa.Text(), nullable=True))
        batch_op.add_column(
            sa.Column("starred", sa.Boolean(), nullable=False, server_default=sa.false())
        )
        batch_op.create_index("ix_runs_starred", ["starred"], unique=False)
    _move_notes(to_column=True)


def downgrade() -> None:
    _move_notes(to_column=False)
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_index("ix_runs_starred")
        batch_op.drop_column("starred")
        batch_op.drop_column("notes")
