"""Renders the sbatch script for a :class:`~schedulers.base.JobRequest`.

User text never becomes shell code: the job name is reduced to ``[A-Za-z0-9_.-]``; strings in
``#SBATCH`` lines are validated and double-quoted where needed (sbatch parses those lines itself and
understands double quotes only — a single-quoted value keeps its quotes); strings in the shell body
go through :func:`shlex.quote`.

Signals: ``--signal=B:USR1@120`` (the batch shell gets SIGUSR1 two minutes before the time limit).
Every launch line starts with ``exec``, so the batch shell *is* the program (single process) or
``srun`` (multi-process), and srun forwards SIGUSR1 to every task. Without ``B:``, Slurm would signal
only job steps, and a single-process job (no srun step) would never see it. Caveat: under
``torch.distributed.run`` the signal reaches the torchrun agent, which does not forward SIGUSR1 to its
workers; those still get SIGTERM at the limit/cancel, and resume relies on the last checkpoint.

Environment: the job starts from the allow-list of :mod:`schedulers.jobenv` (the transport submits
from that environment), and every ``srun`` here says ``--export=ALL`` so a job step gets the batch
shell's clean environment (with ``MASTER_ADDR``/``MASTER_PORT``) whatever the site's defaults.
``paddle.distributed.launch`` writes the whole environment of each worker into its log folder
(``backup_env.N.json``, ``envlog.N``); its ``--log_dir`` is a fresh private folder (``mktemp -d``,
0700) under the node's ``$TMPDIR``, never the run directory the user downloads from.
"""

from __future__ import annotations

import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import jinja2

from core.frameworks import FRAMEWORKS
from core.spec import PipelineSpec
from schedulers.base import JobRequest
from schedulers.modules import sbatch_lines
from schedulers.rank_errors import PEER_LOSS_ERE
from schedulers.selector import resources_from_spec

TEMPLATE_DIR = Path(__file__).resolve().parents[2] / "templates" / "slurm"
TEMPLATE_NAME = "job.sbatch.j2"
SCRIPT_NAME = "job.sbatch"
LOG_PATTERN = "slurm-%j.out"  # stdout+stderr of the job, in the run directory
ARRAY_LOG_PATTERN = "slurm-%A_%a.out"  # an array task's: its job id is "<array>_<task>", so log_file_name fits
DEFAULT_SIGNAL = "B:USR1@120"

_SAFE_SBATCH = re.compile(r"[A-Za-z0-9_./:@+=,\-]+")
# Characters a path may not have in an #SBATCH line: sbatch has no escape for '"', treats '%' as a
# filename pattern and '#' may start a comment; control characters would end the line.
_BAD_PATH_CHARS = re.compile(r'["\\%#\x00-\x1f\x7f]')
_ENV_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PARTITION = re.compile(r"[A-Za-z0-9_.\-]+")
# paddle.distributed.launch's log folder (it dumps the environment there): private, outside the run dir.
PADDLE_LOG_DIR = '"$(mktemp -d "${TMPDIR:-/tmp}/flowtrain-paddle-XXXXXX")"'
_MODULE = re.compile(r"[A-Za-z0-9_.+\-]+(/[A-Za-z0-9_.+\-]+)*")


def log_file_name(job_id: str) -> str:
    """The job's log file name inside its run directory (``LOG_PATTERN`` with ``%j`` filled in)."""
    return LOG_PATTERN.replace("%j", str(job_id))


def sanitize_job_name(name: str) -> str:
    """Only ``[A-Za-z0-9_.-]``, no leading punctuation, at most 64 characters; never empty."""
    cleaned = re.sub(r"[^A-Za-z0-9_.\-]+", "_", name).strip("._-")[:64]
    return cleaned or "flowtrain"


def _sbatch_path(path: str, suffix: str = "") -> str:
    """``path + suffix`` for an #SBATCH line: as is when plain, else double-quoted.

    ``path`` is user-influenced and checked; ``suffix`` is ours (it may hold sbatch's ``%j``, ``%A``, ``%a``).
    """
    if _BAD_PATH_CHARS.search(path):
        raise ValueError(
            f"run directory {path!r} contains a character sbatch cannot take in an #SBATCH line "
            '(one of " \\ % # or a control character); use a path without them'
        )
    value = path + suffix
    return value if _SAFE_SBATCH.fullmatch(re.sub(r"%[jAa]", "", value)) else f'"{value}"'


