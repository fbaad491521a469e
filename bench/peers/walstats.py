"""What a queue writes per job: WAL bytes, heap tuples and index entries, counted in one
database of a shared server.

Three sources, each saying something the others cannot:

- the server's statistics views, read before and after each phase: `pg_stat_all_tables`
  (tuples inserted, updated, HOT-updated, deleted per table, this database only),
  `pg_relation_size` of every index (growth in bytes), `pg_stat_database.xact_commit`
  (this database's commits), and the cluster-wide `pg_current_wal_lsn()` and `pg_stat_wal`,
  with the other databases' commits and tuple writes in the same window, which say how
  quiet the window was;
- the WAL itself, decoded by `pg_waldump` between the two LSNs when the server's `pg_wal`
  is readable from this machine: every record whose block references a relation of this
  database (and the commit records of the transactions that wrote them) is counted for
  this database, so the per-job WAL figure holds however busy the rest of the cluster is.
  B-tree leaf inserts (`INSERT_LEAF`, `INSERT_POST`, and the leaf splits that carry the
  new item) are the index entries written, per index.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field

import psycopg


def db_counters(conn) -> tuple[int, int]:
    """(this database's commits, the cluster's WAL position in bytes): the coarse pair a
    drain's commits and WAL per job are the deltas of."""
    commits = conn.execute("SELECT xact_commit FROM pg_stat_database "
                           "WHERE datname = current_database()").fetchone()[0]
    wal = conn.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").fetchone()[0]
    return int(commits), int(wal)


@dataclass
class Snapshot:
    lsn: str
    lsn_bytes: int
    wal: dict[str, int]                    # pg_stat_wal: records, fpi, bytes (cluster)
    commits: int                           # this database
    others: dict[str, tuple[int, int]]     # every other database: commits, tuples written
    checkpoints: int
    tables: dict[str, dict[str, int]]      # schema.table -> n_tup_* counters
    indexes: dict[str, dict[str, object]]  # schema.index -> table, bytes
    taken: float = field(default_factory=time.monotonic)


_TABLES = """
SELECT format('%I.%I', schemaname, relname), n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del
FROM pg_stat_user_tables"""
_INDEXES = """
SELECT format('%I.%I', schemaname, indexrelname), format('%I.%I', schemaname, relname),
       pg_relation_size(indexrelid)
FROM pg_stat_user_indexes"""
_OTHERS = """
SELECT datname, xact_commit, tup_inserted + tup_updated + tup_deleted
FROM pg_stat_database WHERE datname IS NOT NULL AND datname <> current_database()"""


def snapshot(url: str) -> Snapshot:
    """Every counter, read once the database has no other session left (a backend sends
    its last statistics as it exits, so they are read until two reads agree)."""
    with psycopg.connect(url, autocommit=True) as conn:
        _wait_alone(conn)
        tables = _tables(conn)
        for _ in range(20):
            time.sleep(0.3)
            again = _tables(conn)
            if again == tables:
                break
            tables = again
        lsn, lsn_bytes = conn.execute(
            "SELECT pg_current_wal_lsn()::text, pg_current_wal_lsn() - '0/0'::pg_lsn"
        ).fetchone()
        records, fpi, wal_bytes = conn.execute(
            "SELECT wal_records, wal_fpi, wal_bytes FROM pg_stat_wal").fetchone()
        commits, _ = db_counters(conn)
        others = {name: (int(c), int(t)) for name, c, t in conn.execute(_OTHERS).fetchall()}
        checkpoints = conn.execute(
            "SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter").fetchone()[0]
        indexes = {name: {"table": table, "bytes": size}
                   for name, table, size in conn.execute(_INDEXES).fetchall()}
    return Snapshot(lsn, int(lsn_bytes),
                    {"records": int(records), "fpi": int(fpi), "bytes": int(wal_bytes)},
                    commits, others,
                    int(checkpoints), tables, indexes)


