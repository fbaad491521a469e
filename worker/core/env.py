"""The JOBWARDEN_* settings as the runtime reads them: each class's defaults, without
pydantic, while none of its variables is set; its model (worker/core/settings.py) as soon
as one is.

Importing pydantic and building the settings models costs about 55 ms, over a quarter of
what a worker imports (bench/bench_startup.py), and every `jobwarden` command and every
application that imports Jobwarden to enqueue would pay it to read an environment that
sets nothing.
A variable that is set is read as before: validated by its model, a SettingsError naming
it when it does not read. An application that uses pydantic has it loaded anyway.

Each default is declared once, in worker/core/setting_defaults.py, which the models take
theirs from too.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, cast

from jobwarden.worker.core.setting_defaults import LEVELS as LEVELS
from jobwarden.worker.core.setting_defaults import NOTIFY_DEFAULTS, WORKER_DEFAULTS, env_name
from jobwarden.worker.core.setting_defaults import SettingsError as SettingsError

if TYPE_CHECKING:
    from jobwarden.worker.core.settings import NotifySettings, WorkerSettings


class Defaults:
    """A settings class's defaults, read by attribute as its (frozen) model's values are."""

    def __init__(self, values: dict[str, Any]) -> None:
        object.__setattr__(self, "_values", values)

    def __getattr__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"settings are read-only: {name}")

    def __repr__(self) -> str:
        return f"Defaults({', '.join(self._values)})"


_WORKER = Defaults(WORKER_DEFAULTS)
_NOTIFY = Defaults(NOTIFY_DEFAULTS)
_WORKER_VARIABLES = tuple(map(env_name, WORKER_DEFAULTS))
_NOTIFY_VARIABLES = tuple(map(env_name, NOTIFY_DEFAULTS))


def _unset(variables: tuple[str, ...]) -> bool:
    """No variable of these is set (set but empty counts as unset, as the models read it)."""
    return not any(map(os.environ.get, variables))


def worker_settings() -> WorkerSettings:
    """WorkerSettings.current(), or its defaults while none of its variables is set."""
    if _unset(_WORKER_VARIABLES):
        return cast("WorkerSettings", _WORKER)
    from jobwarden.worker.core.settings import WorkerSettings  # pydantic: a variable is set
    return WorkerSettings.current()


def load_worker_settings() -> WorkerSettings:
    """WorkerSettings.load() (read now: a command's check at its start), or its defaults
    while none of its variables is set."""
    if _unset(_WORKER_VARIABLES):
        return cast("WorkerSettings", _WORKER)
    from jobwarden.worker.core.settings import WorkerSettings  # pydantic: a variable is set
    return WorkerSettings.load()


def notify_settings() -> NotifySettings:
    """NotifySettings.current(), or its defaults while none of its variables is set."""
    if _unset(_NOTIFY_VARIABLES):
        return cast("NotifySettings", _NOTIFY)
    from jobwarden.worker.core.settings import NotifySettings  # pydantic: a variable is set
    return NotifySettings.current()


#: The settings worker_setting has answered with their defaults, no variable being set.
_DEFAULTED: set[str] = set()


def worker_setting(name: str) -> Any:
    """One WorkerSettings value, as WorkerSettings.one reads it (its first read of a
    variable's value checks them all; later ones look up that variable alone: enqueue
    asks on every call), with no model while none of the variables is set. Unset, a
    setting is its default; the model's first read of it only checks the others."""
    if not os.environ.get(env_name(name)) and (name in _DEFAULTED
                                               or _unset(_WORKER_VARIABLES)):
        _DEFAULTED.add(name)
        return WORKER_DEFAULTS[name]
    from jobwarden.worker.core.settings import WorkerSettings  # pydantic, as above
    return WorkerSettings.one(name)
