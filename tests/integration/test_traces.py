"""Traces from request to job (worker/core/tracing.py, docs/guide/traces.md), with the
OpenTelemetry SDK's in-memory exporter and a real worker: a job enqueued in a traced Flask
request runs its first attempt in a child of the request's span and its retry in a new
trace that links to it."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import psycopg
import pytest
from flask import Flask
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from opentelemetry.util._once import Once

from jobwarden import enqueue
from jobwarden.console import create_app
from jobwarden.worker.core import tracing
from jobwarden.worker.core.errors import RetryableError
from jobwarden.worker.core.policy import RetryPolicy
from jobwarden.worker.jobs.registry import Registry, job
from tests.console_support import login
from tests.docs_samples import ROOT
from tests.helpers import as_handler_kind, running_worker, scalar, wait_for


def _reset_provider() -> None:
    # The API lets a process set its provider once; its own tests reset these two the
    # same way (opentelemetry-test-utils' reset_trace_globals).
    trace._TRACER_PROVIDER_SET_ONCE = Once()  # type: ignore[attr-defined]
    trace._TRACER_PROVIDER = None  # type: ignore[attr-defined]
    tracing.recheck()


@pytest.fixture
def spans():
    """A configured SDK provider for this test only, exporting to memory."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    _reset_provider()
    trace.set_tracer_provider(provider)
    tracing.recheck()
    yield exporter
    provider.shutdown()
    _reset_provider()


def shop(url: str, registry: Registry) -> Flask:
    """A web app whose order view enqueues in the request's trace (a SERVER span, as an
    instrumented Flask app opens one for each request)."""
    app = Flask("shop")
    tracer = trace.get_tracer("shop")

    @app.post("/orders")
    def orders():
        with tracer.start_as_current_span("POST /orders", kind=SpanKind.SERVER), \
                psycopg.connect(url) as conn:
            job_id = enqueue(conn, "charge", {"order": 7}, registry=registry)
        return {"job": job_id}

    return app


@pytest.mark.parametrize("handler_kind", ["thread", "coroutine"])
def test_the_first_attempt_is_the_requests_child_and_the_retry_links_to_it(
        clean_db, spans, handler_kind):
    reg = Registry()

    @job("charge", registry=reg, max_attempts=3,
         backoff=RetryPolicy(base=0, cap=0, jitter=0))
    @as_handler_kind(handler_kind)
    def charge(ctx, payload):
        # the handler's own span is the execution's child
        with trace.get_tracer("shop").start_as_current_span("call the bank"):
            if ctx.attempt == 1:
                raise RetryableError("BANK_TIMEOUT", "the bank did not answer")

    job_id = shop(clean_db, reg).test_client().post("/orders").get_json()["job"]
    with running_worker(reg, clean_db):
        wait_for(lambda: scalar(clean_db, "SELECT status FROM background_jobs WHERE id = %s",
                                [job_id]) == "completed", message="the job to complete")
    wait_for(lambda: len(spans.get_finished_spans()) == 5, message="five spans")
    by_name: dict[str, list] = {}
    for s in spans.get_finished_spans():
        by_name.setdefault(s.name, []).append(s)
    (request,) = by_name["POST /orders"]
    first, retry = sorted(by_name["process charge"], key=lambda s: s.attributes[
        "jobwarden.job.attempt"])
    # attempt 1: in the request's trace, its parent the request's span
    assert first.context.trace_id == request.context.trace_id
    assert first.parent.span_id == request.context.span_id
    assert first.kind is SpanKind.CONSUMER and not first.links
    assert first.status.status_code is StatusCode.ERROR
    assert dict(first.attributes) == {
        "messaging.system": "jobwarden", "messaging.operation.type": "process",
        "messaging.destination.name": "default", "messaging.message.id": str(job_id),
        "jobwarden.job.id": job_id, "jobwarden.job.type": "charge",
        "jobwarden.job.attempt": 1, "jobwarden.job.outcome": "retry",
        "jobwarden.error_code": "BANK_TIMEOUT"}
    # attempt 2: a trace of its own, linked to the request's span
    assert retry.parent is None and retry.context.trace_id != request.context.trace_id
    assert [(link.context.trace_id, link.context.span_id) for link in retry.links] == [
        (request.context.trace_id, request.context.span_id)]
    assert retry.attributes["jobwarden.job.outcome"] == "completed"
    assert "jobwarden.error_code" not in retry.attributes
    assert retry.status.status_code is StatusCode.OK
    # the handler's spans are the executions' children
    bank = {s.parent.span_id for s in by_name["call the bank"]}
    assert bank == {first.context.span_id, retry.context.span_id}


def test_a_job_enqueued_outside_any_trace_stores_nothing_and_runs_in_a_root_span(
        clean_db, spans):
    reg = Registry()
    job("plain", registry=reg)(lambda ctx, payload: None)
    with psycopg.connect(clean_db) as conn:
        job_id = enqueue(conn, "plain", {}, registry=reg)
    assert scalar(clean_db, "SELECT trace_context FROM background_jobs WHERE id = %s",
                  [job_id]) is None
    with running_worker(reg, clean_db):
        wait_for(lambda: len(spans.get_finished_spans()) == 1, message="the job's span")
    (span,) = spans.get_finished_spans()
    assert span.parent is None and not span.links


