"""How the suite shares two CPU cores: the pytest-xdist groups and the serial phase (scripts/test.sh).

``scripts/test.sh`` runs the suite in two phases:

1. ``--flowtrain-phase parallel -n 2 --dist loadgroup``: every test except those marked ``alone``, on
   two workers. Each test gets an ``xdist_group`` here; xdist sends each group, whole, to one worker:

   - a test module is one group, so module- and class-scoped fixtures (a trained run, an imported
     ONNX model, a portal server) are built once, not once per worker;
   - every test that uses the dev Slurm cluster (the ``slurm_cluster`` fixture or the ``slurm``
     marker) is in the one group ``slurm-cluster``: those tests drain, down and resume nodes, restart
     slurmctld, fill partitions and count the queue, and each assumes nobody else does so meanwhile,
     as in a serial run; the cluster's 4 nodes share this machine's cores anyway. That group is one
     worker's serial chain, so the other tests of its modules stay in their module's group (they never
     touch the cluster), unless they share a module-, class- or session-scoped fixture of the project
     with the module's cluster tests: then the module is whole in ``slurm-cluster``, and the fixture is
     built once;
   - modules sharing a session fixture (``SHARED_SESSION_FIXTURES``) are one group, so the fixture
     runs once.

2. ``--flowtrain-phase alone``, without workers: the tests marked ``alone``, which measure time,
   speed or load (calibration picks the fastest framework, a wall-clock bound a busy neighbour could
   break); nothing else runs beside them.

Without ``--flowtrain-phase`` (a plain ``pytest`` call, ``FLOWTRAIN_TEST_WORKERS=1``) every test runs.
xdist reads the ``xdist_group`` marks in its own ``pytest_collection_modifyitems``; this hook is
``tryfirst`` so the marks are there before it reads them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.finished_runs import onnx_runs  # noqa: F401  (re-exported as a fixture)
from tests.helpers import empty_screenshots

BROWSER_ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts" / "browser"
PHASES = ("all", "parallel", "alone")
CLUSTER_GROUP = "slurm-cluster"
CLUSTER_FIXTURE = "slurm_cluster"
# Session-scoped fixtures that several modules use: those modules are one group (name: the fixture's).
SHARED_SESSION_FIXTURES = ("framework_reports", "onnx_runs")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--flowtrain-phase", choices=PHASES, default="all",
        help="parallel: every test but those marked 'alone'; alone: only those (scripts/test.sh runs both)",
    )


def pytest_configure(config: pytest.Config) -> None:
    """The controller of a pytest-xdist run empties the screenshot folder once, before its workers start
    (tests/browser/conftest.py empties it itself in a run without workers)."""
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        BROWSER_ARTIFACTS.mkdir(parents=True, exist_ok=True)
        empty_screenshots(BROWSER_ARTIFACTS)


def module_of(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


def group_of(item: pytest.Item, whole_modules: set[str], shared: dict[str, str]) -> str:
    module = module_of(item)
    if uses_cluster(item) or module in whole_modules:
        return CLUSTER_GROUP
    return shared.get(module, module)


def uses_cluster(item: pytest.Item) -> bool:
    return CLUSTER_FIXTURE in getattr(item, "fixturenames", ()) or item.get_closest_marker("slurm") is not None


def wide_fixtures(item: pytest.Item) -> set[str]:
    """The project's fixtures (not pytest's or a plugin's: those have no base id) that the item uses and
    that are built once for more than one test (module, class, package or session scope)."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return set()
    return {name for name, defs in info.name2fixturedefs.items()
            if defs and defs[-1].scope != "function" and defs[-1].baseid and name != CLUSTER_FIXTURE}


def whole_cluster_modules(items: list[pytest.Item]) -> set[str]:
    """Modules whose other tests share a wide fixture with their cluster tests: kept whole in the cluster's
    group, so that the fixture is not built on both workers."""
    cluster_wide: dict[str, set[str]] = {}
    for item in items:
        if uses_cluster(item):
            cluster_wide.setdefault(module_of(item), set()).update(wide_fixtures(item))
    return {module_of(i) for i in items
            if not uses_cluster(i) and wide_fixtures(i) & cluster_wide.get(module_of(i), set())}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    phase = config.getoption("flowtrain_phase")
    if phase != "all":
        want_alone = phase == "alone"
        keep = [i for i in items if (i.get_closest_marker("alone") is not None) == want_alone]
        deselected = [i for i in items if (i.get_closest_marker("alone") is not None) != want_alone]
        if deselected:
            config.hook.pytest_deselected(items=deselected)
            items[:] = keep
    if not config.pluginmanager.has_plugin("xdist"):
        return  # no workers: no groups (and no xdist_group marker to add under --strict-markers)
    whole_modules = whole_cluster_modules(items)
    shared: dict[str, str] = {}
    for fixture in SHARED_SESSION_FIXTURES:
        for i in items:
            if fixture in getattr(i, "fixturenames", ()):
                shared[module_of(i)] = f"session-{fixture}"
    for item in items:
        item.add_marker(pytest.mark.xdist_group(group_of(item, whole_modules, shared)))
