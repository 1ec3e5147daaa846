"""The REST transport's own logic: #SBATCH lines → job properties, tokens, slurmdbd records, errors.

Its calls against the real slurmrestd are the parametrised tests in test_slurm_integration.py
(marker ``slurmrestd``); the records here were captured from that daemon (Slurm 22.05.8,
``GET /slurmdb/v0.0.38/job/{id}``).
"""

from __future__ import annotations

import base64
import json
import socket
import time
from pathlib import Path

import pytest

from schedulers.base import JobRequest, Resources, RunState, SchedulerError
from schedulers.slurm.rest_transport import (
    SlurmRestTransport,
    TokenSource,
    _minutes,
    job_from_slurmdb_json,
    job_properties,
    jwt_claims,
)
from schedulers.slurm.sbatch import render_sbatch

DATA = Path(__file__).parent / "data"


def make_jwt(user: str = "alice", exp: float | None = None) -> str:
    def part(doc: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(doc).encode()).decode().rstrip("=")

    claims: dict[str, object] = {"sun": user, "iat": int(time.time())}
    if exp is not None:
        claims["exp"] = int(exp)
    return f"{part({'alg': 'HS256', 'typ': 'JWT'})}.{part(claims)}.c2lnbmF0dXJl"


def test_job_properties_carry_every_sbatch_line(tmp_path: Path) -> None:
    run_dir = tmp_path / "run dir"  # a space: the #SBATCH lines are double-quoted
    run_dir.mkdir()
    request = JobRequest(run_dir=run_dir, name="fttest-props", framework="torch", resources=Resources(
        nodes=2, gpus_per_node=2, cpus_per_task=3, mem_mb=4000, time_limit_min=1570, partition="gpu"))
    job = job_properties(render_sbatch(request, "/usr/bin/python3"), {"PATH": "/bin"})
    assert job == {
        "environment": {"PATH": "/bin"},
        "name": "fttest-props",
        "nodes": [2, 2],
        "tasks_per_node": 2,
        "tasks": 4,
        "cpus_per_task": 3,
        "gres": "gpu:2",
        "memory_per_node": 4000,
        "time_limit": 1570,
        "partition": "gpu",
        "current_working_directory": str(run_dir),
        "standard_output": f"{run_dir}/slurm-%j.out",
        "standard_error": f"{run_dir}/slurm-%j.out",
        "requeue": True,
        "signal": "USR1@120",  # v0.0.38 refuses "B:"
        "open_mode": "append",
    }


def test_job_properties_refuse_an_option_they_cannot_pass_on() -> None:
    script = "#!/bin/bash\n#SBATCH --job-name=x\n#SBATCH --exclusive\nexec true\n"
    with pytest.raises(ValueError, match="--exclusive is not an option the REST transport can pass on"):
        job_properties(script, {})


def test_sbatch_lines_after_the_first_command_are_not_options() -> None:
    job = job_properties("#!/bin/bash\n#SBATCH --job-name=x\necho hi\n#SBATCH --exclusive\n", {})
    assert job["name"] == "x" and "exclusive" not in job


@pytest.mark.parametrize(("text", "minutes"), [("45", 45), ("1:30:00", 90), ("0:10:30", 11), ("2-03:04:00", 3064)])
def test_time_limits(text: str, minutes: int) -> None:
    assert _minutes(text) == minutes


def test_jwt_claims_name_the_user() -> None:
    assert jwt_claims(make_jwt("bob"))["sun"] == "bob"
    with pytest.raises(SchedulerError, match="not a JWT"):
        jwt_claims("not-a-token")


def test_token_from_file_and_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    token = make_jwt("carol", exp=time.time() + 3600)
    path = tmp_path / "token"
    path.write_text(f"SLURM_JWT={token}\n")
    assert TokenSource(str(path)).current() == ("carol", token)
    monkeypatch.setenv("SLURM_JWT", token)
    assert TokenSource("env").current() == ("carol", token)
    monkeypatch.delenv("SLURM_JWT")
    with pytest.raises(SchedulerError, match="SLURM_JWT is not set"):
        TokenSource("env").current()


def test_expired_token_is_refused_with_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text(make_jwt("dave", exp=time.time() - 10))
    with pytest.raises(SchedulerError, match=r"expired at .*scontrol token"):
        TokenSource(str(path)).current()


def test_unreachable_slurmrestd_is_a_clear_fast_error(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    path = tmp_path / "token"
    path.write_text(make_jwt("erin", exp=time.time() + 600))
    rest = SlurmRestTransport(f"http://127.0.0.1:{port}", token=str(path), timeout_s=3)
    t0 = time.monotonic()
    assert not rest.ping(timeout_s=2)
    with pytest.raises(SchedulerError, match=r"slurmrestd unreachable: GET .*/jobs .*devcluster.sh start --with rest"):
        rest.squeue_jobs()
    assert time.monotonic() - t0 < 5


def test_only_http_urls() -> None:
    with pytest.raises(SchedulerError, match="not an http"):
        SlurmRestTransport("slurm:6820")


def test_slurmdb_records_and_the_exit_code_22_05_gets_wrong() -> None:
    jobs = json.loads((DATA / "slurmdb_jobs.json").read_text())["jobs"]
    ok, failed = (job_from_slurmdb_json(j) for j in jobs)
    assert (ok.state, ok.exit_code, ok.partition, ok.nodes) == (RunState.COMPLETED, 0, "cpu", "n1")
    # The job exited 3; dbv0.0.38 says return_code 0. Unknown beats wrong.
    assert (failed.state, failed.exit_code, failed.workdir) == (RunState.FAILED, None, "/tmp/ft-rest-try/j1")
