"""The JOBWARDEN_* settings (worker/core/settings.py, console/core/config.py): a value
that does not read is a SettingsError of one line naming the variable and what is wrong;
set but empty is unset; no module reads a JOBWARDEN_* variable past the settings."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from jobwarden.console.core.config import ConsoleSettings, load_settings
from jobwarden.worker.core.settings import SettingsError, WorkerSettings, env_name, variables

ROOT = Path(__file__).resolve().parents[2]

#: (variable, a value it refuses, what the line says about it)
BAD = [
    ("JOBWARDEN_LOG_LEVEL", "verbose", "input should be 'DEBUG', 'INFO'"),
    ("JOBWARDEN_LOG_FORMAT", "xml", "input should be 'text' or 'json' (got 'xml')"),
    ("JOBWARDEN_RETENTION", "completed=soon", "'completed=soon' needs a positive age"),
    ("JOBWARDEN_RETENTION", "executions=30d", "executions=30d is shorter than failed=90d"),
    ("JOBWARDEN_DUTY_INTERVAL", "0", "'0' must be more than 0"),
    ("JOBWARDEN_POOLER", "session", "input should be 'transaction' (got 'session')"),
    ("JOBWARDEN_MAX_PAYLOAD_BYTES", "64k", "valid integer"),
    ("JOBWARDEN_MAX_PAYLOAD_BYTES", "0", "greater than or equal to 1 (got '0')"),
    ("JOBWARDEN_MAX_RESULT_BYTES", "1e3", "valid integer"),
    ("JOBWARDEN_MAX_RESULT_BYTES", "-5", "greater than or equal to 1 (got '-5')"),
    ("JOBWARDEN_CONSOLE_URL", "ops.example.com/jobs", "absolute http(s) address"),
    ("JOBWARDEN_CONSOLE_TRACE_URL", "javascript:alert(1)//{trace_id}", "absolute http(s) URL"),
    ("JOBWARDEN_CONSOLE_TRACE_URL", "https://tempo.example.com/trace/", "holding {trace_id}"),
    ("JOBWARDEN_CONSOLE_TRACE_URL", "https://t.example.com/{trace_id}/{span_id}",
     "no placeholder but {trace_id}"),
    ("JOBWARDEN_CONSOLE_READ_MAX_LAG", "0", "'0' must be more than 0"),
    ("JOBWARDEN_SLA", "send_email", "'send_email' is not a job type's target"),
    ("JOBWARDEN_SLA", "send_email=soon", "send_email: 'soon' is not a duration"),
    ("JOBWARDEN_SLA", "=30s", "'=30s' is not a job type's target"),
    ("JOBWARDEN_SLA_DEFAULT", "-5m", "'-5m' is negative"),
    ("JOBWARDEN_STALE_AFTER", "abc", "'abc' is not a duration"),
    ("JOBWARDEN_STALE_AFTER", "0s", "'0s' must be more than 0"),
    ("JOBWARDEN_WORKER_GONE_AFTER", "3661d", "'3661d' is longer than 3660d"),
    ("JOBWARDEN_TRUST_PROXY", "maybe", "valid boolean, unable to interpret input (got 'maybe')"),
    ("JOBWARDEN_COOKIE_SECURE", "si", "valid boolean"),
    ("JOBWARDEN_LOGIN_ACCOUNT_FREE_FAILURES", "five", "valid integer"),
    ("JOBWARDEN_LOGIN_ACCOUNT_LOCK_MAX_SECONDS", "0", "greater than or equal to 1"),
    ("JOBWARDEN_LOGIN_ADDRESS_FREE_FAILURES", "-1", "greater than or equal to 0"),
    ("JOBWARDEN_LOGIN_ADDRESS_LOCK_MAX_SECONDS", "1e9", "valid integer"),
    ("JOBWARDEN_LOGIN_FAILURE_WINDOW_SECONDS", "99999999", "less than or equal to 2592000"),
    ("JOBWARDEN_NOTIFY_INTERVAL", "0", "'0' must be more than 0"),
    ("JOBWARDEN_NOTIFY_PERIOD", "soon", "'soon' is not a duration"),
    ("JOBWARDEN_NOTIFY_QUEUE", "two words", "'two words' is not a queue name"),
    ("JOBWARDEN_NOTIFY_ALLOW_PRIVATE", "sometimes", "valid boolean"),
    ("JOBWARDEN_NOTIFY_WEBHOOK_URL", "file:///etc/passwd", "starts with https:// or http://"),
    ("JOBWARDEN_NOTIFY_WEBHOOK_URL", "https://user:pw@hooks.example.com/x",
     "may not hold a user or password"),
    ("JOBWARDEN_NOTIFY_WEBHOOK_FORMAT", "xml", "input should be 'json' or 'slack'"),
    ("JOBWARDEN_NOTIFY_SMTP_HOST", "mail server", "not a host name or an address"),
    ("JOBWARDEN_NOTIFY_SMTP_PORT", "70000", "less than or equal to 65535"),
    ("JOBWARDEN_NOTIFY_SMTP_STARTTLS", "maybe", "valid boolean"),
    ("JOBWARDEN_NOTIFY_EMAIL_FROM", "ops@example.com\r\nBcc: x@evil.example",
     "is not a mail address"),
    ("JOBWARDEN_NOTIFY_EMAIL_TO", "a@example.com, b@example.com>", "is not a mail address"),
]
#: Variables any text reads as (JOBWARDEN_LISTEN_URL is a database URL, checked by
#: jobwarden.worker.store.db.parse_url when the worker starts: test_database_url.py;
#: JOBWARDEN_CONSOLE_READ_URL when the console is mounted: test_console_replica.py).
ANY_TEXT = {"JOBWARDEN_HOME", "JOBWARDEN_LISTEN_URL", "JOBWARDEN_CONSOLE_READ_URL",
            "JOBWARDEN_SECRET_KEY", "JOBWARDEN_METRICS_TOKEN", "JOBWARDEN_RUNBOOK_URL",
            "JOBWARDEN_NOTIFY_WEBHOOK_SECRET", "JOBWARDEN_NOTIFY_SMTP_USER",
            "JOBWARDEN_NOTIFY_SMTP_PASSWORD"}


@pytest.mark.parametrize(("variable", "value", "says"), BAD,
                         ids=[f"{v}={value}" for v, value, _ in BAD])
def test_a_bad_value_is_one_line_naming_its_variable(monkeypatch, variable, value, says):
    monkeypatch.setenv(variable, value)
    model = WorkerSettings if variable in variables(WorkerSettings) else ConsoleSettings
    with pytest.raises(SettingsError) as refused:
        model.load()
    line = str(refused.value)
    assert line.startswith(f"{variable}: ") and says in line, line
    assert "\n" not in line
    if model is WorkerSettings:  # the console's settings include the runtime's
        with pytest.raises(SettingsError, match=f"^{variable}: "):
            ConsoleSettings.load()


def test_every_variable_that_can_be_wrong_has_a_bad_value_above():
    """A new setting gets its case here, or is declared to take any text."""
    assert {v for v, _, _ in BAD} | ANY_TEXT == set(variables(ConsoleSettings))


def test_each_bad_variable_of_several_is_named_in_the_one_line(monkeypatch):
    monkeypatch.setenv("JOBWARDEN_STALE_AFTER", "abc")
    monkeypatch.setenv("JOBWARDEN_SLA", "send_email=1d,export")
    with pytest.raises(SettingsError) as refused:
        load_settings()
    assert str(refused.value) == (
        "JOBWARDEN_SLA: 'export' is not a job type's target like send_email=30s; "
        "JOBWARDEN_STALE_AFTER: 'abc' is not a duration: use e.g. 30, 30s, 5m, 2h or 7d")


def test_the_console_reads_the_registrys_notation_and_its_defaults(monkeypatch):
    for name in variables(ConsoleSettings):
        monkeypatch.delenv(name, raising=False)
    defaults = load_settings()
    assert (defaults["STALE_HEARTBEAT_SECONDS"], defaults["WORKER_GONE_SECONDS"],
            defaults["SLA_TARGETS"], defaults["SLA_DEFAULT_SECONDS"]) == (30, 60, {}, None)
    monkeypatch.setenv("JOBWARDEN_SLA", " send_email=1d, export=2m,")  # a trailing comma
    monkeypatch.setenv("JOBWARDEN_SLA_DEFAULT", "5m")
    monkeypatch.setenv("JOBWARDEN_STALE_AFTER", "45")
    monkeypatch.setenv("JOBWARDEN_LOGIN_ACCOUNT_FREE_FAILURES", "3")
    monkeypatch.setenv("JOBWARDEN_METRICS_TOKEN", "s3cr3t")
    found = load_settings()
    assert found["SLA_TARGETS"] == {"send_email": 86_400, "export": 120}
    assert (found["SLA_DEFAULT_SECONDS"], found["STALE_HEARTBEAT_SECONDS"]) == (300, 45)
    assert (found["LOGIN_ACCOUNT_FREE_FAILURES"], found["METRICS_TOKEN"]) == (3, "s3cr3t")


def test_set_but_empty_is_unset(monkeypatch):
    for name in variables(ConsoleSettings):
        monkeypatch.setenv(name, "")
    assert ConsoleSettings.load() == ConsoleSettings.model_construct()  # the defaults


def test_a_lower_case_variable_is_another_variable(monkeypatch):
    monkeypatch.setenv("jobwarden_stale_after", "abc")
    assert ConsoleSettings.load().stale_after == 30


def test_the_runtime_rereads_a_variable_that_changed(monkeypatch):
    monkeypatch.setenv("JOBWARDEN_POOLER", "transaction")
    monkeypatch.setenv("JOBWARDEN_MAX_PAYLOAD_BYTES", "100")
    assert WorkerSettings.current().pooler == "transaction"
    assert WorkerSettings.one("max_payload_bytes") == 100
    monkeypatch.setenv("JOBWARDEN_POOLER", "None")
    monkeypatch.setenv("JOBWARDEN_MAX_PAYLOAD_BYTES", "200")
    assert WorkerSettings.current().pooler is None
    assert WorkerSettings.one("max_payload_bytes") == 200
    monkeypatch.setenv("JOBWARDEN_MAX_PAYLOAD_BYTES", "lots")
    with pytest.raises(SettingsError, match="^JOBWARDEN_MAX_PAYLOAD_BYTES: "):
        WorkerSettings.one("max_payload_bytes")
    with pytest.raises(SettingsError, match="^JOBWARDEN_MAX_PAYLOAD_BYTES: "):
        WorkerSettings.current()


def test_an_email_target_from_the_environment_is_whole(monkeypatch):
    """The checks across variables say which are missing, in one line; a password is
    never sent in clear; a secret without a URL is a mistake."""
    from jobwarden.worker.core.settings import NotifySettings

    monkeypatch.setenv("JOBWARDEN_NOTIFY_SMTP_HOST", "smtp.example.com")
    with pytest.raises(SettingsError) as refused:
        NotifySettings.load()
    assert str(refused.value) == ("JOBWARDEN_NOTIFY_EMAIL_FROM, JOBWARDEN_NOTIFY_EMAIL_TO: "
                                  "needed as well, for mail through JOBWARDEN_NOTIFY_SMTP_HOST")
    monkeypatch.setenv("JOBWARDEN_NOTIFY_EMAIL_FROM", "jobs@example.com")
    monkeypatch.setenv("JOBWARDEN_NOTIFY_EMAIL_TO", "ops@example.com, oncall@example.com,")
    monkeypatch.setenv("JOBWARDEN_NOTIFY_SMTP_PASSWORD", "s3cr3t-pw")
    monkeypatch.setenv("JOBWARDEN_NOTIFY_SMTP_STARTTLS", "0")
    with pytest.raises(SettingsError, match="^JOBWARDEN_NOTIFY_SMTP_PASSWORD: refused") as no:
        NotifySettings.load()
    assert "s3cr3t-pw" not in str(no.value)
    monkeypatch.setenv("JOBWARDEN_NOTIFY_SMTP_STARTTLS", "1")
    loaded = NotifySettings.load()
    assert loaded.notify_email_to == ("ops@example.com", "oncall@example.com")
    monkeypatch.setenv("JOBWARDEN_NOTIFY_WEBHOOK_SECRET", "k")
    with pytest.raises(SettingsError, match="^JOBWARDEN_NOTIFY_WEBHOOK_SECRET: set without"):
        NotifySettings.load()


def test_a_webhook_url_in_an_error_is_never_repeated(monkeypatch):
    """Its path may be the secret (Slack's): a URL refused is not echoed."""
    from jobwarden.worker.core.settings import NotifySettings

    monkeypatch.setenv("JOBWARDEN_NOTIFY_WEBHOOK_URL", "ftp://hooks.example.com/T0/B0/s3cr3t")
    with pytest.raises(SettingsError) as refused:
        NotifySettings.load()
    assert "s3cr3t" not in str(refused.value)


def test_a_secret_is_never_repeated_in_an_error(monkeypatch):
    from pydantic import Field, SecretStr

    from jobwarden.worker.core.settings import Settings

    class Strict(Settings):
        token: SecretStr = Field(min_length=20)

    monkeypatch.setenv("JOBWARDEN_TOKEN", "s3cr3t")
    with pytest.raises(SettingsError) as refused:
        Strict.load()
    assert str(refused.value).startswith("JOBWARDEN_TOKEN: ")
    assert "s3cr3t" not in str(refused.value)


def test_every_field_is_named_after_its_variable():
    for name, field in ConsoleSettings.model_fields.items():
        assert field.alias == env_name(name) and field.description, name


def environment_reads(path: Path) -> list[str]:
    """Each read of a JOBWARDEN_* variable straight from the environment in one file:
    os.environ.get("JOBWARDEN_X"), os.getenv(...), os.environ["JOBWARDEN_X"]."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        key = None
        if (isinstance(node, ast.Call) and node.args
                and getattr(node.func, "attr", getattr(node.func, "id", None))
                in ("get", "getenv", "pop", "setdefault")):
            key = node.args[0]
        elif isinstance(node, ast.Subscript) and getattr(node.value, "attr", "") == "environ":
            key = node.slice
        if isinstance(key, ast.Constant) and str(key.value).startswith("JOBWARDEN_"):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno} {key.value}")
    return found


def test_no_module_reads_a_jobwarden_variable_past_the_settings(tmp_path):
    modules = sorted([*(ROOT / "worker").rglob("*.py"), *(ROOT / "console").rglob("*.py")])
    assert len(modules) > 60  # the scan really looked at both packages
    assert [hit for path in modules for hit in environment_reads(path)] == []
    probe = ROOT / "worker" / "_settings_probe.py"
    try:  # the scan sees each form
        probe.write_text("import os\nos.environ.get('JOBWARDEN_A')\nos.getenv('JOBWARDEN_B')\n"
                         "os.environ['JOBWARDEN_C']\nos.environ.get('HOME')\n")
        assert len(environment_reads(probe)) == 3
    finally:
        probe.unlink()
