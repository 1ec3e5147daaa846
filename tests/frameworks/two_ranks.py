"""Two local ranks of a generated program, through each framework's own launcher (used by the tests that
check what several ranks add up to: their shares of an epoch, their summed metrics)."""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

from tests.frameworks.streaming import ENV, PYTHON
from tests.helpers import free_port, free_port_pair


def launch_two_ranks(framework: str, folder: Path, out: Path, script: str = "train.py",
                     env: dict[str, str] | None = None) -> None:
    """Run ``script --out OUT`` in ``folder`` as two processes: torchrun, paddle.distributed.launch, and for
    Keras two processes with Slurm's variables, as srun sets them (MultiWorkerMirroredStrategy)."""
    env = env or ENV
    if framework == "torch":
        commands = [[PYTHON, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port",
                     str(free_port()), script, "--out", str(out)]]
        envs = [env]
    elif framework == "paddle":
        commands = [[PYTHON, "-m", "paddle.distributed.launch", "--nproc_per_node", "2", "--log_dir",
                     str(out.parent / "launch"), script, "--out", str(out)]]
        envs = [env]
    else:
        job, master = str(random.randint(1, 19_000)), str(free_port_pair() - 1)
        commands = [[PYTHON, script, "--out", str(out)]] * 2
        envs = [{**env, "MASTER_PORT": master, "SLURM_JOB_ID": job, "SLURM_PROCID": str(rank), "SLURM_NTASKS": "2",
                 "SLURM_STEP_NUM_TASKS": "2", "SLURM_STEP_NODELIST": "localhost",
                 "SLURM_STEP_TASKS_PER_NODE": "2", "SLURM_NTASKS_PER_NODE": "2"} for rank in (0, 1)]
    procs = [subprocess.Popen(c, cwd=folder, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for c, e in zip(commands, envs)]
    try:
        outputs = [p.communicate(timeout=400) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    logs = "".join(p.read_text(errors="replace")[-3000:] for p in sorted((out.parent / "launch").glob("workerlog.*")))
    for p, (stdout, stderr) in zip(procs, outputs):
        assert p.returncode == 0, stdout[-2000:] + stderr[-3000:] + logs
