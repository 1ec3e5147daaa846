"""The explicit interfaces: every executor implements the whole Executor protocol (everything the run
registry calls), and every Slurm transport the whole SlurmTransport protocol, with the same
parameters, so the registry and the Slurm executor never probe with getattr."""

from __future__ import annotations

import ast
import inspect
import textwrap

import pytest

from schedulers.base import AccountingExecutor, ArrayExecutor, Executor
from schedulers.local import LocalExecutor
from schedulers.slurm.commands import SlurmCommands
from schedulers.slurm.executor import SlurmExecutor
from schedulers.slurm.pyslurm_transport import PyslurmTransport
from schedulers.slurm.rest_transport import SlurmRestTransport
from schedulers.slurm.transport import SlurmTransport


def protocol_methods(protocol: type) -> dict[str, inspect.Signature]:
    return {name: inspect.signature(fn) for name, fn in vars(protocol).items()
            if callable(fn) and not name.startswith("_")}


def assert_implements(cls: type, protocol: type) -> None:
    """Each protocol method exists on ``cls`` and accepts the protocol's parameters (same names, same
    kinds, same defaults); any extra parameter of the implementation has a default."""
    methods = protocol_methods(protocol)
    assert methods, protocol
    for name, wanted in methods.items():
        impl = getattr(cls, name, None)
        assert callable(impl), f"{cls.__name__} lacks {protocol.__name__}.{name}"
        have = inspect.signature(impl).parameters
        for param in wanted.parameters.values():
            assert param.name in have, f"{cls.__name__}.{name} lacks parameter {param.name!r}"
            got = have[param.name]
            assert (got.kind, got.default) == (param.kind, param.default), \
                f"{cls.__name__}.{name}({param.name}): {got} differs from the protocol's {param}"
        extra = [p for n, p in have.items() if n not in wanted.parameters and p.default is inspect.Parameter.empty
                 and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        assert not extra, f"{cls.__name__}.{name} needs parameters the protocol does not pass: {extra}"


@pytest.mark.parametrize("cls", [LocalExecutor, SlurmExecutor])
def test_executors_implement_the_whole_protocol(cls: type) -> None:
    """The parameters the orchestrator passes fit both backends, the group methods of a sweep too
    (that each really runs a group: tests/schedulers/test_sweep_arrays.py)."""
    assert "statuses" in protocol_methods(Executor)  # what reconcile calls
    assert_implements(cls, Executor)
    assert_implements(cls, ArrayExecutor)


def test_only_slurm_keeps_accounting() -> None:
    """Asking the local executor for an accounting record is not possible (it kept a stub that
    answered None); reconcile's fetch_accounting asks only an executor that has one."""
    assert_implements(SlurmExecutor, AccountingExecutor)
    assert not hasattr(LocalExecutor, "accounting")


def test_the_protocol_has_no_stubs() -> None:
    """Every method of the protocol does something on both backends: none is satisfied by a body that
    only returns a constant (``job_times`` returning ``(None, None)`` on Slurm was one)."""
    stubs = []
    for cls, protocols in ((LocalExecutor, (Executor, ArrayExecutor)),
                           (SlurmExecutor, (Executor, ArrayExecutor, AccountingExecutor))):
        for name in set().union(*(protocol_methods(p) for p in protocols)):
            body = [n for n in ast.parse(textwrap.dedent(inspect.getsource(getattr(cls, name)))).body[0].body
                    if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]  # docstring
            if len(body) == 1 and isinstance(body[0], ast.Return) and _constant(body[0].value):
                stubs.append(f"{cls.__name__}.{name}")
    assert not stubs, f"stubs in the Executor protocol's implementations: {stubs}"


def _constant(node: ast.expr | None) -> bool:
    return node is None or isinstance(node, ast.Constant) or (
        isinstance(node, ast.Tuple) and all(isinstance(e, ast.Constant) for e in node.elts))


@pytest.mark.parametrize("cls", [SlurmCommands, PyslurmTransport, SlurmRestTransport])
def test_slurm_transports_implement_the_protocol(cls: type) -> None:
    assert_implements(cls, SlurmTransport)


def test_the_executor_uses_nothing_beyond_the_transport_protocol() -> None:
    """Every ``self.commands.X`` the Slurm executor calls is a protocol method (a REST transport that
    implements the protocol is enough)."""
    import re

    source = inspect.getsource(SlurmExecutor)
    used = set(re.findall(r"self\.commands\.(\w+)", source))
    assert used and used <= set(protocol_methods(SlurmTransport)), used - set(protocol_methods(SlurmTransport))


def test_transport_instances_satisfy_the_protocol() -> None:
    assert isinstance(SlurmCommands(slurm_conf="/nonexistent/slurm.conf"), SlurmTransport)
    assert isinstance(SlurmRestTransport("http://127.0.0.1:9"), SlurmTransport)  # contacts nothing yet
