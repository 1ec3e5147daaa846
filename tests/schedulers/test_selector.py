"""The selector: unit tests on utilisation built from output captured on the real dev cluster
(tests/schedulers/data/sinfo.json, squeue.json), and tests on the live cluster (marker ``slurm``)
that load it with sleeping jobs and drained nodes and watch the choice move.

Captured state: n1, n2 (partitions cpu+gpu) have 3 of 4 GPUs allocated; n3 (gpu) is drained, n4
(gpu) is down; partition gpu has 1 pending job, partition cpu 2.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core import zoo
from core.errors import Problem
from core.load import spec_from_dict
from core.spec import PipelineSpec
from core.validate import Analysis, validate
from schedulers.discovery import EnvironmentReport, FrameworkInfo
from schedulers.selector import NoFeasibleTarget, select
from schedulers.slurm.parsing import partitions_from_scontrol
from schedulers.utilisation import local_utilisation, utilisation_from_outputs
from settings.environments import Environment, FrameworkOverride
from tests.helpers import wait_until
from tests.slurm_fixture import TEST_JOB_PREFIX, TEST_REASON, DevCluster

DATA = Path(__file__).parent / "data"
REPO = Path(__file__).resolve().parents[2]


def captured() -> tuple[dict[str, Any], dict[str, Any]]:
    return json.loads((DATA / "sinfo.json").read_text()), json.loads((DATA / "squeue.json").read_text())


def partitions() -> list[Any]:
    return partitions_from_scontrol((DATA / "scontrol_partitions.txt").read_text())


def idle_cluster() -> dict[str, Any]:
    """The captured cluster with every node idle and nothing queued."""
    sinfo, squeue = captured()
    sinfo = copy.deepcopy(sinfo)
    for n in sinfo["nodes"]:
        n.update(state="idle", state_flags=[], alloc_cpus=0, alloc_memory=0, gres_used="gpu:0", reason="")
    return utilisation_from_outputs(sinfo, {"jobs": []}, partitions())


def busy_cluster() -> dict[str, Any]:
    sinfo, squeue = captured()
    return utilisation_from_outputs(sinfo, squeue, partitions())


def env_report(name: str, partitions: tuple[str, ...], cuda: bool = False, **versions: str) -> EnvironmentReport:
    """An environment with the given frameworks installed (``torch="2.13.0"``)."""
    env = Environment(name=name, python=f"/opt/{name}/bin/python", partitions=partitions,
                      frameworks={fw: FrameworkOverride(v, "cuda" if cuda else "cpu") for fw, v in versions.items()})
    infos = {fw: FrameworkInfo(fw, installed=False) for fw in ("torch", "keras", "paddle")}
    infos.update({fw: FrameworkInfo(fw, installed=True, version=v, device="cuda" if cuda else "cpu",
                                    cuda_version="12.4" if cuda else None, source="config")
                  for fw, v in versions.items()})
    return EnvironmentReport(env, infos)


def spec_with(gpus: int = 0, nodes: int = 1, cpus: int = 1, framework: str = "auto",
              partition: str | None = None) -> PipelineSpec:
    doc = zoo.template("mnist_cnn").model_dump(mode="json")
    doc["training"]["resources"].update(gpus_per_node=gpus, nodes=nodes, cpus_per_task=cpus, partition=partition)
    doc["training"]["framework"] = framework
    return spec_from_dict(doc)


def all_supported(analysis: Analysis, framework: str) -> list[Problem]:
    return []


# torch only on partition gpu, paddle only on partition cpu (both CUDA builds).
SPLIT = [
    env_report("torch-gpu", ("gpu",), cuda=True, torch="2.13.0"),
    env_report("paddle-cpu", ("cpu",), cuda=True, paddle="3.3.1"),
]


def run_select(spec: PipelineSpec, reports: list[EnvironmentReport], util: dict[str, Any], **kw: Any) -> Any:
    kw.setdefault("support", all_supported)
    return select(spec, validate(spec), reports, util, **kw)


def test_soonest_start_beats_preference_on_captured_cluster() -> None:
    """1 GPU: both partitions can start it now, gpu has fewer pending jobs (1 vs 2) → torch on gpu,
    although the user prefers paddle (only on cpu)."""
    sel = run_select(spec_with(gpus=1, framework="paddle"), SPLIT, busy_cluster())
    assert (sel.framework, sel.partition, sel.environment) == ("torch", "gpu", "torch-gpu")
    assert sel.python == "/opt/torch-gpu/bin/python"
    assert sel.reasons[0].startswith("chose torch on partition gpu: it can start now (2 idle GPUs, 1 pending)")
    assert sel.reasons[0].endswith(  # within the uncertainty (both the default MACs model): the known queue decides
        "torch and paddle finish within the estimates' uncertainty (~9 s (3–24 s) against ~9 s (3–24 s)): "
        "preferred paddle queues behind more jobs (2 pending against 1), which is known, not estimated, so torch "
        "goes first")
    by = {(c.framework, c.partition): c for c in sel.candidates}
    assert by["paddle", "cpu"].rank == 2 and by["paddle", "cpu"].preferred
    assert by["torch", "cpu"].installed is False and by["torch", "cpu"].rank is None
    assert "not installed in any environment that reaches cpu" in by["torch", "cpu"].reason
    assert by["torch", "gpu"].idle_gpus == 2 and by["torch", "gpu"].pending_jobs == 1
    doc = sel.to_dict()
    assert doc["framework"] == "torch" and doc["candidates"][0]["feasible"] is True
    json.dumps(doc)  # the portal shows it as JSON


def test_idle_cluster_preference_decides() -> None:
    util = idle_cluster()
    assert run_select(spec_with(gpus=2, framework="paddle"), SPLIT, util).framework == "paddle"
    assert run_select(spec_with(gpus=2), SPLIT, util).framework == "torch"  # auto: fixed order


def test_nothing_can_start_shortest_queue_wins() -> None:
    """2 GPUs per node: no node of the captured cluster has 2 idle → both wait; gpu's queue is shorter."""
    sel = run_select(spec_with(gpus=2, framework="paddle"), SPLIT, busy_cluster())
    assert (sel.framework, sel.partition) == ("torch", "gpu")
    assert "no feasible choice can start now; it has the shortest queue (1 pending)" in sel.reasons[0]
    assert all(not c.can_start_now for c in sel.candidates)


