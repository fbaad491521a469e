"""Needs review at scale: unknown jobs in groups of one type, one error code and one
reconciler's verdict (migration 0077), each decided at once through the bulk review.

A group is named in a URL by one of its jobs (`of=ID`, the newest when the page links
it): its type, code and verdict are read from that job's row, never from the URL, so a
code the pages show as [REDACTED] is never typed into a form or a link, and a group of
one is as easy to name as one of 10,000. Its count comes from background_jobs_unknown_idx
alone (console_unknown_groups), so 10,000 unknown jobs are a few rows, not 200 pages; its
jobs are the page's cards filtered to it, and a decision on it (mark completed, mark
failed, retry, skip) stores exactly its jobs still unknown as a selection
(console/data/bulk.py), for the same review, reason, canary and audit as a failed
group's; two operators deciding it at once act on each job once (compare-and-set).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from jobwarden.console.data.database import CQ, Reader, Row
from jobwarden.worker.core.sanitize import redact

#: What each verdict means on the page; None: no reconciler answered since the job last
#: ran (its type may have none).
VERDICTS = {"unknown": "could not tell", "error": "reconciler failed", None: "no verdict"}
#: The most groups the page reads (every one is a distinct type, code and verdict).
GROUPS_MAX = 500


@dataclass(frozen=True)
class Group:
    """One group of unknown jobs: a type, an error code (None: none), a verdict (None:
    none since the job last ran)."""

    type: str
    code: str | None
    verdict: str | None

    @classmethod
    def of(cls, row: Row) -> Group:
        return cls(row["type"], row["last_error_code"], row["reconcile_verdict"])

    def params(self) -> dict[str, Any]:
        """This group's filters of console_unknown_jobs and console_selection_create."""
        return {"type": self.type, "error_code": self.code, "no_code": self.code is None,
                "verdict": self.verdict, "no_verdict": self.verdict is None}

    def describe(self) -> str:
        """The group in words, as the pages show it (redacted: a selection stores it)."""
        code = f"code {self.code}" if self.code is not None else "no error code"
        verdict = VERDICTS.get(self.verdict, self.verdict)
        return redact(f"unknown jobs of type {self.type}, {code}, {verdict}")


def group_of(reader: Reader, job_id: int) -> Group | None:
    """The group of an unknown job; None when the job is not unknown (decided meanwhile)
    or does not exist."""
    row = reader.one(CQ.console_unknown_group_of, job_id=job_id)
    return None if row is None else Group.of(row)


#: console_unknown_jobs' filters when no group is given: every unknown job.
EVERY = {"type": None, "error_code": None, "no_code": False, "verdict": None,
         "no_verdict": False}


def groups(reader: Reader) -> list[Row]:
    """The unknown jobs' groups, the largest first, each with its `verdict_label`."""
    rows = reader.all(CQ.console_unknown_groups, limit=GROUPS_MAX)
    for row in rows:
        row["verdict_label"] = VERDICTS.get(row["reconcile_verdict"],
                                            row["reconcile_verdict"])
    rows.sort(key=lambda r: (-r["jobs"], r["type"], r["last_error_code"] or "",
                             r["reconcile_verdict"] or ""))
    return rows
