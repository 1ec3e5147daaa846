"""Generated PyTorch training program vs a hand-written expert reference, side by side.

    python bench/torch_speed.py [--reps 3] [--models mnist_cnn mlp resnet18_cifar gpt_mini unet_small] [--quick]

For each model the generated program (``python -m flowtrain generate``) and the reference in
bench/reference/torch_<model>.py train the same network on the same preprocessed data with the
same batch size and optimizer, for the same number of steps, in separate processes run
alternately (A B A B …). Throughput is the median samples/s of the logging intervals after the
warm-up ones (the generated program's "train" records in metrics.jsonl, the reference's JSON
lines: both read the loss once per interval, so both intervals end with a host synchronisation).
Printed: the median over the repetitions of each, and generated ÷ reference (target ≥ 0.97).
For the language model a sample is one window of ``block_size`` tokens (tokens/s = samples/s × 64 for
gpt_mini); ``unet_small`` is the zoo's U-Net at 16 base channels instead of 64 (the 64-channel network
costs 3.0 GMACs per 64×64 image, too slow for these CPUs; same layers, 1/16 of the MACs).

A second pair of columns counts samples per CPU-second of each process over the same intervals
(psutil, read when each interval's line appears). A machine shared with other jobs stretches wall
time but not CPU time, so on such a machine run it with ``--threads 1`` (one thread: no spinning
OpenMP waits either) and read the CPU-time ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
REFERENCE = ROOT / "bench" / "reference"
PYTHON = sys.executable
WARMUP_INTERVALS = 2


@dataclass
class Case:
    name: str  # zoo template (or a bench-only network)
    reference: str  # bench/reference/<file>
    batch: int
    steps: int
    log_every: int
    data: dict[str, Any] = field(default_factory=dict)  # overrides of the template's data section
    training: dict[str, Any] = field(default_factory=dict)  # overrides of its training section
    synthetic: tuple[int, ...] | None = None  # (N, *sample shape) of random uint8 images written to an .npz
    classes: int = 10  # (the vocabulary of a token stream)
    kind: str = "classify"  # the synthetic data: "classify" (a class per sample), "segment" (a mask per
    # image), "tokens" (synthetic = (number of tokens,): a stream of byte ids in an .npy)
    reference_args: tuple[str, ...] = ()


CPU_CASES = {
    "mnist_cnn": Case("mnist_cnn", "torch_mnist_cnn.py", batch=64, steps=70, log_every=10),
    "mlp": Case("mlp", "torch_mlp.py", batch=64, steps=400, log_every=50),
    "resnet18_cifar": Case("resnet18_cifar", "torch_resnet18_cifar.py", batch=32, steps=16, log_every=3,
                           synthetic=(512, 3, 32, 32)),
    "gpt_mini": Case("gpt_mini", "torch_gpt.py", batch=32, steps=60, log_every=10, synthetic=(200_000,),
                     kind="tokens", classes=256),
    "unet_small": Case("unet_small", "torch_unet.py", batch=8, steps=72, log_every=6, synthetic=(256, 3, 64, 64),
                       kind="segment", classes=4, reference_args=("--base", "16")),
}
UNET_SMALL_BASE = 16


def bench_spec(case: Case, folder: Path) -> Any:
    """The zoo template with the bench's batch, data and a single epoch long enough for every step."""
    from core import zoo
    from core.spec import PipelineSpec

    doc = (transformer_doc() if case.name == "transformer" else unet_doc(UNET_SMALL_BASE) if case.name == "unet_small"
           else zoo.template(case.name).model_dump(mode="json"))
    doc["data"].update({"batch_size": case.batch, "validation_split": 0.1, "test_split": 0.0, **case.data})
    if case.kind == "tokens":
        doc["data"].update({"source": str((folder / "bench.npy").resolve())})
    elif case.synthetic is not None:
        doc["data"].update({"source": str((folder / "bench.npz").resolve()), "format": "npz", "num_classes": case.classes,
                            "input_shape": list(case.synthetic[1:])})
    doc["training"].update({
        "epochs": 1, "samples_per_epoch": (case.steps + case.log_every) * case.batch, "log_every_steps": case.log_every,
        "checkpoint": {"every_steps": None, "every_epoch": False},
        **case.training})
    return PipelineSpec.model_validate(doc)


def transformer_doc() -> dict[str, Any]:
    """4 transformer encoder layers (d256, 8 heads, feed-forward 1024) over 128 steps → mean → 10 classes."""
    from core.zoo.builder import GraphBuilder

    g = GraphBuilder()
    x = g.add("Input", id="input")
    for _ in range(4):
        x = g.add("TransformerEncoderLayer", x, num_heads=8, dim_feedforward=1024, dropout=0.1)
    x = g.add("Linear", g.add("SequencePool", x, mode="mean"), out_features=10)
    g.add("Output", x, id="output")
    return {"name": "transformer", "data": {"preprocessing": []}, "model": g.model(),
            "training": {"optimizer": {"name": "adamw", "lr": 1e-3, "weight_decay": 0.01}, "schedule": {"name": "cosine"}}}


