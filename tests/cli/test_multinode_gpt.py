"""gpt_mini trains on 2 nodes of the real dev Slurm cluster in every framework (issue 23's Done-when):
``run SPEC --scheduler slurm --wait`` with 2 nodes x 1 task completes, both ranks take part and end with
the same weights, and the token windows are sharded across the ranks: each rank records the windows it
trains on in an epoch (shares/rank-R.npy, indices of the windows of the training split), and the two
ranks' windows are disjoint and of equal number. Written as tests/cli/test_multinode.py's 2-node test,
with its helpers; a few steps only.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

from core import zoo
from core.example_data import write_example_data
from core.mapping.base import FRAMEWORKS
from schedulers.base import RunState
from schedulers.registry.runs import RunRegistry
from tests.cli.test_run_commands import ME, cli_env, flowtrain

pytestmark = [pytest.mark.slurm, pytest.mark.ddp, pytest.mark.frameworks, pytest.mark.usefixtures("slurm_cluster")]


def _gpt_spec(tmp_path: Path, framework: str) -> Path:
    """gpt_mini on its example text (about 40 windows of 64 bytes), 2 nodes x 1 task of the cpu partition."""
    write_example_data(zoo.template("gpt_mini"), tmp_path / "data", record=tmp_path / "record.json", samples=40)
    doc = zoo.template("gpt_mini").model_dump(mode="json")
    doc["data"].update(source=str(tmp_path / "data" / "text" / "corpus.txt"), batch_size=4, num_workers=0)
    doc["training"].update(framework=framework, epochs=1, log_every_steps=1)
    doc["training"]["resources"].update(nodes=2, gpus_per_node=0, partition="cpu", cpus_per_task=1)
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_gpt_mini_trains_on_two_nodes_with_the_windows_sharded(framework: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = cli_env(home, tmp_path, SLURM_CONF=os.environ["SLURM_CONF"])
    out = flowtrain(env, "run", str(_gpt_spec(tmp_path, framework)), "--scheduler", "slurm", "--wait",
                    "--framework", framework, "--max-steps", "2", "--timeout", "420", timeout=480)
    [run] = RunRegistry(home=home).list_runs(ME)
    log = (run.run_dir / f"slurm-{run.job_id}.out").read_text()
    assert out.returncode == 0 and run.state is RunState.COMPLETED, out.stdout + out.stderr + log
    assert re.search(r"training on \S+ x2:", log), f"expected 2 processes in the log:\n{log}"
    result = RunRegistry(home=home).result(run.id)
    assert result["steps"] == 2 and result["world_size"] == 2, result
    digests = {p.name: json.loads(p.read_text())["weights_sha256"] for p in (run.run_dir / "ranks").glob("*.json")}
    assert sorted(digests) == ["rank-0.json", "rank-1.json"], digests
    assert set(digests.values()) == {result["weights_sha256"]}, f"the ranks ended with different weights: {digests}"
    shares = [np.load(run.run_dir / "shares" / f"rank-{rank}.npy") for rank in (0, 1)]
    assert len(shares[0]) == len(shares[1]) >= 8, shares  # a batch of 4 windows per step, 2 steps at least
    assert not set(shares[0].tolist()) & set(shares[1].tolist()), f"both ranks trained on windows {shares}"
