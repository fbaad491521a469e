"""The console's page areas, one small module and blueprint per area.

jobwarden.console.mount nests them all in the `jobwarden` blueprint, so their endpoints read
`jobwarden.<area>.<view>` wherever the console is mounted. `AREAS` is also the
navigation: templates/base.html renders a link for each area that has a label, in this
order, to users whose role reaches the area's.
"""

from __future__ import annotations

from dataclasses import dataclass

from flask import Blueprint

from jobwarden.console.core.config import mounted
from jobwarden.console.views import (
    actions,
    alerts,
    audit,
    batches,
    bulk,
    failed,
    flows,
    jobs,
    metrics,
    notifications,
    overview,
    queues,
    review,
    schedules,
    search,
    sla,
    users,
    workers,
)
from jobwarden.console.web import auth
from jobwarden.console.web.identity import current_user
from jobwarden.worker.core.version import version


@dataclass(frozen=True)
class Area:
    """A page area: its blueprint and, when the navigation links to it, the link's
    endpoint and label, the least role that sees it, and the key of its count badge
    (overview.nav_badges)."""

    bp: Blueprint
    endpoint: str | None = None
    label: str | None = None
    role: str = "viewer"
    badge: str | None = None
    #: Shown only when the console signs users in itself (a host manages its own users).
    own_login_only: bool = False


AREAS = (
    Area(overview.bp, "jobwarden.overview.index", "Overview"),
    Area(failed.bp, "jobwarden.failed.index", "Failed", badge="failed"),
    Area(jobs.bp, "jobwarden.jobs.index", "Jobs"),
    Area(batches.bp, "jobwarden.batches.index", "Batches"),
    Area(search.bp, "jobwarden.search.index", "Search"),
    Area(queues.bp, "jobwarden.queues.index", "Queues"),
    Area(schedules.bp, "jobwarden.schedules.index", "Schedules"),
    Area(review.bp, "jobwarden.review.index", "Needs review", badge="review"),
    Area(workers.bp, "jobwarden.workers.index", "Workers"),
    Area(sla.bp, "jobwarden.sla.index", "SLA", badge="sla"),
    Area(audit.bp, "jobwarden.audit.index", "Audit log"),
    Area(users.bp, "jobwarden.users.index", "Users", role="admin", own_login_only=True),
    Area(notifications.bp, "jobwarden.notifications.index", "Notifications", role="admin"),
    # No link of their own: sign-in, actions posted from other pages, fragments, /metrics,
    # a flow (reached from its jobs' pages).
    Area(auth.bp), Area(alerts.bp), Area(actions.bp), Area(metrics.bp), Area(bulk.bp),
    Area(flows.bp),
)


def navigation() -> list[Area]:
    """The areas the signed-in user's navigation links to."""
    own_login = mounted().own_login
    return [a for a in AREAS if a.endpoint and current_user.has_role(a.role)
            and (own_login or not a.own_login_only)]


def install(parent: Blueprint) -> None:
    """`navigation()` (base.html) and the jobs lists' bulk actions for the console's templates."""
    parent.context_processor(lambda: {"navigation": navigation,
                                      "list_actions": bulk.LIST_ACTIONS,
                                      "jobwarden_version": version()})