def _tables(conn) -> dict[str, dict[str, int]]:
    return {name: {"ins": ins, "upd": upd, "hot_upd": hot, "del": dele}
            for name, ins, upd, hot, dele in conn.execute(_TABLES).fetchall()}


def _wait_alone(conn, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = "
                       "current_database() AND pid <> pg_backend_pid() "
                       "AND application_name <> %s", (COPIER,)).fetchone()[0]:
        if time.monotonic() > deadline:
            raise RuntimeError("other sessions stayed in the database for 30 s")
        time.sleep(0.1)


# -- the WAL, decoded --------------------------------------------------------------------

_RECORD = re.compile(r"^rmgr: (\S+)\s+len \(rec/tot\):\s*(\d+)/\s*(\d+), tx:\s*(\d+), "
                     r"lsn: \S+, prev \S+, desc: (\S+)(.*)$")
_REL = re.compile(r"rel \d+/(\d+)/(\d+)")
_LEAF_SPLIT = re.compile(r"\blevel 0\b")
_SUBXACTS = re.compile(r"subxacts:((?: \d+)+)")


def waldump_binary(server_version_num: int) -> str | None:
    """A pg_waldump of the server's major version (the WAL format changes between them)."""
    major = server_version_num // 10000
    for path in (os.environ.get("BENCH_PG_WALDUMP"),
                 f"/usr/lib/postgresql/{major}/bin/pg_waldump", shutil.which("pg_waldump")):
        if path and os.access(path, os.X_OK):
            return path
    return None


def wal_source(url: str) -> tuple[str, str, int] | str:
    """(pg_waldump, the server's pg_wal, this database's oid), or why the WAL cannot be
    read from here."""
    with psycopg.connect(url, autocommit=True) as conn:
        version = int(conn.execute("SHOW server_version_num").fetchone()[0])
        try:
            datadir = conn.execute("SHOW data_directory").fetchone()[0]
        except psycopg.Error:
            return "data_directory is not readable (needs pg_read_all_settings)"
        segment = conn.execute("SELECT pg_walfile_name(pg_current_wal_lsn())").fetchone()[0]
        oid = conn.execute("SELECT oid FROM pg_database "
                           "WHERE datname = current_database()").fetchone()[0]
    binary = waldump_binary(version)
    if binary is None:
        return f"no pg_waldump for PostgreSQL {version // 10000} (set BENCH_PG_WALDUMP)"
    pg_wal = os.path.join(datadir, "pg_wal")
    if not os.access(os.path.join(pg_wal, segment), os.R_OK):
        return f"the server's WAL is not readable here ({pg_wal}: another host or user)"
    return binary, pg_wal, int(oid)


def relation_names(url: str) -> dict[int, str]:
    """filenode -> schema.relation for every relation of the database (catalogs too)."""
    with psycopg.connect(url, autocommit=True) as conn:
        return {int(f): n for f, n in conn.execute(
            "SELECT pg_relation_filenode(c.oid), format('%I.%I', n.nspname, c.relname) "
            "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE pg_relation_filenode(c.oid) IS NOT NULL").fetchall()}


#: The copier's sessions, which the snapshots do not wait for.
COPIER = "jwbench-walcopy"


