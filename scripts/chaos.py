"""Chaos on the dev cluster, measured: what happens to real runs when a rank, a node or the controller
goes away (scripts/chaos.sh runs this; docs/reliability.md holds the table it printed).

* ``kill``: rank 1 of a 2-node run is killed with SIGKILL mid-epoch, after the first checkpoint,
  ``--kills`` times per framework. Each run must end COMPLETED after one restart, with the weights of
  the same spec trained without interruption (the digest every rank writes to ranks/rank-N.json).
* ``node``: a node of a running 2-node run (partition ``gpu``, n1-n4) is set ``state=down``; Slurm
  requeues the job and the job script goes on with its next attempt on the nodes left. The node is
  resumed once the job runs again (at the latest after ``--node-down-max`` seconds).
* ``ctld``: ``--runs`` small runs are submitted held and released together, slurmctld is killed
  (SIGKILL) while some run and the others wait, and started again ``--ctld-down`` seconds later:
  every run must end COMPLETED, once.

``node`` and ``ctld`` disturb everyone's jobs on that cluster: they run only when asked for.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from schedulers.registry.runs import RunRegistry  # noqa: E402
from tests.cli.test_multinode import _rank_processes  # noqa: E402
from tests.cli.test_run_commands import ME, cli_env, flowtrain, small_spec  # noqa: E402

FINAL = {"COMPLETED", "FAILED", "CANCELLED", "NODE_FAIL", "TIMEOUT"}
STEPS_PER_EPOCH = 12  # examples/digits_cnn.json's training split at its batch size


@dataclass
class Row:
    part: str
    framework: str
    runs: int = 0
    completed: int = 0
    restarted: int = 0  # runs whose history has a restart line
    same_weights: int = 0  # runs that ended with the uninterrupted run's digest
    seconds: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def cells(self) -> list[str]:
        took = f"{min(self.seconds):.0f}-{max(self.seconds):.0f} s" if self.seconds else "-"
        weights = f"{self.same_weights}/{self.runs}" if not self.part.startswith("slurmctld") else "-"
        return [self.part, self.framework, str(self.runs), f"{self.completed}/{self.runs}",
                f"{self.restarted}/{self.runs}", weights, took, "; ".join(dict.fromkeys(self.notes))[:400]]


def wait(what: str, check: Callable[[], Any], timeout: float, interval: float = 1.0) -> Any:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = check()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(f"gave up after {timeout:.0f} s waiting for {what}")


def status(env: dict[str, str], run_id: str) -> dict[str, Any]:
    """``flowtrain status RUN --json``; state ``?`` when it did not answer (a busy machine, no controller)."""
    try:
        out = flowtrain(env, "status", run_id, "--json", timeout=300)
    except subprocess.TimeoutExpired:
        return {"state": "?", "history": []}
    return json.loads(out.stdout) if out.returncode == 0 and out.stdout.strip() else {"state": "?", "history": []}


def ended(env: dict[str, str], run_id: str, timeout: float) -> dict[str, Any]:
    return wait(f"run {run_id} to end", lambda: (s := status(env, run_id))["state"] in FINAL and s, timeout, 3)


def restart_lines(doc: dict[str, Any]) -> list[str]:
    return [h["detail"] for h in doc.get("history", []) if h["detail"].startswith("restart ")]


def digest(reg: RunRegistry, run_id: str) -> str | None:
    result = reg.result(run_id)
    return result.get("weights_sha256") if result else None


class Workspace:
    """A FlowTrain home and data root of its own, with the 2-node spec of a framework."""

    def __init__(self, root: Path, name: str) -> None:
        self.root = root / name
        self.root.mkdir(parents=True)
        self.home = self.root / "home"
        self.env = cli_env(self.home, self.root, SLURM_CONF=os.environ["SLURM_CONF"])
        self.reg = RunRegistry(home=self.home)

    def spec(self, framework: str, nodes: int, epochs: int, partition: str, cpus: int = 1) -> Path:
        path = small_spec(self.root)
        doc = json.loads(path.read_text())
        doc["training"]["framework"] = framework
        doc["training"]["epochs"] = epochs
        doc["training"]["resources"].update(nodes=nodes, gpus_per_node=0, partition=partition, cpus_per_task=cpus)
        path = self.root / f"spec-{framework}-{nodes}-{partition}.json"
        path.write_text(json.dumps(doc))
        return path

    def submit(self, spec: Path, framework: str, *args: str) -> str:
        out = flowtrain(self.env, "run", str(spec), "--scheduler", "slurm", "--framework", framework, *args,
                        timeout=600)
        said = re.search(r"^run (\S+): ", out.stdout, re.M)
        if out.returncode != 0 or said is None:
            raise RuntimeError(f"flowtrain run failed: {out.stdout}{out.stderr}")
        return said.group(1)

    def train_steps(self, run_id: str) -> int:
        metrics = self.reg.get(run_id, ME).run_dir / "metrics.jsonl"
        if not metrics.is_file():
            return 0
        steps = [json.loads(ln)["step"] for ln in metrics.read_text().splitlines() if '"event": "train"' in ln]
        return max(steps, default=0)

    def mid_epoch(self, run_id: str) -> bool:
        """Past the first epoch's checkpoint and into the next epoch, before its end."""
        checkpoints = self.reg.get(run_id, ME).run_dir / "checkpoints"
        step = self.train_steps(run_id)
        return any(checkpoints.glob(f"ckpt-{STEPS_PER_EPOCH}*")) and step > STEPS_PER_EPOCH


