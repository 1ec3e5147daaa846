"""Discovery: real probes of this venv (each framework in its own process), the cache, failures,
a framework whose own dependency is missing, and a probe through srun on the dev cluster.
The environments file itself: tests/settings/test_environments.py."""

from __future__ import annotations

import importlib.metadata
import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from schedulers.discovery import discover, probe_environment, probe_framework
from settings.environments import Environment, parse_environments
from tests.slurm_fixture import DevCluster

REPO = Path(__file__).resolve().parents[2]


def fake_python(tmp_path: Path, body: str = "", name: str = "python") -> Path:
    """An executable that answers the probe like an interpreter with torch 9.9 (CUDA 12.4) only,
    and counts its calls in ``calls``."""
    path = tmp_path / name
    calls = tmp_path / "calls"
    path.write_text(
        "#!/bin/sh\n"
        f"echo \"$3\" >> {calls}\n"
        f"{body}\n"
        "echo 'some banner a framework prints'\n"
        'if [ "$3" = torch ]; then\n'
        '  echo \'FLOWTRAIN_PROBE {"name": "torch", "installed": true, "version": "9.9", "device": "cuda",'
        ' "cuda_version": "12.4", "gpus_visible": 2, "python_version": "3.11.0"}\'\n'
        "else\n"
        '  echo "FLOWTRAIN_PROBE {\\"name\\": \\"$3\\", \\"installed\\": false, '
        '\\"error\\": \\"ModuleNotFoundError: No module named $3\\"}"\n'
        "fi\n"
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def calls(tmp_path: Path) -> list[str]:
    path = tmp_path / "calls"
    return path.read_text().split() if path.exists() else []


# Probing in a process of its own: whatever this test process imported before (a pytest worker runs
# many framework tests) cannot hide a probe that imports a framework into the portal's process.
PROBE_HERE = """
import json, sys
from schedulers.discovery import probe_environment
from settings.environments import Environment
report = probe_environment(Environment("venv", sys.executable), timeout_s=300)
imported = sorted(n for n in ("torch", "tensorflow", "paddle") if n in sys.modules)
print(json.dumps({"report": report.to_dict(), "imported": imported}))
"""


@pytest.mark.frameworks
def test_probes_this_venv_for_real() -> None:
    """torch, keras (with tensorflow) and paddle, each imported in its own subprocess, none in the prober's."""
    done = subprocess.run([sys.executable, "-c", PROBE_HERE], cwd=REPO, capture_output=True, text=True,
                          timeout=900, check=False)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.splitlines()[-1])
    report = out["report"]
    assert not report["errors"], report["errors"]
    assert report["python_version"] == sys.version.split()[0]
    torch, keras, paddle = (report["frameworks"][n] for n in ("torch", "keras", "paddle"))
    assert torch["installed"] and torch["version"] == importlib.metadata.version("torch").split("+")[0]
    assert keras["installed"] and keras["version"] == importlib.metadata.version("keras")
    assert keras["backend_version"] == importlib.metadata.version("tensorflow-cpu")
    assert paddle["installed"] and paddle["version"] == importlib.metadata.version("paddlepaddle")
    for info in (torch, keras, paddle):
        assert info["device"] == "cpu" and info["build"] == "CPU", info  # this venv has CPU builds only
    assert out["imported"] == []


@pytest.mark.alone
def test_fake_interpreter_cuda_build_and_cache(tmp_path: Path) -> None:
    py = fake_python(tmp_path)
    env = Environment("fake", str(py))
    cache = tmp_path / "cache.json"
    [report] = discover([env], cache_path=cache, ttl_s=3600)
    assert not report.from_cache and sorted(calls(tmp_path)) == ["keras", "paddle", "torch"]
    torch = report.frameworks["torch"]
    assert (torch.version, torch.build, torch.gpus_visible, torch.cuda) == ("9.9", "CUDA 12.4", 2, True)
    assert not report.frameworks["keras"].installed and "No module named keras" in report.frameworks["keras"].error
    assert report.python_version == "3.11.0"

    t0 = time.perf_counter()
    [again] = discover([env], cache_path=cache, ttl_s=3600)
    assert time.perf_counter() - t0 < 0.05
    assert again.from_cache and len(calls(tmp_path)) == 3  # no new probe
    assert again.frameworks["torch"] == torch

    [expired] = discover([env], cache_path=cache, ttl_s=0)
    assert not expired.from_cache and len(calls(tmp_path)) == 6
    discover([env], cache_path=cache, ttl_s=3600, refresh=True)
    assert len(calls(tmp_path)) == 9


