"""The JobStore: the runtime's one door to the database (docs/architecture.md §1).

Every statement the runtime runs passes through here, and each is a named query of
worker/store/sql (`Q.claim_jobs`, a `Query`): a string, or SQL built at a call site, is
refused, so the SQL lives in one place and a log line can always say which statement
failed. `tests/unit/test_runtime_store.py` fails when a module of worker/ outside this
one runs a statement (`.execute(`, `.cursor(`, `exec_driver_sql`, ...), and when a
`Q.<name>` names no query.

A JobStore wraps the caller's connection, inside the caller's transaction: a psycopg
Connection (the worker's own), or a SQLAlchemy Connection or Session (an application
enqueueing in its request's transaction, the console's operator actions). It opens and
commits nothing itself.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Generator, Mapping
from json.scanner import make_scanner
from typing import Any, TypeVar, cast

import psycopg
from psycopg import abc
from psycopg.adapt import Loader, PyFormat, Transformer
from psycopg.pq import ConnStatus, ExecStatus
from psycopg.rows import args_row, tuple_row

from jobwarden.worker.store.queries import CallerConnection, Query

T = TypeVar("T")
Params = Mapping[str, Any] | None
#: A statement's answer as JobStore.table gives it: (column names, rows).
Table = tuple[list[str], list[tuple[Any, ...]]]
#: Logic written once for sync and async callers: a generator that yields each statement
#: it needs run (a named query and its parameters), is sent back its Table, and returns
#: its result. `run_steps` and `run_steps_async` drive it on either kind of connection.
Steps = Generator[tuple[Query, Params], Table, T]


class JobStore:
    """The caller's connection, seen as the runtime's store: one method per way of
    reading a statement's answer."""

    __slots__ = ("conn",)

    def __init__(self, conn: CallerConnection) -> None:
        self.conn = conn

    def rows(self, query: Query, params: Params = None) -> list[tuple[Any, ...]]:
        """Every row the statement returns (none for a statement that returns no rows)."""
        return self.table(query, params)[1]

    def first(self, query: Query, params: Params = None) -> tuple[Any, ...] | None:
        """The first row, or None when the statement matched nothing."""
        rows = self.rows(query, params)
        return rows[0] if rows else None

    def one(self, query: Query, params: Params = None) -> tuple[Any, ...]:
        """The row of a statement that always returns exactly one (a function call, an
        aggregate): a missing row is a broken query, said as such."""
        row = self.first(query, params)
        if row is None:
            raise RuntimeError(f"{query.name} always returns one row but returned none")
        return row

    def dicts(self, query: Query, params: Params = None) -> list[dict[str, Any]]:
        """Every row as a dict of its columns."""
        names, rows = self.table(query, params)
        return [dict(zip(names, row, strict=True)) for row in rows]

    def records(self, query: Query, params: Params, record: type[T], *,
                prepare: bool | None = None) -> list[T]:
        """Every row built into `record` from its columns, in order (psycopg only: the
        worker's own hot paths, such as the claim). `prepare`: psycopg's own (True: a
        server-side prepared statement from the first run, not the fifth)."""
        cur = self._psycopg().cursor(row_factory=args_row(record))
        cur.execute(_checked(query), params, prepare=prepare)
        return cur.fetchall()

    def table(self, query: Query, params: Params = None) -> tuple[list[str], list[tuple[Any, ...]]]:
        """(column names, rows) of the statement."""
        sql, conn = _checked(query), self.conn
        if isinstance(conn, psycopg.Connection):  # the worker's own: the hot paths
            # Tuples whatever row factory the caller's connection was given (dict_row
            # rows would turn into their keys).
            cur = conn.cursor(row_factory=tuple_row)
            cur.execute(sql, params)
            if cur.description is None:
                return [], []
            return [d.name for d in cur.description], cur.fetchall()
        if hasattr(conn, "exec_driver_sql"):  # SQLAlchemy Connection
            result = conn.exec_driver_sql(sql, dict(params or {}))
        elif hasattr(conn, "get_bind") and hasattr(conn, "connection"):  # SQLAlchemy Session
            result = conn.connection().exec_driver_sql(sql, dict(params or {}))
        else:
            raise TypeError("needs a psycopg connection or a SQLAlchemy Connection/Session, "
                            f"not {type(conn).__name__}")
        if not result.returns_rows:
            return [], []
        return list(result.keys()), [tuple(r) for r in result.fetchall()]

    def _psycopg(self) -> psycopg.Connection:
        if not isinstance(self.conn, psycopg.Connection):
            raise TypeError(f"needs a psycopg connection, not {type(self.conn).__name__}")
        return self.conn


