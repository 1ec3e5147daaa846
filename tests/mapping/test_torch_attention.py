"""The torch program's own attention modules (``SelfAttention``, ``TransformerEncoderBlock`` in the generated
model.py) against torch's ``nn.MultiheadAttention`` / ``nn.TransformerEncoderLayer`` (tests/mapping/
torch_reference.py) loaded with the same state dict: the same keys, the same output, dropout in training only."""

from __future__ import annotations

import runpy
import types
from pathlib import Path

import pytest
import torch

from core.codegen import generate
from core.validate import validate
from tests import op_cases

REFERENCE = runpy.run_path(str(Path(__file__).with_name("torch_reference.py")))
ATTENTION = ("MultiheadAttention", "TransformerEncoderLayer")
CASES = [c for c in op_cases.CASES if c.op in ATTENTION]


def generated_model(case: op_cases.OpCase, tmp_path: Path) -> torch.nn.Module:
    """The one-op program's network, its layer ``node`` built from the generated model.py."""
    generate(case.spec(), "torch").write(tmp_path)
    module = types.ModuleType(f"model_{case.name.replace('-', '_')}")
    exec(compile((tmp_path / "model.py").read_text(encoding="utf-8"), str(tmp_path / "model.py"), "exec"),
         module.__dict__)
    return module.build_model()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_generated_attention_matches_torch_s_layer_with_the_same_weights(case: op_cases.OpCase,
                                                                          tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = generated_model(case, tmp_path).eval()
    params = validate(case.spec()).nodes["node"].params  # with the op's defaults, as the program has them
    reference, forward = REFERENCE["build"](case.op, params, [case.shape])
    state = {k.split(".", 1)[1]: v for k, v in model.state_dict().items()}
    assert list(state) == list(reference.state_dict())  # canonical weights and checkpoints fit both
    reference.load_state_dict(state)
    x = torch.randn(3, *case.shape)
    with torch.no_grad():
        torch.testing.assert_close(model(x), forward([x]), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op", ATTENTION)
def test_attention_dropout_acts_in_training_only(op: str, tmp_path: Path) -> None:
    params = {"num_heads": 2, "dropout": 0.5, **({"dim_feedforward": 16} if op != "MultiheadAttention" else {})}
    model = generated_model(op_cases.OpCase(f"{op}-dropout", op, (5, 8), params), tmp_path)
    x = torch.randn(2, 5, 8)
    with torch.no_grad():
        model.eval()
        assert torch.equal(model(x), model(x))
        model.train()
        assert not torch.equal(model(x), model(x))
