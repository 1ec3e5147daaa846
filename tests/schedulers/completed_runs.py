"""A run the registry saw complete, as the executors leave it: its result.json and its COMPLETED status."""

from __future__ import annotations

import json
from typing import Any

from schedulers.base import JobStatus, RunState

# The timings a completed generated program writes in result.json (templates/common/loop.py.j2).
TIMINGS = {"startup_s": 3.0, "val_s": 2.4, "checkpoint_s": 1.3, "train_s": 20.0, "end_s": 1.5, "steps": 276}


def complete(registry: Any, run: Any, job_id: str, result: dict[str, Any], started: float, ended: float) -> None:
    """Write ``result`` as the run's result.json and record its job as COMPLETED (exit 0) from ``started`` to ``ended``."""
    (run.run_dir / "result.json").write_text(json.dumps(result))
    registry.record_status(run.id, JobStatus(job_id, RunState.COMPLETED, exit_code=0, started=started, ended=ended))
