"""The settings file (``flowtrain.toml``) as strict pydantic models, as the pipeline spec is.

One place for each setting's type, default, description and the environment variable that
overrides it (``env=`` beside the key). :mod:`settings.config` reads a file through these models,
applies the overrides and resolves paths; ``python -m flowtrain settings-schema`` prints their JSON
Schema. Unknown keys and wrong types become :class:`~core.errors.Problem` s naming the key with its
section (``slurm.rest_port``), what was received and what was expected, all at once.
"""

from __future__ import annotations

import difflib
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError
from pydantic.fields import FieldInfo

from core.errors import Problem

CONFIG_ENV = "FLOWTRAIN_CONFIG"
HOME_ENV = "FLOWTRAIN_HOME"
SCHEDULER_ENV = "FLOWTRAIN_SCHEDULER"
ENVIRONMENTS_ENV = "FLOWTRAIN_ENVIRONMENTS"
TRANSPORT_ENV = "FLOWTRAIN_SLURM_TRANSPORT"
REST_URL_ENV = "FLOWTRAIN_SLURM_REST_URL"
REST_TOKEN_ENV = "FLOWTRAIN_SLURM_REST_TOKEN"
CALIBRATE_ENV = "FLOWTRAIN_CALIBRATE"
ADDRESS_ENV = "FLOWTRAIN_ADDRESS"  # read by scripts/portal.sh, which binds the portal
MLFLOW_URI_ENV = "MLFLOW_TRACKING_URI"  # MLflow's own variable, as its clients read it

NonEmpty = Annotated[str, StringConstraints(min_length=1)]
HeaderName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_-]+$")]
SlurmTransport = Literal["auto", "commands", "pyslurm", "rest"]
CalibrateMode = Literal["never", "missing"]


def env(var: str) -> dict[str, Any]:
    """``json_schema_extra`` declaring the environment variable that overrides a key."""
    return {"env": var}


class Table(BaseModel):
    """A table of the settings file: unknown keys are errors, values are not coerced (no "3" for 3)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class UserData(Table):
    roots: list[NonEmpty] = Field(default_factory=list,
                                  description="this user's data roots, instead of the shared list")


class DataTable(Table):
    roots: list[NonEmpty] = Field(default_factory=lambda: ["data"],
                                  description='folders a run may read data from; "{user}" becomes the user\'s name')
    builtin_datasets: bool = Field(True, description="offer sklearn:digits and the other built-in datasets")
    users: dict[str, UserData] = Field(default_factory=dict, description="per-user roots ([data.users.NAME])")


class PortalTable(Table):
    address: str = Field("127.0.0.1", description="where scripts/portal.sh binds: an IP address or unix://PATH",
                         json_schema_extra=env(ADDRESS_ENV))
    max_onnx_upload_mb: int = Field(2048, gt=0, le=1024 * 1024,
                                    description="the largest ONNX model the editor's Import ONNX takes, in MB "
                                                "(written to disk in pieces, docs/onnx.md)")


class AuthTable(Table):
    mode: Literal["header", "local", "session"] = Field(
        "local", description='"header": behind a reverse proxy that signs users in; "local": local logins or the '
        'portal\'s OS user; "session": one user\'s own portal opened with a per-session secret')
    header: HeaderName = Field("X-Remote-User", description="the identity header the proxy sets (header mode)")
    local_users: dict[str, str] = Field(default_factory=dict,
                                        description="name = hash from portal.users.hash_password (local mode)")
    proxy_secret_file: str | None = Field(None, description="file (mode 0600) holding the secret the proxy sends")
    proxy_secret_header: HeaderName = Field("X-FlowTrain-Proxy-Secret",
                                            description="the header carrying the proxy's secret")
    trusted_proxies: list[NonEmpty] = Field(default_factory=list,
                                            description="the proxy's addresses or networks (not loopback)")
    admins: list[NonEmpty] = Field(default_factory=list,
                                   description="OS users who may use --user / --all-users on the command line")
    session_hours: float = Field(8.0, gt=0, le=720, description="how long a local sign-in lasts")
    secret_file: str | None = Field(None, description="session mode: the file holding the per-session secret")


class SlurmTable(Table):
    transport: SlurmTransport = Field("auto", description="how the Slurm executor reaches slurmctld",
                                      json_schema_extra=env(TRANSPORT_ENV))
    rest_url: str | None = Field(None, description="slurmrestd's http:// or https:// address",
                                 json_schema_extra=env(REST_URL_ENV))
    rest_token: NonEmpty = Field("scontrol", description='the JWT: "scontrol", "env" ($SLURM_JWT) or a file',
                                 json_schema_extra=env(REST_TOKEN_ENV))


class SelectorTable(Table):
    calibrate: CalibrateMode = Field("never", description='"missing": run calibration jobs where none is cached',
                                     json_schema_extra=env(CALIBRATE_ENV))
    max_age_days: float = Field(30.0, gt=0, description="a measurement older than this is stale")
    steps: int = Field(20, gt=0, description="optimizer steps a calibration job times")
    window_s: float = Field(10.0, ge=0, description="or more steps, to last about this long by the estimate before")
    time_limit_min: int = Field(10, gt=0, description="the calibration job's time limit")
    queue_wait_s: float = Field(600.0, gt=0, description="cancel a calibration job not started by then")


class TrackingTable(Table):
    mlflow_uri: str | None = Field(None, description="an MLflow tracking server (http:// or https://): every "
                                   "completed run is logged there (docs/tracking.md)",
                                   json_schema_extra=env(MLFLOW_URI_ENV))
    experiment: NonEmpty = Field("FlowTrain", description="the MLflow experiment the runs are logged in")


class SettingsFile(Table):
    """The whole file; every table may be left out."""

    model_config = ConfigDict(title="FlowTrain settings file (flowtrain.toml)")

    home: NonEmpty = Field("var", description="runs, registry, logs", json_schema_extra=env(HOME_ENV))
    scheduler: Literal["local", "slurm"] | None = Field(
        None, description="unset: the environments file's, else local", json_schema_extra=env(SCHEDULER_ENV))
    environments_file: str | None = Field(None, description="the execution environments (settings.environments)",
                                          json_schema_extra=env(ENVIRONMENTS_ENV))
    data: DataTable = Field(default_factory=DataTable)
    portal: PortalTable = Field(default_factory=PortalTable)
    auth: AuthTable = Field(default_factory=AuthTable)
    slurm: SlurmTable = Field(default_factory=SlurmTable)
    selector: SelectorTable = Field(default_factory=SelectorTable)
    tracking: TrackingTable = Field(default_factory=TrackingTable)


def env_var(table: type[Table], key: str) -> str:
    """The environment variable declared beside ``table.key``."""
    extra = table.model_fields[key].json_schema_extra
    assert isinstance(extra, dict) and isinstance(extra.get("env"), str), f"{table.__name__}.{key} has no env"
    return str(extra["env"])


def default(table: type[Table], key: str) -> Any:
    """A key's default, from its declaration (the one place defaults live)."""
    return table.model_fields[key].get_default(call_default_factory=True)


