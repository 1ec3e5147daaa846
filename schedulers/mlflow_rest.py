"""A small client of MLflow's tracking REST API (``/api/2.0/mlflow/…``), the standard library only.

FlowTrain logs completed runs from its own process (:mod:`schedulers.tracking`), not from the
generated programs, and needs no ``mlflow`` package for it: the calls are a handful of JSON posts.
Artifacts go through the server's artifact proxy (``mlflow server`` serves artifacts by default:
the run's ``artifact_uri`` is ``mlflow-artifacts:/…``), or straight into a local artifact root
(``file:`` or a path) when the server names one this machine can write.
"""

from __future__ import annotations

import json
import shutil
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from core.errors import FlowTrainError

TIMEOUT_S = 15.0
BATCH_METRICS = 1000  # MLflow's limits per log-batch call
BATCH_PARAMS = 100
BATCH_TAGS = 100
PARAM_VALUE_MAX = 6000


class TrackingError(FlowTrainError):
    """The MLflow server could not be reached, or refused a call (its own words)."""


class MlflowRest:
    """Calls to one tracking server, ``uri`` its ``http(s)://host:port`` (a path prefix is kept)."""

    def __init__(self, uri: str, timeout: float = TIMEOUT_S) -> None:
        self.uri = uri.rstrip("/")
        self.timeout = timeout

    def call(self, method: str, endpoint: str, body: dict[str, Any] | None = None,
             query: dict[str, str] | None = None) -> dict[str, Any]:
        """``endpoint`` under ``/api/2.0/mlflow/``; the answer's JSON. :class:`TrackingError` when
        the server is unreachable or answers with an error."""
        url = f"{self.uri}/api/2.0/mlflow/{endpoint}"
        if query:
            url += "?" + urllib.parse.urlencode(query)
        data = json.dumps(body).encode() if body is not None else None
        answer = self._send(urllib.request.Request(url, data=data, method=method,
                                                   headers={"Content-Type": "application/json"}))
        return json.loads(answer or b"{}")

    def _send(self, request: urllib.request.Request) -> bytes:
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310 (http(s) only)
                return bytes(response.read())
        except urllib.error.HTTPError as exc:
            raise TrackingError(f"{self.uri} refused {request.get_method()} {_path(request.full_url)}: "
                                f"HTTP {exc.code} {_mlflow_message(exc)}") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise TrackingError(f"the MLflow server {self.uri} cannot be reached ({reason})") from None

    def experiment_id(self, name: str) -> str:
        """The id of the experiment ``name``, created when it does not exist."""
        try:
            return str(self.call("GET", "experiments/get-by-name", query={"experiment_name": name})
                       ["experiment"]["experiment_id"])
        except TrackingError as exc:
            if "RESOURCE_DOES_NOT_EXIST" not in str(exc):
                raise
        try:
            return str(self.call("POST", "experiments/create", {"name": name})["experiment_id"])
        except TrackingError as exc:  # created by another process meanwhile
            if "RESOURCE_ALREADY_EXISTS" not in str(exc):
                raise
            return str(self.call("GET", "experiments/get-by-name", query={"experiment_name": name})
                       ["experiment"]["experiment_id"])

    def find_run(self, experiment_id: str, tag: str, value: str) -> dict[str, Any] | None:
        """The run of the experiment whose tag ``tag`` is ``value`` (the first, if several)."""
        found = self.call("POST", "runs/search", {"experiment_ids": [experiment_id], "max_results": 1,
                                                  "filter": f"tags.`{tag}` = '{_quoted(value)}'"})
        runs = found.get("runs") or []
        return runs[0] if runs else None

    def create_run(self, experiment_id: str, name: str, start_ms: int, tags: dict[str, str]) -> dict[str, Any]:
        """A new run (its ``info``: ``run_id``, ``artifact_uri``)."""
        run = self.call("POST", "runs/create", {"experiment_id": experiment_id, "run_name": name,
                                                "start_time": start_ms, "tags": _pairs(tags)})
        return dict(run["run"]["info"])

    def log_batch(self, run_id: str, *, params: dict[str, str] | None = None, tags: dict[str, str] | None = None,
                  metrics: list[dict[str, Any]] | None = None) -> None:
        """Params, tags and metrics in as few calls as MLflow's limits allow."""
        params_list, tags_list, metrics_list = _pairs(params or {}), _pairs(tags or {}), list(metrics or [])
        while params_list or tags_list or metrics_list:
            body = {"run_id": run_id, "params": params_list[:BATCH_PARAMS], "tags": tags_list[:BATCH_TAGS],
                    "metrics": metrics_list[:BATCH_METRICS]}
            self.call("POST", "runs/log-batch", body)
            params_list, tags_list = params_list[BATCH_PARAMS:], tags_list[BATCH_TAGS:]
            metrics_list = metrics_list[BATCH_METRICS:]

    def finish(self, run_id: str, end_ms: int, status: str = "FINISHED") -> None:
        self.call("POST", "runs/update", {"run_id": run_id, "status": status, "end_time": end_ms})

    def upload(self, artifact_uri: str, file: Path, name: str) -> None:
        """``file`` as the artifact ``name`` of the run whose artifacts live at ``artifact_uri``."""
        parsed = urllib.parse.urlparse(artifact_uri)
        if parsed.scheme == "mlflow-artifacts":
            url = f"{self.uri}/api/2.0/mlflow-artifacts/artifacts/{parsed.path.strip('/')}/{urllib.parse.quote(name)}"
            request = urllib.request.Request(url, data=file.read_bytes(), method="PUT",
                                             headers={"Content-Type": "application/octet-stream"})
            self._send(request)
        elif parsed.scheme in ("", "file"):
            target = Path(urllib.parse.unquote(parsed.path)) / name
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(file, target)
            except OSError as exc:
                raise TrackingError(f"the artifact root {artifact_uri} cannot be written from here "
                                    f"({exc.strerror}); run the server with --serve-artifacts") from None
        else:
            raise TrackingError(f"the server keeps artifacts at {artifact_uri}, which FlowTrain cannot write; "
                                "run the server with --serve-artifacts (the default of `mlflow server`)")


def _pairs(values: dict[str, str]) -> list[dict[str, str]]:
    return [{"key": k, "value": str(v)[:PARAM_VALUE_MAX]} for k, v in values.items()]


def _quoted(value: str) -> str:
    return value.replace("\\", "\\\\").replace("'", "\\'")


def _path(url: str) -> str:
    return urllib.parse.urlparse(url).path


def _mlflow_message(exc: urllib.error.HTTPError) -> str:
    """MLflow's ``error_code: message`` from an error answer, else the HTTP reason."""
    try:
        body = json.loads(exc.read() or b"{}")
    except (ValueError, OSError):
        return str(exc.reason)
    if isinstance(body, dict) and body.get("error_code"):
        return f"{body['error_code']}: {str(body.get('message', ''))[:500]}"
    return str(exc.reason)
