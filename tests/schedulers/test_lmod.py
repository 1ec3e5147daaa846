"""Lmod environments (schedulers/modules.py): listing, probing with the module loaded, the choice
following where a framework's module exists, and job.sbatch loading the chosen module.

The ``lmod`` tests use the dev cluster's module trees (``scripts/devcluster.sh start --with lmod``):
tree ``gpu`` (partition gpu) has modules torch, keras and paddle; tree ``cpu`` (partition cpu) has
torch and keras only. Each module's python3 has its framework and not the other two.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from core import zoo
from core.load import spec_from_dict
from core.spec import PipelineSpec
from schedulers.base import JobRequest, Resources, RunState
from schedulers.discovery import EnvironmentReport, discover
from schedulers.launch import Executors, check, launch, plan
from schedulers.modules import load_and_exec, modules_from_spider_json, sbatch_lines, spider
from schedulers.reconcile import cancel_run
from schedulers.registry.runs import RunRegistry
from schedulers.slurm.executor import SlurmExecutor
from schedulers.slurm.sbatch import render_sbatch
from settings import Environment, load_settings
from settings.environments import parse_environments
from tests.helpers import wait_until
from tests.slurm_fixture import TEST_JOB_PREFIX, DevCluster

REPO = Path(__file__).resolve().parents[2]
SPIDER = {  # Lmod 8.6's `spider -o spider-json` for the dev cluster's tree cpu (shortened)
    "torch": {"/m/cpu/torch/2.13.0.lua": {"fullName": "torch/2.13.0", "Version": "2.13.0", "hidden": False,
                                          "Description": "torch 2.13.0", "mpath": "/m/cpu"}},
    "keras": {"/m/cpu/keras/3.15.1.lua": {"fullName": "keras/3.15.1", "Version": "3.15.1", "hidden": False,
                                          "Description": "keras 3.15.1", "mpath": "/m/cpu"},
              "/m/cpu/keras/.old.lua": {"fullName": "keras/.old", "hidden": True}},
}


def test_spider_json_lists_visible_modules() -> None:
    mods = modules_from_spider_json(SPIDER)
    assert [(m.full_name, m.name, m.version, m.modulepath) for m in mods] == [
        ("keras/3.15.1", "keras", "3.15.1", "/m/cpu"), ("torch/2.13.0", "torch", "2.13.0", "/m/cpu")]


def test_module_environments_are_checked() -> None:
    doc = {"environments": [{"name": "gpu", "modulepath": ["/m/gpu"], "modules": "*", "partitions": ["gpu"]}]}
    env = parse_environments(doc).environments[0]
    assert (env.python, env.local, env.modules) == ("python3", False, "*")
    for bad, words in [({"module": "torch/2", "modules": "*"}, "one of them"),
                       ({"modules": "*"}, "modulepath"),
                       ({"module": "torch/2", "local": True}, "loads no modules"),
                       ({"module": "torch; rm -rf /"}, "module name")]:
        with pytest.raises(Exception, match=words):
            parse_environments({"environments": [{"name": "x", **bad}]})


def test_module_loading_is_inert_data(tmp_path: Path) -> None:
    env = Environment(name="e", python="python3", module="torch/2.13.0", modulepath=("/m/a b", "/m/c"))
    argv = load_and_exec(env, ["python3", "-c", "print(1)"])
    assert argv[:2] == ["bash", "-c"] and argv[3:] == ["flowtrain-module", "/m/a b:/m/c", "torch/2.13.0", "python3",
                                                       "-c", "print(1)"]
    assert sbatch_lines("torch/2.13.0", ["/m/a b"])[1:] == ["module use --append '/m/a b'", "module load torch/2.13.0"]
    (tmp_path / "train.py").write_text("pass\n")
    text = render_sbatch(JobRequest(run_dir=tmp_path, name="x", framework="torch", module="torch/2.13.0",
                                    modulepath=("/m/a b",)), "python3")
    load = text.index("module load torch/2.13.0")
    assert 0 < load < text.index("exec python3 train.py")


# --- on the dev cluster --------------------------------------------------------------------------


def trees(cluster: DevCluster) -> list[Environment]:
    cluster.need("lmod")
    assert cluster.modulepath is not None
    doc = {"environments": [{"name": t, "modulepath": [f"{cluster.modulepath}/{t}"], "modules": "*", "partitions": [t]}
                            for t in ("gpu", "cpu")]}
    return list(parse_environments(doc).environments)


@pytest.fixture(scope="module")
def probed(slurm_cluster: DevCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, list[EnvironmentReport]]]:
    """Discovery of both trees, probed once for the module (each module loaded in a subprocess)."""
    home = tmp_path_factory.mktemp("lmod-home")
    reports = discover(trees(slurm_cluster), cache_path=home / "cache" / "discovery.json")
    yield home, reports


def mlp() -> PipelineSpec:
    return spec_from_dict(zoo.template("mlp").model_dump(mode="json"))


@pytest.mark.slurm
@pytest.mark.lmod
def test_modules_are_listed_and_probed_loaded(probed: tuple[Path, list[EnvironmentReport]]) -> None:
    _, reports = probed
    found = {r.environment.name: sorted(fw for fw in ("torch", "keras", "paddle") if r.has(fw)) for r in reports}
    names = sorted(found)
    assert [n.split("/")[0] for n in names] == ["cpu:keras", "cpu:torch", "gpu:keras", "gpu:paddle", "gpu:torch"]
    assert all(found[n] == [n.split(":")[1].split("/")[0]] for n in names), found  # each module: its framework only


@pytest.mark.slurm
@pytest.mark.lmod
def test_the_choice_follows_where_a_frameworks_module_exists(probed: tuple[Path, list[EnvironmentReport]],
                                                             tmp_path: Path) -> None:
    _, reports = probed
    executors = Executors(tmp_path)
    paddle = plan(mlp(), scheduler="slurm", framework="paddle", executors=executors, reports=reports)
    assert (paddle.partition, paddle.module) == ("gpu", next(r.environment.module for r in reports
                                                             if r.environment.name.startswith("gpu:paddle")))
    # the reasons: the choice, each framework's time to result, then one line per candidate (the chosen first)
    assert paddle.reasons[2].startswith("  - paddle on gpu") and f"from module {paddle.module}" in paddle.reasons[2]
    assert any(line.startswith("  - paddle on cpu: not installed") for line in paddle.reasons)
    torch = plan(mlp(), scheduler="slurm", framework="torch", executors=executors, reports=reports)
    assert torch.partition == "cpu" and torch.module is not None and torch.module.startswith("torch/")
    # The run's job.sbatch loads the chosen module before its launch line.
    registry = RunRegistry(home=tmp_path)
    run = launch(check(mlp(), "tester", load_settings()), torch, registry=registry, scheduler="slurm",
                 executors=executors, job_name=f"{TEST_JOB_PREFIX}-lmodrun")
    cancel_run(registry, run.id, executors)
    script = (run.run_dir / "job.sbatch").read_text()
    assert script.index(f"module load {torch.module}") < script.index("python3 train.py")  # each attempt's launch


@pytest.mark.slurm
@pytest.mark.lmod
def test_frameworks_json_shows_the_module(probed: tuple[Path, list[EnvironmentReport]], slurm_cluster: DevCluster
                                          ) -> None:
    home, _ = probed
    envs = home / "environments.json"
    envs.write_text(json.dumps({"environments": [
        {"name": t, "modulepath": [f"{slurm_cluster.modulepath}/{t}"], "modules": "*", "partitions": [t]}
        for t in ("gpu", "cpu")]}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWTRAIN_")}
    env.update(FLOWTRAIN_HOME=str(home), FLOWTRAIN_ENVIRONMENTS=str(envs))
    out = subprocess.run([sys.executable, "-m", "flowtrain", "frameworks", "--json"], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    shown = {e["environment"]["name"]: e["environment"] for e in json.loads(out.stdout)["environments"]}
    paddle = next(v for k, v in shown.items() if k.startswith("gpu:paddle/"))
    assert (paddle["module_name"], paddle["modulepath"]) == ("paddle", [f"{slurm_cluster.modulepath}/gpu"])
    assert paddle["module"] == f"paddle/{paddle['module_version']}"
    assert all(e["from_cache"] for e in json.loads(out.stdout)["environments"])  # the probe of the first test


@pytest.mark.slurm
@pytest.mark.lmod
def test_job_sbatch_loads_the_chosen_module(slurm_cluster: DevCluster, tmp_path: Path) -> None:
    gpu = trees(slurm_cluster)[0]
    module = next(m.full_name for m in spider(gpu.modulepath) if m.name == "paddle")
    (tmp_path / "train.py").write_text(
        "import os, sys\nprint('modules', os.environ.get('LOADEDMODULES'))\n"
        "try:\n    import torch\nexcept ModuleNotFoundError as exc:\n    print('no torch:', exc)\n")
    request = JobRequest(run_dir=tmp_path, name=f"{TEST_JOB_PREFIX}-module", framework="paddle",
                         resources=Resources(partition="gpu", time_limit_min=5), module=module,
                         modulepath=gpu.modulepath)
    ex = SlurmExecutor(slurm_conf=slurm_cluster.slurm_conf, commands=slurm_cluster.commands, python="python3")
    job_id = ex.submit(request)
    status = wait_until(lambda: (s := ex.status(job_id)).state.is_final and s, timeout=60, message="the job to end")
    log = (tmp_path / f"slurm-{job_id}.out").read_text()
    assert status.state is RunState.COMPLETED, log
    assert f"modules {module}" in log and "no torch: No module named 'torch'" in log
