"""The registry's sweeps: one row per sweep in ``sweeps``, its points being runs with ``sweep_id``.

A sweep row holds the base spec and the sweep document, every point's swept values (``points``, a
JSON list in task order), the scheduler, the framework, the job array's id (``job_id``; the local
executor's group id), the parallelism limit and the metric that ranks the points. Each point is an
ordinary run (its own state, history, metrics and directory) whose ``sweep_point`` is its task id.

:class:`SweepTable` is mixed into :class:`~schedulers.registry.runs.RunRegistry` (it uses the registry's
connection and transactions); orchestration (submit, rank, cancel) is :mod:`schedulers.sweeps`.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import time
from abc import ABC, abstractmethod
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.errors import FlowTrainError
from schedulers.registry.db import PRIVATE_DIR, RegistryError, guarded
from schedulers.registry.records import LIST_COLUMNS, Run, run_from_row


class SweepNotFound(FlowTrainError):
    exit_code = 2


@dataclass(frozen=True)
class Sweep:
    id: str
    user: str
    name: str
    spec_json: str
    sweep_json: str
    points: list[dict[str, Any]]  # the swept values of each point, by task id
    scheduler: str
    framework: str
    job_id: str | None  # the job array (Slurm) or the local group; None until submitted
    parallelism: int
    metric: str
    goal: str  # "max" or "min"
    created: float
    sweep_dir: Path

    @property
    def paths(self) -> list[str]:
        return list(self.points[0]) if self.points else []

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "user": self.user, "name": self.name, "sweep": json.loads(self.sweep_json),
                "points": self.points, "scheduler": self.scheduler, "framework": self.framework,
                "job_id": self.job_id, "parallelism": self.parallelism, "metric": self.metric, "goal": self.goal,
                "created": self.created, "sweep_dir": str(self.sweep_dir)}


def _sweep_from_row(row: sqlite3.Row) -> Sweep:
    return Sweep(id=row["id"], user=row["user"], name=row["name"], spec_json=row["spec"], sweep_json=row["sweep"],
                 points=json.loads(row["points"]), scheduler=row["scheduler"], framework=row["framework"],
                 job_id=row["job_id"], parallelism=row["parallelism"], metric=row["metric"], goal=row["goal"],
                 created=row["created"], sweep_dir=Path(row["sweep_dir"]))


class SweepTable(ABC):
    """The sweep methods of :class:`~schedulers.registry.runs.RunRegistry`, which provides the registry's home,
    its connection and its transactions (declared here, so that this module needs nothing of runs)."""

    home: Path

    @abstractmethod
    def _conn(self) -> sqlite3.Connection:
        """This thread's connection to the registry database."""

    @abstractmethod
    def _tx(self) -> AbstractContextManager[sqlite3.Connection]:
        """One write transaction (``BEGIN IMMEDIATE`` … ``COMMIT``)."""

    @guarded
    def create_sweep(self, *, user: str, name: str, spec_json: str, sweep_json: str,
                     points: list[dict[str, Any]], scheduler: str, framework: str, parallelism: int, metric: str,
                     goal: str) -> Sweep:
        """Insert a sweep and make its directory ``<home>/sweeps/<id>`` (0700, the array's job script)."""
        sweep_id = f"sweep-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
        directory = self.home / "sweeps" / sweep_id
        with self._tx() as db:
            db.execute("INSERT INTO sweeps (id, user, name, spec, sweep, points, scheduler, framework, parallelism,"
                       " metric, goal, created, sweep_dir) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                       (sweep_id, user, name, spec_json, sweep_json, json.dumps(points), scheduler, framework,
                        parallelism, metric, goal, time.time(), str(directory)))
        try:
            directory.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
        except OSError as exc:
            with self._tx() as db:
                db.execute("DELETE FROM sweeps WHERE id=?", (sweep_id,))
            raise RegistryError(f"cannot create the sweep directory {directory}: {exc.strerror}") from exc
        return self.get_sweep(sweep_id)

    @guarded
    def set_sweep_job(self, sweep_id: str, job_id: str) -> None:
        with self._tx() as db:
            db.execute("UPDATE sweeps SET job_id=? WHERE id=?", (job_id, sweep_id))

    @guarded
    def get_sweep(self, sweep_id: str, user: str | None = None) -> Sweep:
        """One sweep; ``user`` given: only that user's (another's is "not found", as for runs)."""
        row = self._conn().execute("SELECT * FROM sweeps WHERE id=?", (sweep_id,)).fetchone()
        if row is None or (user is not None and row["user"] != user):
            who = f" for user {user}" if user is not None else ""
            raise SweepNotFound(f"no sweep {sweep_id!r}{who}; `python -m flowtrain sweeps` lists the sweeps")
        return _sweep_from_row(row)

    @guarded
    def is_sweep(self, sweep_id: str) -> bool:
        return self._conn().execute("SELECT 1 FROM sweeps WHERE id=?", (sweep_id,)).fetchone() is not None

    @guarded
    def list_sweeps(self, user: str | None = None, *, limit: int | None = None) -> list[Sweep]:
        """Newest first."""
        sql, params = "SELECT * FROM sweeps", []
        if user is not None:
            sql += " WHERE user=?"
            params.append(user)
        sql += " ORDER BY created DESC, id DESC"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(int(limit))
        return [_sweep_from_row(r) for r in self._conn().execute(sql, params)]

    @guarded
    def sweep_runs(self, sweep_id: str) -> list[Run]:
        """The sweep's points, in task order (without specs)."""
        rows = self._conn().execute(f"SELECT {LIST_COLUMNS} FROM runs WHERE sweep_id=? ORDER BY sweep_point",
                                    (sweep_id,))
        return [run_from_row(r) for r in rows]