class WalCopy:
    """Copies the server's WAL segments into a directory of its own as soon as each is
    complete, from the segment of `start_lsn` on: any checkpoint (another session's too)
    recycles the segments before its redo point, and a window's segments would be gone
    before pg_waldump reads them."""

    def __init__(self, url: str, pg_wal: str, start_lsn: str, interval: float = 0.1):
        self.pg_wal, self.interval = pg_wal, interval
        self.dir = tempfile.mkdtemp(prefix="jwbench-wal-")
        self.error = ""
        self._conn = psycopg.connect(url, autocommit=True, application_name=COPIER)
        size = int(self._conn.execute("SELECT setting FROM pg_settings "
                                      "WHERE name = 'wal_segment_size'").fetchone()[0])
        self._per_id = 0x100000000 // size
        self._next = self._name(start_lsn)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _name(self, lsn: str | None = None) -> str:
        return self._conn.execute("SELECT pg_walfile_name(%s::pg_lsn)" if lsn else
                                  "SELECT pg_walfile_name(pg_current_wal_lsn())",
                                  (lsn,) if lsn else None).fetchone()[0]

    def _successor(self, name: str) -> str:
        tli, hi, lo = int(name[:8], 16), int(name[8:16], 16), int(name[16:], 16) + 1
        if lo == self._per_id:
            hi, lo = hi + 1, 0
        return f"{tli:08X}{hi:08X}{lo:08X}"

    def _copy_before(self, last: str, inclusive: bool) -> None:
        while not self.error and (self._next < last or (inclusive and self._next == last)):
            try:
                shutil.copyfile(os.path.join(self.pg_wal, self._next),
                                os.path.join(self.dir, self._next))
            except FileNotFoundError:
                self.error = (f"segment {self._next} was recycled before it was copied "
                              "(a checkpoint during the window): run again")
                return
            self._next = self._successor(self._next)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._copy_before(self._name(), inclusive=False)

    def finish(self, end_lsn: str) -> str:
        """Copy the rest, up to the segment of `end_lsn` (the last one as written so far);
        the directory to decode, or raise if a segment could not be copied."""
        self._stop.set()
        self._thread.join()
        self._copy_before(self._name(end_lsn), inclusive=True)
        if self.error:
            raise RuntimeError(self.error)
        return self.dir

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self._conn.close()
        shutil.rmtree(self.dir, ignore_errors=True)


@dataclass
class Decoded:
    records: int = 0
    bytes: int = 0
    fpi: int = 0
    fpi_bytes: int = 0
    commits: int = 0
    by_relation: dict[str, dict[str, int]] = field(default_factory=dict)
    by_kind: dict[str, dict[str, int]] = field(default_factory=dict)