def part_kill(root: Path, framework: str, kills: int, epochs: int) -> Row:
    """``kills`` runs of one framework, rank 1 killed mid-epoch in each; one uninterrupted run beside the first."""
    row = Row("kill rank 1", framework)
    ws = Workspace(root, f"kill-{framework}")
    spec = ws.spec(framework, 2, epochs, "cpu")
    reference = ws.submit(spec, framework)
    for _ in range(kills):
        run_id = ws.submit(spec, framework)
        started = time.monotonic()
        row.runs += 1
        try:
            doc = kill_rank_1(ws, framework, run_id)
        except (TimeoutError, RuntimeError) as exc:
            row.notes.append(str(exc))
            continue
        row.seconds.append(time.monotonic() - started)
        row.completed += doc["state"] == "COMPLETED"
        lines = restart_lines(doc)
        row.restarted += bool(lines)
        row.notes += [re.sub(r"\(n\d\)", "(nX)", re.sub(r"step \d+", "step N", ln)) for ln in lines]
        if doc["state"] != "COMPLETED":
            row.notes.append(f"{doc['state']}: {doc.get('reason')}")
        ended(ws.env, reference, 900)
        if digest(ws.reg, run_id) is not None and digest(ws.reg, run_id) == digest(ws.reg, reference):
            row.same_weights += 1
    return row


def kill_rank_1(ws: Workspace, framework: str, run_id: str) -> dict[str, Any]:
    """SIGKILL to rank 1's training process once the run is mid-epoch; the run's final status."""
    wait("the run to be mid-epoch after its first checkpoint", lambda: ws.mid_epoch(run_id), 600, 0.05)
    run_dir = ws.reg.get(run_id, ME).run_dir
    for pid in wait("rank 1's process", lambda: _rank_processes(run_dir, framework, 1), 30, 0.1):
        os.kill(pid, signal.SIGKILL)
    print(f"chaos: {time.strftime('%H:%M:%S', time.gmtime())} UTC: killed rank 1 of {framework} run {run_id} "
          f"at step {ws.train_steps(run_id)}", flush=True)
    return ended(ws.env, run_id, 900)


def job_nodes(job_id: str) -> list[str]:
    out = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T %N"], capture_output=True, text=True, timeout=30)
    state, _, nodes = out.stdout.strip().partition(" ")
    if state != "RUNNING" or not nodes:
        return []
    return subprocess.run(["scontrol", "show", "hostnames", nodes], capture_output=True, text=True,
                          timeout=30).stdout.split()


def set_node(node: str, state: str) -> float:
    extra = ["reason=flowtrain-chaos"] if state == "down" else []
    subprocess.run(["scontrol", "update", f"nodename={node}", f"state={state}", *extra], check=True, timeout=30)
    print(f"chaos: {time.strftime('%H:%M:%S', time.gmtime())} UTC: node {node} state={state}", flush=True)
    return time.monotonic()


NOT_BEFORE: list[float] = []  # --not-before: the earliest time (epoch seconds) to disturb the cluster


def hold_until_allowed() -> None:
    """Wait for --not-before: a shared cluster's users expect the disturbance only then."""
    if NOT_BEFORE and time.time() < NOT_BEFORE[0]:
        print(f"chaos: waiting until {time.strftime('%H:%M:%S', time.gmtime(NOT_BEFORE[0]))} UTC", flush=True)
        time.sleep(NOT_BEFORE[0] - time.time())


def job_state(job_id: str) -> str:
    out = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True, timeout=30)
    return out.stdout.strip()


