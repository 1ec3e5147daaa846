"""What the command line lets a user do: read only their data roots, act only as themselves (unless
an administrator), write private files, and refuse oversize or non-finite specs. Every test runs the
real ``python -m flowtrain`` in a subprocess; none needs a framework."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from schedulers.registry.runs import RunRegistry
from settings.access import os_user

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "digits_cnn.json"
ME = os_user()


def _env(tmp_path: Path, settings: str = "") -> dict[str, str]:
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    config = tmp_path / "flowtrain.toml"
    config.write_text(f'home = "{tmp_path / "home"}"\n{settings}[data]\nroots = ["{data}"]\n', encoding="utf-8")
    envs = tmp_path / "environments.json"
    envs.write_text(json.dumps({"environments": [{"name": "venv", "python": sys.executable,
                                                  "frameworks": {"torch": {"version": "2"}}}]}), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLOWTRAIN_", "SLURM_"))}
    env.update(FLOWTRAIN_CONFIG=str(config), FLOWTRAIN_ENVIRONMENTS=str(envs))
    return env


def _flowtrain(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "flowtrain", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)


def _spec(tmp_path: Path, **data: object) -> Path:
    doc = json.loads(EXAMPLE.read_text(encoding="utf-8"))
    doc["data"].update(data)
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def test_run_refuses_a_source_outside_the_data_roots(tmp_path: Path) -> None:
    """The issue's spec: the job would read the portal account's environment and print it in the log."""
    env = _env(tmp_path)
    spec = _spec(tmp_path, source="/proc/self/environ", format="csv", input_shape=[1, 8, 8], num_classes=10)
    out = _flowtrain(env, "run", str(spec), "--scheduler", "local")
    assert out.returncode == 2, out.stdout + out.stderr
    assert "data.source" in out.stderr and "/proc/self/environ" in out.stderr
    assert str((tmp_path / "data").resolve()) in out.stderr  # the user's roots are named
    assert "Traceback" not in out.stderr
    home = tmp_path / "home"
    assert RunRegistry(home=home).list_runs() == [] and not any((home / "runs").iterdir())


def test_a_data_path_too_long_for_the_file_system_is_a_problem_naming_the_field(tmp_path: Path) -> None:
    """A 300-character file name cannot exist (the limit is 255): `run` names data.source and says why,
    with no traceback (the page shows the same problem through the same check)."""
    env = _env(tmp_path)
    spec = _spec(tmp_path, source="x" * 300 + ".csv", format="csv", input_shape=[1, 8, 8], num_classes=10)
    out = _flowtrain(env, "run", str(spec), "--scheduler", "local")
    assert out.returncode == 2, out.stdout + out.stderr
    assert "data.source" in out.stderr and "cannot be looked up (File name too long)" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr


def test_user_is_the_os_user_and_only_admins_act_for_others(tmp_path: Path) -> None:
    env = _env(tmp_path)
    registry = RunRegistry(home=tmp_path / "home")
    theirs = registry.create_run(user="mallory", spec_json="{}", spec_hash="x", framework="torch",
                                 scheduler="local", name="theirs")
    for args in (["runs", "--all-users"], ["runs", "--user", "mallory"], ["status", theirs.id, "--user", "mallory"],
                 ["cancel", theirs.id, "--user", "mallory"]):
        out = _flowtrain(env, *args)
        assert out.returncode == 2 and "only the administrators" in out.stderr, (args, out.stderr)
    out = _flowtrain({**env, "FLOWTRAIN_USER": "mallory"}, "status", theirs.id)  # no longer an identity
    assert out.returncode == 2 and f"for user {ME}" in out.stderr
    admin = _env(tmp_path, f'[auth]\nadmins = ["{ME}"]\n')
    listed = json.loads(_flowtrain(admin, "runs", "--all-users", "--json").stdout)
    assert [r["id"] for r in listed] == [theirs.id]
    assert _flowtrain(admin, "status", theirs.id, "--user", "mallory").returncode == 0



def test_an_admin_acts_for_others_only_on_a_home_no_one_else_can_write(tmp_path: Path) -> None:
    """A home another user owns (or can write) holds records that user could have forged (a run
    directory, a job id, an interpreter): an administrator's --user and --all-users refuse it."""
    registry = RunRegistry(home=tmp_path / "home")
    theirs = registry.create_run(user="mallory", spec_json="{}", spec_hash="x", framework="torch",
                                 scheduler="local", name="theirs")
    admin = _env(tmp_path, f'[auth]\nadmins = ["{ME}"]\n')
    home = tmp_path / "home"
    home.chmod(0o777)
    for args in (["status", theirs.id, "--user", "mallory"], ["runs", "--all-users"],
                 ["cancel", theirs.id, "--user", "mallory"], ["logs", theirs.id, "--user", "mallory"]):
        out = _flowtrain(admin, *args)
        assert out.returncode == 2 and f"the home {home} belongs to {ME} (mode 777), not to you alone" in out.stderr, \
            (args, out.stderr)
    assert registry.get(theirs.id).state.value == "PENDING"  # not cancelled
    home.chmod(0o700)
    assert _flowtrain(admin, "status", theirs.id, "--user", "mallory").returncode == 0
    if os.geteuid() == 0:  # root can give the home away: a home another user owns
        os.chown(home, 65534, 65534)
        out = _flowtrain(admin, "status", theirs.id, "--user", "mallory")
        assert out.returncode == 2 and "not to you alone" in out.stderr, out.stderr
        os.chown(home, 0, 0)


