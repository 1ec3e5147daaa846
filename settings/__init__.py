"""FlowTrain's settings, one object for the portal and the command line (see :mod:`settings.config`).

A top-level package, not part of ``core``: the framework-free heart knows nothing of homes, users
or schedulers. Everything above ``core`` (``schedulers``, ``portal``, ``cli``) reads its settings here.
"""

from settings.config import (
    CONFIG_ENV,
    ENVIRONMENTS_ENV,
    HOME_ENV,
    SCHEDULER_ENV,
    SLURM_TRANSPORTS,
    AuthSettings,
    ConfigError,
    SelectorSettings,
    Settings,
    SlurmSettings,
    flowtrain_home,
    load_settings,
    slurm_settings,
)
from settings.environments import SCHEDULERS, Environment, FrameworkOverride

__all__ = [
    "CONFIG_ENV",
    "ENVIRONMENTS_ENV",
    "HOME_ENV",
    "SCHEDULER_ENV",
    "SCHEDULERS",
    "SLURM_TRANSPORTS",
    "AuthSettings",
    "SelectorSettings",
    "ConfigError",
    "Environment",
    "FrameworkOverride",
    "Settings",
    "SlurmSettings",
    "flowtrain_home",
    "load_settings",
    "slurm_settings",
]
