"""The GPU benchmark: generated PyTorch programs vs hand-written expert references, plus MFU.

One script for a machine with one NVIDIA GPU and PyTorch (meant to finish in under 10 minutes on an
H200). For the models of docs/performance.md — MLP 784-512-512-10 (batch 4096),
the pytorch/examples MNIST CNN (1024), ResNet-18 CIFAR (512), a 4-layer d256 transformer encoder
over 128 steps (256), GPT-2 small on 1024-token windows (16: tokens/s = samples/s × 1024; the reference
bench/reference/torch_gpt.py --size gpt2_small, nanoGPT's model) and the zoo's U-Net, 64 base channels on
64×64 images (64; bench/reference/torch_unet.py --base 64) — it runs the generated program with its default ("auto") speed settings and
the expert reference (bench/reference/torch_*.py: data on the GPU, bf16 autocast, channels_last,
torch.compile, fused optimizer) on the same synthetic data, one after the other, and prints
samples/s, generated ÷ reference and the generated program's TFLOP/s and MFU
(6 × MACs per sample; peak 793 TFLOP/s, the bf16 matrix-multiply ceiling measured on the H200).

    python bench/gpu_torch.py                      # generate + run (needs FlowTrain's requirements)
    python bench/gpu_torch.py --prepare DIR        # only generate the programs into DIR (any machine)
    python bench/gpu_torch.py --from DIR           # only run what --prepare wrote (needs torch + numpy)
    python bench/gpu_torch.py --dry-run            # every path end to end on this machine's CPU: tiny
                                                   # batches and synthetic sets, a few steps (numbers meaningless)
    python bench/gpu_torch.py --dry-run --models gpt2_small unet     # the same for some models only

Targets (docs/performance.md, expert rows): ResNet-18 CIFAR ≥ 32,600 samples/s and 13.7% MFU.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from torch_speed import Case, print_table, side_by_side  # noqa: E402

PEAK_TFLOPS = 793.0
# Steps: enough for torch.compile ("auto" compiles runs of ≥ 300 steps) to pay off and for several
# intervals after the warm-up ones, which hold the compilation.
GPU_CASES = {
    "mlp": Case("mlp", "torch_mlp.py", batch=4096, steps=400, log_every=50, synthetic=(65536, 1, 28, 28),
                data={"preprocessing": [{"op": "scale", "max_value": 255.0},
                                        {"op": "normalize", "mean": [0.13], "std": [0.31]}]}),
    "mnist_cnn": Case("mnist_cnn", "torch_mnist_cnn.py", batch=1024, steps=400, log_every=50,
                      synthetic=(65536, 1, 28, 28),
                      data={"preprocessing": [{"op": "scale", "max_value": 255.0},
                                              {"op": "normalize", "mean": [0.13], "std": [0.31]}]}),
    "resnet18_cifar": Case("resnet18_cifar", "torch_resnet18_cifar.py", batch=512, steps=300, log_every=50,
                           synthetic=(50000, 3, 32, 32)),
    "transformer": Case("transformer", "torch_transformer.py", batch=256, steps=300, log_every=50,
                        synthetic=(4096, 128, 256)),
    "gpt2_small": Case("gpt2_small", "torch_gpt.py", batch=16, steps=300, log_every=50, synthetic=(4_000_000,),
                       kind="tokens", classes=50257, reference_args=("--size", "gpt2_small")),
    "unet": Case("unet", "torch_unet.py", batch=64, steps=300, log_every=50, synthetic=(4096, 3, 64, 64),
                 kind="segment", classes=4, reference_args=("--base", "64")),
}
DRY_RUN_BLOCK = 32  # a language model's context in the dry run (GPT-2 small's 1024 tokens: minutes per CPU step)



def dry_run_case(case: Case) -> Case:
    """The case shrunk for a CPU: batch 8, 8 steps logged every 2 (the table drops the first two
    intervals), a synthetic set of 64 samples of the same shape; a language model: batch 2 of
    DRY_RUN_BLOCK-token windows (the same layers and vocabulary) from a stream of 64 windows."""
    if case.kind == "tokens":
        return replace(case, batch=2, steps=8, log_every=2, synthetic=(64 * DRY_RUN_BLOCK + 1,),
                       data={**case.data, "block_size": DRY_RUN_BLOCK},
                       reference_args=(*case.reference_args, "--block", str(DRY_RUN_BLOCK)))
    _, *shape = case.synthetic or (64, 1, 28, 28)
    return replace(case, batch=8, steps=8, log_every=2, synthetic=(64, *shape))


def prepare_all(folder: Path, names: list[str], dry_run: bool = False) -> None:
    sys.path.insert(0, str(ROOT))
    from torch_speed import prepare

    for name in names:
        (folder / name).mkdir(parents=True, exist_ok=True)
        prepare(dry_run_case(GPU_CASES[name]) if dry_run else GPU_CASES[name], folder / name)
    print(f"prepared {', '.join(names)} in {folder}")


def run_all(folder: Path, names: list[str], reps: int, dry_run: bool = False) -> None:
    import torch

    if not torch.cuda.is_available() and not dry_run:
        raise SystemExit("no CUDA device: this benchmark is for a GPU machine (see bench/torch_speed.py for CPUs)")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    rows, start = [], time.perf_counter()
    for name in names:
        meta = json.loads((folder / name / "case.json").read_text())
        rows.append(side_by_side(folder / name, meta, reps, env))
        r = rows[-1]
        print(f"{name}: generated {[round(v) for v in r['runs_generated']]}, "
              f"reference {[round(v) for v in r['runs_reference']]} samples/s ({time.perf_counter() - start:.0f} s)",
              flush=True)
        if meta.get("kind") == "tokens":
            r["tokens_per_s"] = {"generated": r["generated"] * meta["block_size"],
                                 "reference": r["reference"] * meta["block_size"]}
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "the CPU (dry run: not a measurement)"
    print(f"\nPyTorch {torch.__version__} on {device}, {reps} run(s) each, "
          f"{time.perf_counter() - start:.0f} s\n")
    print_table(rows, peak_tflops=PEAK_TFLOPS)
    for r in rows:
        if "tokens_per_s" in r:
            print(f"{r['model']}: {r['tokens_per_s']['generated']:,.0f} tokens/s generated, "
                  f"{r['tokens_per_s']['reference']:,.0f} reference")
    print(json.dumps(rows))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prepare", type=Path, help="only generate the programs into this folder")
    parser.add_argument("--from", dest="source", type=Path, help="only run the programs prepared in this folder")
    parser.add_argument("--models", nargs="+", choices=sorted(GPU_CASES), default=list(GPU_CASES))
    parser.add_argument("--reps", type=int, default=1, help="runs of each program per model (default 1)")
    parser.add_argument("--dry-run", action="store_true", help="tiny runs on the CPU: checks the script, not the speed")
    args = parser.parse_args()
    if args.prepare:
        prepare_all(args.prepare, args.models, args.dry_run)
    elif args.source:
        run_all(args.source, args.models, args.reps, args.dry_run)
    else:
        with tempfile.TemporaryDirectory(prefix="flowtrain-gpu-bench-") as tmp:
            prepare_all(Path(tmp), args.models, args.dry_run)
            run_all(Path(tmp), args.models, args.reps, args.dry_run)
    return 0


if __name__ == "__main__":
    sys.exit(main())
