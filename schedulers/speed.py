"""How fast a pipeline trains on a partition: measured step times, their cache, and the MACs model.

The selector (:mod:`schedulers.selector`) ranks candidates by time to result, which needs each
(framework, partition, environment)'s training speed for *this* graph. That comes from:

1. **A measurement** — a calibration job (:mod:`schedulers.calibration`) ran the generated program
   with ``--calibrate N`` on the partition's hardware; its samples/s is cached here under a key of
   the graph, the input shape and batch, the training settings that change step time, the request
   per node, the environment, the framework and the partition's kind of nodes (not its name: two
   partitions of the same nodes share measurements).
2. **The MACs model** until one exists — training MACs per sample (3 × the forward MACs of
   :attr:`core.validate.Analysis.total_macs`) over an effective rate: the median rate of the
   user's own measurements on the same kind of nodes (same framework first, then any framework); on nodes
   where the user measured nothing yet, a CPU job's step time comes from the framework's shipped defaults
   (:mod:`schedulers.shipped`, measured on a development machine and said so), a GPU job's from a default
   rate per GPU (:data:`DEFAULT_GPU_MACS_PER_S`; :data:`DEFAULT_CPU_MACS_PER_S` for a framework without
   shipped figures).

A measurement is **stale** when older than the age limit (``[selector] max_age_days``) or when the
environment's framework version changed since; a stale measurement is not used (the model is, with
the reason said), and the next calibration replaces it.

The cache is ``<home>/calibration.db`` (SQLite, 0600, one row per user and key): each user's
measurements, and the MACs model's rates, are that user's own (:class:`SpeedCache`), so in a
shared home one user's figures never steer another's choice.
"""

from __future__ import annotations

import hashlib
import json
import pwd
import sqlite3
import statistics
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.datasets import builtin
from core.spec import PipelineSpec
from core.validate import Analysis
from schedulers.base import Resources
from schedulers.contention import Contention, idle_share
from schedulers.macs_model import DEFAULT_FACTOR, FEW_FACTOR, Point, learned
from schedulers.registry.db import private_file
from schedulers.shipped import SHIPPED_FACTOR, shipped
from settings.access import os_user

DB_NAME = "calibration.db"
TRAIN_MACS_FACTOR = 3  # a training step: the forward products, and two as many in the backward pass
DEFAULT_CPU_MACS_PER_S = 1e10  # per CPU core, effective for training (framework overheads included)
DEFAULT_GPU_MACS_PER_S = 2e12  # per GPU
DEFAULT_MAX_AGE_DAYS = 30.0
MEASURED_FACTOR = 1.15  # a measured step time's spread between runs of one graph (shared, loaded nodes)
SCHEMA = """
CREATE TABLE IF NOT EXISTS measurements (
    user TEXT NOT NULL,
    key TEXT NOT NULL,
    framework TEXT NOT NULL,
    version TEXT NOT NULL,
    environment TEXT NOT NULL,
    partition TEXT NOT NULL,
    hardware TEXT NOT NULL,
    scheduler TEXT NOT NULL,
    job_id TEXT NOT NULL,
    measured_at REAL NOT NULL,
    samples_per_s REAL NOT NULL,
    step_s REAL NOT NULL,
    startup_s REAL NOT NULL,
    train_samples INTEGER NOT NULL,
    macs_per_sample INTEGER NOT NULL,
    doc TEXT NOT NULL,
    terms TEXT NOT NULL DEFAULT '{}',
    PRIMARY KEY (user, key)
)
"""
COLUMNS = ("key", "framework", "version", "environment", "partition", "hardware", "scheduler", "job_id",
           "measured_at", "samples_per_s", "step_s", "startup_s", "train_samples", "macs_per_sample", "doc")
# The whole run's other terms (schedulers/estimate.py), kept as JSON in the ``terms`` column: one column,
# so that a term added later needs no migration. None: not measured (the estimate models it and says so).
TERMS = ("launch_s", "warmup_s", "val_s", "val_samples", "checkpoint_s", "end_s", "params", "batch_size", "source",
         "conv_macs_per_sample", "val_first_s", "checkpoint_first_s", "contention", "epoch_s", "acts_per_sample")


