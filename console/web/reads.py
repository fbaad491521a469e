"""Where a request reads: the pages of figures from the read replica when one is set
(JOBWARDEN_CONSOLE_READ_URL) and usable, everything else from the primary.

Two providers, one per kind of read, so that which server a view reads is in its code:

- `page_reads()` for a page of figures (counts, trends, SLA, search, lists): the standby
  when console/data/replica.py finds it usable, else the primary. In any request but
  GET or HEAD it is the primary, whatever the view: an action, and whatever it renders
  (an error page's navigation), never reads the standby.
- `primary_page()` for a page that decides an action (the figures of a preview, the job
  an action's form names, a stored selection): the primary, and for the rest of the
  request too, so that its navigation's counts come from the same server.

`get_db()` (console/data/database.py) is the primary for actions themselves.

Decided once per request (the view's reads and the navigation's badges read the same
server), and shown on the page: `templates/_read_source.html` says the replica's lag, or
why the primary was read instead; an htmx fragment that read from the replica carries it
out of band, so a polling panel keeps it current.

After an action (any POST), the primary's WAL position is kept in the session: that
user's pages read the standby again only once it has replayed up to it, so a page
opened after an action shows the action.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from flask import Blueprint, Response, current_app, g, render_template, request, session
from sqlalchemy.exc import DBAPIError

from jobwarden.console.core.config import settings
from jobwarden.console.data.database import CQ, ConsoleDatabase, ReadingDatabase, describe, get_db
from jobwarden.console.data.replica import ReplicaDatabase, ReplicaState
from jobwarden.console.web.security import is_htmx

log = logging.getLogger("jobwarden.console")

#: Where the mounted console keeps its standby's engine in `app.extensions`.
REPLICA = "jobwarden_replica"
#: The session's key for the WAL position of the user's last action.
WRITTEN = "jobwarden_written_lsn"
_SOURCE = "jobwarden_read_source"
_LSN = re.compile(r"[0-9A-F]{1,8}/[0-9A-F]{1,8}")
_READS = ("GET", "HEAD")


@dataclass(frozen=True)
class ReadSource:
    """Where this request's pages read, and the replica's state when that is worth
    showing (None: no replica set, an action, or a page that reads the primary)."""

    db: ReadingDatabase
    state: ReplicaState | None


def replica() -> ReplicaDatabase | None:
    """The mounted console's standby, or None when JOBWARDEN_CONSOLE_READ_URL is unset."""
    found: ReplicaDatabase | None = current_app.extensions.get(REPLICA)
    return found


def page_reads() -> ReadingDatabase:
    """Where a page of figures reads: the standby when usable, else the primary."""
    return _source().db


def primary_page() -> ConsoleDatabase:
    """The primary, for a page that decides an action, and for everything else this
    request reads (one page, one server)."""
    if _SOURCE not in g:
        setattr(g, _SOURCE, ReadSource(get_db(), None))
    return get_db()


def read_source() -> ReadSource | None:
    """This request's source when a replica is set and the page read from it, or was
    sent to the primary instead of it: what `_read_source.html` shows."""
    found: ReadSource | None = g.get(_SOURCE)
    return found if found is not None and found.state is not None else None


def _source() -> ReadSource:
    found: ReadSource | None = g.get(_SOURCE)
    if found is None:
        found = _decide()
        setattr(g, _SOURCE, found)
    return found


def _decide() -> ReadSource:
    primary = get_db()
    standby = replica()
    if standby is None or request.method not in _READS:
        # An action reads where it writes: what it finds is what it changes.
        return ReadSource(primary, None)
    state = standby.state(primary, written=_written(),
                          max_lag_s=settings()["READ_MAX_LAG_SECONDS"])
    return ReadSource(standby if state.usable else primary, state)


def _written() -> str | None:
    value = session.get(WRITTEN)
    return value if isinstance(value, str) and _LSN.fullmatch(value) else None


def _after(response: Response) -> Response:
    if replica() is None:
        return response
    if request.method not in _READS:
        if response.status_code < 500:
            _remember_write()
    elif (is_htmx() and read_source() is not None and response.status_code == 200
          and response.mimetype == "text/html"):
        # A polled fragment read the replica again: its lag goes to the page's notice.
        response.set_data(response.get_data() + render_template(
            "jobwarden/_read_source.html", oob=True).encode())
    return response


def _remember_write() -> None:
    """After an action: the primary's WAL position, which this user's next pages must
    show (a POST that wrote nothing costs one short read)."""
    try:
        session[WRITTEN] = get_db().probe(CQ.console_replica_written)["lsn"]
    except DBAPIError as error:
        # The action's answer stands; until a standby is judged again the pages may lag it.
        log.warning("the position of an action was not read: %s", describe(error),
                    extra={"action": "replica_written_unknown"})


def install(bp: Blueprint) -> None:
    """`read_source()` for the templates, and the hook that remembers actions."""
    bp.context_processor(lambda: {"read_source": read_source})
    bp.after_request(_after)
