"""sbatch rendering: resources → #SBATCH lines, launch line per framework, no shell injection."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest

from schedulers.base import JobRequest, Resources
from schedulers.slurm.sbatch import log_file_name, render_sbatch, sanitize_job_name

HOSTILE = [
    'x"; touch /tmp/pwned; #',
    "$(touch /tmp/pwned)",
    "`touch /tmp/pwned`",
    "a'b\nc\r\n#SBATCH --partition=evil",
    "--wrap=evil",
    "名前 with ünïcode",
    "",
]


def req(tmp_path: Path, framework: str = "torch", name: str = "run", **res: object) -> JobRequest:
    return JobRequest(run_dir=tmp_path, name=name, framework=framework, resources=Resources(**res))  # type: ignore[arg-type]


def sbatch_lines(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        if line.startswith("#SBATCH "):
            opt = line[len("#SBATCH ") :]
            key, _, value = opt.partition("=")
            out[key] = value
    return out


def launch_line(text: str) -> list[str]:
    lines = [ln for ln in text.splitlines() if ln.startswith("exec ")]
    assert len(lines) == 1, text
    return shlex.split(lines[0])


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_job_names_become_plain_words(tmp_path: Path, name: str) -> None:
    text = render_sbatch(req(tmp_path, name=name), python="/usr/bin/python3")
    job_name = sbatch_lines(text)["--job-name"]
    assert re.fullmatch(r"[A-Za-z0-9_.][A-Za-z0-9_.\-]*", job_name), job_name
    others = [ln for ln in text.splitlines() if not ln.startswith("#SBATCH --job-name=")]
    assert not [ln for ln in others if "pwned" in ln or "evil" in ln]
    assert subprocess.run(["bash", "-n"], input=text, text=True, check=False).returncode == 0


def test_sanitize_job_name() -> None:
    assert sanitize_job_name("ResNet-18 (cifar) v2") == "ResNet-18_cifar_v2"
    assert sanitize_job_name("--wrap") == "wrap"
    assert sanitize_job_name("") == "flowtrain"
    assert len(sanitize_job_name("x" * 500)) == 64


def test_hostile_args_env_and_python_stay_data(tmp_path: Path) -> None:
    args = ("--name", "$(touch /tmp/pwned)", "a b;c", "'q'")
    env = (("LABEL", "`id`; $(id)"), ("EMPTY", ""))
    request = JobRequest(run_dir=tmp_path, name="r", framework="torch", args=args, env=env)
    text = render_sbatch(request, python="/opt/my env/bin/python")
    assert launch_line(text) == ["exec", "/opt/my env/bin/python", "train.py", *args]
    # Executing only the export lines shows the values arrive verbatim.
    exports = "\n".join(
        ln for ln in text.splitlines() if ln.startswith("export LABEL") or ln.startswith("export EMPTY")
    )
    out = subprocess.run(
        ["bash", "-c", exports + '\nprintf "%s|%s" "$LABEL" "$EMPTY"'], capture_output=True, text=True, check=True
    ).stdout
    assert out == "`id`; $(id)|"


def test_resources_become_sbatch_options(tmp_path: Path) -> None:
    text = render_sbatch(
        req(tmp_path, nodes=2, gpus_per_node=4, cpus_per_task=3, mem_mb=8000, time_limit_min=90, partition="gpu"),
        python="/usr/bin/python3",
    )
    opts = sbatch_lines(text)
    run_dir = str(tmp_path.resolve())
    assert opts == {
        "--job-name": "run",
        "--nodes": "2",
        "--ntasks-per-node": "4",
        "--cpus-per-task": "3",
        "--gres": "gpu:4",
        "--mem": "8000M",
        "--time": "1:30:00",
        "--partition": "gpu",
        "--chdir": run_dir,
        "--output": f"{run_dir}/slurm-%j.out",
        "--error": f"{run_dir}/slurm-%j.out",
        "--requeue": "",
        "--signal": "B:USR1@120",
        "--open-mode": "append",  # a requeued job's log keeps its earlier attempts
    }
    assert text.startswith("#!/bin/bash\n")


def test_defaults_no_gres_no_mem_no_partition(tmp_path: Path) -> None:
    opts = sbatch_lines(render_sbatch(req(tmp_path), python="python3"))
    assert "--gres" not in opts and "--mem" not in opts and "--partition" not in opts
    assert opts["--ntasks-per-node"] == "1"


def test_no_requeue_and_no_signal(tmp_path: Path) -> None:
    opts = sbatch_lines(render_sbatch(req(tmp_path), python="python3", requeue=False, signal=None))
    assert "--no-requeue" in opts and "--requeue" not in opts and "--signal" not in opts


@pytest.mark.parametrize(
    ("minutes", "text"), [(1, "0:01:00"), (60, "1:00:00"), (1441, "1-00:01:00"), (2 * 1440 + 125, "2-02:05:00")]
)
def test_time_limit_format(tmp_path: Path, minutes: int, text: str) -> None:
    assert sbatch_lines(render_sbatch(req(tmp_path, time_limit_min=minutes), python="p"))["--time"] == text


def test_run_dir_with_space_is_double_quoted(tmp_path: Path) -> None:
    run_dir = tmp_path / "my runs" / "r1"
    run_dir.mkdir(parents=True)
    text = render_sbatch(JobRequest(run_dir=run_dir, name="r", framework="torch"), python="p")
    opts = sbatch_lines(text)
    assert opts["--chdir"] == f'"{run_dir}"'
    assert opts["--output"] == f'"{run_dir}/slurm-%j.out"'
    assert f"cd {shlex.quote(str(run_dir))}" in text


@pytest.mark.parametrize("bad", ['/tmp/a"b', "/tmp/a%b", "/tmp/a#b", "/tmp/a\nb", "/tmp/a\\b"])
def test_run_dir_sbatch_cannot_take_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="run directory"):
        render_sbatch(JobRequest(run_dir=Path(bad), name="r", framework="torch"), python="p")


@pytest.mark.parametrize(
    ("field", "kwargs", "match"),
    [
        ("framework", {"framework": "jax"}, "framework 'jax'"),
        ("partition", {"partition": "gpu; rm"}, "partition"),
        ("nodes", {"nodes": 0}, "resources.nodes"),
        ("gpus", {"gpus_per_node": -1}, "resources.gpus_per_node"),
        ("mem", {"mem_mb": 0}, "resources.mem_mb"),
        ("script", {"script": "../evil.py"}, "script"),
        ("script", {"script": "/abs/train.py"}, "script"),
        ("env", {"env": (("BAD-KEY", "1"),)}, "BAD-KEY"),
    ],
)
def test_invalid_requests_name_the_field(tmp_path: Path, field: str, kwargs: dict, match: str) -> None:
    res = {k: v for k, v in kwargs.items() if k in Resources.__dataclass_fields__}
    top = {k: v for k, v in kwargs.items() if k not in res}
    request = JobRequest(
        run_dir=tmp_path, name="r", framework=top.pop("framework", "torch"), resources=Resources(**res), **top
    )
    with pytest.raises(ValueError, match=re.escape(match)):
        render_sbatch(request, python="p")


def test_invalid_signal_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="signal"):
        render_sbatch(req(tmp_path), python="p", signal="USR1; rm -rf /")


# --- launch lines ---------------------------------------------------------------------------


@pytest.mark.parametrize("framework", ["torch", "keras", "paddle"])
def test_single_process_is_plain_python(tmp_path: Path, framework: str) -> None:
    text = render_sbatch(req(tmp_path, framework), python="/env/bin/python")
    assert launch_line(text) == ["exec", "/env/bin/python", "train.py"]
    assert "MASTER_ADDR" not in text


def test_default_python_is_this_interpreter(tmp_path: Path) -> None:
    import sys

    assert launch_line(render_sbatch(req(tmp_path)))[1] == sys.executable


def test_torch_multi_node_uses_srun_and_torchrun(tmp_path: Path) -> None:
    text = render_sbatch(req(tmp_path, "torch", nodes=2, gpus_per_node=4, cpus_per_task=2), python="/env/py")
    argv = launch_line(text)
    assert argv[:8] == ["exec", "srun", "--export=ALL", "--kill-on-bad-exit=1", "--nodes=2", "--ntasks=2",
                        "--ntasks-per-node=1", "--cpus-per-task=8"]
    assert argv[8:11] == ["/env/py", "-m", "torch.distributed.run"]
    assert "--nproc_per_node=4" in argv and "--rdzv_backend=c10d" in argv
    assert "--nnodes=$SLURM_NNODES" in argv and "--rdzv_endpoint=$MASTER_ADDR:$MASTER_PORT" in argv
    assert argv[-1] == "train.py"
    assert 'scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1' in text
    assert "export MASTER_PORT=" in text


def test_torch_cpu_multi_process_uses_tasks_per_node(tmp_path: Path) -> None:
    argv = launch_line(render_sbatch(req(tmp_path, "torch", nodes=1, tasks_per_node=3), python="p"))
    assert "--nproc_per_node=3" in argv


PADDLE_LOG_DIR = '$(mktemp -d ${TMPDIR:-/tmp}/flowtrain-paddle-XXXXXX)'  # as shlex reads the shell word


def test_paddle_one_node_many_processes(tmp_path: Path) -> None:
    text = render_sbatch(req(tmp_path, "paddle", gpus_per_node=2), python="/env/py")
    argv = launch_line(text)
    assert argv == ["exec", "/env/py", "-m", "paddle.distributed.launch", "--log_dir", PADDLE_LOG_DIR,
                    "--nproc_per_node", "2", "train.py"]
    assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0


def test_paddle_launcher_logs_go_to_a_private_folder_outside_the_run_dir(tmp_path: Path) -> None:
    """paddle.distributed.launch writes every worker's environment into its log folder."""
    run_dir, node_tmp = tmp_path / "run", tmp_path / "node-tmp"
    node_tmp.mkdir()
    line = next(ln for ln in render_sbatch(req(run_dir, "paddle", gpus_per_node=2), python="p").splitlines()
                if ln.startswith("exec "))
    word = line.split("--log_dir ", 1)[1].split(" --", 1)[0]
    folder = subprocess.run(["bash", "-c", f'set -- {word}; printf %s "$1"'], capture_output=True, text=True,
                            env={"TMPDIR": str(node_tmp), "PATH": "/usr/bin:/bin"}, check=True).stdout
    made = Path(folder)
    assert made.parent == node_tmp and made.is_dir() and made.stat().st_mode & 0o777 == 0o700