def decode(binary: str, pg_wal: str, db_oid: int, names: dict[int, str],
           start: str, end: str) -> Decoded:
    """Count this database's WAL between two LSNs. A record is this database's when one of
    its blocks is a relation of it (heap, index, sequence, catalog), or when its
    transaction wrote such a record (the commit). Bytes are record lengths rounded up to
    the 8-byte alignment the WAL stores them with (page headers, 24 bytes per 8 kB, are
    not counted)."""
    out = Decoded()
    xids: set[int] = set()
    rels: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    kinds: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    proc = subprocess.Popen([binary, "--path", pg_wal, "--start", start, "--end", end],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            bufsize=1 << 20)
    assert proc.stdout is not None
    for line in proc.stdout:
        m = _RECORD.match(line)
        if m is None:
            continue
        rmgr, rec, tot, tx, kind, rest = m.groups()
        tx_id = int(tx)
        relation = None
        for db, node in _REL.findall(rest):
            if int(db) == db_oid:
                relation = names.get(int(node), f"filenode {node}")
                break
        if relation is None:
            if rmgr != "Transaction" or not (
                    tx_id in xids or any(int(x) in xids for x in _subxacts(rest))):
                continue
            if kind.startswith("COMMIT"):
                out.commits += 1
            relation = "(transaction records)"
        elif tx_id:
            xids.add(tx_id)
        size = (int(tot) + 7) & ~7
        fpws = rest.count(" FPW")
        out.records += 1
        out.bytes += size
        out.fpi += fpws
        out.fpi_bytes += int(tot) - int(rec) if fpws else 0
        r = rels[relation]
        r["records"] += 1
        r["bytes"] += size
        if rmgr == "Btree" and (kind in ("INSERT_LEAF", "INSERT_POST") or (
                kind in ("SPLIT_L", "SPLIT_R") and _LEAF_SPLIT.search(rest))):
            r["index_entries"] += 1
        k = kinds[f"{rmgr} {kind}"]
        k["records"] += 1
        k["bytes"] += size
    _, err = proc.communicate()
    if proc.returncode != 0:
        reason = (err.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        raise RuntimeError(f"pg_waldump: {reason}")
    out.by_relation = {k: dict(v) for k, v in rels.items()}
    out.by_kind = {k: dict(v) for k, v in kinds.items()}
    return out


def _subxacts(desc: str) -> list[str]:
    m = _SUBXACTS.search(desc)
    return m.group(1).split() if m else []


# -- per job -----------------------------------------------------------------------------

def phase(before: Snapshot, after: Snapshot, jobs: int, decoded: Decoded | None) -> dict:
    """One phase's figures per job (and the raw deltas that make them)."""
    per = 1.0 / jobs
    tables = {}
    for name, b in after.tables.items():
        a = before.tables.get(name, {"ins": 0, "upd": 0, "hot_upd": 0, "del": 0})
        d = {k: b[k] - a[k] for k in b}
        if any(d.values()):
            tables[name] = {"ins": d["ins"] * per, "upd": d["upd"] * per,
                            "hot_upd": d["hot_upd"] * per,
                            "non_hot_upd": (d["upd"] - d["hot_upd"]) * per,
                            "del": d["del"] * per}
    indexes = {}
    for name, b in after.indexes.items():
        grown = int(b["bytes"]) - int(before.indexes.get(name, {"bytes": 0})["bytes"])
        indexes[name] = {"table": b["table"], "bytes_grown": grown * per}
    heap_ins = sum(t["ins"] for t in tables.values())
    heap_upd = sum(t["upd"] for t in tables.values())
    out = {
        "jobs": jobs,
        "cluster_wal_bytes": after.lsn_bytes - before.lsn_bytes,
        "cluster_wal_bytes_per_job": (after.lsn_bytes - before.lsn_bytes) * per,
        "cluster_pg_stat_wal": {k: after.wal[k] - before.wal[k] for k in after.wal},
        "commits_per_job": (after.commits - before.commits) * per,
        "heap_tuples_written_per_job": heap_ins + heap_upd,
        "heap_inserts_per_job": heap_ins,
        "updates_per_job": heap_upd,
        "non_hot_updates_per_job": sum(t["non_hot_upd"] for t in tables.values()),
        "deletes_per_job": sum(t["del"] for t in tables.values()),
        "tables": tables,
        "indexes": indexes,
        "other_databases": _others(before, after),
        "checkpoints_in_window": after.checkpoints - before.checkpoints,
        "lsn": [before.lsn, after.lsn],
    }
    if decoded is not None:
        out["wal_bytes_per_job"] = decoded.bytes * per
        out["wal_records_per_job"] = decoded.records * per
        out["fpi_per_job"] = decoded.fpi * per
        out["fpi_bytes_per_job"] = decoded.fpi_bytes * per
        out["wal_commits_per_job"] = decoded.commits * per
        for name, r in decoded.by_relation.items():
            if name in indexes:
                indexes[name]["entries"] = r.get("index_entries", 0) * per
            target = indexes.get(name) or tables.setdefault(name, {})
            target["wal_bytes"] = r["bytes"] * per
        for name in indexes:
            indexes[name].setdefault("entries", 0.0)
        out["index_entries_per_job"] = sum(i["entries"] for i in indexes.values())
        out["wal_by_kind"] = {k: {"records": v["records"] * per, "bytes": v["bytes"] * per}
                              for k, v in sorted(decoded.by_kind.items(),
                                                 key=lambda kv: -kv[1]["bytes"])}
    return out


def combine(a: dict, b: dict) -> dict:
    """Two phases' figures as one: numbers added (per job of the same jobs, so they add),
    nested figures combined, anything else (names, LSNs) kept from both or the first."""
    out: dict = {}
    for key in a.keys() | b.keys():
        x, y = a.get(key), b.get(key)
        if x is None or y is None:
            out[key] = x if y is None else y
        elif isinstance(x, dict):
            out[key] = combine(x, y)
        elif isinstance(x, (int, float)) and not isinstance(x, bool) and key != "jobs":
            out[key] = x + y
        elif isinstance(x, list):
            out[key] = x + y
        else:
            out[key] = x
    return out


def _others(before: Snapshot, after: Snapshot) -> dict[str, int]:
    """The other databases' commits and tuples written in the window (of those there at
    both ends: a database dropped meanwhile takes its counters with it)."""
    both = before.others.keys() & after.others.keys()
    return {"commits": sum(after.others[d][0] - before.others[d][0] for d in both),
            "tuples": sum(after.others[d][1] - before.others[d][1] for d in both),
            "databases_created_or_dropped": len(before.others.keys() ^ after.others.keys())}


def _f(v: float | None, digits: int = 2) -> str:
    if v is None:
        return ""
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:,.{digits}f}"