def test_drained_and_down_nodes_make_a_partition_too_small() -> None:
    """3 nodes x 4 GPUs: gpu has n3 drained and n4 down → only 2 usable; cpu has only 2 nodes."""
    sel = run_select(spec_with(gpus=4, nodes=3), SPLIT, busy_cluster())
    assert not sel.ok and sel.framework is None
    text = "\n".join(sel.reasons)
    assert "needs 3 node(s)" in text and "n3 idle+DRAIN" in text and "n4 down" in text
    with pytest.raises(NoFeasibleTarget, match="no framework can run this pipeline"):
        sel.require()


def test_gpu_count_larger_than_any_node() -> None:
    sel = run_select(spec_with(gpus=8), SPLIT, idle_cluster())
    assert not sel.ok
    assert "has 8 GPUs (at most 4)" in "\n".join(sel.reasons)


def test_unsupported_ops_exclude_a_framework() -> None:
    reports = [env_report("all", (), torch="2.13.0", keras="3.15.1", paddle="3.3.1")]

    def no_torch(analysis: Analysis, framework: str) -> list[Problem]:
        if framework != "torch":
            return []
        return [Problem("model.nodes[conv2d1]", "cannot be generated for torch: torch has no converter for Conv2d",
                        node="conv2d1", received="Conv2d")]

    sel = run_select(spec_with(framework="torch"), reports, idle_cluster(), support=no_torch)
    assert sel.framework == "keras"
    assert "preferred torch cannot express the graph" in sel.reasons[0]
    torch = next(c for c in sel.candidates if c.framework == "torch")
    assert torch.unsupported == ("conv2d1 (Conv2d: torch has no converter for Conv2d)",)
    assert "cannot express 1 node(s): conv2d1" in torch.reason


def test_real_support_table_is_used_by_default() -> None:
    """Without an injected check the mappers' own converter registries decide (torch lands first)."""
    spec = spec_with()
    sel = select(spec, None, [env_report("all", (), torch="2.13.0")], idle_cluster())
    assert sel.framework == "torch", sel.reasons


def test_required_framework_and_partition_restrict() -> None:
    reports = [env_report("all", (), torch="2.13.0", keras="3.15.1", paddle="3.3.1")]
    util = idle_cluster()
    assert run_select(spec_with(), reports, util, require="paddle").framework == "paddle"
    sel = run_select(spec_with(partition="gpu"), reports, util)
    assert sel.partition == "gpu"
    assert all(not c.feasible for c in sel.candidates if c.partition == "cpu")
    missing = run_select(spec_with(), [env_report("t", (), torch="2.13.0")], util, require="keras")
    assert not missing.ok and "keras on cpu: not installed" in "\n".join(missing.reasons)
    with pytest.raises(NoFeasibleTarget, match="unknown"):
        run_select(spec_with(), reports, util, require="jax")


def test_cpu_jobs_go_to_the_default_partition_gpu_jobs_where_gpus_are_idle() -> None:
    reports = [env_report("all", (), cuda=True, torch="2.13.0")]
    util = idle_cluster()
    assert run_select(spec_with(), reports, util).partition == "cpu"  # default partition
    assert run_select(spec_with(gpus=1), reports, util).partition == "gpu"  # 16 idle GPUs vs 8


