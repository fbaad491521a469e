"""A worker's settings are one frozen WorkerConfig; its constructor takes it, and the
keyword form in docs/guide/workers.md (`WorkerProcess(queues=..., concurrency=8)`) builds
one.
Nothing here opens a connection: pools and claim connections open in run()."""

from __future__ import annotations

import dataclasses

import pytest

from jobwarden.worker.engine.config import WorkerConfig
from jobwarden.worker.engine.producer import ClaimSpec, ProducerSettings
from jobwarden.worker.jobs.registry import Registry, job
from jobwarden.worker.process import WorkerProcess

URL = "postgresql://nobody@127.0.0.1:1/none"


def a_registry() -> Registry:
    reg = Registry()

    @job("config.t", registry=reg, lease=30)
    def t(ctx, payload):
        pass

    return reg


def test_the_settings_are_frozen():
    config = WorkerConfig(url=URL, concurrency=4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.concurrency = 8  # type: ignore[misc]
    for record in (ProducerSettings(), ClaimSpec(types=["t"], leases=[1.0], worker_id="w")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            record.poll_interval = 1.0  # type: ignore[misc, union-attr]


def test_the_worker_takes_a_config_and_the_keywords_build_the_same_one():
    given = WorkerConfig(url=URL, queues="email=2,default", concurrency=3, grace=7.0,
                         worker_id="w-1", claim_batch=50)
    by_config = WorkerProcess(a_registry(), given)
    by_keywords = WorkerProcess(a_registry(), url=URL, queues="email=2,default",
                                concurrency=3, grace=7.0, worker_id="w-1", claim_batch=50)
    assert by_config.config == by_keywords.config == given
    assert by_keywords.concurrency == 5 and by_keywords.queues == ["email", "default"]


def test_a_config_and_keywords_together_are_refused():
    with pytest.raises(TypeError, match="either a WorkerConfig or keyword settings"):
        WorkerProcess(a_registry(), WorkerConfig(url=URL), grace=1.0)


def test_an_unknown_setting_is_named():
    with pytest.raises(TypeError, match="gracee"):
        WorkerProcess(a_registry(), url=URL, gracee=1.0)


@pytest.mark.parametrize("settings, message", [
    ({"claim_batch": 0}, "claim and flush batches must hold at least 1 job"),
    ({"flush_batch": 0}, "claim and flush batches must hold at least 1 job"),
    ({"buffer_size": -1}, "buffer size and flush interval cannot be negative"),
    ({"flush_interval": -0.1}, "buffer size and flush interval cannot be negative"),
    ({"flush_writers": 0}, "flush writers must be 1 to 8"),
    ({"flush_writers": 9}, "flush writers must be 1 to 8"),
])
def test_bad_settings_are_refused_when_the_config_is_made(settings, message):
    with pytest.raises(ValueError, match=message):
        WorkerConfig(url=URL, **settings)