@dataclass(frozen=True)
class JobArray:
    """The tasks of one job array (a sweep): task ``i`` runs in ``run_dirs[i]``, at most ``parallelism``
    tasks at once (``--array=0-N%K``). The directories are ``<parent>/<prefix><i>``, so that sbatch's
    ``%a`` puts each task's log (``slurm-<array>_<task>.out``) into its own run directory."""

    run_dirs: tuple[Path, ...]
    parallelism: int

    def layout(self) -> tuple[str, str]:
        """(parent, prefix) of the run directories; ``ValueError`` when they do not follow the pattern."""
        dirs = [Path(d).resolve() for d in self.run_dirs]
        if not dirs:
            raise ValueError("a job array needs at least one run directory")
        if not isinstance(self.parallelism, int) or self.parallelism < 1:
            raise ValueError(f"array parallelism must be an integer >= 1, got {self.parallelism!r}")
        parent, prefix = dirs[0].parent, dirs[0].name[:-1]
        if not re.fullmatch(r"[A-Za-z0-9_-]*", prefix) or any(
                d.parent != parent or d.name != f"{prefix}{i}" for i, d in enumerate(dirs)):
            raise ValueError("the run directories of a job array must be <folder>/<prefix><task id> "
                             f"(0, 1, 2, …); got {', '.join(str(d) for d in dirs[:3])}")
        return str(parent), prefix


def _time_limit(minutes: int) -> str:
    days, rest = divmod(minutes, 24 * 60)
    hours, mins = divmod(rest, 60)
    return f"{days}-{hours:02d}:{mins:02d}:00" if days else f"{hours}:{mins:02d}:00"


@dataclass(frozen=True)
class _Launch:
    mode: str
    line: str
    distributed: bool  # the job script exports MASTER_ADDR/MASTER_PORT
    node_addresses: bool = False  # … and FLOWTRAIN_NODE_ADDRS, every node's address (programs that list all workers)


# A task that dies ends the whole step at once (srun kills the others), so a crashed rank fails the
# job within seconds instead of leaving the other ranks waiting for it until the time limit.
# --export=ALL: job steps keep the batch shell's (allow-listed) environment; see schedulers/jobenv.py.
SRUN = "exec srun --export=ALL --kill-on-bad-exit=1"


def _launch(request: JobRequest, python: str, procs_per_node: int) -> _Launch:
    """The launch line for the request's framework (already shell-quoted)."""
    r = request.resources
    py = shlex.quote(python)
    prog = " ".join(shlex.quote(a) for a in (request.script, *request.args))
    total = r.nodes * procs_per_node
    if total == 1:
        return _Launch("one process", f"exec {py} {prog}", distributed=False)
    node_cpus = procs_per_node * r.cpus_per_task
    # One srun task per node, holding all the node's CPUs/GPUs, for launchers that fork workers.
    per_node = f"{SRUN} --nodes={r.nodes} --ntasks={r.nodes} --ntasks-per-node=1 --cpus-per-task={node_cpus}"
    if request.framework == "torch":
        line = (
            f'{per_node} {py} -m torch.distributed.run --nnodes="$SLURM_NNODES" '
            f"--nproc_per_node={procs_per_node} --rdzv_backend=c10d "
            f'--rdzv_endpoint="$MASTER_ADDR:$MASTER_PORT" --rdzv_id="$SLURM_JOB_ID" {prog}'
        )
        return _Launch(f"srun, one torchrun per node x {procs_per_node} processes", line, True)
    if request.framework == "paddle":
        if r.nodes == 1:
            line = (f"exec {py} -m paddle.distributed.launch --log_dir {PADDLE_LOG_DIR} "
                    f"--nproc_per_node {procs_per_node} {prog}")
            return _Launch(f"paddle.distributed.launch, {procs_per_node} processes", line, False)
        # $SLURM_NODEID differs per task, so it is expanded inside the task, by bash -c; python and
        # the program reach that inner shell as positional parameters, never as code.
        inner = (
            f'exec "$0" -m paddle.distributed.launch --log_dir {PADDLE_LOG_DIR} --master "$MASTER_ADDR:$MASTER_PORT" '
            f'--nnodes "$SLURM_NNODES" --rank "$SLURM_NODEID" --nproc_per_node {procs_per_node} "$@"'
        )
        line = f"{per_node} bash -c {shlex.quote(inner)} {py} {prog}"
        return _Launch(f"srun, one paddle.distributed.launch per node x {procs_per_node}", line, True)
    # keras / TensorFlow: one srun task per worker; the program lists the workers from the node
    # addresses and its rank (SLURM_PROCID), each on its own port.
    line = (
        f"{SRUN} --nodes={r.nodes} --ntasks={total} --ntasks-per-node={procs_per_node} "
        f"--cpus-per-task={r.cpus_per_task} {py} {prog}"
    )
    return _Launch(f"srun, one task per worker ({total} workers)", line, True, node_addresses=True)


