"""Valid means runnable where it will run: the training layer's resources checked against the user's
scheduler (portal/resource_fit.py), every mismatch at once, and *Fit to this machine* on the page."""

from __future__ import annotations

import pytest

from core import zoo
from portal.resource_fit import check_local, check_slurm
from schedulers.slurm.parsing import PartitionLimits
from schedulers.utilisation import NodeUtilisation, _summarise
from tests.portal.conftest import as_the_browser, editor, form, messages
from tests.slurm_fixture import DevCluster, slurm_cluster  # noqa: F401  (fixture)


def _partition(name: str, cpus: int, gpus: int, memory_mb: int = 8192, nodes: int = 1,
               limits: PartitionLimits | None = None):
    members = [NodeUtilisation(f"{name}{i}", "idle", True, cpus, 0, gpus, 0, memory_mb, 0) for i in range(nodes)]
    return _summarise(name, members, up=True, default=False, pending=0, running=0,
                      limits=limits or PartitionLimits())


def _training(name: str) -> dict:
    return zoo.template(name).training.model_dump(mode="json")


def test_a_gpu_template_on_a_two_cpu_machine_gets_every_problem_and_a_fit():
    laptop = _partition("local", cpus=2, gpus=0)
    result = check_local(_training("alexnet"), laptop)  # 2 nodes × 4 GPUs × 8 CPUs per task
    assert result.where == "local has 2 CPUs, 8 GB of memory and no GPU"
    assert [p.location for p in result.problems] == ["training.resources.nodes", "training.resources.gpus_per_node",
                                                     "training.resources.cpus_per_task"]
    assert all(p.fix for p in result.problems)
    assert "32 CPUs (8 per task × 4 task(s))" in result.problems[2].message
    assert {k: result.fitted[k] for k in ("nodes", "gpus_per_node", "cpus_per_task")} == \
        {"nodes": 1, "gpus_per_node": 0, "cpus_per_task": 2}
    training = {**_training("alexnet"), "resources": result.fitted}
    assert check_local(training, laptop).fits  # the fit fits


def test_memory_over_the_machine_is_a_problem_and_a_fitting_request_has_none():
    laptop = _partition("local", cpus=4, gpus=1, memory_mb=4096)
    training = {**_training("lenet5"), "resources": {**_training("lenet5")["resources"], "mem_gb": 64}}
    [problem] = check_local(training, laptop).problems
    assert problem.location == "training.resources.mem_gb" and check_local(training, laptop).fitted["mem_gb"] is None
    assert check_local(_training("resnet18_cifar"), _partition("local", cpus=8, gpus=1)).fits


def test_slurm_partition_limits_and_unknown_partitions_are_reported():
    partitions = {"cpu": _partition("cpu", cpus=4, gpus=0, nodes=2),
                  "gpu": _partition("gpu", cpus=16, gpus=4, nodes=2, limits=PartitionLimits(max_time_min=30))}
    training = _training("resnet18_cifar")  # partition gpu, 60 min
    [problem] = check_slurm(training, partitions, None).problems
    assert "MaxTime" in problem.message
    training["resources"]["partition"] = "huge"
    [problem] = check_slurm(training, partitions, None).problems
    assert problem.location == "training.resources.partition" and problem.expected == "cpu, gpu"
    training["resources"].update(partition=None, time_limit_min=20)
    assert check_slurm(training, partitions, None).fits  # the selector may choose gpu
    training["resources"]["gpus_per_node"] = 8
    result = check_slurm(training, partitions, None)
    assert {p.message.split(":")[0] for p in result.problems} == {"partition cpu", "partition gpu"}


def test_fit_to_this_machine_makes_the_pipeline_valid_and_runnable(app):
    at = app()
    as_the_browser(at, lambda: at.selectbox(key="toolbar.template").set_value("mnist_cnn"))
    as_the_browser(at, at.button(key="toolbar.load").click)
    assert any(m.startswith("Valid:") for m in messages(at))
    as_the_browser(at, lambda: form(at, "number_input", "training.resources.nodes").set_value(2))
    as_the_browser(at, lambda: form(at, "number_input", "training.resources.gpus_per_node").set_value(64))
    [warning] = [w.value for w in at.warning if w.value.startswith("Valid, but local has")]
    # all at once, in the open: nodes, GPUs and CPUs (64 tasks × 2 CPUs)
    assert "3 resource problem(s)" in warning and "training.resources.gpus_per_node" in warning
    assert not any(m.startswith("Valid:") for m in messages(at))
    as_the_browser(at, at.button(key="editor.fit_resources").click)
    assert any(m.startswith("Valid:") and "Fits local" in m for m in messages(at))
    resources = editor(at).doc["training"]["resources"]
    assert resources["nodes"] == 1 and resources["gpus_per_node"] <= 64
    assert form(at, "number_input", "training.resources.nodes").value == 1
    at.switch_page("pages/runs.py").run()
    assert [b for b in at.button if b.key == "runs.submit"], "the fitted pipeline can be submitted"


@pytest.mark.slurm
def test_on_slurm_the_partition_asked_for_is_checked_before_submit(app, slurm_cluster: DevCluster,  # noqa: F811
                                                                   monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("FLOWTRAIN_SCHEDULER", "slurm")
    at = app()
    as_the_browser(at, lambda: at.selectbox(key="toolbar.template").set_value("mnist_cnn"))
    as_the_browser(at, at.button(key="toolbar.load").click)
    assert any(m.startswith("Valid:") and "Fits Slurm" in m for m in messages(at))
    as_the_browser(at, lambda: form(at, "text_input", "training.resources.partition").set_value("nosuch"))
    [warning] = [w.value for w in at.warning if w.value.startswith("Valid, but Slurm partition nosuch")]
    assert "this cluster has no such partition" in warning and "cpu, gpu" in warning
    assert not [b for b in at.button if b.key == "editor.fit_resources"]  # no machine to fit on Slurm
    as_the_browser(at, lambda: form(at, "text_input", "training.resources.partition").set_value(""))
    as_the_browser(at, lambda: form(at, "number_input", "training.resources.gpus_per_node").set_value(64))
    [warning] = [w.value for w in at.warning if w.value.startswith("Valid, but Slurm")]
    assert "partition cpu: no usable node" in warning and "partition gpu: no usable node" in warning
