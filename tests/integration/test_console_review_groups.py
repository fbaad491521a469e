"""Needs review at scale: unknown jobs in groups, each decided at once through the bulk
review (reason, audit, exactly the group's jobs), by operators only; two operators
deciding the same group at once act on each job once (compare-and-set, real connections)."""

from __future__ import annotations

import threading

import psycopg
import pytest

from jobwarden.console import create_app
from jobwarden.worker.ops.operations import act_on_selection
from tests.console_support import login, post_form
from tests.helpers import wait_for

GROUP = 300


def _unknown(conn, n: int, job_type: str, code: str | None, verdict: str | None = None,
             status: str = "unknown") -> list[int]:
    return [r[0] for r in conn.execute(
        "INSERT INTO background_jobs (type, payload, status, attempts, last_error_code, "
        "reconcile_verdict) SELECT %s, '{}', %s, 1, %s, %s FROM generate_series(1, %s) "
        "RETURNING id", [job_type, status, code, verdict, n])]


@pytest.fixture
def group(clean_db) -> dict[str, list[int]]:
    """A group of GROUP unknown jobs, and jobs beside it: its type and code with another
    verdict, failed, or no code; its code in another type."""
    with psycopg.connect(clean_db) as conn:
        made = {"group": _unknown(conn, GROUP, "pay.charge", "GATEWAY_TIMEOUT")}
        made["told"] = _unknown(conn, 3, "pay.charge", "GATEWAY_TIMEOUT", "unknown")
        made["failed"] = _unknown(conn, 3, "pay.charge", "GATEWAY_TIMEOUT", status="failed")
        made["no_code"] = _unknown(conn, 3, "pay.charge", None)
        made["other_type"] = _unknown(conn, 3, "crm.sync", "GATEWAY_TIMEOUT")
        made["group"] += _unknown(conn, 2, "pay.charge", "GATEWAY_TIMEOUT")  # newest
    return made


def _client(url: str, who: str, **settings):
    app = create_app({"TESTING": True, "SECRET_KEY": "t", "DATABASE_URL": url, **settings})
    client = app.test_client()
    assert login(client, who).status_code == 303
    return app, client


def _statuses(url: str) -> dict[int, str]:
    with psycopg.connect(url) as conn:
        return dict(conn.execute("SELECT id, status FROM background_jobs").fetchall())


def _decide(client, of: int, action: str) -> str:
    response = post_form(client, "/review/group", {"of": str(of), "action": action},
                         token_from="/review")
    assert response.status_code == 303, response.get_data(as_text=True)[:300]
    return response.headers["Location"].split("/bulk/")[1].split("?")[0]


def test_a_group_is_decided_once_with_a_reason_and_audited(group, clean_db, users):
    app, client = _client(clean_db, "otto")
    before = _statuses(clean_db)
    selection = _decide(client, group["group"][0], "mark_completed")
    review = client.get(f"/bulk/{selection}").get_data(as_text=True)
    assert f'data-testid="selected-count">{GROUP + 2}<' in review
    assert "unknown jobs of type pay.charge, code GATEWAY_TIMEOUT, no verdict" in review
    post_form(client, f"/bulk/{selection}", {"reason": "the gateway's ledger shows them",
                                             "request_id": "g1", "mode": "all"},
              token_from=f"/bulk/{selection}")
    after = _statuses(clean_db)
    assert {after[i] for i in group["group"]} == {"completed"}
    bystanders = [i for k, ids in group.items() if k != "group" for i in ids]
    assert {i: after[i] for i in bystanders} == {i: before[i] for i in bystanders}
    with psycopg.connect(clean_db) as conn:
        audit = conn.execute("SELECT job_id, action, actor, reason FROM job_audit "
                             "WHERE bulk_id = %s", [selection]).fetchall()
    assert sorted(a[0] for a in audit) == sorted(group["group"])
    assert {a[1:] for a in audit} == {("mark_completed", "otto",
                                       "the gateway's ledger shows them")}
    # decided: the group is gone from the page, its job's link says so
    page = client.get(f"/review?of={group['group'][0]}").get_data(as_text=True)
    assert 'data-testid="group-gone"' in page
    app.extensions["jobwarden_db"].dispose()


def test_a_viewer_sees_the_groups_and_no_decision(group, clean_db, users):
    app, client = _client(clean_db, "vera")
    page = client.get("/review").get_data(as_text=True)
    assert f'data-group-of="{group["group"][-1]}"' in page
    assert "/review/group" not in page
    response = client.post("/review/group", data={"of": group["group"][0],
                                                  "action": "mark_completed"})
    assert response.status_code in (400, 403)  # no CSRF token, no role: nothing changes
    assert set(_statuses(clean_db).values()) == {"unknown", "failed"}
    app.extensions["jobwarden_db"].dispose()


@pytest.mark.parametrize("of, status", [("abc", 400), ("-1", 400), ("9" * 30, 400),
                                        ("999999", 200)])
def test_a_group_named_by_a_bad_id_is_a_400_or_says_it_is_gone(group, clean_db, users,
                                                                of, status):
    app, client = _client(clean_db, "vera")
    response = client.get("/review", query_string={"of": of})
    assert response.status_code == status
    if status == 200:
        assert 'data-testid="group-gone"' in response.get_data(as_text=True)
    app.extensions["jobwarden_db"].dispose()


@pytest.mark.parametrize("form", [{"of": "abc", "action": "mark_completed"},
                                  {"of": "1", "action": "cancel"},
                                  {"of": "1", "action": "'; DROP TABLE background_jobs"}])
