"""Accounts, QoS and limits from slurmdbd (schedulers/accounting.py), and sacct data in run details.

The unit tests read output captured from the dev cluster's slurmdbd (``scripts/devcluster.sh start
--with dbd``: accounts root/ml/physics, QoS normal/short, see scripts/devcluster-extras.sh). The
``slurmdbd`` tests ask the real database: a user without the account is refused before submission
(and slurmctld agrees), a request over a limit is refused with the limit named, and a finished run's
details show its account, QoS and sacct figures.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from core import zoo
from core.load import spec_from_dict
from core.spec import PipelineSpec
from schedulers.accounting import (
    Accounting,
    associations_from_sacctmgr,
    partition_access_from_scontrol,
    qos_from_sacctmgr,
    record_words,
    wall_minutes,
)
from schedulers.base import JobRequest, Resources, RunState, SchedulerError
from schedulers.discovery import EnvironmentReport
from schedulers.launch import Executors, accounting_for, plan
from schedulers.reconcile import fetch_accounting, reconcile
from schedulers.registry.db import MIGRATIONS, SCHEMA_VERSION
from schedulers.registry.runs import RunRegistry
from schedulers.slurm.executor import SlurmExecutor
from schedulers.slurm.parsing import accounting_from_sacct
from schedulers.slurm.rest_transport import SlurmRestTransport, accounting_from_slurmdb_json
from schedulers.slurm.sbatch import render_sbatch
from settings.access import os_user
from tests.helpers import wait_until
from tests.schedulers.test_registry_safety import OLD_SCHEMA_V1
from tests.slurm_fixture import TEST_JOB_PREFIX, DevCluster

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data"
ASSOC = """flowtrain|physics|alice||normal||||
flowtrain|ml|root||normal,short|normal|gres/gpu=4||
flowtrain|root|root||normal,short|normal|||
"""
QOS = "normal|||\nshort|00:30:00||\n"
PARTITIONS = (
    "PartitionName=cpu AllowGroups=ALL AllowAccounts=ALL AllowQos=ALL Default=YES MaxTime=UNLIMITED Nodes=n[1-2]\n"
    "PartitionName=gpu AllowGroups=ALL AllowAccounts=physics AllowQos=ALL DenyQos=short Nodes=n[1-4]\n"
)
SACCT = """JobID|State|ExitCode|ElapsedRaw|TotalCPU|MaxRSS|Account|QOS
5|FAILED|3:0|6|00:00.050||ml|short
5.batch|FAILED|3:0|6|00:00.050|59836K|ml|
5.extern|COMPLETED|0:0|6|00:00:00|900K|ml|
"""


def accounting(user: str = "root") -> Accounting:
    assocs = tuple(a for a in associations_from_sacctmgr(ASSOC) if a.user == user)
    return Accounting(user=user, cluster="flowtrain", enforce=("associations", "limits", "qos"),
                      default_account={"root": "root", "alice": "physics"}.get(user), associations=assocs,
                      qos=qos_from_sacctmgr(QOS), partitions=partition_access_from_scontrol(PARTITIONS))


def test_associations_qos_and_partition_lists_are_read() -> None:
    acct = accounting()
    assert acct.accounts == ["root", "ml"] and acct.qos_of("ml") == ["normal", "short"]
    ml = next(a for a in acct.associations if a.account == "ml")
    assert ml.max_tres == {"gres/gpu": 4}
    assert acct.qos["short"].max_wall_min == 30 and acct.qos["normal"].max_wall_min is None
    assert acct.partitions["gpu"].allow_accounts == ("physics",) and acct.partitions["cpu"].allow_accounts is None
    assert acct.partitions["gpu"].deny_qos == ("short",)
    assert [wall_minutes(t) for t in ("1-00:00:00", "02:00:00", "45", "")] == [1440, 120, 45, None]


def test_a_request_within_the_limits_has_no_problem() -> None:
    assert accounting().problems("cpu", Resources(account="ml", qos="short", time_limit_min=30, gpus_per_node=4)) == []


def test_every_limit_is_named_at_once() -> None:
    res = Resources(account="ml", qos="short", nodes=2, gpus_per_node=4, time_limit_min=90)
    problems = accounting().problems("gpu", res)
    assert problems == [
        "partition gpu allows only accounts physics (AllowAccounts), not ml",
        "partition gpu denies QoS short (DenyQos)",
        "account ml allows at most 4 GPUs per job (MaxTRES gres/gpu=4); the request needs 8",
        "QoS short allows at most 30 min per job (MaxWall); the request asks 90 min",
    ]


def test_accounts_and_qos_the_user_may_not_use() -> None:
    assert accounting("alice").problems("cpu", Resources(account="ml")) == [
        "user alice has no association with account ml on cluster flowtrain (alice may charge: physics)"]
    assert accounting("alice").problems("cpu", Resources(qos="short", time_limit_min=30)) == [
        "account physics does not allow QoS short for user alice (allowed: normal)"]
    assert accounting().problems("cpu", Resources(qos="gold"))[0].startswith("QoS gold does not exist")
    nobody = Accounting(user="bob", cluster="flowtrain", enforce=("associations",), default_account=None,
                        associations=(), qos={}, partitions={})
    assert "Slurm user bob has no association" in nobody.problems("cpu", Resources())[0]


def test_the_selector_refuses_with_the_limit_named() -> None:
    from tests.schedulers.test_selector import SPLIT, idle_cluster, run_select

    sel = run_select(mlp_spec(account="ml", qos="short", time_limit_min=60), SPLIT, idle_cluster(),
                     accounting=accounting())
    assert not sel.ok
    assert "torch on gpu: torch 2.13.0 (CUDA 12.4 build), but partition gpu allows only accounts physics " \
           "(AllowAccounts), not ml; partition gpu denies QoS short (DenyQos); QoS short allows at most 30 min " \
           "per job (MaxWall); the request asks 60 min" in "\n".join(sel.reasons), sel.reasons
    assert run_select(mlp_spec(account="ml", qos="short", time_limit_min=30), SPLIT, idle_cluster(),
                      accounting=accounting()).partition == "cpu"


def test_sbatch_and_spec_carry_account_and_qos(tmp_path: Path) -> None:
    doc = zoo.template("mlp").model_dump(mode="json")
    doc["training"]["resources"].update(account="ml", qos="short")
    assert spec_from_dict(doc).training.resources.account == "ml"
    doc["training"]["resources"]["qos"] = "short; rm -rf /"
    with pytest.raises(Exception, match="training.resources.qos"):
        spec_from_dict(doc)
    text = render_sbatch(JobRequest(run_dir=tmp_path, name="x", framework="torch",
                                    resources=Resources(account="ml", qos="short")), "/usr/bin/python3")
    assert "#SBATCH --account=ml\n#SBATCH --qos=short\n" in text
    with pytest.raises(ValueError, match="resources.account"):
        render_sbatch(JobRequest(run_dir=tmp_path, name="x", framework="torch", resources=Resources(account="a b")))


def test_sacct_and_slurmdb_records() -> None:
    record = accounting_from_sacct(SACCT, "5")
    assert record is not None
    assert (record.state, record.exit_code, record.elapsed_s, record.cpu_time_s) == ("FAILED", 3, 6, 0.05)
    assert (record.max_rss_mb, record.account, record.qos) == (58.4, "ml", "short")
    assert accounting_from_sacct(SACCT.replace("FAILED", "RUNNING"), "5") is None  # not ended yet
    # for ~2 s after the end, slurmdbd shows the QoS as "Unknown": the record is not complete yet
    assert accounting_from_sacct(SACCT.replace("ml|short", "ml|Unknown"), "5") is None
    assert record_words(record.to_dict()) == ("account ml, QoS short, elapsed 0:06, CPU time 0.1 s, max RSS 58.4 MB, "
                                              "exit code 3 (FAILED)")
    jobs = json.loads((DATA / "slurmdb_jobs.json").read_text())["jobs"]
    rest = accounting_from_slurmdb_json(jobs[0])
    assert rest is not None and (rest.state, rest.exit_code, rest.account, rest.qos) == ("COMPLETED", 0, "root", "normal")
    assert accounting_from_slurmdb_json({**jobs[0], "qos": "Unknown"}) is None


def test_a_version_2_registry_gains_the_accounting_column(tmp_path: Path) -> None:
    """A file as FlowTrain wrote it at schema version 2 (version 1 plus data_source) is migrated: its
    runs get an empty accounting record, and the file reaches the current version."""
    (tmp_path / "runs").mkdir()
    with sqlite3.connect(tmp_path / "flowtrain.db") as db:
        db.executescript(OLD_SCHEMA_V1)
        for statement in MIGRATIONS[1]:
            db.execute(statement)
        db.execute("INSERT INTO runs (id, user, name, spec, spec_hash, framework, scheduler, state, created, run_dir)"
                   " VALUES ('old-run', 'u', 'old', '{}', 'h', 'torch', 'slurm', 'COMPLETED', 1.0, ?)",
                   (str(tmp_path / "runs" / "old-run"),))
        db.execute("PRAGMA user_version = 2")
    again = RunRegistry(home=tmp_path)
    assert again.get("old-run").accounting is None
    with sqlite3.connect(tmp_path / "flowtrain.db") as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


# --- the real database ---------------------------------------------------------------------------


@pytest.fixture
def dbd(slurm_cluster: DevCluster) -> Iterator[DevCluster]:
    slurm_cluster.need("dbd")
    yield slurm_cluster


def torch_everywhere() -> list[EnvironmentReport]:
    """Discovery's answer for an environment declared to have torch on every partition (no probe)."""
    from tests.schedulers.test_selector import env_report

    return [env_report("torch", (), torch="2.13.0")]