def test_paddle_multi_node_gets_rank_per_task(tmp_path: Path) -> None:
    text = render_sbatch(req(tmp_path, "paddle", nodes=3, gpus_per_node=2), python="/env/py")
    argv = launch_line(text)
    assert argv[:3] == ["exec", "srun", "--export=ALL"] and "--ntasks-per-node=1" in argv
    i = argv.index("bash")
    inner = argv[i + 2]
    assert '--rank "$SLURM_NODEID"' in inner and '--nnodes "$SLURM_NNODES"' in inner
    assert "--nproc_per_node 2" in inner and '--master "$MASTER_ADDR:$MASTER_PORT"' in inner
    assert '--log_dir "$(mktemp -d "${TMPDIR:-/tmp}/flowtrain-paddle-XXXXXX")"' in inner
    assert argv[i + 3 :] == ["/env/py", "train.py"]


def test_keras_one_srun_task_per_worker(tmp_path: Path) -> None:
    text = render_sbatch(req(tmp_path, "keras", nodes=2, gpus_per_node=2), python="/env/py")
    argv = launch_line(text)
    assert "export FLOWTRAIN_NODE_ADDRS" in text and "export MASTER_PORT=" in text  # one port per rank
    assert argv == [
        "exec",
        "srun",
        "--export=ALL",
        "--kill-on-bad-exit=1",
        "--nodes=2",
        "--ntasks=4",
        "--ntasks-per-node=2",
        "--cpus-per-task=1",
        "/env/py",
        "train.py",
    ]


def test_log_file_name() -> None:
    assert log_file_name("123") == "slurm-123.out"
