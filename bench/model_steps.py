"""The generated network against the hand-written reference network, one training step at a time, in ONE
process: what is left of bench/torch_speed.py's ratio once the two programs' loops, start-up and the shared
machine's drift are taken out.

    python bench/model_steps.py [--models gpt_mini unet_small] [--rounds 10]

For each model: the generated program's model.py (``build_model``, and for the U-Net its on-device
``segment_augment``) and the reference's network (bench/reference/torch_gpt.py ``GPT``, torch_unet.py
``UNet(16)`` with ``flip_pair``) train on the same random batch with the same optimizer and loss, one thread;
rounds alternate (one warm step, then ``--steps`` timed steps of each). Printed: the median CPU ms per step of
each and reference ÷ generated (the speed ratio, target ≥ 0.97).
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import tempfile
import time
import types
from collections.abc import Callable
from pathlib import Path

import torch
from torch.nn import functional as F

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "bench" / "reference"))


def step_fn(model: torch.nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor,
            loss: Callable, augment: Callable | None = None, clip: float | None = None) -> Callable[[], None]:
    def step() -> None:
        xb, yb = augment(x, y) if augment else (x, y)
        value = loss(model(xb), yb)
        optimizer.zero_grad(set_to_none=True)
        value.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()

    return step


def program(name: str, folder: Path) -> types.ModuleType:
    """The generated torch program's model.py for the bench case (and its devices.py importable)."""
    from torch_speed import CPU_CASES, prepare

    prepare(CPU_CASES[name], folder)
    sys.path.insert(0, str(folder / "program"))
    for module in ("model", "devices"):
        sys.modules.pop(module, None)
    return importlib.import_module("model")


def cases(name: str, folder: Path) -> dict[str, Callable[[], None]]:
    gen = program(name, folder)
    torch.manual_seed(0)
    if name == "gpt_mini":
        import torch_gpt as ref

        x, y = torch.randint(0, 256, (32, 64)), torch.randint(0, 256, (32, 64))
        loss = lambda out, t: F.cross_entropy(out.flatten(0, 1), t.flatten())  # noqa: E731
        adamw = lambda m: torch.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=0.1, fused=True)  # noqa: E731
        plain, model = gen.build_model(), ref.GPT()
        return {"generated": step_fn(plain, adamw(plain), x, y, loss, clip=1.0),
                "reference": step_fn(model, adamw(model), x, y, loss, clip=1.0)}
    import devices
    import torch_unet as ref

    x, y = torch.rand(8, 3, 64, 64), torch.randint(0, 4, (8, 64, 64))
    adam = lambda m: torch.optim.Adam(m.parameters(), lr=1e-4, fused=True)  # noqa: E731
    plain, model = gen.build_model(), ref.UNet(16)
    return {"generated": step_fn(plain, adam(plain), x, y, F.cross_entropy, devices.segment_augment),
            "reference": step_fn(model, adam(model), x, y, F.cross_entropy, ref.flip_pair)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", choices=("gpt_mini", "unet_small"), default=["gpt_mini", "unet_small"])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--steps", type=int, default=3, help="timed steps of each network per round")
    args = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="flowtrain-steps-") as tmp:
        for name in args.models:
            (Path(tmp) / name).mkdir()
            steps = cases(name, Path(tmp) / name)
            times: dict[str, list[float]] = {k: [] for k in steps}
            for _ in range(args.rounds):
                for label, step in steps.items():
                    step()
                    start = time.process_time()
                    for _ in range(args.steps):
                        step()
                    times[label].append((time.process_time() - start) / args.steps * 1000)
            ms = {k: statistics.median(v) for k, v in times.items()}
            for label, value in ms.items():
                print(f"{name:<11} {label:<28} {value:8.1f} CPU ms/step   reference ÷ this {ms['reference'] / value:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
