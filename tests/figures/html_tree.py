"""A rendered page as a tree of elements, to read figures by `data-testid` and row attributes.

The standard library's HTMLParser is enough: the console's templates are well formed, and a
test that reads a cell by its attribute breaks loudly (no element, or several) rather than
matching the wrong text the way a regular expression over the page can.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
        "track", "wbr"}


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    children: list[Element | str] = field(default_factory=list)

    def __getitem__(self, name: str) -> str:
        return self.attrs[name]

    def text(self) -> str:
        """The element's text with its whitespace collapsed, as a reader sees it."""
        return " ".join("".join(self._texts()).split())

    def _texts(self) -> Iterator[str]:
        for child in self.children:
            yield from (child,) if isinstance(child, str) else child._texts()

    def walk(self) -> Iterator[Element]:
        for child in self.children:
            if isinstance(child, Element):
                yield child
                yield from child.walk()

    def all(self, match: Callable[[Element], bool] | str) -> list[Element]:
        """Descendants matching a predicate, or carrying this `data-testid`."""
        if isinstance(match, str):
            testid = match
            match = lambda e: e.attrs.get("data-testid") == testid  # noqa: E731
        return [e for e in self.walk() if match(e)]

    def one(self, match: Callable[[Element], bool] | str) -> Element:
        """The only descendant matching; fails the test when there are none or several."""
        found = self.all(match)
        assert len(found) == 1, f"{len(found)} elements match {match!r}"
        return found[0]

    def maybe(self, match: Callable[[Element], bool] | str) -> Element | None:
        found = self.all(match)
        assert len(found) <= 1, f"{len(found)} elements match {match!r}"
        return found[0] if found else None

    def having(self, attr: str) -> list[Element]:
        """Descendants that carry the attribute `attr` (rows: `data-job-id`, ...)."""
        return self.all(lambda e: attr in e.attrs)

    def time(self) -> str | None:
        """The machine-readable instant of the <time> inside, if any."""
        found = self.all(lambda e: e.tag == "time")
        return found[0]["datetime"] if found else None


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("root", {})
        self.stack = [self.root]

    def handle_starttag(self, tag, attrs):
        element = Element(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(element)
        if tag not in VOID:
            self.stack.append(element)

    def handle_startendtag(self, tag, attrs):
        self.stack[-1].children.append(Element(tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag):
        for depth in range(len(self.stack) - 1, 0, -1):
            if self.stack[depth].tag == tag:
                del self.stack[depth:]
                return

    def handle_data(self, data):
        self.stack[-1].children.append(data)


def parse(html: str) -> Element:
    builder = _Builder()
    builder.feed(html)
    builder.close()
    return builder.root


def page(client, url: str) -> Element:
    """GET `url` (it must answer 200) and parse it."""
    response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    return parse(response.get_data(as_text=True))
