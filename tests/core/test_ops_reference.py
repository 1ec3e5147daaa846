"""Shape inference and parameter counts of every op-catalogue case against PyTorch itself.

The reference (tests/mapping/torch_reference.py) builds each case's layer in torch from the op's
parameters and input shapes alone, runs random inputs through it and reports the output shape
and the parameter count; both must equal what the catalogue infers. PyTorch runs in a
subprocess (the portal's own process never imports a framework).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from core.ops import REGISTRY, Tensor
from tests.op_cases import CASES, OpCase

REFERENCE = Path(__file__).resolve().parents[1] / "mapping" / "torch_reference.py"


def normalised(case: OpCase) -> dict[str, Any]:
    cls = REGISTRY.get(case.op)
    return {prm.name: prm.check(case.params.get(prm.name, prm.default)) for prm in cls.params}


def infer(case: OpCase) -> tuple[Tensor, int]:
    cls = REGISTRY.get(case.op)
    p = normalised(case)
    ins = [Tensor(shape, case.dtype) for shape in case.input_shapes]
    out = cls.infer(ins, p)
    return out, cls.count_params(ins, p, out)


@pytest.fixture(scope="module")
def torch_results(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    jobs = [{"op": c.op, "params": normalised(c), "shapes": [list(s) for s in c.input_shapes], "dtype": c.dtype}
            for c in CASES]
    path = tmp_path_factory.mktemp("reference") / "cases.json"
    path.write_text(json.dumps(jobs))
    proc = subprocess.run([sys.executable, str(REFERENCE), "layers", str(path)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(results) == len(CASES)
    return results


@pytest.mark.frameworks
@pytest.mark.parametrize("index", range(len(CASES)), ids=[c.name for c in CASES])
def test_shape_and_params_match_torch(index: int, torch_results: list[dict[str, Any]]) -> None:
    out, n_params = infer(CASES[index])
    assert list(out.shape) == torch_results[index]["shape"]
    assert n_params == torch_results[index]["params"]
