"""The console's read replica (JOBWARDEN_CONSOLE_READ_URL): a hot standby of DATABASE_URL's
server that the pages of figures may read instead of the primary the workers claim from.

Whether a page may read it is decided here from two readings taken one after the other:
the primary's WAL position and clock, then the standby's replay position and its last
replayed commit (console/data/sql/replica.sql). The lag is 0 when the standby has replayed
everything the primary had written; otherwise the time from its last replayed commit to
the primary's clock: the figures miss at most the primary's commits of that span. Both
times are the primary's clock (a commit's timestamp is stamped there), so a skewed
standby clock changes nothing. It overstates, never understates: on a primary idle for
an hour, a record written without a commit (a checkpoint's) reads as an hour until
replayed, milliseconds later.

The standby is read only when it is one of this primary's database (same system
identifier, same database name, in recovery), has replayed the user's last action,
and is at most the allowed lag behind; otherwise the primary is read, and the state says
why. A standby that cannot be reached is not tried again for a while (`retry_s`, the
setting READ_RETRY_SECONDS), so a page does not wait on a dead server's connect timeout
at every request.

Its connections are read-only at the server (`default_transaction_read_only`), which a
standby enforces anyway: nothing the console runs on it can write.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum

from sqlalchemy.exc import OperationalError

from jobwarden.console.data.database import CQ, ReadingDatabase, Row, describe

log = logging.getLogger("jobwarden.console")

#: How long connecting to the standby may take: a page waits this long at most, once per
#: `retry_s`, when the standby's host does not answer.
CONNECT_TIMEOUT_SECONDS = 3


class Why(Enum):
    """Why the pages read the primary instead of the standby."""

    UNREACHABLE = "unreachable"
    OTHER_CLUSTER = "other_cluster"
    OTHER_DATABASE = "other_database"
    NOT_STANDBY = "not_standby"
    LAG_UNKNOWN = "lag_unknown"
    TOO_FAR_BEHIND = "too_far_behind"
    BEFORE_YOUR_ACTION = "before_your_action"


#: The reasons that are the setting's mistake, not a passing state: refused at start.
MISCONFIGURED = frozenset({Why.OTHER_CLUSTER, Why.OTHER_DATABASE, Why.NOT_STANDBY})


class ReplicaRefused(RuntimeError):
    """JOBWARDEN_CONSOLE_READ_URL names a server that is not a standby of DATABASE_URL's
    database: said in one line at start, before any page reads it."""


@dataclass(frozen=True)
class ReplicaState:
    """One reading: whether the pages may read the standby, its lag, and else why not."""

    where: str
    why_not: Why | None
    lag_s: float | None = None
    behind_bytes: int | None = None
    #: Since when an unreachable standby has failed (UTC).
    down_since: datetime | None = None
    #: The allowed lag, when that is why_not.
    max_lag_s: float | None = None
    #: What identifies each side when they differ (system identifiers, database names).
    theirs: str | None = None
    ours: str | None = None

    @property
    def usable(self) -> bool:
        return self.why_not is None


def mismatch(primary: Row, replica: Row) -> tuple[Why, str, str] | None:
    """How the standby is not one of the primary's database, with what each side is, or
    None: a physical standby has its primary's system identifier and database names, and
    is in recovery (a promoted standby, or the primary itself, is not)."""
    if replica["system_id"] != primary["system_id"]:
        return Why.OTHER_CLUSTER, replica["system_id"], primary["system_id"]
    if replica["dbname"] != primary["dbname"]:
        return Why.OTHER_DATABASE, replica["dbname"], primary["dbname"]
    if not replica["standby"]:
        return Why.NOT_STANDBY, "not in recovery", "the primary"
    return None


def judge(primary: Row, replica: Row, max_lag_s: float) -> tuple[Why, str, str] | Why | None:
    """Why the pages must not read the standby now, or None when they may."""
    wrong = mismatch(primary, replica)
    if wrong is not None:
        return wrong
    if replica["lag_s"] is None:
        # Behind, and no commit replayed since the standby started: how far is unknown.
        return Why.LAG_UNKNOWN
    if replica["lag_s"] > max_lag_s:
        return Why.TOO_FAR_BEHIND
    if not replica["shows_written"]:
        return Why.BEFORE_YOUR_ACTION
    return None


def refusal(where: str, primary_where: str, why: Why, theirs: str, ours: str) -> str:
    """The one line that refuses a standby of the wrong database."""
    what = {Why.OTHER_CLUSTER: f"another PostgreSQL cluster (system identifier {theirs}, "
                               f"the primary's {ours})",
            Why.OTHER_DATABASE: f"database {theirs!r} where the primary's is {ours!r}",
            Why.NOT_STANDBY: "not a standby: it is not in recovery (the primary itself, or "
                             "a promoted standby)"}[why]
    return (f"JOBWARDEN_CONSOLE_READ_URL ({where}) is not a standby of DATABASE_URL's "
            f"database ({primary_where}): {what}")


class ReplicaDatabase(ReadingDatabase):
    """The standby's engine, read-only at the server, and what it was last found to be."""

    def __init__(self, url: str, *, pool_size: int, retry_s: float) -> None:
        super().__init__(url, pool_size, connect_args={
            "connect_timeout": CONNECT_TIMEOUT_SECONDS,
            "options": "-c default_transaction_read_only=on"})
        self.retry_s = retry_s
        self._lock = threading.Lock()
        self._down_until = 0.0
        self._down_since: datetime | None = None
        self._logged: object = None

    def check(self, primary: ReadingDatabase) -> None:
        """At start: ReplicaRefused when the standby answers and is not one of the
        primary's database. Either one down now is not checked (the pages then read the
        primary and say so, and check again when they can)."""
        try:
            here = primary.probe(CQ.console_replica_primary_position)
            there = self.probe(CQ.console_replica_position, primary_lsn=here["lsn"],
                             primary_at=here["at"], written=None)
        except OperationalError as error:
            log.warning("the read replica was not checked at start: %s", describe(error),
                        extra={"action": "replica_not_checked"})
            return
        wrong = mismatch(here, there)
        if wrong is not None:
            raise ReplicaRefused(refusal(self.where(), primary.where(), *wrong))

    def state(self, primary: ReadingDatabase, *, written: str | None,
              max_lag_s: float) -> ReplicaState:
        """Whether the pages may read the standby now (`written`: the user's last action's
        WAL position, which they must show)."""
        with self._lock:
            if time.monotonic() < self._down_until:
                return ReplicaState(self.where(), Why.UNREACHABLE,
                                    down_since=self._down_since)
        # The primary first: a standby that has replayed up to this position shows every
        # commit made before it, whatever happens between the two readings.
        here = primary.probe(CQ.console_replica_primary_position)
        try:
            there = self.probe(CQ.console_replica_position, primary_lsn=here["lsn"],
                             primary_at=here["at"], written=written)
        except OperationalError as error:
            with self._lock:
                self._down_until = time.monotonic() + self.retry_s
                self._down_since = self._down_since or datetime.now(UTC)
                since = self._down_since
            self._log_once("unreachable", logging.WARNING, "read replica %s unreachable, "
                           "pages read the primary: %s", self.where(), describe(error))
            return ReplicaState(self.where(), Why.UNREACHABLE, down_since=since)
        with self._lock:
            self._down_since = None
        verdict = judge(here, there, max_lag_s)
        figures = {"lag_s": there["lag_s"], "behind_bytes": there["behind_bytes"]}
        if isinstance(verdict, tuple):
            why, theirs, ours = verdict
            self._log_once(why, logging.ERROR, "%s; pages read the primary",
                           refusal(self.where(), primary.where(), why, theirs, ours))
            return ReplicaState(self.where(), why, theirs=theirs, ours=ours)
        if verdict is Why.TOO_FAR_BEHIND:
            self._log_once(verdict, logging.WARNING, "read replica %s is %.0f s behind the "
                           "primary, more than %g s: pages read the primary", self.where(),
                           there["lag_s"], max_lag_s)
            return ReplicaState(self.where(), verdict, max_lag_s=max_lag_s, **figures)
        if verdict is None:
            self._logged = None  # usable again: its next problem is logged
        return ReplicaState(self.where(), verdict, **figures)

    def _log_once(self, key: object, level: int, message: str, *args: object) -> None:
        """Log a problem when it starts, not at every page that meets it."""
        if self._logged != key:
            self._logged = key
            log.log(level, message, *args, extra={"action": "replica_not_used"})