def unet_doc(base: int) -> dict[str, Any]:
    """The zoo's unet (data, training, layers) with ``base`` channels at the top instead of 64."""
    from core import zoo
    from core.zoo.builder import GraphBuilder
    from core.zoo.segmentation import SHAPES_CLASSES, unet_graph

    doc = zoo.template("unet").model_dump(mode="json")
    g = GraphBuilder()
    g.add("Output", unet_graph(g, SHAPES_CLASSES, base=base), id="output")
    doc.update(name="unet_small", model=g.model())
    return doc


def write_synthetic(case: Case, folder: Path) -> None:
    if case.synthetic is None:
        return
    rng = np.random.default_rng(0)
    n, *shape = case.synthetic
    if case.kind == "tokens":  # a token stream with ids 0 … classes − 1 (the vocabulary)
        np.save(folder / "bench.npy", rng.integers(0, case.classes, size=n).astype(
            np.uint8 if case.classes <= 256 else np.uint16))
        return
    if case.kind == "segment":  # images with a mask of class indices each
        np.savez(folder / "bench.npz", x=rng.integers(0, 256, size=(n, *shape), dtype=np.uint8),
                 y=rng.integers(0, case.classes, size=(n, *shape[1:]), dtype=np.uint8))
        return
    x = rng.integers(0, 256, size=(n, *shape), dtype=np.uint8) if len(shape) == 3 else \
        rng.standard_normal((n, *shape), dtype=np.float32)
    np.savez(folder / "bench.npz", x=x, y=rng.integers(0, case.classes, size=n))


def prepare(case: Case, folder: Path) -> dict[str, Any]:
    """Generate the program into folder/program; return what the runs need (also written as case.json)."""
    from core.codegen import generate
    from core.validate import validate

    spec = bench_spec(case, folder)
    analysis = validate(spec)
    generate(spec, "torch", analysis).write(folder / "program")
    meta = {"name": case.name, "reference": case.reference, "batch": case.batch, "steps": case.steps,
            "log_every": case.log_every, "synthetic": case.synthetic, "classes": case.classes,
            "kind": case.kind, "reference_args": list(case.reference_args), "block_size": spec.data.block_size,
            "macs_per_sample": analysis.total_macs}
    (folder / "case.json").write_text(json.dumps(meta))
    return meta


def export_train_split(folder: Path, env: dict[str, str]) -> Path:
    """The generated data.py's preprocessed training split as an .npz, so the reference trains on the same data."""
    out = folder / "train_split.npz"
    code = ("import sys, numpy as np, data; s = data.load_splits()['train']; "
            "np.savez(sys.argv[1], x=s.x, y=s.y)")
    subprocess.run([PYTHON, "-c", code, str(out)], cwd=folder / "program", env=env, check=True)
    return out


def interval_rates(lines: list[dict[str, Any]]) -> list[float]:
    return [float(r["samples_per_s"]) for r in lines][WARMUP_INTERVALS:]


def stream(cmd: list[str], cwd: Path | None, env: dict[str, str], marker: str) -> tuple[list[str], list[float]]:
    """Run cmd; at every stdout line containing `marker` (one per logging interval) note the process's CPU
    time. Returns (stdout lines, CPU seconds at each interval). CPU time is what a busy shared machine
    does not inflate: a process that waits for a core is not charged for the wait."""
    import psutil

    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watched = psutil.Process(proc.pid)
    lines, cpu = [], []
    assert proc.stdout is not None
    for line in proc.stdout:
        if marker in line:
            times = watched.cpu_times()
            cpu.append(times.user + times.system)
        lines.append(line)
    stderr = proc.stderr.read() if proc.stderr else ""
    if proc.wait() != 0:
        raise RuntimeError(f"{' '.join(cmd[:2])} failed:\n{stderr[-3000:]}")
    return lines, cpu


def per_cpu_second(cpu: list[float], samples_per_interval: int) -> float:
    """Samples per CPU-second over the intervals after the warm-up ones."""
    start, end = cpu[WARMUP_INTERVALS - 1], cpu[-1]
    return samples_per_interval * (len(cpu) - WARMUP_INTERVALS) / max(end - start, 1e-9)


def run_generated(folder: Path, meta: dict[str, Any], run: int, env: dict[str, str]) -> tuple[float, float]:
    """(samples/s of the median interval, samples per CPU-second) of one run of the generated program."""
    out = folder / f"run-{run}"
    _, cpu = stream([PYTHON, "train.py", "--out", str(out), "--max-steps", str(meta["steps"]), "--resume", "never"],
                    folder / "program", env, " samples/s")
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    wall = statistics.median(interval_rates([r for r in rows if r["event"] == "train"]))
    return wall, per_cpu_second(cpu, meta["batch"] * meta["log_every"])


