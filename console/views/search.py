"""Search: a job by id, idempotency key, payload value or error text (console/data/search.py).

A payload value or an error text is searched in one window of the newest jobs (of a range
of creation times, when given); the page names the ids it searched and links to the
window before them, so the time of a search stays the same however many jobs the table
holds.
"""

from __future__ import annotations

from datetime import datetime
from functools import partial

from flask import Blueprint, render_template, request, url_for
from flask.typing import ResponseReturnValue

from jobwarden.console.core.config import settings
from jobwarden.console.data import find, search, suggest
from jobwarden.console.data.queries import positive_int
from jobwarden.console.web.reads import page_reads

bp = Blueprint("search", __name__)


@bp.get("/search")
def index() -> ResponseReturnValue:
    """The search box, and what it found (a 400 naming the problem for unreadable input)."""
    cfg = settings()
    text = request.args.get("q")
    page = partial(render_template, "jobwarden/search.html", window=cfg["SEARCH_WINDOW"],
                   created=find.Created(),
                   suggestions=suggest.read(page_reads(), suggest.search_box) or [])
    if text is None or not text.strip():
        return page(q="", results=None, problem=None)
    try:
        wanted = search.parse(text)
        before, floor = (_position(request.args.get(name), name) for name in ("before", "floor"))
        created = find.Created(
            find.moment(request.args.get("created_from"), "the range's start"),
            find.moment(request.args.get("created_to"), "the range's end"))
    except (search.SearchError, find.BadTime) as problem:
        return page(q=text[:search.SEARCH_MAX], results=None, problem=str(problem)), 400
    try:
        with page_reads().reading() as reader:
            results = search.run(reader, wanted, window=cfg["SEARCH_WINDOW"],
                                 limit=cfg["PAGE_SIZE"], before=before, floor=floor,
                                 time_limit=cfg["SEARCH_SECONDS"], created=created)
    except search.SearchTooSlow as problem:
        return page(q=text.strip(), results=None, problem=str(problem), created=created), 503

    def link(before_id: int | None, floor_id: int | None = None) -> str:
        return url_for("jobwarden.search.index", q=text.strip(), before=before_id,
                       floor=floor_id, created_from=_iso(created.start),
                       created_to=_iso(created.end))

    return page(q=text.strip(), results=results, problem=None, link=link, created=created)


def _iso(at: datetime | None) -> str | None:
    return None if at is None else at.isoformat()


def _position(value: str | None, name: str) -> int | None:
    """A paging position from the URL: absent, or a job id (anything else is refused)."""
    if value is None or value == "":
        return None
    number = positive_int(value)
    if number is None:
        raise search.SearchError(f"The page position {name}={value[:30]!r} is not a job id: "
                                 "start the search again.")
    return number
