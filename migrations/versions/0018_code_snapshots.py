"""snapshots, snapshot_files, jobs.snapshot_id: the code a job runs

Revision ID: 0018_code_snapshots
Revises: 0017_artifact_token
Create Date: 2026-12-05 02:00:00.000000

``tracker submit`` records the files of the project it submits from (a git work tree's
tracked and untracked-but-not-ignored files, with the commit and the uncommitted diff; else
the directory's files, ``.gitignore`` respected) as a snapshot: one ``snapshots`` row per
distinct tree (``digest``), one ``snapshot_files`` row per file whose bytes are a blob of the
artifact root (content-addressed, so a second submission of the same tree stores nothing
new). A worker or dispatcher writes the snapshot into a fresh directory per attempt and runs
the job there. Jobs stored before this revision, and ``--no-snapshot`` jobs, have NULL and
run from the worker's file system as before.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018_code_snapshots"
down_revision: str | None = "0017_artifact_token"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "snapshots",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("files", sa.Integer(), nullable=False),
        sa.Column("bytes", sa.BigInteger(), nullable=False),
        sa.Column("git_commit", sa.String(length=64), nullable=True),
        sa.Column("git_diff", sa.Text(), nullable=True),
        sa.Column("root_name", sa.String(length=255), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_snapshots")),
        sa.UniqueConstraint("digest", name=op.f("uq_snapshots_digest")),
    )
    op.create_table(
        "snapshot_files",
        sa.Column("snapshot_id", sa.Integer(), nullable=False),
        sa.Column("path", sa.String(length=1024), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("executable", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(
            ["snapshot_id"],
            ["snapshots.id"],
            name=op.f("fk_snapshot_files_snapshot_id_snapshots"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("snapshot_id", "path", name=op.f("pk_snapshot_files")),
    )
    op.create_index("ix_snapshot_files_sha256", "snapshot_files", ["sha256"], unique=False)
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("snapshot_id", sa.Integer(), nullable=True))
        batch_op.create_index("ix_jobs_snapshot_id", ["snapshot_id"], unique=False)
        batch_op.create_foreign_key(
            "fk_jobs_snapshot_id_snapshots",
            "snapshots",
            ["snapshot_id"],
            ["id"],
            ondelete="RESTRICT",
        )


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_constraint("fk_jobs_snapshot_id_snapshots", type_="foreignkey")
        batch_op.drop_index("ix_jobs_snapshot_id")
        batch_op.drop_column("snapshot_id")
    op.drop_index("ix_snapshot_files_sha256", table_name="snapshot_files")
    op.drop_table("snapshot_files")
    op.drop_table("snapshots")
