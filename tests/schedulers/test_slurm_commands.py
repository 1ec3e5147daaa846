"""Parsing, exit-code decoding and state mapping, on output captured from the real dev cluster
(tests/schedulers/data/, recaptured by data/capture.sh)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from schedulers.base import RunState, SchedulerError
from schedulers.slurm.commands import SlurmCommands
from schedulers.slurm.parsing import (
    count_gres,
    decode_wait_status,
    job_from_scontrol,
    job_from_squeue_json,
    jobs_from_sacct,
    map_job_state,
    nodes_from_sinfo_json,
    parse_exit_pair,
    parse_sbatch_parsable,
    parse_scontrol_line,
    parse_slurm_minutes,
    partitions_from_scontrol,
)

DATA = Path(__file__).parent / "data"


def scontrol_job(name: str):
    return job_from_scontrol(parse_scontrol_line((DATA / f"scontrol_job_{name}.txt").read_text()))


@pytest.mark.parametrize(
    ("raw", "expected"),
    [(0, (0, None)), (768, (3, None)), (256, (1, None)), (9, (None, 9)), (15, (None, 15)), (1792, (7, None))],
)
def test_decode_wait_status(raw: int, expected: tuple[int | None, int | None]) -> None:
    assert decode_wait_status(raw) == expected


def test_decode_wait_status_rejects_negative() -> None:
    with pytest.raises(ValueError, match="-1"):
        decode_wait_status(-1)


@pytest.mark.parametrize(
    ("text", "expected"), [("0:0", (0, None)), ("3:0", (3, None)), ("0:9", (None, 9)), ("0:15", (None, 15))]
)
def test_parse_exit_pair(text: str, expected: tuple[int | None, int | None]) -> None:
    assert parse_exit_pair(text) == expected


def test_parse_exit_pair_names_bad_input() -> None:
    with pytest.raises(ValueError, match="'3'"):
        parse_exit_pair("3")


@pytest.mark.parametrize(
    ("slurm", "state"),
    [
        ("PENDING", RunState.PENDING),
        ("RUNNING", RunState.RUNNING),
        ("COMPLETING", RunState.RUNNING),
        ("COMPLETED", RunState.COMPLETED),
        ("FAILED", RunState.FAILED),
        ("OUT_OF_MEMORY", RunState.FAILED),
        ("CANCELLED by 0", RunState.CANCELLED),
        ("TIMEOUT", RunState.TIMEOUT),
        ("NODE_FAIL", RunState.NODE_FAIL),
        ("BOOT_FAIL", RunState.NODE_FAIL),
        ("PREEMPTED", RunState.PREEMPTED),
        ("REQUEUED", RunState.REQUEUED),
        ("REQUEUE_HOLD", RunState.REQUEUED),
        ("running", RunState.RUNNING),
        ("SOMETHING_NEW", RunState.UNKNOWN),
        ("", RunState.UNKNOWN),
    ],
)
def test_map_job_state(slurm: str, state: RunState) -> None:
    assert map_job_state(slurm) is state


def test_parse_scontrol_line_keeps_values_with_spaces() -> None:
    line = (DATA / "scontrol_nodes.txt").read_text().splitlines()[3]
    fields = parse_scontrol_line(line)
    assert fields["NodeName"] == "n4"
    assert fields["Reason"].startswith("fixture [root@")
    assert fields["OS"].startswith("Linux ") and " #1 " in fields["OS"]
    assert fields["Partitions"] == "gpu"


def test_scontrol_jobs_decode_states_and_exit_codes() -> None:
    ok = scontrol_job("ok")
    assert (ok.state, ok.exit_code, ok.signal, ok.name) == (RunState.COMPLETED, 0, None, "ok")
    fail = scontrol_job("fail3")
    assert (fail.state, fail.exit_code, fail.signal, fail.reason) == (RunState.FAILED, 3, None, "NonZeroExitCode")
    killed = scontrol_job("killed")
    assert (killed.state, killed.exit_code, killed.signal) == (RunState.FAILED, None, 9)
    cancelled = scontrol_job("cancelled")
    assert (cancelled.state, cancelled.exit_code, cancelled.signal) == (RunState.CANCELLED, None, 15)
    running = scontrol_job("running")
    assert (running.state, running.exit_code, running.nodes, running.partition) == (
        RunState.RUNNING,
        None,
        "n[1-2]",
        "gpu",
    )
    pending = scontrol_job("pending")
    assert (pending.state, pending.reason, pending.nodes, pending.exit_code) == (
        RunState.PENDING,
        "Resources",
        "",
        None,
    )


def test_scontrol_requeued_job_counts_restarts() -> None:
    job = scontrol_job("requeued")
    assert job.state is RunState.PENDING
    assert job.restarts == 1
    status = job.to_status()
    assert (status.state, status.restarts, status.job_id) == (RunState.PENDING, 1, job.job_id)


def test_job_from_scontrol_rejects_other_records() -> None:
    with pytest.raises(ValueError, match="NodeName"):
        job_from_scontrol(parse_scontrol_line("NodeName=n1 State=IDLE"))


def test_squeue_json_exit_codes_are_wait_statuses() -> None:
    jobs = {j.name: j for j in map(job_from_squeue_json, json.loads((DATA / "squeue.json").read_text())["jobs"])}
    assert (jobs["fail3"].state, jobs["fail3"].exit_code) == (RunState.FAILED, 3)
    assert (jobs["killed"].exit_code, jobs["killed"].signal) == (None, 9)
    assert (jobs["cancelme"].state, jobs["cancelme"].signal) == (RunState.CANCELLED, 15)
    assert (jobs["ok"].state, jobs["ok"].exit_code) == (RunState.COMPLETED, 0)
    assert jobs["gpus"].state is RunState.RUNNING and jobs["gpus"].exit_code is None
    assert (jobs["requeue"].state, jobs["requeue"].restarts) == (RunState.PENDING, 1)
    assert jobs["pending"].reason == "Resources"


def test_sacct_jobcomp_last_record_wins_and_counts_restarts() -> None:
    jobs = jobs_from_sacct((DATA / "sacct_jobcomp.txt").read_text())
    by_name = {j.name: j for j in jobs.values()}
    assert (by_name["fail3"].state, by_name["fail3"].exit_code) == (RunState.FAILED, 3)
    assert (by_name["killed"].exit_code, by_name["killed"].signal) == (None, 9)
    assert by_name["ok"].state is RunState.COMPLETED
    # NODE_FAIL (node set down, job requeued) then CANCELLED: two records for one job.
    assert by_name["requeue"].state is RunState.CANCELLED
    assert by_name["requeue"].restarts == 1
    assert by_name["big"].nodes == ""


def test_sacct_skips_steps_and_tolerates_broken_rows() -> None:
    text = "JobID|JobName|State|ExitCode\n7|a|FAILED|3:0\n7.batch|batch|FAILED|3:0\n8|b||garbage\n"
    jobs = jobs_from_sacct(text)
    assert set(jobs) == {"7", "8"}
    assert jobs["7"].exit_code == 3
    assert jobs["8"].state is RunState.UNKNOWN


def test_sacct_names_missing_columns() -> None:
    with pytest.raises(ValueError, match="ExitCode"):
        jobs_from_sacct("JobID|State\n1|COMPLETED\n")


@pytest.mark.parametrize(
    ("gres", "count"),
    [
        ("gpu:4", 4),
        ("gpu:3(IDX:0-2)", 3),
        ("gpu:a100:2(IDX:0,2),mps:100", 2),
        ("gpu:a100:2,gpu:v100:1", 3),
        ("mps:100", 0),
        ("(null)", 0),
        ("", 0),
    ],
)
def test_count_gres(gres: str, count: int) -> None:
    assert count_gres(gres) == count


def test_sinfo_json_nodes_and_availability() -> None:
    nodes = {n.name: n for n in nodes_from_sinfo_json(json.loads((DATA / "sinfo.json").read_text()))}
    assert set(nodes) == {"n1", "n2", "n3", "n4"}
    n1 = nodes["n1"]
    assert (n1.cpus, n1.alloc_cpus, n1.gpus, n1.alloc_gpus, n1.memory_mb) == (8, 2, 4, 3, 16000)
    assert n1.partitions == ("cpu", "gpu") and n1.available
    assert not nodes["n3"].available and "DRAIN" in nodes["n3"].flags
    assert nodes["n3"].state_text == "idle+DRAIN"
    assert not nodes["n4"].available and nodes["n4"].state == "down"


def test_sinfo_json_names_missing_nodes_key() -> None:
    with pytest.raises(ValueError, match="nodes"):
        nodes_from_sinfo_json({"meta": {}})


def test_partitions() -> None:
    parts = {p.name: p for p in partitions_from_scontrol((DATA / "scontrol_partitions.txt").read_text())}
    assert parts["cpu"].default and parts["cpu"].up and parts["cpu"].nodes == "n[1-2]"
    assert not parts["gpu"].default and parts["gpu"].nodes == "n[1-4]"


@pytest.mark.parametrize(("out", "job_id"), [("42\n", "42"), ("42;cluster\n", "42")])
def test_parse_sbatch_parsable(out: str, job_id: str) -> None:
    assert parse_sbatch_parsable(out) == job_id


def test_parse_sbatch_parsable_names_bad_output() -> None:
    with pytest.raises(ValueError, match="Submitted batch job"):
        parse_sbatch_parsable("Submitted batch job 42")


def test_missing_client_commands_say_how_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SchedulerError, match=r"`squeue` not found.*devcluster.sh install"):
        SlurmCommands(slurm_conf="/nonexistent/slurm.conf").squeue_json()


@pytest.mark.parametrize("bad", ["12; rm -rf /", "-1", "", "12 13"])
def test_job_ids_are_validated(bad: str) -> None:
    with pytest.raises(SchedulerError, match="invalid Slurm job id"):
        SlurmCommands().show_job(bad)


def test_fake_slurm_failure_names_command_and_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failing client (a stand-in script) → the error names the command line and its stderr."""
    fake = tmp_path / "scontrol"
    fake.write_text(
        "#!/bin/sh\necho 'scontrol: error: Unable to contact slurm controller (connect failure)' >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{Path('/usr/bin')}:{Path('/bin')}")
    with pytest.raises(SchedulerError) as err:
        SlurmCommands(slurm_conf="/etc/x/slurm.conf").show_job("5")
    text = str(err.value)
    assert "unreachable at SLURM_CONF=/etc/x/slurm.conf" in text
    assert "scontrol -o show job 5" in text and "connect failure" in text
    assert "scripts/devcluster.sh start" in text