class PreparedQuery:
    """A named query prepared on a connection under a name of its own, with each of its
    parameters but the `varying` ones dumped once, here: a run sends the statement's name
    and the parameters' text, and waits in libpq with the GIL released.

    For the claim of a producer (worker/engine/producer.py), which an idle worker runs
    once per notification: after an idle spell the interpreter's caches are cold, and
    building and dumping claim_jobs' parameters took about 0.22 ms of a 1.24 ms one-job
    claim through a cursor (0.05 ms warm). Done once, ahead, that work leaves the path
    from a notification to the start of its job: 0.97-0.99 ms a claim
    (bench/bench_idle_claim.py; bench/README.md@eb7c2f0, "Enqueue→start: the claim's parameters
    dumped ahead").

    Not through a transaction pooler: a statement prepared by name lives in one server
    session (the producer claims through a cursor there, `JobStore.records`). `varying`
    parameters are ints or strs, sent as their text, or None, sent as NULL."""

    __slots__ = ("query", "name", "_sql", "_fixed", "_places", "_on", "_rows")

    def __init__(self, query: Query, params: Mapping[str, Any], varying: tuple[str, ...],
                 conn: psycopg.Connection) -> None:
        self.query = _checked(query)
        self.name = f"jobwarden_{query.name}".encode()
        # Every parameter is cast in the SQL (or compared with a column), so the server
        # infers its type.
        sql, order = numbered(self.query)
        self._sql = sql.encode()
        tx = Transformer(conn)
        self._fixed: list[bytes | None] = [
            None if name in varying else _text(tx, params[name]) for name in order]
        #: Where each varying parameter goes among them.
        self._places = {name: order.index(name) for name in varying}
        #: The connection it is prepared on now (None: none yet).
        self._on: psycopg.Connection | None = None
        #: What builds its rows on that connection: a Transformer whose column loaders
        #: were looked up at its first result (None: none yet). Its columns never change,
        #: and looking the loaders up again took 0.03 ms of every one-job claim after an
        #: idle spell (a third of the time from its answer to its jobs in hand).
        self._rows: abc.Transformer | None = None

    def prepare(self, conn: psycopg.Connection) -> None:
        """Prepare it on `conn` (a new session; DISCARD PLANS keeps it, and replans it)."""
        with conn.lock:
            _raise_for(conn, conn.pgconn.prepare(self.name, self._sql, None),
                       ExecStatus.COMMAND_OK)
        self._on = conn
        self._rows = None

    def prepared_on(self, conn: psycopg.Connection) -> bool:
        return conn is self._on and not conn.closed

    def records(self, conn: psycopg.Connection, record: type[T],
                **varying: int | str | None) -> list[T]:
        """Run it on `conn` (prepared there) with these values of the varying parameters:
        every row built into `record` from its columns, as `JobStore.records` builds
        them. On an autocommit connection it is a transaction of its own; inside
        `conn.transaction()` it is part of that one (psycopg sends no BEGIN for it, so
        it never opens one)."""
        params = list(self._fixed)
        for name, value in varying.items():
            params[self._places[name]] = None if value is None else str(value).encode()
        with conn.lock:
            # A None is a NULL to libpq, which psycopg's stub does not say.
            result = conn.pgconn.exec_prepared(self.name, cast(Any, params))
            _raise_for(conn, result, ExecStatus.TUPLES_OK)
            # Under the connection's lock: one thread at a time uses the Transformer.
            tx = self._rows
            if tx is None or tx.connection is not conn:
                tx = self._rows = Transformer(conn)
                tx.set_pgresult(result)
            else:
                tx.set_pgresult(result, set_loaders=False)
            try:
                return tx.load_rows(0, result.ntuples, lambda values: record(*values))
            finally:
                tx.set_pgresult(None, set_loaders=False)  # the result is not kept alive


#: The json module's own scanner (C where it has it), as json.loads configures it (its
#: stub wants a scanner for the decoder it takes).
_scan: Callable[[str, int], tuple[Any, int]] = make_scanner(cast(Any, json.JSONDecoder()))


def _loads(text: str) -> Any:
    """json.loads(text), through the scanner alone when the text is PostgreSQL's shape."""
    try:
        value, end = _scan(text, 0)
    except StopIteration:  # no value at the start: json.loads says what is wrong
        return json.loads(text)
    return value if end == len(text) else json.loads(text)


class JsonbLoader(Loader):
    """jsonb as json.loads reads it, for the worker's own connections (db.py,
    DedicatedConnection), whose claims carry every job's payload. psycopg's loader calls
    json.loads on the bytes: it sniffs their encoding, decodes them and matches
    whitespace around the value with a regular expression, each a Python step.
    PostgreSQL writes jsonb as UTF-8 text with no space around the value (json.loads
    assumes UTF-8 too), so the text goes straight to the scanner: 0.5 us for a small
    payload, where psycopg's loader took 2 us. Text of another shape (never seen) goes
    to json.loads, which reads it or raises as ever."""

    def load(self, data: abc.Buffer) -> Any:
        return read_jsonb(str(data, "utf-8"))


