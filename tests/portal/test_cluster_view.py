"""The cluster page's usage charts: a bar per partition, allocated vs idle vs down, readable sizes."""

from __future__ import annotations

import json

from portal.cluster_view import BAR_PX, usage_chart, usage_rows
from schedulers.utilisation import NodeUtilisation, PartitionUtilisation
from tests.portal.conftest import assert_no_exception


def _partition(name: str, nodes: list[NodeUtilisation]) -> PartitionUtilisation:
    up = [n for n in nodes if n.available]
    return PartitionUtilisation(
        name=name, up=True, default=name == "cpu",
        total_cpus=sum(n.cpus for n in nodes), alloc_cpus=sum(n.alloc_cpus for n in up),
        idle_cpus=sum(n.idle_cpus for n in nodes), total_gpus=sum(n.gpus for n in nodes),
        alloc_gpus=sum(n.alloc_gpus for n in up), idle_gpus=sum(n.idle_gpus for n in nodes),
        total_memory_mb=sum(n.memory_mb for n in nodes), alloc_memory_mb=sum(n.alloc_memory_mb for n in up),
        idle_memory_mb=sum(n.memory_mb - n.alloc_memory_mb for n in up), pending_jobs=0, running_jobs=1,
        nodes=tuple(nodes))


def _cluster() -> dict[str, PartitionUtilisation]:
    n1 = NodeUtilisation("n1", "mixed", True, 16, 12, 4, 3, 64_000, 32_000)
    n2 = NodeUtilisation("n2", "idle", True, 16, 0, 4, 0, 64_000, 0)
    n3 = NodeUtilisation("n3", "down", False, 16, 0, 4, 0, 64_000, 0, reason="not responding")
    return {"cpu": _partition("cpu", [n1, n2]), "gpu": _partition("gpu", [n1, n2, n3])}


def test_each_partition_has_a_bar_of_allocated_idle_and_down():
    rows = usage_rows(_cluster())
    gpu_cpus = {r["use"]: r["amount"] for r in rows if r["partition"] == "gpu" and r["resource"] == "CPUs"}
    assert gpu_cpus == {"allocated": 12, "idle": 20, "down": 16}
    bars = {r["bar"] for r in rows if r["resource"] == "GPUs"}
    assert bars == {"cpu · 3 of 8 allocated", "gpu · 3 of 12 allocated"}
    spec = usage_chart(rows, "CPUs").to_dict()
    assert spec["height"] >= 2 * (BAR_PX + 8), "both bars fit, with room between them"
    assert spec["mark"] == {"type": "bar", "size": BAR_PX}
    color = spec["encoding"]["color"]
    assert color["scale"]["domain"] == ["allocated", "idle", "down"]
    assert color["legend"]["orient"] == "bottom", "the legend goes under the bars, never cut off at the side"
    assert spec["title"]["text"] == "CPUs"


def test_the_cluster_page_draws_bars_sized_to_the_page(app):
    at = app("pages/cluster.py")
    assert_no_exception(at)
    charts = [json.loads(c.proto.spec) for c in at.get("vega_lite_chart")]
    no_gpus = "No GPUs on this machine." in [i.value for i in at.info]  # said in words instead of empty bars
    assert [c["title"]["text"] for c in charts] == (["CPUs", "Memory GB"] if no_gpus else ["CPUs", "GPUs", "Memory GB"])
    assert all(c["height"] >= BAR_PX + 40 and c["encoding"]["color"]["legend"]["orient"] == "bottom" for c in charts)
    assert all(c["encoding"]["y"]["field"] == "bar" for c in charts), "bars labelled 'local · 0 of N allocated'"