def settings_schema() -> dict[str, Any]:
    return SettingsFile.model_json_schema()


def parse(doc: dict[str, Any]) -> tuple[SettingsFile | None, list[Problem]]:
    """The file's document as models, or every problem in it."""
    try:
        return SettingsFile.model_validate(doc), []
    except ValidationError as exc:
        return None, [_problem(err) for err in exc.errors(include_url=False)]


def check_value(table: type[Table], key: str, value: Any, location: str) -> list[Problem]:
    """Problems of one value (an environment variable's) against ``table.key``'s declared type."""
    try:
        table.__pydantic_validator__.validate_assignment(table.model_construct(), key, value)
    except ValidationError as exc:
        return [_problem({**err, "loc": ()}, location) for err in exc.errors(include_url=False)]
    return []


def _problem(err: Any, location: str | None = None) -> Problem:
    loc = tuple(err["loc"])
    where = location or _dotted(loc)
    kind = err["type"]
    ctx = err.get("ctx") or {}
    received = _short_repr(err.get("input"))
    if kind == "extra_forbidden":
        table = _table_at(loc[:-1])
        known = [f"{_dotted(loc[:-1])}.{k}" if loc[:-1] else k for k in table.model_fields] if table else []
        close = difflib.get_close_matches(where, known, n=1, cutoff=0.6)
        return Problem(where, "is not a known setting", received=None,
                       expected=f"one of {', '.join(known)}" if known else None,
                       fix=f"did you mean {close[0]}?" if close else "remove it (unknown keys are never ignored)")
    if kind == "literal_error":
        choices = str(ctx.get("expected", "")).replace("'", "")
        return Problem(where, f"is not one of {choices.replace(' or ', ', ')}", received=received,
                       expected=str(ctx.get("expected")))
    return Problem(where, "has the wrong type" if kind.endswith("_type") else "is out of range",
                   received=received, expected=_EXPECTED.get(kind, err["msg"]).format(**ctx))


_EXPECTED = {
    "string_type": "a string", "bool_type": "true or false", "int_type": "a whole number",
    "float_type": "a number", "list_type": "a list of non-empty strings", "dict_type": "a table",
    "model_type": "a table", "greater_than": "a positive number (more than {gt})",
    "less_than_equal": "at most {le}", "string_too_short": "a non-empty string",
    "string_pattern_mismatch": "an HTTP header name (letters, digits, '-' and '_')",
}


def _table_at(loc: tuple[Any, ...]) -> type[Table] | None:
    """The model of the table at ``loc`` (``("data", "users", "alice")`` → :class:`UserData`)."""
    model: type[Table] = SettingsFile
    for part in loc:
        field: FieldInfo | None = model.model_fields.get(str(part))
        if field is None:
            continue  # a free key (a user's name) inside a dict of tables
        annotation = field.annotation
        inner = getattr(annotation, "__args__", (annotation,))[-1]
        if not (isinstance(inner, type) and issubclass(inner, Table)):
            return None
        model = inner
    return model


def _dotted(loc: tuple[Any, ...]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")


def _short_repr(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
