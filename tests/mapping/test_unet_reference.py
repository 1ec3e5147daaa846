"""The zoo's unet is the 2015 U-Net: the hand-written torch module (tests/mapping/unet_reference.py) has
its parameter count, which ``flowtrain summary`` reports for the template, and, given the zoo graph's
weights, computes its outputs (the graph run by the catalogue's torch reference,
tests/mapping/torch_reference.py), at a small input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from core import zoo
from core.equivalence import small_zoo_spec
from core.validate import validate
from core.weights import random_canonical

HERE = Path(__file__).resolve().parent


def test_unet_has_the_reference_modules_parameters_and_outputs(tmp_path: Path) -> None:
    spec = small_zoo_spec("unet")  # 3×32×32: the bottom of the U is 2×2
    analysis = validate(spec)
    assert analysis.total_params == validate(zoo.template("unet")).total_params == 31_031_940
    np.savez(tmp_path / "weights.npz", **random_canonical(analysis, seed=1))
    np.save(tmp_path / "input.npy", np.random.default_rng(0).standard_normal((2, 3, 32, 32)).astype(np.float32))
    graph = analysis.summary()
    for layer in graph["layers"]:
        layer["params"] = analysis.nodes[layer["id"]].params
    graph["output"] = analysis.output_id
    (tmp_path / "graph.json").write_text(json.dumps(graph), encoding="utf-8")
    files = [str(tmp_path / n) for n in ("weights.npz", "input.npy")]
    script = ("import runpy, sys\n"
              f"runpy.run_path({str(HERE / 'unet_reference.py')!r})['main']('3', '4', *{files!r}, "
              f"{str(tmp_path / 'unet.npy')!r})\n"
              f"runpy.run_path({str(HERE / 'torch_reference.py')!r})['main']({str(tmp_path / 'graph.json')!r}, "
              f"*{files!r}, {str(tmp_path / 'graph.npy')!r})\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    reference = json.loads(done.stdout.splitlines()[0])["params"]
    assert reference == analysis.total_params
    # what a user reads: `flowtrain summary` of the template (64 channels at the top, 3×64×64 images)
    (tmp_path / "unet.json").write_text(zoo.template("unet").to_json(), encoding="utf-8")
    summary = [subprocess.run([sys.executable, "-m", "flowtrain", "summary", str(tmp_path / "unet.json"), *flag],
                              cwd=HERE.parents[1], capture_output=True, text=True, timeout=120) for flag in ([], ["--json"])]
    assert all(s.returncode == 0 for s in summary), [s.stderr[-2000:] for s in summary]
    assert json.loads(summary[1].stdout)["params"] == reference
    assert f"{reference:,} parameters" in summary[0].stdout
    unet, graph_out = np.load(tmp_path / "unet.npy"), np.load(tmp_path / "graph.npy")
    assert unet.shape == graph_out.shape == (2, 4, 32, 32)
    np.testing.assert_allclose(graph_out, unet, atol=1e-5, rtol=0)
