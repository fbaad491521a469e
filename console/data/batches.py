"""Batches in the console: one batch's progress, moments and callbacks, and the list of them.

Every figure comes from the batch's own row (`job_batches`), whose counts the runtime
keeps in the transaction that gives a member its outcome (docs/guide/flows.md, "How a
batch counts"), and from its callbacks' rows: nothing here reads the members, so a page
is as cheap for a batch of a million as for one of ten. The members themselves are the
jobs list's `batch=` filter, where a bulk action can select them.
"""

from __future__ import annotations

from dataclasses import dataclass

from jobwarden.console.data.database import CQ, Reader, Row

#: A batch's members by where they are, in the order the page and its bar show them:
#: the final states, `unknown` (not final: a reconciliation decides) and `unfinished`
#: (pending, waiting or running).
PROGRESS_STATES = ("completed", "failed", "cancelled", "skipped", "unknown", "unfinished")
#: The callbacks, in the order open_batch names them.
EVENTS = ("complete", "success", "failure")


@dataclass(frozen=True)
class Progress:
    """A batch's members counted by PROGRESS_STATES; `members` is their sum."""

    members: int
    counts: dict[str, int]

    @classmethod
    def of(cls, row: Row) -> Progress:
        return cls(row["members"], {s: row[s] for s in PROGRESS_STATES})

    @property
    def final(self) -> int:
        """Members in a final state (completed, failed, cancelled, skipped)."""
        return self.members - self.counts["unknown"] - self.counts["unfinished"]


@dataclass(frozen=True)
class BatchPage:
    batch: Row
    progress: Progress
    callbacks: list[Row]


def read(reader: Reader, batch_id: int) -> BatchPage | None:
    """Everything the batch page shows of `batch_id`; None when there is no such batch."""
    batch = reader.one(CQ.console_batch_get, batch_id=batch_id)
    if batch is None:
        return None
    return BatchPage(batch, Progress.of(batch),
                     reader.all(CQ.console_batch_callbacks, batch_id=batch_id))


@dataclass(frozen=True)
class ListPage:
    rows: list[Row]
    next_before: int | None  # the "Older" link's position, if older batches exist


def page(reader: Reader, *, owner: str | None, before: int | None, limit: int) -> ListPage:
    """One page of batches, newest first (of one owner key when given)."""
    rows = reader.all(CQ.console_batches_page, owner=owner, before_id=before, limit=limit + 1)
    more = len(rows) > limit
    rows = rows[:limit]
    for row in rows:
        row["progress"] = Progress.of(row)
    return ListPage(rows, rows[-1]["id"] if more and rows else None)