def test_cache_ttl_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = Environment("fake", str(fake_python(tmp_path)))
    monkeypatch.setenv("FLOWTRAIN_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("FLOWTRAIN_DISCOVERY_TTL", "3600")
    discover([env])
    assert (tmp_path / "home" / "cache" / "discovery.json").is_file()
    assert discover([env])[0].from_cache
    monkeypatch.setenv("FLOWTRAIN_DISCOVERY_TTL", "0")
    assert not discover([env])[0].from_cache


@pytest.mark.alone
def test_failures_are_reported_and_not_cached(tmp_path: Path) -> None:
    missing = Environment("gone", str(tmp_path / "no-such-python"))
    slow = Environment("slow", str(fake_python(tmp_path, body="sleep 5", name="slowpy")))
    cache = tmp_path / "cache.json"
    t0 = time.perf_counter()
    gone, hung = discover([missing, slow], cache_path=cache, timeout_s=1.0)
    assert time.perf_counter() - t0 < 4.5  # the probes ran in parallel, each bounded by the timeout
    assert "not found" in gone.errors[0] and not gone.installed()
    assert "timed out after 1 s" in hung.frameworks["torch"].error
    assert json.loads(cache.read_text())["entries"] == {}


def test_probe_without_result_line(tmp_path: Path) -> None:
    crash = tmp_path / "crash"
    crash.write_text("#!/bin/sh\necho 'Segmentation fault' >&2\nexit 139\n")
    crash.chmod(0o755)
    info, version = probe_framework(str(crash), "paddle", timeout_s=10)
    assert not info.installed and version is None
    assert "exited with code 139" in info.error and "Segmentation fault" in info.error


def test_framework_with_a_missing_dependency_is_a_failure_naming_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """paddle importable but one of its own modules missing: not "not installed", a named failure."""
    fake = tmp_path / "site" / "paddle"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("import paddle_kernels_not_there\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site"))
    report = probe_environment(Environment("broken", sys.executable), timeout_s=60, frameworks=("paddle",))
    paddle = report.frameworks["paddle"]
    assert not paddle.installed
    assert "paddle is installed but needs the missing module 'paddle_kernels_not_there'" in paddle.error
    assert report.errors == (paddle.error,)  # reported as a failure of the environment, not a quiet "absent"


def test_configured_frameworks_skip_probing(tmp_path: Path) -> None:
    declared = parse_environments({"environments": [
        {"name": "site", "python": str(fake_python(tmp_path)), "partitions": ["gpu"],
         "frameworks": {"paddle": {"version": "3.0", "device": "cuda"}}},
        {"name": "list", "python": "/x/python", "frameworks": ["keras"]},
    ]})
    site, listed = discover(declared.environments, cache_path=tmp_path / "c.json")
    assert calls(tmp_path) == []
    assert site.has("paddle") and not site.has("torch") and site.frameworks["paddle"].build == "CUDA"
    assert site.environment.partitions == ("gpu",) and site.environment.serves_partition("gpu")
    assert not site.environment.serves_partition("cpu")
    assert listed.has("keras") and listed.frameworks["keras"].source == "config"


def test_frameworks_cli_json(tmp_path: Path) -> None:
    import subprocess

    envs = tmp_path / "envs.json"
    envs.write_text(json.dumps({"environments": [{"name": "fake", "python": str(fake_python(tmp_path))}]}))
    env = {**os.environ, "FLOWTRAIN_HOME": str(tmp_path / "home"), "FLOWTRAIN_ENVIRONMENTS": str(envs)}
    out = subprocess.run([sys.executable, "-m", "flowtrain", "frameworks", "--json"], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    fw = doc["environments"][0]["frameworks"]
    assert fw["torch"]["installed"] and fw["torch"]["build"] == "CUDA 12.4" and not fw["paddle"]["installed"]
    table = subprocess.run([sys.executable, "-m", "flowtrain", "frameworks"], cwd=REPO, env=env,
                           capture_output=True, text=True, timeout=60)
    assert table.returncode == 0 and "fake" in table.stdout and "CUDA 12.4" in table.stdout
    assert "(cached" not in table.stdout and "cached" in table.stdout


@pytest.mark.slurm
@pytest.mark.frameworks
def test_probe_through_srun_on_a_partition(slurm_cluster: DevCluster) -> None:
    """An environment that exists only on compute nodes is probed by a short job on its partition."""
    env = Environment("cluster-venv", sys.executable, partitions=("cpu",), local=False, probe="srun")
    report = probe_environment(env, timeout_s=120, frameworks=("torch",))
    torch = report.frameworks["torch"]
    assert torch.installed and torch.source == "srun", torch
    assert torch.version == importlib.metadata.version("torch").split("+")[0]