def run_reference(folder: Path, meta: dict[str, Any], data: Path, env: dict[str, str],
                  extra: list[str]) -> tuple[float, float]:
    lines, cpu = stream([PYTHON, str(REFERENCE / meta["reference"]), "--data", str(data), "--batch",
                         str(meta["batch"]), "--steps", str(meta["steps"]), "--log-every", str(meta["log_every"]),
                         *extra], None, env, "samples_per_s")
    rows = [json.loads(line) for line in lines if line.startswith("{")]
    return statistics.median(interval_rates(rows)), per_cpu_second(cpu, meta["batch"] * meta["log_every"])


def side_by_side(folder: Path, meta: dict[str, Any], reps: int, env: dict[str, str],
                 reference_args: list[str] | None = None) -> dict[str, Any]:
    """Alternate generated and reference runs (A B B A A B …: each goes first equally often)."""
    write_synthetic(Case(meta["name"], meta["reference"], meta["batch"], meta["steps"], meta["log_every"],
                         synthetic=tuple(meta["synthetic"]) if meta["synthetic"] else None,
                         classes=meta["classes"], kind=meta.get("kind", "classify")), folder)
    reference_args = [*meta.get("reference_args", []), *(reference_args or [])]
    data = export_train_split(folder, env)
    generated, reference = [], []
    for rep in range(reps):
        order = ("gen", "ref") if rep % 2 == 0 else ("ref", "gen")
        for which in order:
            if which == "gen":
                generated.append(run_generated(folder, meta, rep, env))
            else:
                reference.append(run_reference(folder, meta, data, env, reference_args))
    gen, ref = statistics.median(g for g, _ in generated), statistics.median(r for r, _ in reference)
    gen_cpu, ref_cpu = statistics.median(g for _, g in generated), statistics.median(r for _, r in reference)
    return {"model": meta["name"], "batch": meta["batch"], "generated": gen, "reference": ref, "ratio": gen / ref,
            "generated_per_cpu_s": gen_cpu, "reference_per_cpu_s": ref_cpu, "cpu_ratio": gen_cpu / ref_cpu,
            "runs_generated": [g for g, _ in generated], "runs_reference": [r for r, _ in reference],
            "macs_per_sample": meta["macs_per_sample"]}


def print_table(rows: list[dict[str, Any]], peak_tflops: float | None = None, cpu_time: bool = False) -> None:
    head = f"{'model':<16} {'batch':>6} {'generated':>12} {'reference':>12} {'ratio':>7}"
    if cpu_time:
        head += f" {'gen/CPU-s':>10} {'ref/CPU-s':>10} {'ratio':>7}"
    if peak_tflops:
        head += f" {'TFLOP/s':>8} {'MFU':>6}"
    print(head)
    print("-" * len(head))
    for r in rows:
        line = (f"{r['model']:<16} {r['batch']:>6} {r['generated']:>12,.0f} {r['reference']:>12,.0f} "
                f"{r['ratio']:>7.3f}")
        if cpu_time:
            line += (f" {r['generated_per_cpu_s']:>10,.0f} {r['reference_per_cpu_s']:>10,.0f} "
                     f"{r['cpu_ratio']:>7.3f}")
        if peak_tflops:
            tflops = r["generated"] * 6 * r["macs_per_sample"] / 1e12  # forward 2·MACs + backward 4·MACs
            line += f" {tflops:>8.1f} {100 * tflops / peak_tflops:>5.1f}%"
        print(line)
    print("(samples/s: median over runs of the median interval after warm-up; ratio = generated ÷ reference"
          + ("; /CPU-s: samples per CPU-second of the process over the same intervals, which a busy shared "
             "machine does not inflate" if cpu_time else "") + ")")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", choices=sorted(CPU_CASES), default=list(CPU_CASES))
    parser.add_argument("--reps", type=int, default=3, help="runs of each program per model (default 3)")
    parser.add_argument("--quick", action="store_true", help="fewer steps (a smoke test of the bench itself)")
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)),
                        help="torch threads of both programs (default: all cores; 1 makes CPU time exact)")
    parser.add_argument("--json", action="store_true", help="also print the rows as JSON")
    args = parser.parse_args()
    threads = str(args.threads)
    env = {**os.environ, "OMP_NUM_THREADS": threads, "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": ""}
    rows = []
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="flowtrain-bench-") as tmp:
        for name in args.models:
            case = CPU_CASES[name]
            if args.quick:
                case.steps = max(case.log_every * (WARMUP_INTERVALS + 2), case.steps // 4)
            folder = Path(tmp) / name
            folder.mkdir()
            rows.append(side_by_side(folder, prepare(case, folder), args.reps, env))
            print(f"{name}: generated {[round(v) for v in rows[-1]['runs_generated']]}, "
                  f"reference {[round(v) for v in rows[-1]['runs_reference']]} samples/s", flush=True)
    print(f"\nPyTorch on CPU ({threads} threads), {args.reps} alternating runs each, "
          f"{time.perf_counter() - start:.0f} s\n")
    print_table(rows, cpu_time=True)
    if args.json:
        print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