def render_sbatch(
    request: JobRequest,
    python: str | None = None,
    *,
    requeue: bool = True,
    signal: str | None = DEFAULT_SIGNAL,
    array: JobArray | None = None,
) -> str:
    """The text of ``job.sbatch`` for ``request``; with ``array``, of a job array whose task ``i`` runs
    the same program in ``array.run_dirs[i]`` (``request.run_dir`` is then unused).

    ``python``: the interpreter of the execution environment on the compute nodes (default: this
    process's ``sys.executable``). Processes per node = ``gpus_per_node`` when GPUs are requested,
    else ``tasks_per_node``; that is also ``--ntasks-per-node``. Raises ``ValueError`` naming the
    field when a value cannot be rendered safely.
    """
    r = request.resources
    if request.framework not in FRAMEWORKS:
        raise ValueError(f"framework {request.framework!r} is not one of {', '.join(FRAMEWORKS)}")
    for field_name, minimum in (
        ("nodes", 1),
        ("cpus_per_task", 1),
        ("tasks_per_node", 1),
        ("gpus_per_node", 0),
        ("time_limit_min", 1),
    ):
        value = getattr(r, field_name)
        if not isinstance(value, int) or value < minimum:
            raise ValueError(f"resources.{field_name} must be an integer >= {minimum}, got {value!r}")
    if r.mem_mb is not None and (not isinstance(r.mem_mb, int) or r.mem_mb < 1):
        raise ValueError(f"resources.mem_mb must be a positive integer (MB) or None, got {r.mem_mb!r}")
    for field_name in ("partition", "account", "qos"):
        value = getattr(r, field_name)
        if value is not None and not _PARTITION.fullmatch(value):
            raise ValueError(f"resources.{field_name} {value!r} is not a Slurm {field_name} name ([A-Za-z0-9_.-])")
    script = PurePosixPath(request.script)
    if script.is_absolute() or ".." in script.parts or not request.script.strip():
        raise ValueError(f"script {request.script!r} must be a relative path inside the run directory")
    for key, _ in request.env:
        if not _ENV_KEY.fullmatch(key):
            raise ValueError(f"environment variable name {key!r} is invalid; expected [A-Za-z_][A-Za-z0-9_]*")
    if not isinstance(request.restarts, int) or isinstance(request.restarts, bool) or not 0 <= request.restarts <= 100:
        raise ValueError(f"restarts must be an integer from 0 to 100, got {request.restarts!r}")
    if signal is not None and not re.fullmatch(r"(B:|R:|RB:)?[A-Z0-9]+(@\d+)?", signal):
        raise ValueError(f"signal {signal!r} is not an sbatch --signal value like 'B:USR1@120'")

    if request.module is not None and not _MODULE.fullmatch(request.module):
        raise ValueError(f"module {request.module!r} is not an Lmod module name like torch/2.13.0")
    run_dir = str(Path(request.run_dir).resolve())
    sbatch_run_dir, sbatch_log = _sbatch_path(run_dir), _sbatch_path(run_dir, "/" + LOG_PATTERN)
    array_range, point_dirs = "", []
    if array is not None:
        parent, prefix = array.layout()
        n = len(array.run_dirs)
        array_range = f"0-{n - 1}%{min(array.parallelism, n)}"
        sbatch_run_dir, sbatch_log = _sbatch_path(parent), _sbatch_path(parent, f"/{prefix}%a/" + ARRAY_LOG_PATTERN)
        point_dirs = [shlex.quote(str(Path(d).resolve())) for d in array.run_dirs]
    procs = r.gpus_per_node if r.gpus_per_node > 0 else r.tasks_per_node
    launch = _launch(request, python or sys.executable, procs)
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
    )
    return env.get_template(TEMPLATE_NAME).render(
        job_name=sanitize_job_name(request.name),
        nodes=r.nodes,
        tasks_per_node=procs,
        cpus_per_task=r.cpus_per_task,
        gpus_per_node=r.gpus_per_node,
        mem_mb=r.mem_mb,
        time_limit=_time_limit(r.time_limit_min),
        partition=r.partition,
        account=r.account,
        qos=r.qos,
        sbatch_run_dir=sbatch_run_dir,
        sbatch_log=sbatch_log,
        array=array_range,
        point_dirs=point_dirs,
        requeue=requeue,
        signal=signal,
        framework=request.framework,
        script_name=sanitize_job_name(request.script),
        launch_mode=launch.mode,
        run_dir=shlex.quote(run_dir),
        env=[(k, shlex.quote(v)) for k, v in request.env],
        distributed=launch.distributed,
        node_addresses=launch.node_addresses,
        launch=launch.line,
        launch_line=launch.line.removeprefix("exec "),
        restarts=request.restarts,
        world=r.nodes * procs,
        peer_loss=shlex.quote(PEER_LOSS_ERE),
        module=request.module,
        module_lines=sbatch_lines(request.module, request.modulepath) if request.module else [],
    )


def write_sbatch(spec: PipelineSpec, framework: str, out: Path) -> Path:
    """Write ``job.sbatch`` for a program generated into ``out`` (``python -m flowtrain generate``);
    the Slurm executor renders the same script at submission. Returns its path."""
    run_dir = out.resolve()
    request = JobRequest(run_dir=run_dir, name=spec.name, framework=framework, resources=resources_from_spec(spec))
    path = run_dir / SCRIPT_NAME
    path.write_text(render_sbatch(request), encoding="utf-8")
    return path
