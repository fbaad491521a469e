"""GET /metrics: Prometheus exposition of queue health, for a scraper's token or a user."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from console import create_app, sample_data

TOKEN = "scrape-me-0123456789"


@pytest.fixture
def scenario(engine):
    with engine.begin() as conn:
        return sample_data.seed_console_scenario(conn)


@pytest.fixture
def scraper(clean_db, users):
    app = create_app({"TESTING": True, "SECRET_KEY": "test-secret", "DATABASE_URL": clean_db,
                      "METRICS_TOKEN": TOKEN})
    yield app.test_client()
    app.extensions["jobwarden_db"].dispose()


def samples(text: str) -> dict[tuple, float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_a_scraper_with_the_token_gets_job_counts_by_status(scraper, scenario):
    response = scraper.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200
    assert response.mimetype == "text/plain"
    found = samples(response.get_data(as_text=True))
    failed = sum(v for (name, labels), v in found.items()
                 if name == "jobwarden_jobs" and ("status", "failed") in labels)
    completed = sum(v for (name, labels), v in found.items()
                    if name == "jobwarden_jobs" and ("status", "completed") in labels)
    assert (failed, completed) == (9, 52)  # the same numbers the overview shows
    assert found[("jobwarden_oldest_pending_age_seconds", ())] > 0
    assert ("jobwarden_workers", (("state", "running"),)) in found


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"},
                                     {"Authorization": f"Basic {TOKEN}"}])
def test_metrics_refuse_anyone_without_a_token_or_session(scraper, scenario, headers):
    response = scraper.get("/metrics", headers=headers)
    assert response.status_code == 401
    assert b"jobwarden_jobs" not in response.data


def test_a_signed_in_viewer_may_read_metrics(viewer, scenario):
    response = viewer.get("/metrics")
    assert response.status_code == 200 and b"jobwarden_jobs{" in response.data
