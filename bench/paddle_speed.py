"""Generated vs hand-written expert PaddlePaddle training throughput on this machine's CPU.

    .venv/bin/python bench/paddle_speed.py [--reps 3] [--models mnist_cnn,mlp,resnet18_cifar,unet_small] [--onednn]
                                           [--baseline /work/main]

For each model, the program ``flowtrain generate --framework paddle`` writes (run as
``train.py --max-steps N``) and the expert reference in ``bench/reference/paddle_<model>.py`` train
the same network on the same data with the same batch size, in alternating runs (A B A B …)
within this one invocation. After a warm-up, each run measures samples/s over windows of
``log_every`` steps between two host synchronisations (the generated program's numbers come from
the time stamps of its metrics.jsonl records; the reference synchronises as often). Two figures
per run: "all" = every measured step, "best" = its fastest window. On a shared, noisy machine
"best" is the steadier measure of what the code costs (other processes only ever slow a window
down). A third figure does not depend on the machine's load at all: the CPU time one training
step costs (user + system time of the process, one paddle thread), from two runs of different
lengths whose difference cancels start-up, data loading and graph conversion. The table shows
medians over the runs and the ratios generated ÷ reference (target ≥ 0.97).

Data: mnist_cnn and mlp use their zoo data (scikit-learn digits at 28×28); resnet18_cifar uses a
reduced synthetic set (256 images 3×32×32, no augmentation) as its real source is CIFAR-10 on disk.
unet_small is the zoo's U-Net at 16 base channels instead of 64 (as in torch_speed.py: same layers, 1/16
of the MACs) on 256 synthetic images 3×64×64 with masks of 4 classes, its horizontal flip kept (the
reference flips each image and its mask alike, bench/reference/paddle_unet.py).
The reference loads the generated data.py's training split, so both see identical arrays.

``--baseline TREE`` (another checkout of this repository, e.g. main's) adds that tree's generated program,
made by its own code generator and bench settings, to the alternation (A B C A B C …, each run as the
generated one is): its row gives before and after against the same reference runs, at the same load.

The reference follows performance.md's tuned recipe (threads from the CPU count, in-memory
batches, ``paddle.jit.to_static``). ``--onednn`` adds FLAGS_use_mkldnn to the reference only (the
tuned recipe). The generated program leaves oneDNN off: with paddle 3.3 under to_static, oneDNN
crashes the MLP's backward, gives wrong max-pooling gradients (the generated program avoids that
kernel; this reference does not) and now and then fails a CNN's step (docs/performance.md has the
figures). To measure the generated program with oneDNN, set FLAGS_use_mkldnn=1 in the environment.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from core import zoo  # noqa: E402
from core.codegen import generate  # noqa: E402
from core.load import spec_from_dict  # noqa: E402

sys.path.insert(0, str(REPO / "bench"))
from torch_speed import UNET_SMALL_BASE, unet_doc  # noqa: E402

REFERENCE = REPO / "bench" / "reference"
ENV = {**os.environ, "GLOG_minloglevel": "2", "PYTHONWARNINGS": "ignore"}


@dataclass(frozen=True)
class Case:
    model: str
    batch: int
    warmup: int  # steps before the clock starts (to_static conversion, allocator warm-up); a multiple of log_every
    steps: int  # measured steps; both a multiple of log_every
    log_every: int
    cpu_steps: tuple[int, int]  # total steps of the short and the long run of the CPU-time measurement
    reference_args: tuple[str, ...] = ()  # bench/reference/paddle_<model>.py's own arguments


CASES = {
    "mnist_cnn": Case("mnist_cnn", 64, 5, 30, 5, (10, 40)),
    "mlp": Case("mlp", 64, 10, 200, 10, (20, 220)),
    "resnet18_cifar": Case("resnet18_cifar", 32, 2, 4, 1, (2, 6)),
    "unet_small": Case("unet_small", 8, 6, 48, 6, (6, 30), reference_args=("--base", "16")),
}
REFERENCE_FILE = {"unet_small": "paddle_unet.py"}  # else paddle_<model>.py


def bench_spec(case: Case, work: Path) -> Any:
    """The zoo template with the bench's batch, a constant learning rate (as the references use),
    the static graph on, one long epoch (no evaluation inside the measured steps) and no checkpoints."""
    doc = unet_doc(UNET_SMALL_BASE) if case.model == "unet_small" else zoo.template(case.model).model_dump(mode="json")
    doc["data"]["batch_size"] = case.batch
    if case.model == "unet_small":
        rng = np.random.default_rng(0)
        np.savez(work / "unet_small.npz", x=rng.integers(0, 256, (256, 3, 64, 64), dtype=np.uint8),
                 y=rng.integers(0, 4, (256, 64, 64), dtype=np.uint8))
        doc["data"].update(source=str((work / "unet_small.npz").resolve()), format="npz", input_shape=[3, 64, 64])
    elif case.model == "resnet18_cifar":
        rng = np.random.default_rng(0)
        np.savez(work / "cifar_small.npz", x=rng.integers(0, 256, (256, 3, 32, 32), dtype=np.uint8),
                 y=rng.integers(0, 10, 256))
        doc["data"].update(source=str((work / "cifar_small.npz").resolve()), format="npz", target="y", augmentation=[])
    longest = max(case.warmup + case.steps, case.cpu_steps[1])
    # compile "on": what "auto" gives a real run (long enough to earn back the conversion); the
    # bench's short runs would otherwise run eagerly
    doc["training"].update(performance={"compile": "on", "device_data": "auto"}, schedule={"name": "constant"},
                           samples_per_epoch=case.batch * (longest + 10),
                           log_every_steps=case.log_every,
                           checkpoint={"every_steps": None, "every_epoch": False, "keep": 1})
    return spec_from_dict(doc)


BASELINE_PROGRAM = """
import sys
from pathlib import Path
tree, model, work = sys.argv[1], sys.argv[2], Path(sys.argv[3])
sys.path[:0] = [tree, tree + "/bench"]
import paddle_speed
from core.codegen import generate
generate(paddle_speed.bench_spec(paddle_speed.CASES[model], work), "paddle").write(work / "program")
"""


def baseline_program(tree: Path, case: Case, work: Path) -> Path:
    """`tree`'s generated program for the case (its code generator and bench_spec, in a process of its own)."""
    work.mkdir()
    run_child([sys.executable, "-c", BASELINE_PROGRAM, str(tree.resolve()), case.model, str(work)], work, ENV,
              f"generating {tree}'s {case.model} program")
    return work / "program"


