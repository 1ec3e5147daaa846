"""A damaged sample met in the middle of a streamed epoch ends the program with one line that names
the file (and the tar member), what is wrong and how to fix it, also when a loader worker (torch and
paddle DataLoader workers, a tf.data map function) read it; that line is the run's failure reason
(ranks/rank-0.error, which the registry shows), never a traceback."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from schedulers.base import RunState
from schedulers.registry.runs import RunRegistry
from tests.cli.test_run_commands import ME, cli_env, flowtrain
from tests.data.fixtures import write_shards
from tests.frameworks.streaming import FRAMEWORKS, run, small_cnn, write_jpegs, write_program

pytestmark = [pytest.mark.frameworks, pytest.mark.streaming]

SIDE = 16
SAMPLES = 24


def folder_with_a_truncated_jpeg(root: Path) -> Path:
    """4 class folders of 6 JPEGs; returns the one cut to half its length (as an interrupted copy leaves it)."""
    write_jpegs(root, 4, SAMPLES // 4, SIDE)
    damaged = root / "class2" / "img00003.jpg"
    data = damaged.read_bytes()
    damaged.write_bytes(data[:len(data) // 2])
    return damaged


def shards_with_a_damaged_member(root: Path) -> tuple[Path, str]:
    """2 shards of 12 PNG samples; returns the shard and the member whose bytes no longer start as a PNG."""
    write_shards(root, [i % 4 for i in range(SAMPLES)], per_shard=SAMPLES // 2, size=SIDE)
    shard, member = root / "shard-000001.tar", "000017.png"
    with tarfile.open(shard) as tar:
        offset = tar.getmember(member).offset_data
    with open(shard, "r+b") as f:  # the tar stays readable: only the image's first bytes change
        f.seek(offset)
        f.write(b"not an image")
    return shard, member


def streamed_spec(source: Path, fmt: str, framework: str):  # noqa: ANN201  (a PipelineSpec)
    """The damaged sample is not among the samples read before training (the one the shape check
    reads: scale by a given maximum takes no statistics): the loader meets it in the middle of the
    epoch, in a worker."""
    return small_cnn(source, 4, SIDE, framework, data={
        "format": fmt, "batch_size": 4, "num_workers": 1, "augmentation": [],
        "preprocessing": [{"op": "resize", "size": [SIDE, SIDE]}, {"op": "scale", "max_value": 255}]})


def last_error_line(stderr: str) -> str:
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert errors, stderr[-3000:]
    return errors[-1].removeprefix("error: ")


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("fmt", ["image_folder", "webdataset"])
def test_a_damaged_sample_mid_epoch_ends_the_run_with_one_line_naming_it(fmt: str, framework: str,
                                                                         tmp_path: Path) -> None:
    if fmt == "image_folder":
        damaged = folder_with_a_truncated_jpeg(tmp_path / "images")
        source, named, what = tmp_path / "images", str(damaged), "truncated"
    else:
        shard, member = shards_with_a_damaged_member(tmp_path / "shards")
        source, named, what = tmp_path / "shards", f"{shard}, member {member}", "cannot identify image file"
    folder = write_program(streamed_spec(source, fmt, framework), framework, tmp_path / "program")
    result = run(folder, "--out", "out")
    assert result.returncode == 2, result.stderr[-3000:]
    assert f"train: {SAMPLES} samples" in result.stdout and "streamed" in result.stdout, result.stdout
    message = last_error_line(result.stderr)
    assert message.startswith(f"{named}: cannot read the image (") and what in message.lower(), message
    assert message.endswith("replace it or delete it (FlowTrain's example data: write it again with "
                            "`python -m flowtrain example-data`)" if fmt == "image_folder"
                            else "the shard is damaged: write it again, or move it out of the folder"), message
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    reason = (folder / "out" / "ranks" / "rank-0.error").read_text()
    assert reason.startswith("rank 0 (") and reason.rstrip("\n").endswith(f"): DataError: {message}"), reason
    assert "Traceback" not in reason and reason.count("\n") == 1


@pytest.mark.parametrize("framework", ["torch"])
def test_flowtrain_status_shows_the_damaged_file_as_the_reason(framework: str, tmp_path: Path) -> None:
    """Through the command line, the local executor and the run registry: the reason and the log's last line."""
    damaged = folder_with_a_truncated_jpeg(tmp_path / "images")
    spec = tmp_path / "spec.json"
    doc = streamed_spec(tmp_path / "images", "image_folder", framework).model_dump(mode="json")
    doc["training"]["resources"]["cpus_per_task"] = 1
    spec.write_text(json.dumps(doc))
    env = cli_env(tmp_path / "home", tmp_path)
    out = flowtrain(env, "run", str(spec), "--scheduler", "local", "--wait")
    assert out.returncode == 1 and "FAILED (exit code 2)" in out.stdout, out.stdout + out.stderr
    [run_] = RunRegistry(home=tmp_path / "home").list_runs(ME)
    assert run_.state == RunState.FAILED
    assert run_.reason.startswith("rank 0 (") and f"DataError: {damaged}: cannot read the image (" in run_.reason
    assert "Traceback" not in run_.reason
    shown = flowtrain(env, "status", run_.id).stdout
    assert f"reason     {run_.reason}" in shown, shown
    last = flowtrain(env, "logs", run_.id, "--tail", "1").stdout.strip()
    assert last.startswith(f"error: {damaged}: cannot read the image (")
    assert run_.reason.endswith(last.removeprefix("error: "))