def part_node(root: Path, framework: str, epochs: int, down_max: float, release: bool) -> Row:
    """A 2-node run on partition gpu loses its second node: Slurm requeues it, it goes on elsewhere."""
    row = Row("node down", framework, runs=1)
    ws = Workspace(root, f"node-{framework}")
    spec = ws.spec(framework, 2, epochs, "gpu")
    reference = ws.submit(spec, framework)
    ended(ws.env, reference, 900)  # before the run under test: a node set down must not touch it
    run_id = ws.submit(spec, framework)
    job_id = ws.reg.get(run_id, ME).job_id or ""
    wait("the run to be mid-epoch after its first checkpoint", lambda: ws.mid_epoch(run_id), 600, 0.05)
    started = time.monotonic()
    first = wait("the job's nodes", lambda: job_nodes(job_id), 30, 0.2)
    victim = first[-1]
    hold_until_allowed()
    down_at = set_node(victim, "down")
    try:
        if release:  # Slurm holds a requeued job for CredExpire (120 s): let it start at once instead
            wait("Slurm to requeue the job", lambda: job_state(job_id) == "PENDING", 60, 0.2)
            subprocess.run(["scontrol", "update", f"jobid={job_id}", "StartTime=now"], check=True, timeout=30)
            row.notes.append("requeue hold released")
        again = wait("the requeued job to run again", lambda: job_nodes(job_id), down_max, 1)
        row.notes.append(f"{'+'.join(first)} -> {'+'.join(again)}")
    except TimeoutError as exc:
        row.notes.append(str(exc))
    finally:
        up_at = set_node(victim, "resume")
        row.notes.append(f"{victim} down {up_at - down_at:.0f} s")
    doc = ended(ws.env, run_id, 900)
    row.seconds.append(time.monotonic() - started)
    row.completed += doc["state"] == "COMPLETED"
    lines = restart_lines(doc)
    row.restarted += bool(lines)
    row.notes += lines + ([f"{doc['state']}: {doc.get('reason')}"] if doc["state"] != "COMPLETED" else [])
    ended(ws.env, reference, 900)
    row.same_weights += digest(ws.reg, run_id) is not None and digest(ws.reg, run_id) == digest(ws.reg, reference)
    return row


def ctld_pid() -> int:
    conf = Path(os.environ["SLURM_CONF"]).read_text()
    pid_file = re.search(r"^SlurmctldPidFile=(\S+)", conf, re.M)
    return int(Path(pid_file.group(1)).read_text().split()[0]) if pid_file else 0


def held_sbatch(folder: Path) -> Path:
    """A folder whose ``sbatch`` is Slurm's with ``--hold``: the slurmctld runs are submitted held and
    released together, so that every one of them is alive at the kill. Submitted as they come, the
    first ones ended before the last was queued (submitting 30 took 15 minutes on the loaded
    machine: 20 of 30 were done at the kill)."""
    real = shutil.which("sbatch")
    if real is None:
        raise RuntimeError("sbatch is not on PATH")
    bin_dir = folder / "held-bin"
    bin_dir.mkdir(exist_ok=True)
    wrapper = bin_dir / "sbatch"
    wrapper.write_text(f'#!/bin/sh\nexec {shlex.quote(real)} --hold "$@"\n')
    wrapper.chmod(0o755)
    return bin_dir


def resume_duplicate_drains() -> list[str]:
    """Resume the nodes slurmctld drained as "Duplicate jobid" after its restart, and say so.

    Slurm saves its job state a moment after each change: a job started in the last seconds before
    the SIGKILL comes back PENDING, its node still runs it, and the restarted controller kills it
    there and drains the node (seen once: released at 19:30:00, killed at 19:30:02). The job itself
    runs again as a requeued one; the drain is the chaos's, so it is undone at once."""
    out = subprocess.run(["sinfo", "-h", "-N", "-t", "drain,drng", "-o", "%N|%E"], capture_output=True, text=True,
                         timeout=60).stdout
    nodes = sorted({ln.split("|")[0] for ln in out.splitlines() if ln.endswith("|Duplicate jobid")})
    if not nodes:
        return []
    subprocess.run(["scontrol", "update", f"nodename={','.join(nodes)}", "state=resume"], check=True, timeout=30)
    print(f"chaos: resumed {','.join(nodes)} (drained by slurmctld: Duplicate jobid)", flush=True)
    return [f"{','.join(nodes)} drained 'Duplicate jobid' after the restart, resumed"]