def test_cuda_build_preferred_for_gpu_jobs() -> None:
    reports = [env_report("cpu-only", (), cuda=False, torch="2.13.0"), env_report("cuda", (), cuda=True,
                                                                                   keras="3.15.1")]
    sel = run_select(spec_with(gpus=1, framework="torch"), reports, idle_cluster())
    assert sel.framework == "keras"
    torch = next(c for c in sel.candidates if c.framework == "torch" and c.partition == sel.partition)
    assert not torch.gpu_build_ok and "CPU build: the requested GPUs would sit idle" in torch.reason
    # Without GPUs the build does not matter and the preference wins.
    assert run_select(spec_with(framework="torch"), reports, idle_cluster()).framework == "torch"


def test_local_machine_as_one_partition() -> None:
    reports = [env_report("here", (), torch="2.13.0", keras="3.15.1")]
    free = {"local": local_utilisation(gpus=0)}
    sel = run_select(spec_with(framework="keras"), reports, free, scheduler="local")
    assert (sel.framework, sel.partition) == ("keras", "local")
    busy = {"local": local_utilisation(gpus=0, alloc_cpus=10_000, running_jobs=1, pending_jobs=3)}
    sel = run_select(spec_with(), reports, busy, scheduler="local")
    assert sel.ok and not sel.candidates[0].can_start_now and sel.candidates[0].pending_jobs == 3
    not_local = [EnvironmentReport(Environment("remote", "/x", ("gpu",), local=False, frameworks={}),
                                   {"torch": FrameworkInfo("torch", True, "2.13.0", "cpu")})]
    assert not run_select(spec_with(), not_local, free, scheduler="local").ok


def test_no_partitions_at_all() -> None:
    sel = run_select(spec_with(), SPLIT, {})
    assert not sel.ok and "no partition" in sel.reasons[0]