def test_without_a_configured_provider_nothing_is_stored_and_no_span_starts(clean_db):
    _reset_provider()  # the API's default: a proxy that records nothing
    assert not tracing.enabled()
    reg = Registry()
    job("plain", registry=reg)(lambda ctx, payload: None)
    with trace.get_tracer("shop").start_as_current_span("POST /orders"), \
            psycopg.connect(clean_db) as conn:
        job_id = enqueue(conn, "plain", {}, registry=reg)
    # a non-recording span has no valid context: nothing to keep
    assert scalar(clean_db, "SELECT trace_context FROM background_jobs WHERE id = %s",
                  [job_id]) is None


def test_without_the_package_enqueue_and_the_worker_run_and_import_none_of_it(clean_db):
    """A process where `import opentelemetry` fails, as it does when the package is not
    installed: a job is enqueued and run, and no module of the package was loaded."""
    script = textwrap.dedent(f"""
        import sys, time
        class NoOtel:
            def find_spec(self, name, path=None, target=None):
                if name == "opentelemetry" or name.startswith("opentelemetry."):
                    raise ImportError("no opentelemetry here")
        sys.meta_path.insert(0, NoOtel())
        import psycopg
        from jobwarden import enqueue
        from jobwarden.worker.jobs.registry import Registry, job
        from tests.helpers import running_worker, scalar, wait_for
        reg = Registry()
        job("plain", registry=reg)(lambda ctx, payload: None)
        url = {clean_db!r}
        with psycopg.connect(url) as conn:
            job_id = enqueue(conn, "plain", {{}}, registry=reg)
        with running_worker(reg, url):
            wait_for(lambda: scalar(url, "SELECT status FROM background_jobs WHERE id = %s",
                                    [job_id]) == "completed")
        loaded = sorted(m for m in sys.modules if m.startswith("opentelemetry"))
        print("loaded:", loaded)
        assert not loaded, loaded
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "loaded: []" in done.stdout


@pytest.mark.parametrize("stored", [
    None, "", "not json", "[]", '{"traceparent": 7}', '{"traceparent": "00-zz-01"}',
    '{"traceparent": "00-' + "0" * 32 + '-' + "1" * 16 + '-01"}',
    '{"traceparent": "00-' + "a" * 32 + '-' + "1" * 16 + '-01", "x": "' + "y" * 3000 + '"}',
])
def test_a_stored_context_that_is_not_a_traceparent_gives_no_trace_id(stored):
    assert tracing.trace_id(stored) is None


def test_a_stored_traceparent_gives_its_trace_id():
    stored = json.dumps({"traceparent": "00-" + "AB" * 16 + "-" + "1" * 16 + "-01"})
    assert tracing.trace_id(stored) == "ab" * 16


def test_a_hostile_stored_context_runs_the_job_in_a_root_span(clean_db, spans):
    """A context written by hand (or by a buggy client) is ignored, not an error."""
    reg = Registry()
    job("plain", registry=reg)(lambda ctx, payload: None)
    with psycopg.connect(clean_db) as conn:
        job_id = enqueue(conn, "plain", {}, registry=reg)
        conn.execute("UPDATE background_jobs SET trace_context = %s WHERE id = %s",
                     ['{"traceparent": "00-<script>-x-01"}', job_id])
    with running_worker(reg, clean_db):
        wait_for(lambda: scalar(clean_db, "SELECT status FROM background_jobs WHERE id = %s",
                                [job_id]) == "completed", message="the job to complete")
    wait_for(lambda: len(spans.get_finished_spans()) == 1, message="the job's span")
    (span,) = spans.get_finished_spans()
    assert span.parent is None and not span.links


def test_the_job_page_links_to_the_trace_when_a_viewer_is_configured(clean_db, users):
    trace_hex = "0af7651916cd43dd8448eb211c80319c"
    with psycopg.connect(clean_db) as conn:
        traced = conn.execute(
            "INSERT INTO background_jobs (type, queue, payload, trace_context) "
            "VALUES ('t', 'default', '{}', %s) RETURNING id",
            [json.dumps({"traceparent": f"00-{trace_hex}-b7ad6b7169203331-01"})]).fetchone()[0]
        plain = conn.execute("INSERT INTO background_jobs (type, queue, payload) "
                             "VALUES ('t', 'default', '{}') RETURNING id").fetchone()[0]
    for template, link in ((None, None),
                           ("https://tempo.example.com/trace/{trace_id}?x=1",
                            f"https://tempo.example.com/trace/{trace_hex}?x=1")):
        app = create_app({"TESTING": True, "SECRET_KEY": "t", "DATABASE_URL": clean_db,
                          "TRACE_URL": template})
        client = app.test_client()
        assert login(client, "vera").status_code == 303
        html = client.get(f"/jobs/{traced}").get_data(as_text=True)
        assert trace_hex in html
        assert (f'href="{link}"' in html.replace("&amp;", "&")) if link else (
            'data-testid="job-trace-link"' not in html)
        other = client.get(f"/jobs/{plain}").get_data(as_text=True)
        assert 'data-testid="job-trace"' in other and trace_hex not in other
        app.extensions["jobwarden_db"].dispose()


def test_a_provider_set_after_the_worker_started_is_seen_at_the_next_recheck(monkeypatch):
    """`enabled` asks the API at most once a RECHECK_SECONDS (the question costs an
    environment lookup per execution); a provider set later is seen at the next one."""
    now = [1000.0]
    monkeypatch.setattr(tracing.time, "monotonic", lambda: now[0])
    _reset_provider()
    assert not tracing.enabled()
    provider = TracerProvider()
    trace.set_tracer_provider(provider)
    try:
        assert not tracing.enabled()  # the answer of the last check, until the next
        now[0] += tracing.RECHECK_SECONDS
        assert tracing.enabled()
    finally:
        provider.shutdown()
        _reset_provider()
