"""TensorBoard event files of a real run (``tb/``), read back by TensorBoard's own reader, and
``python -m flowtrain tensorboard`` serving them.

One tiny digits MLP is trained by the generated torch program through the command line; its event
files must hold the same values at the same steps as its ``metrics.jsonl`` (the program writes both
from the same records, ``templates/common/_tb_events.py.j2``).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import types
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from schedulers.base import RunState
from schedulers.registry.runs import RunRegistry
from tests.cli.test_run_commands import ME, REPO, cli_env, flowtrain
from tests.cli.test_sweep_commands import MLP
from tests.helpers import wait_until

pytestmark = [pytest.mark.frameworks, pytest.mark.slow]


@pytest.fixture(scope="module")
def tb_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("tensorboard")
    env = cli_env(tmp / "home", tmp)
    (tmp / "spec.json").write_text(json.dumps({**MLP, "name": "tb demo"}))
    done = flowtrain(env, "run", str(tmp / "spec.json"), "--scheduler", "local", "--wait", "--max-steps", "6")
    assert done.returncode == 0, done.stdout + done.stderr
    [run] = RunRegistry(home=tmp / "home").list_runs(ME)
    assert run.state == RunState.COMPLETED
    return {"env": env, "tmp": tmp, "run": run}


def test_event_files_read_back_equal_metrics_jsonl(tb_run: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    # TensorBoard's reader without TensorFlow (a minute to import here): its switch is this module
    monkeypatch.setitem(sys.modules, "tensorboard.compat.notf", types.ModuleType("tensorboard.compat.notf"))
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = tb_run["run"]
    events = EventAccumulator(str(run.run_dir / "tb"))
    events.Reload()
    scalars = {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}
    records = [json.loads(line) for line in (run.run_dir / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in records if r["event"] == "train"]
    assert [r["step"] for r in train] == [2, 4, 6]
    for name in ("loss", "accuracy", "lr", "samples_per_s"):
        assert scalars[f"train/{name}"] == [(r["step"], pytest.approx(r[name], rel=1e-6)) for r in train]
    [end] = [r for r in records if r["event"] == "end"]
    assert scalars["val/loss"] == [(6, pytest.approx(end["val_loss"], rel=1e-6))]
    assert scalars["val/accuracy"] == [(6, pytest.approx(end["val_accuracy"], rel=1e-6))]
    assert set(scalars) == {"train/loss", "train/accuracy", "train/lr", "train/samples_per_s", "val/loss",
                            "val/accuracy"}


def test_the_tensorboard_command_serves_the_run_on_loopback(tb_run: dict[str, Any]) -> None:
    run, env = tb_run["run"], tb_run["env"]
    server = subprocess.Popen([sys.executable, "-m", "flowtrain", "tensorboard", "tb demo"], cwd=REPO, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert server.stdout is not None
        first = server.stdout.readline()
        assert first.startswith("TensorBoard on http://127.0.0.1:") and "for 1 run(s)" in first, first
        url = first.split()[2]

        def listed() -> list[str]:
            try:
                with urllib.request.urlopen(f"{url}data/runs", timeout=5) as answer:
                    return list(json.load(answer))
            except OSError:
                return []

        assert wait_until(listed, timeout=120, message="TensorBoard listing the run") == [f"tb_demo-{run.id}/."]
        server.terminate()  # as a batch system or a session's end stops the command
        server.wait(timeout=30)
        # TensorBoard went with it (it once served on, orphaned, after its command was gone)
        assert wait_until(lambda: not listed(), timeout=30, message="TensorBoard stopping with its command")
    finally:
        server.kill()
        server.wait(timeout=30)


def test_other_users_runs_and_runs_without_event_files_are_refused(tb_run: dict[str, Any]) -> None:
    env, home = tb_run["env"], tb_run["tmp"] / "home"
    registry = RunRegistry(home=home)
    theirs = registry.create_run(user="someone-else", spec_json=json.dumps(MLP), spec_hash="h", framework="torch",
                                 scheduler="local")
    done = flowtrain(env, "tensorboard", theirs.id)
    assert done.returncode == 2 and f"no run '{theirs.id}' (by id or by name) for user {ME}" in done.stderr
    fresh = registry.create_run(user=ME, spec_json=json.dumps(MLP), spec_hash="h", framework="torch",
                                scheduler="local", name="fresh")
    done = flowtrain(env, "tensorboard", "fresh")
    assert done.returncode == 2 and f"no event files to show: 1 run(s) without tb/ ({fresh.id})" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_unwritable_event_folder_costs_a_warning_not_the_records(tb_run: dict[str, Any], tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(tb_run["run"].run_dir))  # runtime.py imports its data.py
    spec = importlib.util.spec_from_file_location("tb_runtime", tb_run["run"].run_dir / "runtime.py")
    assert spec is not None and spec.loader is not None
    runtime = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "tb_runtime", runtime)  # its dataclasses look their module up
    spec.loader.exec_module(runtime)
    (tmp_path / "tb").write_text("a file where the folder would go")
    report = runtime.Report(tmp_path, 0)
    report.write("train", 1, 0, split="train", loss=0.5)
    assert f"warning: TensorBoard event files are not written to {tmp_path / 'tb'}: File exists" in capsys.readouterr().out
    assert json.loads((tmp_path / "metrics.jsonl").read_text())["loss"] == 0.5