TORCH = torch_everywhere()


def mlp_spec(**resources: object) -> PipelineSpec:
    doc = zoo.template("mlp").model_dump(mode="json")
    doc["training"]["resources"].update(resources)
    return spec_from_dict(doc)


@pytest.mark.slurm
@pytest.mark.slurmdbd
def test_a_user_without_the_account_is_refused_before_submission(dbd: DevCluster, tmp_path: Path) -> None:
    executors = Executors(tmp_path)
    sel = plan(mlp_spec(account="ml"), scheduler="slurm", executors=executors, slurm_user="alice", reports=TORCH)
    assert not sel.ok
    assert any("user alice has no association with account ml on cluster flowtrain (alice may charge: physics)"
               in line for line in sel.reasons), sel.reasons
    assert plan(mlp_spec(account="ml"), scheduler="slurm", executors=executors, reports=TORCH).ok  # root may
    # slurmctld agrees: root has no association with physics, and sbatch is refused.
    (tmp_path / "train.py").write_text("pass\n")
    request = JobRequest(run_dir=tmp_path, name=f"{TEST_JOB_PREFIX}-acct", framework="torch",
                         resources=Resources(account="physics", time_limit_min=5))
    with pytest.raises(SchedulerError, match="(?i)invalid account"):
        SlurmExecutor(slurm_conf=dbd.slurm_conf, commands=dbd.commands).submit(request)


