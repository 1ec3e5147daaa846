"""How the lockstep check (:mod:`core.lockstep`) starts a generated program on this machine's CPU: one
process, or ``ranks`` local processes through each framework's own launcher — torch's
``torch.distributed.run``, paddle's ``paddle.distributed.launch``, and for Keras the variables ``srun``
sets, which its ``MultiWorkerMirroredStrategy`` reads (``templates/keras/_strategy.py.j2``), one process
per rank. Each process's output goes to a file in the program's folder (``rank-<i>.log``; paddle's
launcher writes its workers' to ``launch/workerlog.<i>``), so no pipe fills while another rank is awaited.
"""

from __future__ import annotations

import os
import random
import socket
import subprocess
import time
from pathlib import Path

ENV = {"CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": "", "TF_CPP_MIN_LOG_LEVEL": "3", "GLOG_minloglevel": "2",
       "PYTHONWARNINGS": "ignore"}
_PORTS = random.SystemRandom()  # not the global generator: two checks side by side must not try the same ports


def free_ports(count: int) -> int:
    """A port p with p … p + count − 1 all free on loopback right now."""
    for _ in range(200):
        base = _PORTS.randint(20_000, 60_000 - count)
        sockets = [socket.socket() for _ in range(count)]
        try:
            for i, s in enumerate(sockets):
                s.bind(("127.0.0.1", base + i))
            return base
        except OSError:
            continue
        finally:
            for s in sockets:
                s.close()
    raise OSError(f"no {count} consecutive free ports on loopback")


def commands(folder: Path, framework: str, ranks: int, steps: int, python: str) -> list[tuple[list[str], dict]]:
    """The command lines (with their environments) that train the program in `folder` for `steps` steps."""
    train = ["train.py", "--max-steps", str(steps), "--resume", "never"]
    env = {**os.environ, **ENV}
    if ranks == 1:
        return [([python, *train], env)]
    if framework == "torch":
        return [([python, "-m", "torch.distributed.run", "--nproc-per-node", str(ranks), "--master-port",
                  str(free_ports(1)), *train], env)]
    if framework == "paddle":
        # paddle's launcher reads any CUDA_VISIBLE_DEVICES, an empty one too, as a list of GPUs ([""]) and
        # fails to hand them out; without it, it finds the devices itself (a CPU build: the CPU, over gloo)
        env = {name: value for name, value in env.items() if name != "CUDA_VISIBLE_DEVICES"}
        return [([python, "-m", "paddle.distributed.launch", "--nproc_per_node", str(ranks), "--log_dir",
                  str(folder / "launch"), *train], env)]
    base = free_ports(ranks + 1)  # Keras's workers listen on MASTER_PORT + 1 + rank
    tasks = {"SLURM_NTASKS": str(ranks), "SLURM_STEP_NUM_TASKS": str(ranks), "SLURM_STEP_NODELIST": "localhost",
             "SLURM_STEP_TASKS_PER_NODE": str(ranks), "SLURM_NTASKS_PER_NODE": str(ranks), "MASTER_PORT": str(base)}
    return [([python, *train], {**env, **tasks, "SLURM_PROCID": str(rank), "SLURM_LOCALID": str(rank)})
            for rank in range(ranks)]


def run_program(folder: Path, framework: str, steps: int, python: str, timeout: float, ranks: int = 1) -> str | None:
    """Train the program in `folder` for `steps` optimizer steps on `ranks` local processes; None, or what
    went wrong (the end of the first failed process's output)."""
    logs, procs = [], []
    try:
        for i, (argv, env) in enumerate(commands(folder, framework, ranks, steps, python)):
            logs.append(folder / f"rank-{i}.log")
            with logs[-1].open("wb") as log:
                procs.append(subprocess.Popen(argv, cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT))
        deadline = time.monotonic() + timeout
        for proc in procs:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                return f"train.py did not finish within {timeout:g} s"
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    for proc, log in zip(procs, logs):
        if proc.returncode != 0:
            worker_logs = sorted((folder / "launch").glob("workerlog.*"))
            text = "\n".join(path.read_text(errors="replace") for path in [log, *worker_logs])
            return f"train.py exited with {proc.returncode}: " + " | ".join(text.strip().splitlines()[-5:])
    return None
