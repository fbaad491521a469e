"""The application's first migration: its orders table."""

from alembic import op

revision = "a1b2c3d4e5f6"
down_revision = None


def upgrade() -> None:
    op.execute("CREATE TABLE orders (id serial PRIMARY KEY, email text)")


def downgrade() -> None:
    op.execute("DROP TABLE orders")