def release_again(jobs: set[str]) -> list[str]:
    """Release again the jobs the restarted slurmctld brought back held: a release made in the last
    seconds before the SIGKILL was not saved yet (all 30 came back held once, released 2 s before)."""
    out = subprocess.run(["squeue", "-h", "-t", "PD", "-o", "%i %r"], capture_output=True, text=True, timeout=60).stdout
    held = sorted(ln.split()[0] for ln in out.splitlines() if ln.split()[0] in jobs and ln.endswith("JobHeldUser"))
    if not held:
        return []
    subprocess.run(["scontrol", "release", ",".join(held)], check=True, timeout=60)
    print(f"chaos: released {len(held)} jobs again: the restarted slurmctld had them held", flush=True)
    return [f"{len(held)} came back held (the release was not saved before the kill), released again"]


def part_ctld(root: Path, runs: int, down: float, cpus: int) -> Row:
    """``runs`` one-node torch runs of a few steps, ``cpus`` CPUs each (so that some wait while others
    run), submitted held and released together (at ``--not-before``); slurmctld killed under them as
    soon as some run, and started again."""
    row = Row("slurmctld restart", "torch", runs=runs)
    ws = Workspace(root, "ctld")
    spec = ws.spec("torch", 1, 1, "cpu", cpus)
    ws.env["PATH"] = f"{held_sbatch(ws.root)}{os.pathsep}{ws.env['PATH']}"
    started = time.monotonic()
    with ThreadPoolExecutor(4) as pool:  # four submissions at a time, as several users would
        ids = list(pool.map(lambda _: ws.submit(spec, "torch", "--max-steps", "6"), range(runs)))
    jobs = {ws.reg.get(i, ME).job_id for i in ids}

    def mixed() -> tuple[int, int] | None:
        out = subprocess.run(["squeue", "-h", "-o", "%i %T"], capture_output=True, text=True, timeout=30).stdout
        states = [ln.split()[1] for ln in out.splitlines() if ln.split()[0] in jobs]
        counts = (states.count("RUNNING"), states.count("PENDING"))
        return counts if counts[0] and counts[1] else None

    hold_until_allowed()
    subprocess.run(["scontrol", "release", ",".join(sorted(j for j in jobs if j))], check=True, timeout=60)
    print(f"chaos: {time.strftime('%H:%M:%S', time.gmtime())} UTC: {len(jobs)} held jobs released", flush=True)
    running, pending = wait("some runs running and some waiting", mixed, 300, 0.5)
    pid = ctld_pid()
    os.kill(pid, signal.SIGKILL)
    print(f"chaos: {time.strftime('%H:%M:%S', time.gmtime())} UTC: slurmctld (pid {pid}) killed with "
          f"{running} runs running and {pending} waiting", flush=True)
    with ThreadPoolExecutor(1) as pool:  # what status says meanwhile, while the controller stays away
        asked = pool.submit(flowtrain, ws.env, "status", ids[0], timeout=120)
        time.sleep(down)
        subprocess.run(["bash", str(REPO / "scripts" / "devcluster.sh"), "start"], check=True, timeout=300)
        print(f"chaos: {time.strftime('%H:%M:%S', time.gmtime())} UTC: slurmctld started again", flush=True)
        row.notes += resume_duplicate_drains()
        row.notes += release_again(jobs)
        try:
            unreachable = asked.result()
        except subprocess.TimeoutExpired:
            unreachable = subprocess.CompletedProcess([], 1, "", "status did not answer within 120 s")
    row.notes.append(f"{running} running + {pending} waiting at the kill")
    if unreachable.returncode != 0 or "COMPLETED" not in unreachable.stdout + unreachable.stderr:
        row.notes.append("status while down: " + (unreachable.stdout + unreachable.stderr).strip().splitlines()[-1][:80])
    docs = [ended(ws.env, i, 900) for i in ids]
    row.seconds.append(time.monotonic() - started)
    row.completed = sum(d["state"] == "COMPLETED" for d in docs)
    listed = ws.reg.list_runs(ME, limit=10 * runs)
    job_ids = [r.job_id for r in listed]
    twice = [d["id"] for d in docs if sum("training on" in ln for ln in _log(ws, d["id"]).splitlines()) != 1]
    row.notes.append(f"{len(listed)} runs listed, {len(set(job_ids))} distinct jobs, {len(twice)} trained twice")
    row.notes += [f"{d['id']}: {d['state']} {d.get('reason')}" for d in docs if d["state"] != "COMPLETED"]
    return row


def _log(ws: Workspace, run_id: str) -> str:
    path = ws.reg.log_path(run_id)
    return path.read_text(errors="replace") if path and path.is_file() else ""