@dataclass(frozen=True)
class Measurement:
    """One calibration result as cached."""

    key: str
    framework: str
    version: str
    environment: str
    partition: str  # where it was measured (any partition of the same hardware may use it)
    hardware: str
    scheduler: str
    job_id: str
    measured_at: float
    samples_per_s: float
    step_s: float
    startup_s: float  # process start to the first step: imports, data, model
    train_samples: int
    macs_per_sample: int  # training MACs of one sample (TRAIN_MACS_FACTOR x forward)
    doc: Mapping[str, Any]  # the program's calibration.json
    user: str = ""  # whose calibration job measured it (set by SpeedCache.put)
    launch_s: float | None = None  # submission to the program's clock and its end to the job's: interpreter, imports
    warmup_s: float | None = None  # the warm-up steps (the first step's compilation or tracing included)
    val_s: float | None = None  # one validation pass over val_samples (a steady one: not the first)
    val_samples: int = 0
    checkpoint_s: float | None = None  # one checkpoint write (a steady one: not the first)
    end_s: float | None = None  # the final model (and its ONNX export where the program writes one)
    params: int = 0  # the graph's parameters (the learned MACs model's second feature)
    batch_size: int = 0
    source: str = "calibration"  # or "run <id>": a completed run's own figures (schedulers/learning.py)
    conv_macs_per_sample: int = 0  # the convolutions' share of macs_per_sample (the learned model's op families)
    # A run's first validation pass (keras traces its evaluation there) and first checkpoint write (one-off costs),
    # timed apart from val_s and checkpoint_s, the steady ones; None: not timed apart (a completed run's averages)
    val_first_s: float | None = None
    checkpoint_first_s: float | None = None
    # The CPU contention it was measured under (schedulers/contention.py); None: not recorded (a Slurm job's own
    # CPUs, or a row from before loads were recorded): its compute terms are not scaled by the load
    contention: Contention | None = None
    # An epoch's start beyond a step (its input pipeline started anew: keras's dataset, a DataLoader's workers), paid
    # every epoch; None: not timed (a completed run's steps hold its epochs' starts; a program before this figure)
    epoch_s: float | None = None
    # The layers' output values of one sample (the learned model's fourth feature); 0: not recorded (a measurement
    # from before it was): such a measurement serves its own graph but not the learned model of others
    acts_per_sample: int = 0

    @property
    def macs_per_s(self) -> float:
        return self.samples_per_s * self.macs_per_sample


@dataclass(frozen=True)
class Speed:
    """A candidate's training speed as the selector uses it."""

    samples_per_s: float
    source: str  # "measured" or "model"
    startup_s: float = 0.0
    measured_at: float | None = None
    train_samples: int | None = None  # known from the measurement (the program counted them)
    note: str = ""  # how the model rate was found, or why a measurement was not used
    job_id: str = ""  # the calibration job that measured it
    factor: float = 1.0  # the step time may be this many times lower or higher (macs_model.py)
    measurement: Measurement | None = None  # the fresh measurement of this very graph, with its other terms
    peers: tuple[Measurement, ...] = ()  # the user's measurements of other graphs, this framework, these nodes
    shipped: bool = False  # nothing measured on these nodes: the framework's shipped defaults (schedulers/shipped.py)
    idle: bool = False  # the figures are an idle machine's (the learned model's, the shipped defaults): the estimate
    # scales them to the load now (schedulers/contention.py, idle_share)

    @property
    def measured(self) -> bool:
        return self.source == "measured"


def train_macs_per_sample(analysis: Analysis) -> int:
    return TRAIN_MACS_FACTOR * max(analysis.total_macs, 1)


