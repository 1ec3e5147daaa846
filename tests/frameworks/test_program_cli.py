"""The generated program's command line with a hostile pipeline name (issue 10, finding 10):
argparse %-formats its description, so a name with ``%`` must be escaped by the template."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.codegen import generate
from tests.data.fixtures import spec_with_data

pytestmark = pytest.mark.frameworks

NAME = "100% sure %(prog)s %d %"
ENV = {**os.environ, "GLOG_minloglevel": "2", "PYTHONPATH": "", "PYTHONWARNINGS": "ignore",
       "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}


@pytest.mark.parametrize("framework", ["torch", "keras", "paddle"])
def test_help_shows_a_pipeline_name_with_percent_signs(tmp_path: Path, framework: str) -> None:
    spec = spec_with_data({"source": "sklearn:iris"}).model_copy(update={"name": NAME})
    generate(spec, framework).write(tmp_path)
    proc = subprocess.run([sys.executable, "train.py", "--help"], cwd=tmp_path, env=ENV, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"Train the pipeline {NAME!r}" in " ".join(proc.stdout.split()), proc.stdout
    assert "--max-steps" in proc.stdout
