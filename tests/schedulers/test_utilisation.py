"""Utilisation from captured cluster output (n1-n2 running a 2-node job with 3 GPUs each, n3 drained,
n4 down, two jobs pending in cpu, one requeued job pending in gpu) and from psutil locally."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest

from schedulers.slurm.parsing import partitions_from_scontrol
from schedulers.utilisation import local_utilisation, utilisation_from_outputs

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def util():
    return utilisation_from_outputs(
        json.loads((DATA / "sinfo.json").read_text()),
        json.loads((DATA / "squeue.json").read_text()),
        partitions_from_scontrol((DATA / "scontrol_partitions.txt").read_text()),
    )


def test_partitions_found(util) -> None:
    assert set(util) == {"cpu", "gpu"}
    assert util["cpu"].default and not util["gpu"].default
    assert util["cpu"].up and util["gpu"].up


def test_gpu_partition_excludes_drained_and_down_nodes(util) -> None:
    gpu = util["gpu"]
    assert (gpu.total_cpus, gpu.alloc_cpus) == (32, 4)
    assert (gpu.total_gpus, gpu.alloc_gpus) == (16, 6)
    # Only n1 and n2 are usable: 2 x (4 - 3) GPUs, 2 x (8 - 2) CPUs.
    assert (gpu.idle_gpus, gpu.idle_cpus) == (2, 12)
    assert gpu.idle_memory_mb == 2 * (16000 - 2000)
    assert gpu.available_nodes == 2
    assert {n.name: n.state for n in gpu.unavailable_nodes} == {"n3": "idle+DRAIN", "n4": "down"}
    assert gpu.running_jobs == 1 and gpu.pending_jobs == 1


def test_cpu_partition_counts_pending(util) -> None:
    cpu = util["cpu"]
    assert (cpu.total_cpus, cpu.idle_cpus, cpu.total_gpus, cpu.idle_gpus) == (16, 12, 8, 2)
    assert cpu.pending_jobs == 2


def test_fit_questions(util) -> None:
    gpu = util["gpu"]
    assert gpu.nodes_that_fit(gpus=1) == 2
    assert gpu.nodes_that_fit(gpus=2) == 0
    assert gpu.can_start_now(nodes=2, gpus=1, cpus=6)
    assert not gpu.can_start_now(nodes=3, gpus=1)
    assert not gpu.can_start_now(nodes=1, cpus=7)


def test_results_are_frozen(util) -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        util["gpu"].idle_gpus = 99  # type: ignore[misc]


def test_partition_down_has_no_idle_capacity() -> None:
    sinfo = json.loads((DATA / "sinfo.json").read_text())
    text = (DATA / "scontrol_partitions.txt").read_text().replace("State=UP", "State=DOWN", 1)
    util = utilisation_from_outputs(sinfo, {"jobs": []}, partitions_from_scontrol(text))
    assert not util["cpu"].up and util["cpu"].idle_cpus == 0 and util["cpu"].nodes_that_fit() == 0
    assert util["gpu"].up and util["gpu"].idle_cpus == 12


def test_local_utilisation_from_psutil() -> None:
    local = local_utilisation(alloc_cpus=1, running_jobs=1, gpus=0)
    assert local.name == "local" and local.default and local.up
    assert local.total_cpus == (os.cpu_count() or 1)
    assert local.idle_cpus == local.total_cpus - 1
    assert local.total_memory_mb > 0 and local.total_gpus == 0 and local.idle_gpus == 0
    assert local.running_jobs == 1


def test_local_utilisation_without_nvidia_smi(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert local_utilisation().total_gpus == 0


def test_local_utilisation_counts_nvidia_smi_gpus(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\nprintf '0\\n1\\n'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    local = local_utilisation(alloc_gpus=1)
    assert (local.total_gpus, local.alloc_gpus, local.idle_gpus) == (2, 1, 1)
