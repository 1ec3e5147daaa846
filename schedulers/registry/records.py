"""The records of the run registry: a run, a state change, a reconcile report, and the registry's errors.

Kept apart from :mod:`schedulers.registry.runs` (the SQLite registry itself) so the code that only reads runs
(the CLI, the portal's views, launch) depends on plain data, and each module stays small.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from core.errors import FlowTrainError
from schedulers.base import FINAL_STATES, JobStatus, RunState
from schedulers.registry.db import RegistryError

# Columns of a listing: everything but the (possibly large) spec.
LIST_COLUMNS = (
    "id, user, name, spec_hash, framework, scheduler, partition, environment, job_id, state, exit_code, "
    "signal, reason, restarts, created, submitted, started, ended, run_dir, selection, log_tail, metrics_count, "
    "data_source, accounting, sweep_id, sweep_point, export"
)


class RunNotFound(FlowTrainError):
    exit_code = 2


@dataclass(frozen=True)
class StateChange:
    run_id: str
    state: str
    time: float
    detail: str = ""


@dataclass(frozen=True)
class Run:
    id: str
    user: str
    name: str
    spec_hash: str
    framework: str
    scheduler: str
    partition: str | None
    environment: str | None
    job_id: str | None
    state: RunState
    exit_code: int | None
    signal: int | None
    reason: str
    restarts: int
    created: float
    submitted: float | None
    started: float | None
    ended: float | None
    run_dir: Path
    selection: dict[str, Any] | None = None
    log_tail: str | None = None
    metrics_count: int = 0
    data_source: str | None = None  # the data source pinned at submission
    spec_json: str | None = None  # only filled by RunRegistry.get
    accounting: dict[str, Any] | None = None  # schedulers.base.JobAccounting as a dict, once known
    sweep_id: str | None = None  # the sweep this run is a point of (schedulers/sweeps.py)
    sweep_point: int | None = None  # its index in the sweep: the job array's task id
    export: str | None = None  # model.onnx: "pending" once COMPLETED, then "written" or "failed"

    @property
    def is_final(self) -> bool:
        return self.state in FINAL_STATES

    @property
    def duration(self) -> float | None:
        if self.started is None:
            return None
        return (self.ended or time.time()) - self.started

    def spec(self) -> Any:
        """The spec as a :class:`core.spec.PipelineSpec` (needs a run loaded with ``get``)."""
        from core.load import spec_from_json

        if self.spec_json is None:
            raise RegistryError(f"run {self.id} was loaded without its spec; load it with RunRegistry.get")
        return spec_from_json(self.spec_json, source=f"run {self.id}")

    def to_dict(self) -> dict[str, Any]:
        doc = {k: v for k, v in asdict(self).items() if k != "spec_json"}
        doc["state"] = self.state.value
        doc["run_dir"] = str(self.run_dir)
        return doc


@dataclass
class ReconcileReport:
    changes: list[StateChange] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # one line per scheduler that could not be asked
    checked: int = 0


def state_detail(status: JobStatus, restarted: bool) -> str:
    parts = []
    if restarted:
        parts.append(f"requeued (restart {status.restarts})")
    if status.state in FINAL_STATES:
        if status.signal is not None:
            parts.append(f"signal {status.signal}")
        elif status.exit_code is not None:
            parts.append(f"exit code {status.exit_code}")
    if status.reason:
        parts.append(status.reason)
    if status.nodes and status.state == RunState.RUNNING:
        parts.append(f"on {status.nodes}")
    return "; ".join(parts)


def run_from_row(row: sqlite3.Row, with_spec: bool = False) -> Run:
    keys = row.keys()
    return Run(
        id=row["id"], user=row["user"], name=row["name"], spec_hash=row["spec_hash"], framework=row["framework"],
        scheduler=row["scheduler"], partition=row["partition"], environment=row["environment"],
        job_id=row["job_id"], state=RunState(row["state"]), exit_code=row["exit_code"], signal=row["signal"],
        reason=row["reason"], restarts=row["restarts"], created=row["created"], submitted=row["submitted"],
        started=row["started"], ended=row["ended"], run_dir=Path(row["run_dir"]),
        selection=json.loads(row["selection"]) if row["selection"] else None, log_tail=row["log_tail"],
        metrics_count=row["metrics_count"], data_source=row["data_source"],
        spec_json=row["spec"] if with_spec and "spec" in keys else None,
        accounting=json.loads(row["accounting"]) if "accounting" in keys and row["accounting"] else None,
        sweep_id=row["sweep_id"] if "sweep_id" in keys else None,
        sweep_point=row["sweep_point"] if "sweep_point" in keys else None,
        export=row["export"] if "export" in keys else None,
    )


def as_str(v: Any) -> str | None:
    return v if isinstance(v, str) else None


def as_int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def as_float(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None