def test_another_users_log_cannot_drive_an_administrators_terminal(tmp_path: Path) -> None:
    """``logs RUN --user mallory``: mallory's program wrote every byte of its log; an administrator
    sees its escape sequences as text. Mallory's own ``logs`` stays byte for byte."""
    registry = RunRegistry(home=tmp_path / "home")
    theirs = registry.create_run(user="mallory", spec_json="{}", spec_hash="x", framework="torch",
                                 scheduler="local", name="theirs")
    (theirs.run_dir / "run.log").write_bytes("epoch 1 \x1b]2;owned\x07\x1b[2J done é\n".encode())
    admin = _env(tmp_path, f'[auth]\nadmins = ["{ME}"]\n')
    for extra in ((), ("--tail", "5")):
        out = _flowtrain(admin, "logs", theirs.id, "--user", "mallory", *extra)
        assert out.returncode == 0, out.stderr
        assert out.stdout == "epoch 1 \\x1b]2;owned\\x07\\x1b[2J done é\n", repr(out.stdout)
    mine = registry.create_run(user=ME, spec_json="{}", spec_hash="x", framework="torch", scheduler="local", name="m")
    (mine.run_dir / "run.log").write_bytes(b"\x1b[1mbold\x1b[0m\n")
    assert _flowtrain(admin, "logs", mine.id).stdout == "\x1b[1mbold\x1b[0m\n"

def test_command_line_writes_private_files(tmp_path: Path) -> None:
    """The CLI sets umask 077: what it generates is readable by its owner only."""
    env = _env(tmp_path)
    out_dir = tmp_path / "program"
    out = subprocess.run(f"umask 022; exec {sys.executable} -m flowtrain generate {EXAMPLE} --framework torch "
                         f"--out {out_dir}", shell=True, cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    modes = {p.name: p.stat().st_mode & 0o777 for p in out_dir.iterdir()}
    assert modes and set(modes.values()) == {0o600}, modes
    assert out_dir.stat().st_mode & 0o777 == 0o700


def test_oversize_spec_file_is_refused(tmp_path: Path) -> None:
    env = _env(tmp_path)
    big = tmp_path / "big.json"
    big.write_text('{"name": "x", "description": "' + "x" * (11 * 1024 * 1024) + '"}', encoding="utf-8")
    out = _flowtrain(env, "validate", str(big))
    assert out.returncode == 2 and "10 MB limit" in out.stderr and "Traceback" not in out.stderr


def test_infinity_in_a_spec_is_a_problem_naming_the_field(tmp_path: Path) -> None:
    env = _env(tmp_path)
    text = EXAMPLE.read_text(encoding="utf-8").replace('"training": {', '"training": {"gradient_clip_norm": Infinity,', 1)
    assert "Infinity" in text
    path = tmp_path / "inf.json"
    path.write_text(text, encoding="utf-8")
    out = _flowtrain(env, "validate", str(path), "--json")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    [problem] = json.loads(out.stdout)["problems"]
    assert problem["location"] == "training.gradient_clip_norm" and problem["received"] == "Infinity"
    gen = _flowtrain(env, "generate", str(path), "--framework", "torch", "--out", str(tmp_path / "g"))
    assert gen.returncode == 2 and "training.gradient_clip_norm: is not a finite number" in gen.stderr