def detail(system: str, run: dict) -> str:
    """One system's WAL run as Markdown: the phases side by side, then each table and
    each index of the whole run (enqueue + drain)."""
    phases = [("enqueue", run["enqueue"]), ("drain", run["drain"]), ("total", run["total"])]
    decoded = "wal_bytes_per_job" in run["total"]
    lines = [f"#### {system}: {run['jobs']:,} no-op jobs, enqueue + drain", "",
             "| per completed job | " + " | ".join(p for p, _ in phases) + " |",
             "|---|" + "---|" * len(phases)]
    rows = [("WAL bytes, this database (pg_waldump)", "wal_bytes_per_job"),
            ("WAL records", "wal_records_per_job"),
            ("full-page images", "fpi_per_job"),
            ("WAL bytes, whole cluster (LSN delta)", "cluster_wal_bytes_per_job"),
            ("commits (WAL commit records)", "wal_commits_per_job"),
            ("heap tuples written (inserts + updates)", "heap_tuples_written_per_job"),
            ("non-HOT updates", "non_hot_updates_per_job"),
            ("deletes", "deletes_per_job"),
            ("index entries written (B-tree leaf inserts)", "index_entries_per_job")]
    for label, key in rows:
        if key in run["total"]:
            lines.append(f"| {label} | " + " | ".join(_f(p.get(key)) for _, p in phases) + " |")
    total = run["total"]
    lines += ["", "| table (or other relation) | inserts | updates | HOT | non-HOT | deletes "
              "| WAL bytes |",
              "|---|---|---|---|---|---|---|"]
    for name, t in sorted(total["tables"].items(), key=lambda kv: -kv[1].get("wal_bytes", 0)):
        lines.append(f"| {name} | " + " | ".join(_f(t.get(k)) for k in (
            "ins", "upd", "hot_upd", "non_hot_upd", "del", "wal_bytes")) + " |")
    lines += ["", "| index | entries written | size growth, bytes | WAL bytes |",
              "|---|---|---|---|"]
    untouched = []
    for name, i in sorted(total["indexes"].items(),
                          key=lambda kv: (-kv[1].get("entries", 0), kv[0])):
        if not i.get("entries") and not i["bytes_grown"] and not i.get("wal_bytes"):
            untouched.append(name.split(".", 1)[-1])
            continue
        lines.append(f"| {name} | {_f(i.get('entries'))} | {_f(i['bytes_grown'], 1)} | "
                     f"{_f(i.get('wal_bytes'))} |")
    if "wal_by_kind" in total:
        lines += ["", "| WAL record type | records | bytes |", "|---|---|---|"]
        kinds = sorted(total["wal_by_kind"].items(), key=lambda kv: -kv[1]["bytes"])
        for name, k in kinds[:12]:
            lines.append(f"| {name} | {_f(k['records'])} | {_f(k['bytes'])} |")
    notes = []
    if untouched:
        notes.append(f"indexes not written: {', '.join(untouched)}")
    others = total["other_databases"]
    notes.append(f"other databases in the window: {others['commits']:,} commits, "
                 f"{others['tuples']:,} tuples written, "
                 f"{others.get('databases_created_or_dropped', 0)} created or dropped; "
                 f"checkpoints in the window: {total['checkpoints_in_window']}")
    if not decoded:
        notes.append(f"WAL not decoded: {run.get('waldump', 'unknown reason')}")
    return "\n".join(lines + [""] + notes)