def export_training_split(program: Path, work: Path, target: Path) -> None:
    """The generated data.py's training split as an npz for the reference (numpy only)."""
    module_spec = importlib.util.spec_from_file_location("bench_generated_data", program / "data.py")
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    sys.modules["bench_generated_data"] = module
    module_spec.loader.exec_module(module)
    train = module.load_splits()["train"]
    np.savez(target, train_x=train.x, train_y=train.y)


def run_child(command: list[str], cwd: Path, env: dict[str, str], what: str) -> tuple[str, float]:
    """(stdout, CPU seconds the child used: user + system, all its threads)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(command, cwd=cwd, capture_output=True, text=True, env=env, timeout=1800)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f"{what} failed:\n{proc.stderr[-4000:]}")
    return proc.stdout, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def generated_command(case: Case, work: Path, out: Path, steps: int) -> list[str]:
    return [sys.executable, "train.py", "--out", str(out), "--resume", "never",
            "--max-steps", str(steps)]


def reference_command(case: Case, data: Path, steps: int, onednn: bool) -> list[str]:
    command = [sys.executable, str(REFERENCE / REFERENCE_FILE.get(case.model, f"paddle_{case.model}.py")), "--data",
               str(data), "--batch", str(case.batch), "--warmup", str(case.warmup), "--steps", str(steps - case.warmup),
               "--window", str(case.log_every), *case.reference_args]
    return command + (["--onednn"] if onednn else [])


def cpu_per_sample(run: Callable[[int], float], case: Case) -> float:
    """Samples per CPU-second of the training steps alone: (long − short) steps over the CPU-time difference."""
    short, long = case.cpu_steps
    return (long - short) * case.batch / max(run(long) - run(short), 1e-9)


def run_generated(program: Path, case: Case, work: Path, rep: int) -> tuple[float, float]:
    """(samples/s over all measured steps, samples/s of the fastest window)"""
    out = work / f"run{rep}"
    run_child(generated_command(case, work, out, case.warmup + case.steps), program, ENV, f"generated {case.model}")
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    at = {r["step"]: r["time"] for r in records if r["event"] == "train"}
    marks = [at[step] for step in range(case.warmup, case.warmup + case.steps + 1, case.log_every)]
    windows = [case.log_every * case.batch / (b - a) for a, b in zip(marks, marks[1:])]
    return case.steps * case.batch / (marks[-1] - marks[0]), max(windows)


def run_reference(case: Case, data: Path, onednn: bool) -> tuple[float, float]:
    """(samples/s over all measured steps, samples/s of the fastest window)"""
    stdout, _ = run_child(reference_command(case, data, case.warmup + case.steps, onednn), REFERENCE, ENV,
                          f"reference {case.model}")
    result = json.loads(stdout.strip().splitlines()[-1])
    return float(result["samples_per_s"]), max(result["windows"])


ONE_THREAD = {**ENV, "FLAGS_paddle_num_threads": "1"}


def cpu_generated(program: Path, case: Case, work: Path) -> float:
    return cpu_per_sample(lambda steps: run_child(generated_command(case, work, work / "cpu", steps), program,
                                                  ONE_THREAD, f"generated {case.model}")[1], case)


def cpu_reference(case: Case, data: Path, onednn: bool) -> float:
    return cpu_per_sample(lambda steps: run_child(reference_command(case, data, steps, onednn), REFERENCE,
                                                  ONE_THREAD, f"reference {case.model}")[1], case)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3, help="alternating runs of each program (default 3)")
    parser.add_argument("--models", default=",".join(CASES), help=f"comma-separated, from {', '.join(CASES)}")
    parser.add_argument("--onednn", action="store_true", help="FLAGS_use_mkldnn in the reference")
    parser.add_argument("--baseline", type=Path, help="another checkout whose generated programs run alongside")
    args = parser.parse_args()
    if args.baseline is not None and not (args.baseline / "bench" / "paddle_speed.py").is_file():
        parser.error(f"--baseline {args.baseline}: not a checkout of this repository (no bench/paddle_speed.py in it)")
    rows = []
    with tempfile.TemporaryDirectory(prefix="flowtrain-paddle-bench-") as tmp:
        for name in args.models.split(","):
            case = CASES[name]
            work = Path(tmp) / name
            work.mkdir()
            program = work / "program"
            generate(bench_spec(case, work), "paddle").write(program)
            data = work / "train.npz"
            export_training_split(program, work, data)
            programs = {"generated": (program, work)}
            if args.baseline is not None:
                programs["baseline"] = (baseline_program(args.baseline, case, work / "baseline"), work / "baseline")
            runs: dict[str, list[tuple[float, float, float]]] = {key: [] for key in [*programs, "reference"]}
            for rep in range(args.reps):
                for key, (folder, scratch) in programs.items():
                    runs[key].append((*run_generated(folder, case, scratch, rep), cpu_generated(folder, case, scratch)))
                runs["reference"].append((*run_reference(case, data, args.onednn), cpu_reference(case, data, args.onednn)))
                print(f"  {name} run {rep + 1}: " + ", ".join(f"{key} all {r[-1][0]:.1f} best {r[-1][1]:.1f} cpu "
                                                             f"{r[-1][2]:.1f}" for key, r in runs.items()), flush=True)
            medians = {key: [statistics.median(v) for v in zip(*r)] for key, r in runs.items()}
            for key in programs:
                rows.append((name if key == "generated" else f"{name} ({key})", case.batch, medians[key],
                             medians["reference"]))
    print()
    print(f"PaddlePaddle on CPU ({len(os.sched_getaffinity(0))} cores, load average "
          f"{os.getloadavg()[0]:.1f}), medians of {args.reps} alternating runs"
          f"{', reference with oneDNN' if args.onednn else ''}; samples/s")
    header = "".join(f"{'gen ' + k:>10}{'ref ' + k:>10}{'ratio':>7}" for k in ("all", "best", "cpu"))
    print(f"{'model':<24}{'batch':>6}{header}")
    for name, batch, gen, ref in rows:
        cells = "".join(f"{g:>10.1f}{r:>10.1f}{g / r:>7.3f}" for g, r in zip(gen, ref))
        print(f"{name:<24}{batch:>6}{cells}")
    print("all/best: samples/s (wall clock, all threads); cpu: samples per CPU-second with one thread;")
    print("ratio = generated / reference; target >= 0.97" + ("; (baseline): --baseline's program, same reference runs"
                                                              if args.baseline is not None else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