def test_json_errors_with_controller_down_say_unreachable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """squeue --json exits 0 with an error list when slurmctld is down (seen on 22.05)."""
    squeue = tmp_path / "squeue"
    squeue.write_text(
        '#!/bin/sh\necho \'{"errors": [{"error": "Unspecified error", "source": "slurm_load_jobs"}], "jobs": []}\'\n'
    )
    scontrol = tmp_path / "scontrol"
    scontrol.write_text("#!/bin/sh\necho 'Slurmctld(primary) at vm is DOWN'\nexit 1\n")
    for f in (squeue, scontrol):
        f.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    with pytest.raises(SchedulerError, match=r"unreachable at SLURM_CONF=/x/slurm.conf.*devcluster.sh start"):
        SlurmCommands(slurm_conf="/x/slurm.conf").squeue_json()


@pytest.mark.parametrize(("text", "minutes"), [
    ("UNLIMITED", None), ("INFINITE", None), ("30", 30), ("30:00", 30), ("01:00:00", 60), ("0:30:01", 31),
    ("2-00:00:00", 2880), ("1-12", 2160), ("1-12:30", 2190),
])
def test_parse_slurm_minutes(text: str, minutes: int | None) -> None:
    assert parse_slurm_minutes(text) == minutes


def test_parse_slurm_minutes_names_bad_input() -> None:
    with pytest.raises(ValueError, match="not a Slurm time limit"):
        parse_slurm_minutes("soon")
