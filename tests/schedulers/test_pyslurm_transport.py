"""The pyslurm transport and the choice between it and the commands transport (issue 5).

pyslurm cannot be built against Debian's Slurm 22.05, so on this machine the real behaviour under
test is the choice: commands transport, reason "pyslurm not installed", and a forced pyslurm that
fails with the fix. The live submit/status/cancel test runs only where pyslurm imports.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from schedulers.base import RunState, SchedulerError
from schedulers.slurm.commands import SlurmCommands
from schedulers.slurm.pyslurm_transport import (
    ENV_VAR,
    PyslurmTransport,
    choose_transport,
    major_minor,
    probe,
    versions_match,
)
from schedulers.slurm.rest_transport import SlurmRestTransport
from settings import ConfigError
from tests.slurm_fixture import TEST_JOB_PREFIX, DevCluster

HAVE_PYSLURM = importlib.util.find_spec("pyslurm") is not None
NO_PYSLURM = "pyslurm is not installable against Debian's Slurm 22.05; runs on a Slurm 25.11 site"


@pytest.fixture
def mode(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    monkeypatch.delenv(ENV_VAR, raising=False)
    yield monkeypatch


def test_major_minor_is_numeric() -> None:
    assert major_minor("slurm 22.05.8") == (22, 5)
    assert major_minor("25.11.0") == (25, 11)
    assert major_minor("25.5.0") == (25, 5)
    with pytest.raises(ValueError, match="no version number"):
        major_minor("slurm-wlm")


@pytest.mark.parametrize(
    ("pyslurm_version", "slurm_version", "match"),
    [
        ("25.11.0", "slurm 25.11.2", True),
        ("25.5.1", "slurm 25.05.3", True),  # pyslurm writes 25.05 as 25.5
        ("25.11.0", "slurm 22.05.8", False),
        ("22.5.0", "slurm-wlm 22.05.8", True),  # Debian prints slurm-wlm
        ("24.11.0", "slurm 25.11.0", False),
    ],
)
def test_versions_match(pyslurm_version: str, slurm_version: str, match: bool) -> None:
    assert versions_match(pyslurm_version, slurm_version) is match


@pytest.mark.skipif(HAVE_PYSLURM, reason="pyslurm is installed here")
def test_probe_without_pyslurm() -> None:
    assert probe() == (None, "pyslurm not installed")


@pytest.mark.skipif(HAVE_PYSLURM, reason="pyslurm is installed here")
def test_forced_pyslurm_without_it_is_an_error_with_the_fix(mode: pytest.MonkeyPatch) -> None:
    mode.setenv(ENV_VAR, "pyslurm")
    with pytest.raises(SchedulerError, match="pyslurm not installed") as info:
        choose_transport()
    assert "pip install" in str(info.value) and "docs/pyslurm.md" in str(info.value)
    with pytest.raises(SchedulerError, match="SLURM_INCLUDE_DIR"):
        PyslurmTransport()


def test_forced_commands_needs_no_cluster(mode: pytest.MonkeyPatch) -> None:
    mode.setenv(ENV_VAR, "Commands")
    transport, reason = choose_transport(slurm_conf="/nonexistent/slurm.conf")
    assert isinstance(transport, SlurmCommands)
    assert transport.slurm_conf == "/nonexistent/slurm.conf"
    assert reason == f"{ENV_VAR}=commands"


def test_unknown_mode_is_an_error(mode: pytest.MonkeyPatch) -> None:
    mode.setenv(ENV_VAR, "pigeon")
    with pytest.raises(ConfigError, match="'pigeon' is not one of auto, commands, pyslurm, rest"):
        choose_transport()


def test_rest_mode_builds_the_rest_transport_without_contacting_it(mode: pytest.MonkeyPatch) -> None:
    mode.setenv(ENV_VAR, "rest")
    mode.setenv("FLOWTRAIN_SLURM_REST_URL", "http://127.0.0.1:9/")
    transport, reason = choose_transport(slurm_conf="/nonexistent/slurm.conf")
    assert isinstance(transport, SlurmRestTransport) and transport.url == "http://127.0.0.1:9"
    assert reason == f"{ENV_VAR}=rest (http://127.0.0.1:9/)"


@pytest.mark.slurm
@pytest.mark.skipif(HAVE_PYSLURM, reason="pyslurm is installed here")
def test_auto_picks_commands_on_this_machine(slurm_cluster: DevCluster, mode: pytest.MonkeyPatch) -> None:
    transport, reason = choose_transport(slurm_conf=slurm_cluster.slurm_conf)
    assert isinstance(transport, SlurmCommands)
    assert reason == "pyslurm not installed"
    assert transport.ping(timeout_s=5)


@pytest.mark.slurm
@pytest.mark.skipif(not HAVE_PYSLURM, reason=NO_PYSLURM)
def test_pyslurm_submit_status_cancel(slurm_cluster: DevCluster, tmp_path: Path, mode: pytest.MonkeyPatch) -> None:
    from tests.helpers import wait_until

    mode.setenv(ENV_VAR, "pyslurm")
    transport, reason = choose_transport(slurm_conf=slurm_cluster.slurm_conf)
    assert isinstance(transport, PyslurmTransport), reason
    assert transport.ping(timeout_s=5)
    script = tmp_path / "job.sbatch"
    script.write_text(
        f"#!/bin/bash\n#SBATCH --job-name={TEST_JOB_PREFIX}-pyslurm\n#SBATCH --output={tmp_path}/out-%j.txt\n"
        "sleep 300\n"
    )
    job_id = transport.sbatch(script, cwd=tmp_path)
    job = transport.show_job(job_id)
    assert job is not None and job.name == f"{TEST_JOB_PREFIX}-pyslurm"
    assert job.workdir == str(tmp_path)
    assert job_id in transport.squeue_jobs()
    transport.scancel(job_id)
    wait_until(lambda: (j := transport.show_job(job_id)) is None or j.state == RunState.CANCELLED, timeout=30)
    assert transport.show_job("999999999") is None
    assert os.environ.get("SLURM_CONF") == slurm_cluster.slurm_conf
