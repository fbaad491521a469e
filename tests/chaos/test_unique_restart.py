"""PostgreSQL crashing in the middle of an enqueue of a unique key
(docs/security-runtime.md#uniqueness-and-expiry): the enqueue's transaction is gone with
everything it wrote, the key is as the last commit left it, and an enqueue after the
restart folds or creates exactly as it would have."""

from __future__ import annotations

import psycopg
import pytest

from jobwarden import enqueue
from tests.helpers import scalar, wait_for
from tests.pgcluster import accepts as _accepts

pytestmark = pytest.mark.chaos


def test_a_crash_mid_enqueue_loses_only_the_uncommitted_enqueue(private_cluster):
    url = private_cluster.url
    with psycopg.connect(url) as conn:
        first = enqueue(conn, "t", {"v": 1}, unique_key="doc:1", replace=True, delay=600)
        conn.commit()
    # A replace and a new key, uncommitted when the server crashes: the key rows locked,
    # the holder's payload changed in the transaction.
    doomed = psycopg.connect(url)
    assert enqueue(doomed, "t", {"v": 2}, unique_key="doc:1", replace=True).replaced
    enqueue(doomed, "t", {"v": 3}, unique_key="doc:2", unique_for="1h")
    private_cluster.stop("immediate")
    private_cluster.start()
    wait_for(lambda: _accepts(url), timeout=20, message="the restarted cluster")
    with pytest.raises(psycopg.OperationalError):
        doomed.commit()
    doomed.close()

    assert scalar(url, "SELECT payload FROM background_jobs WHERE id = %s", [first]) == {"v": 1}
    assert scalar(url, "SELECT array_agg(key ORDER BY key) FROM job_unique_keys") == ["doc:1"]
    with psycopg.connect(url) as conn:
        again = enqueue(conn, "t", {"v": 4}, unique_key="doc:1", replace=True, delay=600)
        fresh = enqueue(conn, "t", {"v": 5}, unique_key="doc:2", unique_for="1h")
        conn.commit()
    assert again == first and again.replaced and not fresh.folded
    assert scalar(url, "SELECT count(*) FROM background_jobs") == 2
    assert scalar(url, "SELECT payload FROM background_jobs WHERE id = %s", [first]) == {"v": 4}
