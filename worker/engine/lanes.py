"""Lanes: the queues a worker serves, grouped with slots of their own.

`--queues email=4,reports=1,default,billing` gives `email` 4 slots and `reports` 1 slot
that no other queue can take, while `default` and `billing` share the `--concurrency`
slots: a flood of reports fills the one reports slot and waits there, and a password
reset email still starts at once. `*` among the plain names stands for every queue not
named with a capacity (`--queues email=4,*`). Without `--queues` a worker has one lane:
every queue, `--concurrency` slots.

This module only reads the specification; worker/process.py gives each lane its buffer,
producer and slot threads (docs/architecture.md §6, "Lanes").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from jobwarden.worker.jobs.registry import check_name

#: Most slots a lane (or a worker's --concurrency) may have.
MAX_SLOTS = 1000
#: Among the plain names: every queue the capacity lanes do not name.
EVERY_OTHER = "*"

#: What `WorkerProcess(queues=...)` accepts: None (every queue), "email=4,reports=1,a",
#: ["a", "b"] or ["email=4", "a"], {"email": 4, "a": None}.
QueueSpec = str | Iterable[str] | Mapping[str, int | None] | None


@dataclass(frozen=True, slots=True)
class Lane:
    """Queues served by slots of their own.

    `queues` None: every queue except those in `excluded` (the capacity lanes' queues).
    `shared`: the lane of the plain names, sized by the worker's concurrency."""

    queues: tuple[str, ...] | None
    slots: int
    shared: bool = False
    excluded: tuple[str, ...] = ()

    def serves(self, queue: str) -> bool:
        if self.queues is None:
            return queue not in self.excluded
        return queue in self.queues

    @property
    def label(self) -> str:
        if self.queues is not None:
            return ",".join(self.queues)
        return "*" if not self.excluded else "* (other queues)"

    def as_row(self) -> dict[str, Any]:
        """How `job_workers.lanes` records it (the console reads it back)."""
        return {"queues": list(self.queues) if self.queues is not None else [EVERY_OTHER],
                "slots": self.slots, "shared": self.shared}


def parse_queues(spec: QueueSpec, concurrency: int) -> list[Lane]:
    """The lanes a queue specification asks for; ValueError saying what is wrong.

    Entries `name=N` get N slots each; plain names (and `*`) share `concurrency` slots in
    one lane, which comes last. None or an empty list: one lane, every queue."""
    entries = _entries(spec)
    if entries is None:
        return [Lane(None, _slots("--concurrency", concurrency), shared=True)]
    seen: set[str] = set()
    own: list[Lane] = []
    named: list[str] = []  # the queues of the lanes in `own`, one each
    plain: list[str] = []
    for name, slots in entries:
        if name == "":
            raise ValueError("an empty queue name (two commas in a row, or one at an end?)")
        if name != EVERY_OTHER:
            check_name("queue", name)
        if name in seen:
            raise ValueError(f"queue {name!r} is named twice")
        seen.add(name)
        if slots is None:
            plain.append(name)
        elif name == EVERY_OTHER:
            raise ValueError("'*' shares the --concurrency slots: give it no '=N'")
        else:
            own.append(Lane((name,), _slots(name, slots)))
            named.append(name)
    if EVERY_OTHER in plain and len(plain) > 1:
        others = ", ".join(repr(n) for n in plain if n != EVERY_OTHER)
        raise ValueError(f"'*' already includes {others}: name them with '=N' slots of "
                         "their own, or leave them out")
    if plain:
        slots = _slots("--concurrency", concurrency)
        if plain == [EVERY_OTHER]:
            own.append(Lane(None, slots, shared=True, excluded=tuple(named)))
        else:
            own.append(Lane(tuple(plain), slots, shared=True))
    return own


def _entries(spec: QueueSpec) -> list[tuple[str, int | str | None]] | None:
    """(name, slots or None) per entry, names stripped; None for "every queue"."""
    if spec is None:
        return None
    if isinstance(spec, str):
        if not spec.strip():
            raise ValueError("no queue given")
        items: Iterable[object] = spec.split(",")
    elif isinstance(spec, Mapping):
        items = [(name, slots) for name, slots in spec.items()]
    else:
        items = list(spec)
    entries = []
    for item in items:
        if isinstance(item, tuple):
            name, slots = item
        elif isinstance(item, str):
            name, sep, slots = item.partition("=")
            slots = slots.strip() if sep else None
        else:
            raise ValueError(f"a queue entry must be a name or 'name=N', not {item!r}")
        if not isinstance(name, str):
            raise ValueError(f"a queue name must be text, not {name!r}")
        entries.append((name.strip(), slots))
    return entries or None


def _slots(name: str, value: int | str) -> int:
    """A lane's slots: a whole number from 1 to MAX_SLOTS."""
    if isinstance(value, str):
        try:
            value = int(value)
        except ValueError:
            raise ValueError(f"{name}: slots must be a whole number, not {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_SLOTS:
        raise ValueError(f"{name}: slots must be from 1 to {MAX_SLOTS}, not {value!r}")
    return value
