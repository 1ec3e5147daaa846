"""The explicit interfaces: every executor implements the whole Executor protocol (everything the run
registry calls), and every Slurm transport the whole SlurmTransport protocol, with the same
parameters, so the registry and the Slurm executor never probe with getattr."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from schedulers.base import Executor
from schedulers.local import LocalExecutor
from schedulers.slurm.commands import SlurmCommands
from schedulers.slurm.executor import SlurmExecutor
from schedulers.slurm.pyslurm_transport import ENV_VAR, PyslurmTransport
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
    assert {"statuses", "job_times"} <= set(protocol_methods(Executor))  # what the registry calls
    assert_implements(cls, Executor)


def test_executor_instances_satisfy_the_protocol(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_VAR, "commands")  # builds the commands transport; no cluster is contacted
    for executor in (LocalExecutor(tmp_path / "local", cpus=1, gpus=0),
                     SlurmExecutor(slurm_conf=str(tmp_path / "slurm.conf"))):
        assert isinstance(executor, Executor), type(executor).__name__
    assert SlurmExecutor(slurm_conf=str(tmp_path / "slurm.conf")).job_times("1") == (None, None)


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