def read_jsonb(text: str) -> Any:
    """A jsonb value's text as JsonbLoader reads it: an UnreadableJson where Python's json
    module cannot read what PostgreSQL stored (any client may have written it)."""
    try:
        return _loads(text)
    except RecursionError:
        return UnreadableJson(len(text), "is nested deeper than the worker can read")
    except json.JSONDecodeError:
        raise  # not JSON at all: never PostgreSQL's output
    except ValueError:  # an integer past Python's digit limit (sys.int_info)
        return UnreadableJson(len(text), "holds an integer of more digits than the "
                                         "worker reads")


class UnreadableJson(dict[str, Any]):
    """A jsonb value that PostgreSQL takes, from any client, and Python's json module
    does not read: nested deeper than about 1,000 levels, or holding an integer of more
    than 4,300 digits (Jobwarden's enqueue refuses both). Read as an empty object, so
    the claim that carried it goes on: the job's payload check fails that job alone
    (PAYLOAD_INVALID, runner.py) instead of the producer dying on it, and the worker
    with it, at every claim of it."""

    def __init__(self, size: int, why: str) -> None:
        super().__init__()
        self.reason = f"the payload ({size:,} characters of JSON) {why}"


def numbered(sql: str) -> tuple[str, list[str]]:
    """`sql` with each `%(name)s` as `$n`, n the name's place in order of first use (as
    psycopg numbers them), and the names in that order."""
    order: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match.group(1) not in order:
            order.append(match.group(1))
        return f"${order.index(match.group(1)) + 1}"

    return re.sub(r"%\((\w+)\)s", number, sql), order


def _text(tx: abc.Transformer, value: Any) -> bytes | None:
    """`value` as the text PostgreSQL reads it as (None: NULL)."""
    if value is None:
        return None
    dumped = tx.get_dumper(value, PyFormat.TEXT).dump(value)
    return None if dumped is None else bytes(dumped)


def _raise_for(conn: psycopg.Connection, result: Any, ok: ExecStatus) -> None:
    """psycopg's error for a result that is not `ok`: OperationalError once the connection
    is gone (as a cursor would raise), else the server's error by its SQLSTATE."""
    if result.status == ok:
        return
    if conn.pgconn.status == ConnStatus.BAD:
        raise psycopg.OperationalError(
            f"the connection was lost: {conn.pgconn.get_error_message()}")
    raise psycopg.errors.error_from_result(result, encoding=conn.info.encoding)


def _checked(query: Query) -> str:
    if not isinstance(query, Query):
        raise TypeError("the runtime runs only named queries of worker/store/sql "
                        f"(Q.<name>), not {type(query).__name__} {str(query)[:40]!r}")
    return query


class AsyncJobStore:
    """JobStore for async callers: a psycopg AsyncConnection (a coroutine handler's
    transaction), or a SQLAlchemy AsyncConnection or AsyncSession (an async application
    enqueueing in its request's transaction). The same named queries, awaited; it opens
    and commits nothing itself."""

    __slots__ = ("conn",)

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    async def rows(self, query: Query, params: Params = None) -> list[tuple[Any, ...]]:
        return (await self.table(query, params))[1]

    async def dicts(self, query: Query, params: Params = None) -> list[dict[str, Any]]:
        names, rows = await self.table(query, params)
        return [dict(zip(names, row, strict=True)) for row in rows]

    async def table(self, query: Query,
                    params: Params = None) -> tuple[list[str], list[tuple[Any, ...]]]:
        sql, conn = _checked(query), self.conn
        if isinstance(conn, psycopg.AsyncConnection):
            cur = conn.cursor(row_factory=tuple_row)
            await cur.execute(sql, params)
            if cur.description is None:
                return [], []
            return [d.name for d in cur.description], await cur.fetchall()
        if hasattr(conn, "exec_driver_sql"):  # SQLAlchemy AsyncConnection
            result = await conn.exec_driver_sql(sql, dict(params or {}))
        elif hasattr(conn, "get_bind") and hasattr(conn, "connection"):  # AsyncSession
            result = await (await conn.connection()).exec_driver_sql(sql, dict(params or {}))
        else:
            raise TypeError("needs a psycopg AsyncConnection or a SQLAlchemy "
                            f"AsyncConnection/AsyncSession, not {type(conn).__name__}")
        if not result.returns_rows:
            return [], []
        return list(result.keys()), [tuple(r) for r in result.fetchall()]


def run_steps(store: JobStore, steps: Steps[T]) -> T:
    """Run `steps` (see Steps) on a JobStore: each statement it yields, in order."""
    try:
        query, params = next(steps)
        while True:
            query, params = steps.send(store.table(query, params))
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def run_steps_async(store: AsyncJobStore, steps: Steps[T]) -> T:
    """run_steps on an AsyncJobStore: the same statements, awaited."""
    try:
        query, params = next(steps)
        while True:
            query, params = steps.send(await store.table(query, params))
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
