"""artifacts.token_id: the stored token an artifact was uploaded with (per-token quota)

Revision ID: 0017_artifact_token
Revises: 0016_job_fail_on
Create Date: 2026-12-06 10:00:00.000000

``tracker ui --max-token-artifact-bytes`` caps what the uploads of one stored token may hold
across every run, so a ``log`` token cannot fill the disk by spreading files over many runs
(the per-run quota alone does not stop that). Each artifact row now says which stored token
(``tokens.id``) wrote it; NULL for a write made without one (the configured token, a
loopback dashboard without authentication, a training script writing to the store itself),
which no token's quota counts. Tokens are revoked, never deleted, so the id stays meaningful.
Artifacts stored before this revision have NULL.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017_artifact_token"
down_revision: str | None = "0016_job_fail_on"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("artifacts", schema=None) as batch_op:
        batch_op.add_column(sa.Column("token_id", sa.Integer(), nullable=True))
        batch_op.create_index("ix_artifacts_token_id", ["token_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("artifacts", schema=None) as batch_op:
        batch_op.drop_index("ix_artifacts_token_id")
        batch_op.drop_column("token_id")
