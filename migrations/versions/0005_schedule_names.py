"""schedule names: unique

Revision ID: 0005_schedule_names
Revises: 0004_auth
Create Date: 2026-12-01 05:30:00.000000

A schedule's name tells it apart in ``tracker schedule ls`` and on the dashboard, so two
schedules may no longer share one. Databases that already hold duplicates keep the oldest
schedule's name; each later one gets `` (schedule <id>)`` appended (cut to the 200-character
limit), so the upgrade never fails on existing data and never loses a schedule.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005_schedule_names"
down_revision: str | None = "0004_auth"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_schedules = sa.table("schedules", sa.column("id", sa.Integer), sa.column("name", sa.String))


def _rename_duplicates() -> None:
    conn = op.get_bind()
    seen: set[str] = set()
    rows = conn.execute(
        sa.select(_schedules.c.id, _schedules.c.name).order_by(_schedules.c.id)
    ).all()
    taken = {name for _, name in rows}
    for schedule_id, name in rows:
        if name not in seen:
            seen.add(name)
            continue
        suffix = f" (schedule {schedule_id})"
        new = name[: 200 - len(suffix)] + suffix
        while new in taken:  # a name someone already gave that exact form
            suffix = f" ({suffix.strip()[1:-1]}+)"
            new = name[: 200 - len(suffix)] + suffix
        taken.add(new)
        seen.add(new)
        conn.execute(sa.update(_schedules).where(_schedules.c.id == schedule_id).values(name=new))


def upgrade() -> None:
    _rename_duplicates()
    with op.batch_alter_table("schedules", schema=None) as batch_op:
        batch_op.create_unique_constraint(batch_op.f("uq_schedules_name"), ["name"])


def downgrade() -> None:
    with op.batch_alter_table("schedules", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("uq_schedules_name"), type_="unique")
