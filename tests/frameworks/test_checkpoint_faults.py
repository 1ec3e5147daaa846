"""A disk that fills while a checkpoint is written, for real: the generated torch program's checkpoints/
is a tmpfs with room for one checkpoint and a page. The program ends with the file system's error as
its rank's reason (what ``status`` shows; the job script does not retry it, tests/schedulers/
test_job_restarts.py), the checkpoint it was writing is left cut short, and the next start skips a
cut-short checkpoint for the newest complete one instead of crashing on it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from core.codegen import generate
from core.spec import PipelineSpec
from schedulers.rank_errors import failure_reason
from tests.data.fixtures import spec_with_data

pytestmark = [pytest.mark.frameworks,
              pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")]

ENV = {**os.environ, "PYTHONPATH": "", "PYTHONWARNINGS": "ignore", "CUDA_VISIBLE_DEVICES": ""}


def _train(program: Path, out: Path, steps: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "train.py", "--out", str(out), "--max-steps", str(steps)], cwd=program,
                          env=ENV, capture_output=True, text=True, timeout=300)


def test_a_disk_that_fills_during_a_checkpoint_fails_the_run_and_the_torn_checkpoint_is_skipped(tmp_path: Path) -> None:
    doc = spec_with_data({"source": "sklearn:iris"}).model_dump(mode="json")
    doc["training"]["checkpoint"] = {"every_steps": 2, "every_epoch": False, "keep": 2}
    program, out = tmp_path / "program", tmp_path / "out"
    generate(PipelineSpec.model_validate(doc), "torch").write(program)
    first = _train(program, out, 2)
    assert first.returncode == 0, first.stderr[-2000:]
    folder, kept = out / "checkpoints", tmp_path / "kept"
    shutil.move(folder, kept)
    size = (kept / "ckpt-2.pt").stat().st_size
    pages = -(-size // 4096)
    folder.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={(pages + 1) * 4096}", "tmpfs", str(folder)], check=True)
    try:
        shutil.copy2(kept / "ckpt-2.pt", folder)
        full = _train(program, out, 4)  # resumes from step 2; step 4's checkpoint does not fit
        torn = sorted(p.name for p in folder.iterdir())
        shutil.copytree(folder, kept, dirs_exist_ok=True)
    finally:
        subprocess.run(["umount", str(folder)], check=True)
    assert full.returncode == 1, full.stdout[-2000:] + full.stderr[-2000:]
    reason = failure_reason(out, full.stdout + full.stderr, "torch")
    assert reason is not None and "[Errno 28] No space left on device" in reason, reason
    assert torn == ["ckpt-2.pt", "ckpt-4.pt.tmp"], torn  # the complete one kept, the new one cut short
    # the cut-short file where a checkpoint would be (renamed before its data reached the disk)
    shutil.copytree(kept, folder, dirs_exist_ok=True)
    (folder / "ckpt-4.pt.tmp").rename(folder / "ckpt-4.pt")
    again = _train(program, out, 6)
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"skipping unreadable checkpoint {folder / 'ckpt-4.pt'}" in again.stderr, again.stderr[-2000:]
    assert f"resumed from {folder / 'ckpt-2.pt'} (step 2" in again.stdout + again.stderr, again.stdout[-2000:]
