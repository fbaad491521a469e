"""The storefront: place an order, see what happened to it."""

from __future__ import annotations

import secrets

from flask import Blueprint, abort, redirect, render_template, url_for
from flask_wtf import FlaskForm
from sqlalchemy.exc import IntegrityError
from wtforms import EmailField, HiddenField, SelectField
from wtforms.validators import DataRequired, Length, Regexp

from jobwarden import JobSpec, enqueue_many
from shop.jobs import Charge, OrderRef
from shop.models import FakeCrmContact, Order, OutboxEmail, db

bp = Blueprint("store", __name__)

#: What the shop sells, in cents.
CATALOGUE = {"teapot": 2450, "mug": 900, "kettle": 5900}


class OrderForm(FlaskForm):
    email = EmailField("Email", validators=[DataRequired(), Length(max=200),
                                            Regexp(r"^[^@\s]+@[^@\s]+$", message="an email")])
    item = SelectField("Item", choices=list(CATALOGUE))
    checkout_token = HiddenField(validators=[DataRequired(), Length(max=64)])


@bp.get("/")
def index():
    form = OrderForm(formdata=None, checkout_token=secrets.token_urlsafe(24))
    return render_template("shop/index.html", form=form, catalogue=CATALOGUE)


@bp.post("/orders")
def place_order():
    form = OrderForm()
    if not form.validate():
        return render_template("shop/index.html", form=form, catalogue=CATALOGUE), 400
    order = Order(checkout_token=form.checkout_token.data, email=form.email.data,
                  item=form.item.data, amount_cents=CATALOGUE[form.item.data])
    db.session.add(order)
    try:
        db.session.flush()  # the order's id, for the jobs
    except IntegrityError:  # the same checkout submitted twice: show the first order
        db.session.rollback()
        order = db.session.execute(db.select(Order).filter_by(
            checkout_token=form.checkout_token.data)).scalar_one()
        return redirect(url_for("store.order", order_id=order.id), code=303)
    # The jobs are written through the request's own session: they commit with the order
    # below, and a failure before the commit leaves neither.
    ref = OrderRef(order_id=order.id)
    enqueue_many(db.session, [
        JobSpec("send_confirmation", ref.model_dump(),
                idempotency_key=f"shop:order:{order.id}:confirmation"),
        JobSpec("charge_card", Charge(order_id=order.id, amount_cents=order.amount_cents)
                .model_dump(), idempotency_key=f"shop:order:{order.id}:charge"),
        JobSpec("sync_crm", ref.model_dump(), idempotency_key=f"shop:order:{order.id}:crm"),
    ])
    db.session.commit()
    return redirect(url_for("store.order", order_id=order.id), code=303)


@bp.get("/orders/<int:order_id>")
def order(order_id: int):
    found = db.session.get(Order, order_id) or abort(404)
    facts = {
        "confirmation email sent": db.session.execute(db.select(OutboxEmail.id).filter_by(
            order_id=order_id, kind="confirmation")).first() is not None,
        "card charged": found.status == "paid",
        "customer in the CRM": db.session.execute(db.select(FakeCrmContact.id).filter_by(
            order_id=order_id)).first() is not None,
    }
    return render_template("shop/order.html", order=found, facts=facts,
                           done=all(facts.values()))
