"""``flowtrain logs`` prints only the run's own log: opened once without following a link (the run
folder, then the file with O_NOFOLLOW, checked with fstat), so a log swapped for a link is refused,
also in the middle of a swap race, never printed from outside the run folder."""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from flowtrain import main
from schedulers.registry.records import Run
from schedulers.registry.runs import RunRegistry
from settings.access import os_user

SECRET = "TOKEN=hunter2"
SPEC = json.dumps({"name": "tiny", "data": {"source": "/data/alice/t.csv"}})


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Run]:
    home = tmp_path / "home"
    monkeypatch.setenv("FLOWTRAIN_HOME", str(home))
    monkeypatch.delenv("FLOWTRAIN_CONFIG", raising=False)
    registry = RunRegistry(home=home)
    created = registry.create_run(user=os_user(), spec_json=SPEC, spec_hash="abc", framework="torch",
                                  scheduler="local", name="tiny")
    (created.run_dir / "run.log").write_text("step 1 loss 0.5\n", encoding="utf-8")
    umask = os.umask(0o077)
    os.umask(umask)
    yield created
    os.umask(umask)  # main() sets the command line's own


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "other-user" / "secret.txt"
    path.parent.mkdir()
    path.write_text(SECRET + "\n", encoding="utf-8")
    return path


def test_the_log_is_printed(run: Run, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["logs", run.id]) == 0
    assert capsys.readouterr().out == "step 1 loss 0.5\n"
    assert main(["logs", run.id, "--tail", "1"]) == 0
    assert capsys.readouterr().out == "step 1 loss 0.5\n"


@pytest.mark.parametrize("tail", [[], ["--tail", "5"]])
def test_a_log_swapped_for_a_link_is_refused(run: Run, secret: Path, tail: list[str],
                                             capsys: pytest.CaptureFixture[str]) -> None:
    (run.run_dir / "run.log").unlink()
    (run.run_dir / "run.log").symlink_to(secret)
    assert main(["logs", run.id, *tail]) == 1
    out, err = capsys.readouterr()
    assert SECRET not in out and out == ""
    assert (f"error: the log of run {run.id} cannot be read: run.log is a symbolic link; a log that is not a regular "
            "file of the run directory is never read") in err


def test_a_run_folder_swapped_for_a_link_is_refused(run: Run, secret: Path, capsys: pytest.CaptureFixture[str]) -> None:
    moved = run.run_dir.with_name(run.run_dir.name + ".moved")
    run.run_dir.rename(moved)
    (secret.parent / "run.log").write_text(SECRET + "\n", encoding="utf-8")
    run.run_dir.symlink_to(secret.parent)
    assert main(["logs", run.id]) == 1
    out, err = capsys.readouterr()
    assert out == "" and "is not a folder (a symbolic link?); nothing in it is read" in err


def test_a_swap_race_never_prints_a_file_outside_the_run_folder(run: Run, secret: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """The audit's race: 4 of 150 calls printed the other file when the log was swapped for a link
    between the check and the open. A thread swaps the log and a link to the other file back and forth
    (a bounded number of times) while logs runs; not once is the other file's content printed."""
    log, stop = run.run_dir / "run.log", threading.Event()
    link, plain = run.run_dir / ".swap-link", run.run_dir / ".swap-plain"

    def swap() -> None:
        for _ in range(1_000_000):
            if stop.is_set():
                return
            os.symlink(secret, link)
            os.replace(link, log)
            plain.write_text("step 1 loss 0.5\n", encoding="utf-8")
            os.replace(plain, log)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible: the race's gaps get their chance
    swapper = threading.Thread(target=swap, daemon=True)
    swapper.start()
    calls: list[tuple[int, str, str]] = []
    try:
        for _ in range(400):
            code = main(["logs", run.id])
            calls.append((code, *capsys.readouterr()))
    finally:
        stop.set()
        swapper.join()
        sys.setswitchinterval(interval)
    leaked = [out for _code, out, _err in calls if SECRET in out]
    assert not leaked, f"{len(leaked)} of {len(calls)} calls printed a file outside the run folder"
    for code, out, err in calls:
        assert (out == "step 1 loss 0.5\n") if code == 0 else ("run.log is a symbolic link" in err), (code, out, err)
    assert any(code == 0 for code, _out, _err in calls)
