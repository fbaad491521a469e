"""The shop's tables (Flask-SQLAlchemy), in the same database as Jobwarden's.

One database is what lets an order and its jobs commit in one transaction. The
constraints are business invariants the database keeps, whatever a job or a retry does.
"""

from __future__ import annotations

from datetime import datetime

from flask_login import UserMixin
from flask_sqlalchemy import SQLAlchemy
from sqlalchemy import CheckConstraint, DateTime, ForeignKey, String, UniqueConstraint, func
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    pass


db = SQLAlchemy(model_class=Base)


class Order(db.Model):
    __tablename__ = "shop_orders"
    __table_args__ = (
        CheckConstraint("amount_cents > 0", name="shop_orders_amount_positive"),
        CheckConstraint("status IN ('placed', 'paid')", name="shop_orders_status"),
        # A paid order always names its charge: a job cannot half-record a payment.
        CheckConstraint("(status = 'paid') = (charge_id IS NOT NULL)", name="shop_orders_paid"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    # The checkout form's one-time token: a double-submitted form places one order.
    checkout_token: Mapped[str] = mapped_column(String(64), unique=True)
    email: Mapped[str] = mapped_column(String(200))
    item: Mapped[str] = mapped_column(String(100))
    amount_cents: Mapped[int]
    status: Mapped[str] = mapped_column(String(20), default="placed")
    charge_id: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class OutboxEmail(db.Model):
    """Mail the shop has sent (the example's mailer writes here instead of SMTP)."""

    __tablename__ = "shop_outbox"
    __table_args__ = (UniqueConstraint("order_id", "kind", name="shop_outbox_once"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    order_id: Mapped[int] = mapped_column(ForeignKey("shop_orders.id"))
    kind: Mapped[str] = mapped_column(String(40))
    recipient: Mapped[str] = mapped_column(String(200))
    subject: Mapped[str] = mapped_column(String(200))
    sent_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class Staff(UserMixin, db.Model):
    """The shop's back-office accounts; `console_role` is their role in the jobs console."""

    __tablename__ = "shop_staff"
    __table_args__ = (CheckConstraint("console_role IN ('viewer', 'operator', 'admin')",
                                      name="shop_staff_console_role"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    username: Mapped[str] = mapped_column(String(100), unique=True)
    password_hash: Mapped[str] = mapped_column(String(300))
    console_role: Mapped[str] = mapped_column(String(20), default="viewer")


# -- the fake providers' own state (a real shop would not have these tables) ---------------

class FakeCharge(db.Model):
    """The fake payment provider's charges, one per Idempotency-Key."""

    __tablename__ = "fake_payment_charges"

    idempotency_key: Mapped[str] = mapped_column(String(200), primary_key=True)
    charge_id: Mapped[str] = mapped_column(String(64), unique=True)
    amount_cents: Mapped[int]
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class FakeCrmContact(db.Model):
    """The fake CRM's contacts. It has no idempotency: a repeated call adds a duplicate."""

    __tablename__ = "fake_crm_contacts"

    id: Mapped[int] = mapped_column(primary_key=True)
    email: Mapped[str] = mapped_column(String(200))
    order_id: Mapped[int]
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class FakeCrmSwitch(db.Model):
    """One row: whether the fake CRM is down (the admin page breaks and fixes it)."""

    __tablename__ = "fake_crm_switch"

    id: Mapped[int] = mapped_column(primary_key=True)
    broken: Mapped[bool] = mapped_column(default=False)