@pytest.mark.slurm
@pytest.mark.slurmdbd
def test_limits_are_refused_with_the_limit_named(dbd: DevCluster, tmp_path: Path) -> None:
    executors = Executors(tmp_path)
    sel = plan(mlp_spec(qos="short", time_limit_min=60), scheduler="slurm", executors=executors, reports=TORCH)
    assert any("QoS short allows at most 30 min per job (MaxWall); the request asks 60 min" in line
               for line in sel.reasons) and not sel.ok, sel.reasons
    try:
        dbd.commands.run(["scontrol", "update", "partitionname=gpu", "AllowAccounts=physics"])
        sel = plan(mlp_spec(partition="gpu"), scheduler="slurm", executors=executors, reports=TORCH)
        assert any("partition gpu allows only accounts physics (AllowAccounts), not root" in line
                   for line in sel.reasons) and not sel.ok, sel.reasons
    finally:
        dbd.commands.run(["scontrol", "update", "partitionname=gpu", "AllowAccounts=ALL"])
    acct = accounting_for(executors)
    assert acct is not None and acct.accounts == ["root", "ml"] and acct.qos_of("ml") == ["normal", "short"]


@pytest.mark.slurm
@pytest.mark.slurmdbd
def test_sacct_data_appears_in_the_run_details(dbd: DevCluster, tmp_path: Path) -> None:
    home = tmp_path / "home"
    reg = RunRegistry(home=home)
    run = reg.create_run(user=os_user(), spec_json="{}", spec_hash="h", framework="torch", scheduler="slurm")
    # Holds 80 MB for 2.5 s: the node samples each task's memory every second (JobAcctGatherFrequency).
    (run.run_dir / "train.py").write_text("import time\nx = bytearray(80_000_000)\nsum(range(3_000_000))\n"
                                          "time.sleep(2.5)\n")
    executor = SlurmExecutor(slurm_conf=dbd.slurm_conf, commands=dbd.commands)
    request = JobRequest(run_dir=run.run_dir, name=f"{TEST_JOB_PREFIX}-sacct", framework="torch",
                         resources=Resources(account="ml", qos="short", time_limit_min=5))
    job_id = executor.submit(request)
    reg.mark_submitted(run.id, job_id, "submitted")
    executors = {"slurm": executor}
    wait_until(lambda: reconcile(reg, executors, run_ids=[run.id]) and reg.get(run.id).is_final, timeout=60,
               message="the run to end")
    assert reg.get(run.id).state is RunState.COMPLETED
    record = wait_until(lambda: fetch_accounting(reg, run.id, executors), timeout=30, message="sacct's record")
    assert (record["account"], record["qos"], record["exit_code"], record["state"]) == ("ml", "short", 0, "COMPLETED")
    assert record["elapsed_s"] >= 0 and record["cpu_time_s"] > 0 and record["max_rss_mb"] > 70
    out = subprocess.run([sys.executable, "-m", "flowtrain", "status", run.id], cwd=REPO,
                         env={**_env(), "FLOWTRAIN_HOME": str(home)}, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "sacct      account ml, QoS short, elapsed " in out.stdout and "exit code 0 (COMPLETED)" in out.stdout
    if "rest" in dbd.extras:  # slurmdbd through slurmrestd says the same
        assert dbd.rest_url is not None
        rest = SlurmRestTransport(dbd.rest_url, slurm_conf=dbd.slurm_conf).accounting(job_id)
        assert rest is not None
        assert (rest.account, rest.qos, rest.state, rest.elapsed_s) == ("ml", "short", "COMPLETED", record["elapsed_s"])
        assert rest.max_rss_mb is not None and abs(rest.max_rss_mb - record["max_rss_mb"]) < 1


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("FLOWTRAIN_")} | {"FLOWTRAIN_SCHEDULER": "slurm"}


@pytest.mark.slurm
@pytest.mark.slurmdbd
def test_accounts_command(dbd: DevCluster) -> None:
    out = subprocess.run([sys.executable, "-m", "flowtrain", "accounts", "--json"], cwd=REPO, env=_env(),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["default_account"] == "root"
    assert doc["accounts"] == [{"account": "root", "qos": ["normal", "short"]}, {"account": "ml", "qos": ["normal", "short"]}]
