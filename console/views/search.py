"""Search: a job by id, idempotency key, payload value or error text (console/data/search.py).

A payload value or an error text is searched in one window of the newest jobs; the page
names the ids it searched and links to the window before them, so the time of a search
stays the same however many jobs the table holds.
"""

from __future__ import annotations

from flask import Blueprint, render_template, request, url_for
from flask.typing import ResponseReturnValue

from jobwarden.console.core.config import settings
from jobwarden.console.data import search
from jobwarden.console.data.queries import positive_int
from jobwarden.console.web.reads import page_reads

bp = Blueprint("search", __name__)


@bp.get("/search")
def index() -> ResponseReturnValue:
    """The search box, and what it found (a 400 naming the problem for unreadable input)."""
    cfg = settings()
    text = request.args.get("q")
    if text is None or not text.strip():
        return render_template("jobwarden/search.html", q="", results=None, problem=None,
                               window=cfg["SEARCH_WINDOW"])
    try:
        wanted = search.parse(text)
        before, floor = (_position(request.args.get(name), name) for name in ("before", "floor"))
    except search.SearchError as problem:
        return render_template("jobwarden/search.html", q=text[:search.SEARCH_MAX],
                               results=None, problem=str(problem),
                               window=cfg["SEARCH_WINDOW"]), 400
    try:
        with page_reads().reading() as reader:
            results = search.run(reader, wanted, window=cfg["SEARCH_WINDOW"],
                                 limit=cfg["PAGE_SIZE"], before=before, floor=floor,
                                 time_limit=cfg["SEARCH_SECONDS"])
    except search.SearchTooSlow as problem:
        return render_template("jobwarden/search.html", q=text.strip(), results=None,
                               problem=str(problem), window=cfg["SEARCH_WINDOW"]), 503

    def link(before_id: int | None, floor_id: int | None = None) -> str:
        return url_for("jobwarden.search.index", q=text.strip(), before=before_id,
                       floor=floor_id)

    return render_template("jobwarden/search.html", q=text.strip(), results=results,
                           problem=None, window=cfg["SEARCH_WINDOW"], link=link)


def _position(value: str | None, name: str) -> int | None:
    """A paging position from the URL: absent, or a job id (anything else is refused)."""
    if value is None or value == "":
        return None
    number = positive_int(value)
    if number is None:
        raise search.SearchError(f"The page position {name}={value[:30]!r} is not a job id: "
                                 "start the search again.")
    return number
