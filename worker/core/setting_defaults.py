"""Each JOBWARDEN_* setting's default, declared once: worker/core/settings.py's models
take theirs from these tables, and worker/core/env.py reads a class's table while none of
its variables is set (tests/unit/test_settings_env.py holds each equal to what its model
reads from nothing). With the names every reader of the settings shares: the variables'
prefix, the log levels and SettingsError. Imports no pydantic (env.py says why).
"""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType
from typing import Any

from jobwarden.worker.core.retention_policy import RetentionPolicy

PREFIX = "JOBWARDEN_"
#: The log levels a command takes (--log-level, JOBWARDEN_LOG_LEVEL).
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


class SettingsError(ValueError):
    """A JOBWARDEN_* variable that does not read, said in one line that names it."""


def env_name(field: str) -> str:
    """The environment variable of a setting: `stale_after` -> JOBWARDEN_STALE_AFTER."""
    return PREFIX + field.upper()


#: WorkerSettings' defaults, in its fields' order.
WORKER_DEFAULTS: dict[str, Any] = {
    "home": Path(".jobwarden"),
    "log_level": None,
    "log_format": "text",
    "retention": RetentionPolicy(),
    "duty_interval": None,
    "pooler": None,
    "listen_url": None,
    "max_payload_bytes": 64 * 1024,
    "max_result_bytes": 64 * 1024,
}

#: NotifySettings' defaults, in its fields' order.
NOTIFY_DEFAULTS: dict[str, Any] = {
    "console_url": None,
    "sla": MappingProxyType({}),
    "sla_default": None,
    "notify_interval": 30.0,
    "notify_period": 900.0,
    "notify_queue": "default",
    "notify_allow_private": False,
    "notify_webhook_url": None,
    "notify_webhook_secret": None,
    "notify_webhook_format": "json",
    "notify_smtp_host": None,
    "notify_smtp_port": 587,
    "notify_smtp_user": None,
    "notify_smtp_password": None,
    "notify_smtp_starttls": True,
    "notify_email_from": None,
    "notify_email_to": (),
}