def test_a_forged_group_decision_selects_nothing(group, clean_db, users, form):
    app, client = _client(clean_db, "otto")
    response = post_form(client, "/review/group", form, token_from="/review")
    assert response.status_code in (303, 400)
    with psycopg.connect(clean_db) as conn:
        assert conn.execute("SELECT count(*) FROM console_selections").fetchone()[0] == 0
    app.extensions["jobwarden_db"].dispose()


def test_two_operators_deciding_one_group_at_once_act_on_each_job_once(group, clean_db,
                                                                        users):
    """Otto marks the group completed, Ada failed, both started together, in chunks of 40:
    whatever the interleaving, each job is changed by one of them, audited once, and the
    other's chunk leaves it alone."""
    (app_a, otto), (app_b, ada) = (_client(clean_db, who, BULK_CHUNK_SIZE=40)
                                   for who in ("otto", "ada"))
    newest = group["group"][-1]
    selections = {"otto": _decide(otto, newest, "mark_completed"),
                  "ada": _decide(ada, newest, "mark_failed")}
    start = threading.Barrier(2)
    errors = []

    def run(client, who):
        try:
            sel = selections[who]
            token_page = f"/bulk/{sel}"
            start.wait(timeout=10)
            post_form(client, f"/bulk/{sel}", {"reason": f"{who} decides", "mode": "all",
                                               "request_id": f"race-{who}"},
                      token_from=token_page)
            for _ in range(100):
                with psycopg.connect(clean_db) as conn:
                    state = conn.execute("SELECT state FROM console_selections WHERE id = %s",
                                         [sel]).fetchone()[0]
                if state == "done":
                    return
                post_form(client, f"/bulk/{sel}/step", {}, token_from=token_page)
            errors.append(f"{who}: not done after 100 steps")
        except Exception as exc:  # reported below: a thread's assertion would be lost
            errors.append(f"{who}: {exc!r}")

    threads = [threading.Thread(target=run, args=(c, w)) for c, w in ((otto, "otto"),
                                                                       (ada, "ada"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors and not any(t.is_alive() for t in threads), errors
    with psycopg.connect(clean_db) as conn:
        audited = conn.execute(
            "SELECT job_id, count(*), min(action) FROM job_audit WHERE bulk_id = ANY(%s) "
            "GROUP BY job_id", [list(selections.values())]).fetchall()
        totals = {actor: (changed, left) for actor, changed, left in conn.execute(
            "SELECT actor, changed, left_alone FROM console_selections").fetchall()}
    assert sorted(r[0] for r in audited) == sorted(group["group"])
    assert {r[1] for r in audited} == {1}  # each job once
    statuses = _statuses(clean_db)
    assert all(statuses[job_id] == {"mark_completed": "completed", "mark_failed": "failed"}[
        action] for job_id, _n, action in audited)
    size = len(group["group"])
    assert sum(changed for changed, _left in totals.values()) == size
    assert all(changed + left == size for changed, left in totals.values()), totals
    app_a.extensions["jobwarden_db"].dispose()
    app_b.extensions["jobwarden_db"].dispose()


def test_a_chunk_waits_for_the_other_operators_and_leaves_its_jobs_alone(group, clean_db,
                                                                         users):
    """Deterministic: Ada's decision holds ten of the group's rows in an open transaction
    (as her chunk does) while Otto's chunk starts on the whole group; it waits for those
    rows, then finds them decided and leaves them alone (compare-and-set on the status
    each job had when selected)."""
    app_a, otto = _client(clean_db, "otto", BULK_CHUNK_SIZE=1000)
    app_b, ada = _client(clean_db, "ada")
    newest = group["group"][-1]
    mine, hers = _decide(otto, newest, "mark_completed"), _decide(ada, newest, "mark_failed")
    held = group["group"][:10]
    with psycopg.connect(clean_db) as conn:
        result = act_on_selection(conn, "mark_failed", held, actor="ada", role="admin",
                                  reason="ada decides ten", bulk_id=hers,
                                  selected_statuses=["unknown"] * len(held))
        assert result.jobs == len(held)
        # Otto starts while her transaction is open: his chunk waits on her rows.
        done = threading.Event()
        threading.Thread(target=lambda: (post_form(
            otto, f"/bulk/{mine}", {"reason": "otto decides", "mode": "all",
                                    "request_id": "w1"}, token_from=f"/bulk/{mine}"),
            done.set()), daemon=True).start()
        wait_for(lambda: conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = "
            "'jobwarden-console' AND wait_event_type = 'Lock' "
            "AND datname = current_database()").fetchone()[0] == 1,
            message="otto's chunk waiting for ada's rows")
        assert not done.is_set()
        conn.commit()
    wait_for(done.is_set, message="otto's chunk done")
    statuses = _statuses(clean_db)
    assert {statuses[i] for i in held} == {"failed"}
    assert {statuses[i] for i in group["group"][10:]} == {"completed"}
    with psycopg.connect(clean_db) as conn:
        changed, left = conn.execute("SELECT changed, left_alone FROM console_selections "
                                     "WHERE id = %s", [mine]).fetchone()
        audited = conn.execute("SELECT count(*) FROM job_audit WHERE bulk_id = %s",
                               [mine]).fetchone()[0]
    assert (changed, left, audited) == (len(group["group"]) - 10, 10, len(group["group"]) - 10)
    app_a.extensions["jobwarden_db"].dispose()
    app_b.extensions["jobwarden_db"].dispose()
