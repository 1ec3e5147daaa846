"""What the command modules share: argument help texts, the scheduler-error wrapper, the acting user,
a quiet reconcile, and the plain-text formatting of times and tables (:mod:`cli.runs`, :mod:`cli.sweeps`,
:mod:`cli.calibrate`, :mod:`cli.export`)."""

from __future__ import annotations

import argparse
import functools
import sys
import time
from collections.abc import Callable
from typing import Any

from core.errors import CommandError, FlowTrainError
from core.frameworks import FRAMEWORKS
from core.load import spec_from_dict
from core.spec import PipelineSpec
from schedulers.base import SchedulerError
from schedulers.launch import Executors
from schedulers.reconcile import follow
from schedulers.registry.runs import RunRegistry
from settings import Settings
from settings.access import acting_user

FRAMEWORK_CHOICES = ("auto", *FRAMEWORKS)
SCHEDULER_HELP = "default: FLOWTRAIN_SCHEDULER, else the settings file (FLOWTRAIN_CONFIG), else local"
ADMIN_HELP = "act for this user (administrators in [auth] admins only; default: you)"


class SchedulerUnavailable(FlowTrainError):
    """A scheduler could not be reached or refused the request (wraps SchedulerError for the CLI)."""

    exit_code = 3


Handler = Callable[[argparse.Namespace], int]


def scheduler_errors(fn: Handler) -> Handler:
    @functools.wraps(fn)
    def wrapper(args: argparse.Namespace) -> int:
        try:
            return fn(args)
        except SchedulerError as exc:
            raise SchedulerUnavailable(str(exc)) from None

    return wrapper


def command_user(settings: Settings, args: argparse.Namespace) -> str:
    """The OS user, or ``--user`` for an administrator."""
    return acting_user(settings, args.user)



def reconcile_quietly(registry: RunRegistry, executors: Executors, **kw: Any) -> None:
    """Refresh states; a scheduler that cannot be asked is a warning here (the registry still shows
    the last known state), never a silent success."""
    report = follow(registry, executors, **kw)
    for err in report.errors:
        print(f"warning: states not refreshed: {err}", file=sys.stderr)


def local_time(t: float | None) -> str:
    if t is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def text_table(rows: list[tuple[str, ...]], header: tuple[str, ...]) -> str:
    widths = [max(len(header[i]), *(len(r[i]) for r in rows)) if rows else len(header[i]) for i in range(len(header))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(lines)


def with_epochs(spec: PipelineSpec, epochs: int | None) -> PipelineSpec:
    if epochs is None:
        return spec
    if epochs < 1:
        raise CommandError(f"--epochs {epochs}: expected a positive number of epochs")
    doc = spec.model_dump(mode="json")
    doc["training"]["epochs"] = epochs
    return spec_from_dict(doc)