def train_acts_per_sample(analysis: Analysis) -> int:
    """The values every layer outputs for one sample (the forward pass writes them, the backward reads them and
    writes as many gradients): the learned MACs model's measure of a step's memory traffic (macs_model.py)."""
    return sum(n.output.numel for n in analysis.nodes.values() if n.op not in ("Input", "Output"))


def train_conv_macs_per_sample(analysis: Analysis) -> int:
    """The convolutions' share of :func:`train_macs_per_sample` (an op family of its own rate)."""
    return TRAIN_MACS_FACTOR * sum(n.macs for n in analysis.nodes.values() if n.op.startswith("Conv"))


def speed_key(spec: PipelineSpec, analysis: Analysis, framework: str, environment: str, python: str,
              module: str | None, hardware: str, resources: Resources) -> str:
    """The cache key: what decides a step's time, and nothing that does not (names, positions,
    epochs, learning rate)."""
    model = spec.model.model_dump(mode="json")
    for node in model["nodes"]:
        node.pop("position", None)
        node.pop("label", None)
    data = spec.data
    t = spec.training
    doc = {
        "model": model,
        "input_shape": _input_shape(analysis),
        "data": {"source": data.source, "batch_size": data.batch_size, "preprocessing":
                 [p.model_dump(mode="json") for p in data.preprocessing],
                 "augmentation": [a.model_dump(mode="json") for a in data.augmentation]},
        "training": {"loss": t.loss, "optimizer": t.optimizer.name, "precision": t.precision,
                     "clip": t.gradient_clip_norm is not None, "performance": t.performance.model_dump(mode="json")},
        "per_node": [resources.nodes, resources.gpus_per_node, resources.cpus_per_task],
        "environment": [environment, python, module or ""],
        "framework": framework,
        "hardware": hardware,
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _input_shape(analysis: Analysis) -> str:
    node = analysis.nodes.get(analysis.input_id or "")
    return repr(node.output) if node is not None else ""


def planned_train_samples(spec: PipelineSpec) -> int | None:
    """Training samples per epoch as far as the spec tells (``samples_per_epoch``, else the data's
    size, detected or built-in, less the validation and test splits); ``None`` when unknown."""
    if spec.training.samples_per_epoch:
        return spec.training.samples_per_epoch
    size = spec.data.size
    if size is None:
        known = builtin(spec.data.source)
        size = known.size if known is not None else None
    if size is None:
        return None
    return max(int(size * (1.0 - spec.data.validation_split - spec.data.test_split)), 1)


class SpeedCache:
    """``<home>/calibration.db``: one user's measurements, one row per (user, key).

    In a shared home (one portal account serving many users) each user's figures steer only that
    user's choices: every query is filtered by ``user`` (default: the OS user). A file written before
    measurements were per user is migrated once; its rows become those of the file's owner (who ran
    every job in a per-user home; in a shared one, the service account, whose figures no portal
    user's queries read).
    """

    def __init__(self, home: str | Path, user: str | None = None) -> None:
        self.path = Path(home) / DB_NAME
        self.user = user if user is not None else os_user()

    def _conn(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        private_file(self.path)
        conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
        conn.row_factory = sqlite3.Row
        _migrate(conn, self.path)
        conn.execute(SCHEMA)
        return conn

    def put(self, m: Measurement) -> None:
        conn = self._conn()
        try:
            conn.execute(
                f"INSERT OR REPLACE INTO measurements (user, {', '.join(COLUMNS)}, terms) "
                f"VALUES ({', '.join('?' * 17)})",
                (self.user, m.key, m.framework, m.version, m.environment, m.partition, m.hardware, m.scheduler,
                 m.job_id, m.measured_at, m.samples_per_s, m.step_s, m.startup_s, m.train_samples,
                 m.macs_per_sample, json.dumps(dict(m.doc)), json.dumps(_terms(m))),
            )
        finally:
            conn.close()

    def get(self, key: str) -> Measurement | None:
        conn = self._conn()
        try:
            row = conn.execute("SELECT * FROM measurements WHERE user = ? AND key = ?", (self.user, key)).fetchone()
        finally:
            conn.close()
        return _measurement(row) if row is not None else None

    def on_hardware(self, hardware: str) -> list[Measurement]:
        conn = self._conn()
        try:
            rows = conn.execute("SELECT * FROM measurements WHERE user = ? AND hardware = ?",
                                (self.user, hardware)).fetchall()
        finally:
            conn.close()
        return [_measurement(r) for r in rows]

    def all(self) -> list[Measurement]:
        """This user's measurements, newest first."""
        if not self.path.exists():
            return []
        conn = self._conn()
        try:
            rows = conn.execute("SELECT * FROM measurements WHERE user = ? ORDER BY measured_at DESC",
                                (self.user,)).fetchall()
        finally:
            conn.close()
        return [_measurement(r) for r in rows]


def _migrate(conn: sqlite3.Connection, path: Path) -> None:
    """A cache from before per-user measurements (no ``user`` column): its rows become the file owner's.
    One from before the whole run's terms gets an empty ``terms`` column (those terms are modelled)."""
    columns = [r["name"] for r in conn.execute("PRAGMA table_info(measurements)")]
    if columns and "terms" not in columns and "user" in columns:
        try:
            conn.execute("ALTER TABLE measurements ADD COLUMN terms TEXT NOT NULL DEFAULT '{}'")
        except sqlite3.OperationalError as exc:  # another process added it between the check and here
            if "duplicate column" not in str(exc):
                raise
    if not columns or "user" in columns:
        return
    try:
        owner = pwd.getpwuid(path.stat().st_uid).pw_name
    except KeyError:
        owner = str(path.stat().st_uid)
    conn.execute("BEGIN IMMEDIATE")
    try:
        if "user" not in [r["name"] for r in conn.execute("PRAGMA table_info(measurements)")]:
            conn.execute("ALTER TABLE measurements RENAME TO measurements_before_users")
            conn.execute(SCHEMA)
            conn.execute(f"INSERT INTO measurements (user, {', '.join(COLUMNS)}) "
                         f"SELECT ?, {', '.join(COLUMNS)} FROM measurements_before_users", (owner,))
            conn.execute("DROP TABLE measurements_before_users")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _terms(m: Measurement) -> dict[str, Any]:
    terms = {t: getattr(m, t) for t in TERMS}
    terms["contention"] = m.contention.to_dict() if m.contention is not None else None
    return terms


def _measurement(row: sqlite3.Row) -> Measurement:
    """A row as a :class:`Measurement`; a term its row lacks (written before the term was measured) is not known."""
    fields = dict(row)
    fields["doc"] = json.loads(fields["doc"])
    terms = json.loads(fields.pop("terms", None) or "{}")
    terms["contention"] = Contention.from_dict(terms.get("contention"))
    return Measurement(**fields, **{t: terms[t] for t in TERMS if terms.get(t) is not None})


def stale_reason(m: Measurement, version: str | None, max_age_s: float, now: float) -> str:
    """Why ``m`` may not be used any more ("" when it may)."""
    if version is not None and m.version != version:
        return f"measured with {m.framework} {m.version}, the environment now has {version}"
    age = now - m.measured_at
    if age > max_age_s:
        return f"measured {age / 86400:.0f} days ago (older than {max_age_s / 86400:g} days)"
    return ""


@dataclass
class SpeedBook:
    """Speeds for one spec: cached measurements where fresh, else the MACs model.

    ``max_age_s``: a measurement older than this is stale. ``now``: the clock (tests pin it).
    """

    cache: SpeedCache | None
    max_age_s: float = DEFAULT_MAX_AGE_DAYS * 86400
    now: float | None = None
    _seen: dict[str, list[Measurement]] = field(default_factory=dict, repr=False)  # one query per kind of nodes

    def speed(self, spec: PipelineSpec, analysis: Analysis, framework: str, version: str | None,
              environment: str, python: str, module: str | None, hardware: str, resources: Resources,
              cuda: bool) -> Speed:
        now = time.time() if self.now is None else self.now
        note = ""
        if self.cache is not None:
            key = speed_key(spec, analysis, framework, environment, python, module, hardware, resources)
            found = self.cache.get(key)
            peers = tuple(m for m in self.on_hardware(hardware) if m.framework == framework and m.key != key
                          and not stale_reason(m, version, self.max_age_s, now))
            if found is not None:
                stale = stale_reason(found, version, self.max_age_s, now)
                if not stale:
                    return Speed(found.samples_per_s, "measured", startup_s=found.startup_s,
                                 measured_at=found.measured_at, train_samples=found.train_samples,
                                 job_id=found.job_id, factor=MEASURED_FACTOR, measurement=found, peers=peers)
                note = f"stale measurement not used: {stale}; "
        else:
            peers = ()
        cpu_job = not (resources.gpus_per_node and cuda)
        defaults = shipped(framework) if cpu_job else None  # the shipped line's shape is a CPU's
        line = learned([Point(m.macs_per_sample, m.params, m.batch_size, m.step_s * idle_share(m.contention),
                              m.conv_macs_per_sample, m.acts_per_sample) for m in peers if m.params],
                       defaults.shape() if defaults is not None else None, f"shipped {framework} line")
        batch = spec.data.batch_size
        if line is not None:  # each step as on an idle machine
            step = line.step_s(train_macs_per_sample(analysis), analysis.total_params, batch,
                               train_acts_per_sample(analysis))
            return Speed(batch * _world(resources) / step, "model", note=note + line.words(),
                         factor=line.factor, peers=peers, idle=True)
        measured = bool(self.on_hardware(hardware))
        if not measured and defaults is not None:
            step = defaults.step().step_s(train_macs_per_sample(analysis), analysis.total_params, batch,
                                          train_acts_per_sample(analysis))
            return Speed(batch * _world(resources) / step, "model", note=note + defaults.words(framework),
                         factor=SHIPPED_FACTOR, peers=peers, shipped=True, idle=True)
        rate, how = self.model_rate(framework, hardware, resources, cuda)
        samples = rate / train_macs_per_sample(analysis)
        return Speed(samples, "model", note=note + how, factor=FEW_FACTOR if measured else DEFAULT_FACTOR,
                     peers=peers)

    def on_hardware(self, hardware: str) -> list[Measurement]:
        if self.cache is None or not hardware:
            return []
        if hardware not in self._seen:
            self._seen[hardware] = self.cache.on_hardware(hardware)
        return self._seen[hardware]

    def model_rate(self, framework: str, hardware: str, resources: Resources, cuda: bool) -> tuple[float, str]:
        """Effective training MACs/s for a job of ``resources`` on nodes of ``hardware``: the median of
        the measurements there (same framework first, same request per node), else a default rate."""
        measured = self.on_hardware(hardware)
        same_fw = [m.macs_per_s for m in measured if m.framework == framework]
        for rates, whose in ((same_fw, framework), ([m.macs_per_s for m in measured], "all frameworks")):
            if rates:
                rate = statistics.median(rates)
                return rate, (f"MACs model: {rate / 1e9:,.2f} GMAC/s, the median of {len(rates)} measurement(s) "
                              f"of {whose} on these nodes")
        if resources.gpus_per_node and cuda:
            rate = DEFAULT_GPU_MACS_PER_S * resources.gpus_per_node * resources.nodes
            return rate, f"MACs model: default {DEFAULT_GPU_MACS_PER_S / 1e12:g} TMAC/s per GPU (no measurement yet)"
        cores = max(resources.cpus_per_task, 1) * max(resources.tasks_per_node, 1) * resources.nodes
        rate = DEFAULT_CPU_MACS_PER_S * cores
        return rate, f"MACs model: default {DEFAULT_CPU_MACS_PER_S / 1e9:g} GMAC/s per CPU core (no measurement yet)"


def _world(resources: Resources) -> int:
    """Processes of a data-parallel job: one per GPU, else one per node (the batch size is per process)."""
    return max(resources.nodes, 1) * max(resources.gpus_per_node, 1)