def report(logs: list[Path]) -> list[Row]:
    """The kill rows again from the logs of earlier runs of this script (several runs of one framework
    merge into one row): each log names its folder and the runs it killed; the first run of each
    framework's folder is its uninterrupted one. Runs still going are left out, and said so."""
    rows: dict[str, Row] = {}
    for log in logs:
        text = log.read_text()
        root = Path(re.search(r"^chaos: runs under (\S+?);", text, re.M).group(1))
        for framework, run_id in re.findall(r"killed rank 1 of (\w+) run (\S+) at step", text):
            row = rows.setdefault(framework, Row("kill rank 1", framework))
            folder = root / f"kill-{framework}"
            env = cli_env(folder / "home", folder, SLURM_CONF=os.environ["SLURM_CONF"])
            reg = RunRegistry(home=folder / "home")
            reference = min(reg.list_runs(ME), key=lambda r: r.created).id
            doc, ref = status(env, run_id), status(env, reference)
            if doc["state"] not in FINAL or ref["state"] not in FINAL:
                row.notes.append(f"{run_id} still {doc['state']}")
                continue
            row.runs += 1
            row.completed += doc["state"] == "COMPLETED"
            lines = restart_lines(doc)
            row.restarted += bool(lines)
            row.notes += [re.sub(r"\(n\d\)", "(nX)", re.sub(r"step \d+", "step N", ln)) for ln in lines]
            if doc["state"] != "COMPLETED":
                row.notes.append(f"{doc['state']}: {doc.get('reason')}")
            run = reg.get(run_id, ME)
            if run.ended and run.created:
                row.seconds.append(run.ended - run.created)
            row.same_weights += digest(reg, run_id) is not None and digest(reg, run_id) == digest(reg, reference)
    return list(rows.values())


def table(rows: list[Row]) -> str:
    head = ["part", "framework", "runs", "COMPLETED", "restarted", "same weights", "time per run", "notes"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(r.cells()) + " |" for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--parts", default="kill", help="comma-separated: kill, node, ctld (default: kill)")
    parser.add_argument("--frameworks", default="torch,keras,paddle")
    parser.add_argument("--kills", type=int, default=1, help="killed runs per framework (default 1)")
    parser.add_argument("--epochs", type=int, default=3, help="epochs of 12 steps per run (default 3)")
    parser.add_argument("--runs", type=int, default=6, help="runs under the slurmctld restart (default 6)")
    parser.add_argument("--ctld-down", type=float, default=20, help="seconds slurmctld stays down (default 20)")
    parser.add_argument("--ctld-cpus", type=int, default=4,
                        help="CPUs per run under the slurmctld restart: with 4, 4 of them run on n1-n2 at once (default 4)")
    parser.add_argument("--release", action="store_true",
                        help="node: start the requeued job at once (StartTime=now), not after Slurm's 120 s hold, so "
                             "that the node is down only briefly")
    parser.add_argument("--node-down-max", type=float, default=300, help="longest a node stays down (default 300 s)")
    parser.add_argument("--work", type=Path, default=None, help="folder for the runs (default: a new temporary one)")
    parser.add_argument("--report", type=Path, nargs="+", default=None, metavar="LOG",
                        help="print the kill rows again from these logs of earlier runs (no new runs)")
    parser.add_argument("--not-before", default=None, metavar="HH:MM",
                        help="node, ctld: disturb the cluster no earlier than this time (UTC, today)")
    args = parser.parse_args(argv)
    if args.not_before:
        hours, minutes = (int(x) for x in args.not_before.split(":"))
        now = time.time()
        day = now - now % 86400  # one reading: two put the time a fraction of a second early (19:29:59)
        NOT_BEFORE.append(day + hours * 3600 + minutes * 60)
    if args.report:
        print(table(report(args.report)))
        return 0
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = sorted(set(parts) - {"kill", "node", "ctld"})
    if unknown or "SLURM_CONF" not in os.environ:
        parser.error(f"unknown part(s) {unknown}" if unknown else "SLURM_CONF is not set: eval \"$(scripts/devcluster.sh env)\"")
    root = args.work or Path(tempfile.mkdtemp(prefix="flowtrain-chaos-"))
    print(f"chaos: runs under {root}; {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())} UTC", flush=True)
    rows = []
    frameworks = [f for f in args.frameworks.split(",") if f]
    for part in parts:
        if part == "kill":
            rows += [part_kill(root, fw, args.kills, args.epochs) for fw in frameworks]
        elif part == "node":
            rows.append(part_node(root, frameworks[0], args.epochs, args.node_down_max, args.release))
        else:
            rows.append(part_ctld(root, args.runs, args.ctld_down, args.ctld_cpus))
        print(table(rows), flush=True)
    print(f"chaos: done {time.strftime('%H:%M:%S', time.gmtime())} UTC", flush=True)
    ok = all(r.completed == r.runs and (r.part.startswith("slurmctld") or r.restarted == r.runs) for r in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
