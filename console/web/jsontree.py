"""A JSON value as a collapsible tree of <details> (no script): the job page's payload,
checkpoint and result.

Only the sanitized value is drawn (jobwarden.worker.core.sanitize.sanitize_payload:
secret keys' values and secret-looking strings redacted, depth capped), and every key and
string goes through the console's output filter (redact_output: redaction again, control
and bidi characters shown as escapes) before it is escaped as HTML here. The tree draws at
most MAX_NODES values and MAX_DEPTH levels, so a hostile payload (a million keys, a
thousand levels) costs a bounded page; what is left out is counted, and the whole value
is still there as JSON beside it.
"""

from __future__ import annotations

from typing import Any

from markupsafe import Markup, escape

from jobwarden.console.web.formatting import redact_output
from jobwarden.worker.core.sanitize import sanitize_payload

#: Values drawn per tree; the rest are counted in one line.
MAX_NODES = 2000
#: Levels drawn; deeper containers are summarised ("{3 keys}") without their contents.
MAX_DEPTH = 32
#: Levels open when the page loads; deeper ones open on a click.
OPEN_DEPTH = 2
#: Characters of one string shown; the JSON beside the tree has the rest.
MAX_STRING = 2000


def json_tree(value: Any) -> Markup:
    """The sanitized `value` as nested <details>/<ul>, escaped."""
    budget = [MAX_NODES]
    return Markup('<div class="json-tree">{}</div>').format(
        _node(None, sanitize_payload(value), 0, budget))


def _text(value: str) -> Markup:
    return escape(redact_output(value))


def _scalar(value: Any) -> Markup:
    if isinstance(value, str):
        shown = value if len(value) <= MAX_STRING else value[:MAX_STRING] + "…"
        return Markup('<span class="json-string">"{}"</span>').format(_text(shown))
    if value is None:
        return Markup('<span class="json-null">null</span>')
    if isinstance(value, bool):
        return Markup('<span class="json-bool">{}</span>').format("true" if value else "false")
    return Markup('<span class="json-number">{}</span>').format(_text(str(value)))


def _size(value: dict[Any, Any] | list[Any]) -> str:
    n = len(value)
    if isinstance(value, dict):
        return f"{{{n} key{'' if n == 1 else 's'}}}"
    return f"[{n} item{'' if n == 1 else 's'}]"


def _node(key: Any, value: Any, depth: int, budget: list[int]) -> Markup:
    """One value (with its key, if it has one) as a list item's contents."""
    budget[0] -= 1
    label = Markup("") if key is None else Markup(
        '<span class="json-key">{}</span>: ').format(_text(str(key)))
    if not isinstance(value, dict | list):
        return label + _scalar(value)
    size = _size(value)
    if not value or depth >= MAX_DEPTH:
        return label + Markup('<span class="json-size">{}</span>').format(size)
    items = list(value.items()) if isinstance(value, dict) else list(enumerate(value))
    rows: list[Markup] = []
    for i, (k, v) in enumerate(items):
        if budget[0] <= 0:
            rows.append(Markup('<li class="json-more">… {} more not drawn: see the JSON</li>')
                        .format(len(items) - i))
            break
        rows.append(Markup("<li>{}</li>").format(_node(k, v, depth + 1, budget)))
    opened = " open" if depth < OPEN_DEPTH else ""
    return Markup('<details{}><summary>{}<span class="json-size">{}</span></summary>'
                  '<ul>{}</ul></details>').format(Markup(opened), label, size,
                                                  Markup("").join(rows))
