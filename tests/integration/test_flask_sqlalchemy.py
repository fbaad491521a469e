"""enqueue(db.session, ...) in a Flask-SQLAlchemy 3 app: the job and the request's business
writes commit together and roll back together, on a real PostgreSQL."""

from __future__ import annotations

import pytest
from flask import Flask, abort, jsonify
from flask_sqlalchemy import SQLAlchemy
from sqlalchemy import Integer, String
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from jobwarden import enqueue
from jobwarden.worker.store.db import sqlalchemy_url
from tests.helpers import job_row, scalar


class Base(DeclarativeBase):
    pass


db = SQLAlchemy(model_class=Base)


class Order(db.Model):
    __tablename__ = "fsa_orders"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    email: Mapped[str] = mapped_column(String(200))


def create_app(url: str) -> Flask:
    """The app factory pattern: the extension is created once, bound per app."""
    app = Flask(__name__)
    app.config["SQLALCHEMY_DATABASE_URI"] = sqlalchemy_url(url)
    db.init_app(app)

    @app.post("/orders/<email>")
    def place_order(email):
        order = Order(email=email)
        db.session.add(order)
        db.session.flush()  # the order's id, for the payload
        job_id = enqueue(db.session, "send_receipt", {"order": order.id},
                         idempotency_key=f"receipt:order:{order.id}")
        # Nothing is visible to anyone else before the request's commit.
        seen_outside = scalar(url, "SELECT count(*) FROM background_jobs")
        if email.startswith("fail"):
            abort(500)  # an error after the writes: the request's session never commits
        if email.startswith("rollback"):
            db.session.rollback()
            return jsonify(rolled_back=True)
        db.session.commit()
        return jsonify(order=order.id, job=job_id, seen_outside=seen_outside)

    return app


@pytest.fixture
def fsa_app(clean_db):
    app = create_app(clean_db)
    with app.app_context():
        db.create_all()
    yield app
    with app.app_context():
        db.drop_all()
        db.engine.dispose()


def test_enqueue_commits_with_the_requests_business_writes(fsa_app, clean_db):
    answer = fsa_app.test_client().post("/orders/ann@example.com").get_json()

    assert answer["seen_outside"] == 0
    job = job_row(clean_db, answer["job"])
    assert (job["type"], job["payload"], job["status"]) == (
        "send_receipt", {"order": answer["order"]}, "pending")
    assert scalar(clean_db, "SELECT email FROM fsa_orders WHERE id = %s",
                  [answer["order"]]) == "ann@example.com"


@pytest.mark.parametrize("email", ["fail@example.com", "rollback@example.com"])
def test_a_failed_or_rolled_back_request_leaves_neither_order_nor_job(fsa_app, clean_db, email):
    response = fsa_app.test_client().post(f"/orders/{email}")

    assert response.status_code == (500 if email.startswith("fail") else 200)
    assert scalar(clean_db, "SELECT count(*) FROM fsa_orders") == 0
    assert scalar(clean_db, "SELECT count(*) FROM background_jobs") == 0


def test_each_request_gets_its_own_scoped_session(fsa_app, clean_db):
    client = fsa_app.test_client()
    first = client.post("/orders/a@example.com").get_json()
    client.post("/orders/fail@example.com")
    second = client.post("/orders/b@example.com").get_json()

    assert second["order"] != first["order"]
    assert scalar(clean_db, "SELECT count(*) FROM fsa_orders") == 2
    assert scalar(clean_db, "SELECT array_agg(payload->>'order' ORDER BY id) "
                  "FROM background_jobs") == [str(first["order"]), str(second["order"])]