def test_select_cli_local_json(tmp_path: Path) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(spec_with().to_json())
    envs = tmp_path / "envs.json"
    envs.write_text(json.dumps({"environments": [{"name": "here", "python": sys.executable,
                                                  "frameworks": {"torch": {"version": "2.13.0"}}}]}))
    env = {"FLOWTRAIN_HOME": str(tmp_path / "home"), "FLOWTRAIN_ENVIRONMENTS": str(envs), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-m", "flowtrain", "select", str(spec), "--scheduler", "local", "--json"],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert (doc["framework"], doc["partition"], doc["environment"]) == ("torch", "local", "here")
    text = subprocess.run([sys.executable, "-m", "flowtrain", "select", str(spec), "--scheduler", "local",
                           "--framework", "paddle"], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert text.returncode == 4 and "paddle on local: not installed" in text.stdout


# --------------------------------------------------------------------------- the real cluster


@pytest.fixture
def cluster_load(slurm_cluster: DevCluster) -> Iterator[Any]:
    """Helpers that occupy nodes' GPUs with sleeping jobs / drain nodes, undone at the end."""
    cmds = slurm_cluster.commands
    jobs: list[str] = []
    drained: list[str] = []

    class Load:
        def occupy_gpus(self, node: str) -> str:
            out = cmds.run(["sbatch", "--parsable", f"--job-name={TEST_JOB_PREFIX}-occupy-{node}", "-p", "gpu",
                            f"--nodelist={node}", "--gres=gpu:4", "-n1", "-c1", "--mem=100", "-t", "10",
                            "-o", "/dev/null", "--wrap", "sleep 600"], clean_job_env=True).stdout
            job_id = out.strip().split(";")[0]
            jobs.append(job_id)
            return job_id

        def drain(self, nodes: str) -> None:
            slurm_cluster.update_node(nodes, State="drain", Reason=f"{TEST_REASON}-selector")
            drained.append(nodes)

    try:
        yield Load()
    finally:
        for job_id in jobs:
            cmds.scancel(job_id)
        for nodes in drained:
            slurm_cluster.update_node(nodes, State="resume")


@pytest.mark.slurm
def test_choice_moves_with_load_on_the_real_cluster(cluster_load: Any, tmp_path: Path) -> None:
    """torch only on partition cpu (n1, n2), keras only on gpu (n1–n4), 1 node x 4 GPUs.

    Idle: torch (fixed order). GPUs of n1, n2 occupied by sleeping jobs: torch cannot start, keras
    on gpu can (n3, n4) → keras. n3, n4 drained as well: nothing can start now, no queue either
    → torch again, and the reasons say both would wait.
    """
    from schedulers.utilisation import slurm_utilisation

    reports = [env_report("torch-env", ("cpu",), cuda=True, torch="2.13.0"),
               env_report("keras-env", ("gpu",), cuda=True, keras="3.15.1")]
    spec = spec_with(gpus=4)

    def choose() -> Any:
        return run_select(spec, reports, slurm_utilisation())

    first = choose()
    assert (first.framework, first.partition) == ("torch", "cpu"), first.reasons

    for node in ("n1", "n2"):
        cluster_load.occupy_gpus(node)
    moved = wait_until(lambda: (s := choose()).framework == "keras" and s, timeout=30,
                       message=lambda: f"the choice to move to keras: {choose().reasons}")
    assert moved.partition == "gpu"
    torch = next(c for c in moved.candidates if c.framework == "torch" and c.partition == "cpu")
    assert not torch.can_start_now and "would wait" in torch.reason

    cluster_load.drain("n[3-4]")
    back = wait_until(lambda: (s := choose()).framework == "torch" and s, timeout=30,
                      message=lambda: f"the choice to move back to torch: {choose().reasons}")
    assert "no feasible choice can start now" in back.reasons[0]
    keras = next(c for c in back.candidates if c.framework == "keras")
    assert not keras.can_start_now and keras.idle_gpus == 0

    too_big = run_select(spec_with(gpus=4, nodes=3), reports, slurm_utilisation())
    assert not too_big.ok and "n3 idle+DRAIN" in "\n".join(too_big.reasons)


def limited_cluster(**limits: str) -> dict[str, Any]:
    """The idle captured cluster whose gpu partition has the given scontrol limits (MaxNodes=2, …)."""
    sinfo, _ = captured()
    sinfo = copy.deepcopy(sinfo)
    for n in sinfo["nodes"]:
        n.update(state="idle", state_flags=[], alloc_cpus=0, alloc_memory=0, gres_used="gpu:0", reason="")
    text = (DATA / "scontrol_partitions.txt").read_text()
    lines = []
    for line in text.splitlines():
        if line.startswith("PartitionName=gpu "):
            for key, value in limits.items():
                line = re.sub(rf"\b{key}=\S+", f"{key}={value}", line) if f" {key}=" in line \
                    else f"{line} {key}={value}"
        lines.append(line)
    return utilisation_from_outputs(sinfo, {"jobs": []}, partitions_from_scontrol("\n".join(lines)))


def test_partition_limits_are_parsed_from_scontrol() -> None:
    gpu = limited_cluster(MaxNodes="2", MaxTime="01:00:00", MaxCPUsPerNode="4", MaxMemPerNode="8000")["gpu"]
    assert (gpu.limits.max_nodes, gpu.limits.max_time_min, gpu.limits.max_cpus_per_node,
            gpu.limits.max_mem_per_node_mb) == (2, 60, 4, 8000)
    cpu = limited_cluster()["cpu"]
    assert cpu.limits.max_nodes is None and cpu.limits.max_time_min is None  # UNLIMITED


@pytest.mark.parametrize(("limits", "spec_kw", "words"), [
    ({"MaxNodes": "2"}, {"nodes": 3, "gpus": 1}, ["3 nodes", "MaxNodes=2", "training.resources.nodes"]),
    ({"MaxTime": "01:00:00"}, {"gpus": 1, "minutes": 120}, ["2:00:00", "1:00:00 (MaxTime)", "time_limit_min"]),
    ({"MaxCPUsPerNode": "2"}, {"gpus": 1, "cpus": 4}, ["4 CPUs per node", "MaxCPUsPerNode"]),
    ({"MaxMemPerNode": "1000"}, {"gpus": 1, "mem_gb": 2}, ["2048 MB per node", "MaxMemPerNode"]),
])
def test_requests_beyond_a_partition_limit_are_refused_naming_it(limits: dict[str, str], spec_kw: dict[str, Any],
                                                                 words: list[str]) -> None:
    doc = zoo.template("mnist_cnn").model_dump(mode="json")
    r = doc["training"]["resources"]
    r.update(gpus_per_node=spec_kw.get("gpus", 0), nodes=spec_kw.get("nodes", 1),
             cpus_per_task=spec_kw.get("cpus", 1), partition="gpu")
    if "minutes" in spec_kw:
        r["time_limit_min"] = spec_kw["minutes"]
    if "mem_gb" in spec_kw:
        r["mem_gb"] = spec_kw["mem_gb"]
    spec = spec_from_dict(doc)
    sel = run_select(spec, SPLIT, limited_cluster(**limits))
    assert not sel.ok
    reason = next(c.reason for c in sel.candidates if (c.framework, c.partition) == ("torch", "gpu"))
    assert all(w in reason for w in words), reason
    with pytest.raises(NoFeasibleTarget) as err:
        sel.require()
    assert all(w in str(err.value) for w in words)
    # Within the limits the same cluster runs it.
    assert run_select(spec, SPLIT, limited_cluster()).framework == "torch"
