"""Every completed run logged to the group's MLflow server, when ``[tracking] mlflow_uri`` (or
``MLFLOW_TRACKING_URI``) names one (docs/tracking.md).

As with ``model.onnx`` (:mod:`schedulers.model_export`), the registry records the logging as pending
in the transaction that records COMPLETED; :func:`track_pending` then logs each pending run, after its
export, from this process through MLflow's REST API (:mod:`schedulers.mlflow_rest`): the generated
programs need no ``mlflow``, and a cluster node needs no route to the server. A run is logged with:

- params: the spec flattened (``data.*``, ``training.*``) and a summary of the model (``model.*``);
- metrics per optimizer step, from the run's ``metrics.jsonl`` records (:func:`metric_points`);
- tags: framework, scheduler, partition, job_id, spec_hash, user (and ``flowtrain.run_id``);
- artifacts: ``model.onnx``, ``spec.json``, ``result.json``.

A sweep is a parent MLflow run (tag ``flowtrain.sweep_id``) whose children are its points. The
outcome is a line in the run's history; a server that is down or refuses is a warning there, never a
failed run. Without a URI nothing is logged and the pending runs wait (they are logged once one is
set).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol

from schedulers.mlflow_rest import MlflowRest, TrackingError
from schedulers.registry.files import ONNX_NAME
from schedulers.registry.records import Run
from schedulers.registry.sweeps import Sweep

ARTIFACTS = (ONNX_NAME, "spec.json", "result.json")
STRUCTURAL = frozenset({"step", "epoch", "elapsed", "time", "world_size", "steps", "epochs", "rank"})
RATE_KEYS = frozenset({"lr", "samples_per_s"})
RUN_TAG = "flowtrain.run_id"
SWEEP_TAG = "flowtrain.sweep_id"


class TrackingBook(Protocol):
    """What logging needs of the run registry (:class:`schedulers.registry.runs.RunRegistry`)."""

    def pending_tracking(self, run_ids: Sequence[str] | None = None, user: str | None = None) -> list[Run]: ...

    def record_tracking(self, run_id: str, logged: bool, detail: str) -> None: ...

    def metrics(self, run_id: str) -> list[dict[str, Any]]: ...

    def get_sweep(self, sweep_id: str, user: str | None = None) -> Sweep: ...


def track_pending(registry: TrackingBook, run_ids: Sequence[str] | None = None, user: str | None = None,
                  *, uri: str | None = None, experiment: str | None = None) -> list[str]:
    """Log the completed runs still pending (all, of ``run_ids`` or of ``user``) to the MLflow server
    ``uri`` (default: the settings'); returns the history lines added. Never raises for a run: its
    failure is recorded as a warning in its history."""
    if uri is None:
        from settings import load_settings

        tracking = load_settings().tracking
        uri, experiment = tracking.mlflow_uri, experiment or tracking.experiment
    if not uri:
        return []
    pending = registry.pending_tracking(run_ids, user)
    if not pending:
        return []
    client = MlflowRest(uri)
    notes = []
    for run in pending:
        try:
            detail = log_run(client, registry, run, experiment or "FlowTrain")
            logged = True
        except (TrackingError, OSError, ValueError) as exc:
            detail, logged = f"warning: not logged to MLflow: {exc}", False
        registry.record_tracking(run.id, logged, detail)
        notes.append(detail)
    return notes


def after_completion(registry: Any, run_ids: Sequence[str] | None = None, user: str | None = None) -> list[str]:
    """What follows a run's completion, off the path of any page: its ``model.onnx``
    (:func:`schedulers.model_export.export_pending`), then its MLflow run (:func:`track_pending`),
    which logs that file."""
    from schedulers.model_export import export_pending

    return export_pending(registry, run_ids, user) + track_pending(registry, run_ids, user)


def log_run(client: MlflowRest, registry: TrackingBook, run: Run, experiment: str) -> str:
    """One completed run into ``experiment`` (as a child of its sweep's run); the history line."""
    experiment_id = client.experiment_id(experiment)
    parent = _sweep_parent(client, registry, run, experiment_id) if run.sweep_id else None
    tags = run_tags(run) | ({"mlflow.parentRunId": parent} if parent else {})
    existing = client.find_run(experiment_id, RUN_TAG, run.id)  # a retry after a crash reuses its run
    info = existing["info"] if existing else client.create_run(experiment_id, run.name, _ms(run.started or run.created),
                                                               tags)
    run_id = str(info["run_id"])
    client.log_batch(run_id, params=spec_params(run), tags=tags if existing else None,
                     metrics=metric_points(registry.metrics(run.id)))
    skipped = []
    for name in ARTIFACTS:
        file = run.run_dir / name
        if file.is_file():
            client.upload(str(info["artifact_uri"]), file, name)
        else:
            skipped.append(name)
    client.finish(run_id, _ms(run.ended or run.created))
    missing = f" (no {', '.join(skipped)} to log)" if skipped else ""
    return f"logged to MLflow {client.uri}: experiment {experiment}, run {run_id}{missing}"


def run_tags(run: Run) -> dict[str, str]:
    tags = {"framework": run.framework, "scheduler": run.scheduler, "partition": run.partition or "",
            "job_id": run.job_id or "", "spec_hash": run.spec_hash, "user": run.user, RUN_TAG: run.id,
            "mlflow.user": run.user, "mlflow.runName": run.name, "mlflow.source.name": "FlowTrain"}
    return {k: v for k, v in tags.items() if v}


def spec_params(run: Run) -> dict[str, str]:
    """The spec's data and training layers flattened (``training.optimizer.lr``), lists as JSON, and
    the model summarised: its node count, ops, parameters and MACs per sample."""
    doc = json.loads(run.spec_json or "{}")
    params: dict[str, str] = {}
    for layer in ("data", "training"):
        _flatten(doc.get(layer) or {}, layer, params)
    nodes = (doc.get("model") or {}).get("nodes") or []
    params["model.nodes"] = str(len(nodes))
    params["model.ops"] = ",".join(sorted({str(n.get("op")) for n in nodes}))
    params.update(_model_size(run))
    if run.sweep_point is not None:
        params["sweep.point"] = str(run.sweep_point)
    return params


def _flatten(value: Any, prefix: str, out: dict[str, str]) -> None:
    if isinstance(value, dict) and value:
        for key, inner in value.items():
            _flatten(inner, f"{prefix}.{key}", out)
    else:
        out[prefix] = value if isinstance(value, str) else json.dumps(value)


def _model_size(run: Run) -> dict[str, str]:
    """Parameters and MACs of the model, as ``flowtrain summary`` counts them (none if it fails)."""
    from core.validate import analyse

    try:
        summary = analyse(run.spec()).summary()
    except Exception:  # noqa: BLE001  (a summary is a nicety: the run is logged without it)
        return {}
    return {"model.params": str(summary["params"]), "model.macs": str(summary["macs"])}


def metric_points(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """MLflow metrics from ``metrics.jsonl`` records, at each record's step: ``train_loss``,
    ``train_accuracy``, ``lr``, ``samples_per_s`` per logged step; ``train_epoch_loss`` and
    ``val_loss`` … per epoch; ``test_*``; and the final ``val_*``/``test_*`` of the ``end`` record."""
    points: list[dict[str, Any]] = []
    seen: set[tuple[str, int]] = set()  # the end record repeats the last epoch's val_* at the same step
    for record in records:
        event, step, ms = record.get("event"), int(record.get("step") or 0), _ms(record.get("time") or 0)
        for name, value in record.items():
            if name in STRUCTURAL or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            key = _metric_key(str(event), record.get("split"), name)
            if key is not None and (key, step) not in seen:
                seen.add((key, step))
                points.append({"key": key, "value": float(value), "timestamp": ms, "step": step})
    return points


def _metric_key(event: str, split: Any, name: str) -> str | None:
    if event == "train":
        return name if name in RATE_KEYS else f"train_{name}"
    if name in RATE_KEYS:
        return None  # the same rate again at the epoch's end
    if event == "epoch":
        return f"train_epoch_{name}" if split == "train" else f"{split}_{name}"
    if event == "test":
        return f"test_{name}"
    if event == "end" and name.startswith(("val_", "test_")):
        return name
    return None


def _sweep_parent(client: MlflowRest, registry: TrackingBook, run: Run, experiment_id: str) -> str:
    """The MLflow run of ``run``'s sweep, created by its first point to be logged."""
    assert run.sweep_id is not None
    found = client.find_run(experiment_id, SWEEP_TAG, run.sweep_id)
    if found:
        return str(found["info"]["run_id"])
    sweep = registry.get_sweep(run.sweep_id)
    tags = {SWEEP_TAG: sweep.id, "user": sweep.user, "mlflow.user": sweep.user, "framework": sweep.framework,
            "scheduler": sweep.scheduler, "job_id": sweep.job_id or "", "mlflow.runName": sweep.name}
    info = client.create_run(experiment_id, sweep.name, _ms(sweep.created), {k: v for k, v in tags.items() if v})
    client.log_batch(str(info["run_id"]), params={"sweep.metric": sweep.metric, "sweep.goal": sweep.goal,
                                                  "sweep.points": str(len(sweep.points)),
                                                  "sweep.paths": ",".join(sweep.paths)})
    client.finish(str(info["run_id"]), _ms(sweep.created))
    return str(info["run_id"])


def _ms(seconds: float) -> int:
    return int(round(float(seconds) * 1000))

