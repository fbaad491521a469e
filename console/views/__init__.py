"""The console's blueprints, one small module per area."""

from flask import Flask


def register_blueprints(app: Flask) -> None:
    from console import auth
    from console.views import (
        actions,
        audit,
        bulk,
        failed,
        jobs,
        metrics,
        overview,
        queues,
        review,
        sla,
        users,
        workers,
    )

    for module in (auth, overview, jobs, queues, actions, failed, review, workers, sla, audit,
                   users, metrics, bulk):
        app.register_blueprint(module.bp)
