"""The runtime's reads of the JOBWARDEN_* settings (worker/core/env.py): each class's
defaults without pydantic while none of its variables is set, its model once one is;
every default declared once and equal to what its model reads from nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from types import MappingProxyType

import pytest

from jobwarden.worker.core import env
from jobwarden.worker.core.env import (
    NOTIFY_DEFAULTS,
    WORKER_DEFAULTS,
    SettingsError,
    load_worker_settings,
    notify_settings,
    worker_setting,
    worker_settings,
)
from jobwarden.worker.core.settings import NotifySettings, WorkerSettings


@pytest.fixture(autouse=True)
def no_variables(monkeypatch):
    """Each test starts from an environment that sets no JOBWARDEN_* variable."""
    for name in list(os.environ):
        if name.startswith("JOBWARDEN_"):
            monkeypatch.delenv(name)
    monkeypatch.setattr(env, "_DEFAULTED", set())


@pytest.mark.parametrize("model, table", [(WorkerSettings, WORKER_DEFAULTS),
                                          (NotifySettings, NOTIFY_DEFAULTS)],
                         ids=["worker", "notify"])
def test_each_default_is_what_its_model_reads_from_nothing(model, table):
    assert list(table) == list(model.model_fields)  # every field, in the model's order
    read = model.model_validate({})
    for name, value in table.items():
        got = getattr(read, name)
        assert got == value, name
        if not isinstance(value, MappingProxyType):  # the model's own is a plain dict
            assert type(got) is type(value), name


def test_unset_variables_are_read_as_the_defaults_without_a_model():
    assert not isinstance(worker_settings(), WorkerSettings)
    assert not isinstance(notify_settings(), NotifySettings)
    assert not isinstance(load_worker_settings(), WorkerSettings)
    for name, value in WORKER_DEFAULTS.items():
        assert getattr(worker_settings(), name) == value
        assert worker_setting(name) == value
    assert notify_settings().notify_queue == "default"
    with pytest.raises(AttributeError):
        worker_settings().log_format = "json"  # read-only, as the frozen model is
    with pytest.raises(AttributeError):
        worker_settings().no_such_setting  # noqa: B018


def test_set_but_empty_is_unset(monkeypatch):
    monkeypatch.setenv("JOBWARDEN_LOG_FORMAT", "")
    monkeypatch.setenv("JOBWARDEN_NOTIFY_QUEUE", "")
    assert not isinstance(worker_settings(), WorkerSettings)
    assert not isinstance(notify_settings(), NotifySettings)


def test_a_variable_that_is_set_is_read_by_its_model(monkeypatch):
    monkeypatch.setenv("JOBWARDEN_LOG_FORMAT", "json")
    assert isinstance(worker_settings(), WorkerSettings)
    assert worker_settings().log_format == "json"
    assert load_worker_settings().log_format == "json"
    # The other class has none of its variables set: its defaults, still no model.
    assert not isinstance(notify_settings(), NotifySettings)
    monkeypatch.setenv("JOBWARDEN_NOTIFY_QUEUE", "mail")
    assert notify_settings().notify_queue == "mail"


def test_a_variable_that_does_not_read_is_refused_in_one_line(monkeypatch):
    monkeypatch.setenv("JOBWARDEN_LOG_FORMAT", "xml")
    with pytest.raises(SettingsError, match="^JOBWARDEN_LOG_FORMAT: input should be"):
        load_worker_settings()
    with pytest.raises(SettingsError, match="^JOBWARDEN_LOG_FORMAT: "):
        worker_settings()
    # One setting's first read checks every variable of its class, as the model's does.
    with pytest.raises(SettingsError, match="^JOBWARDEN_LOG_FORMAT: "):
        worker_setting("max_payload_bytes")
    monkeypatch.setenv("JOBWARDEN_NOTIFY_SMTP_PORT", "99999")
    with pytest.raises(SettingsError, match="^JOBWARDEN_NOTIFY_SMTP_PORT: "):
        notify_settings()


def test_one_setting_is_read_again_when_its_variable_changes(monkeypatch):
    assert worker_setting("max_payload_bytes") == 64 * 1024
    monkeypatch.setenv("JOBWARDEN_MAX_PAYLOAD_BYTES", "100")
    assert worker_setting("max_payload_bytes") == 100
    monkeypatch.setenv("JOBWARDEN_MAX_PAYLOAD_BYTES", "lots")
    with pytest.raises(SettingsError, match="^JOBWARDEN_MAX_PAYLOAD_BYTES: "):
        worker_setting("max_payload_bytes")
    monkeypatch.delenv("JOBWARDEN_MAX_PAYLOAD_BYTES")
    assert worker_setting("max_payload_bytes") == 64 * 1024


#: What a worker's start and an application's enqueue load, in a fresh interpreter.
LOADS = """
import sys
import jobwarden
from jobwarden import enqueue, job
import jobwarden.worker.cli.commands, jobwarden.worker.process, jobwarden.worker.duties.periodic
from jobwarden.worker.core.env import (load_worker_settings, notify_settings,
                                       worker_setting, worker_settings)
from jobwarden.worker.core.sanitize import validation_error
load_worker_settings(), worker_settings(), notify_settings()
worker_setting("max_payload_bytes"), worker_setting("max_result_bytes")
assert validation_error().__name__ == "_NotLoaded"
print(sorted(m for m in sys.modules if m.split(".")[0] in ("pydantic", "pydantic_core")))
"""


def _loaded(extra: dict[str, str]) -> str:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("JOBWARDEN_")}
    out = subprocess.run([sys.executable, "-c", LOADS], env={**clean, **extra},
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_a_worker_start_with_no_variable_set_never_loads_pydantic():
    assert _loaded({}) == "[]"


def test_a_variable_set_loads_the_model_that_reads_it():
    # (the same script fails at validation_error() once pydantic is loaded: the check
    # that the probe can see pydantic at all)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("JOBWARDEN_")}
    out = subprocess.run([sys.executable, "-c", LOADS],
                         env={**clean, "JOBWARDEN_LOG_FORMAT": "json"},
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and "AssertionError" in out.stderr
