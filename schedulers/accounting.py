"""Accounts, QoS and their limits from Slurm's accounting database (slurmdbd), for the selector.

What the cluster would refuse, said before submission and with the limit named:

- the Slurm user has no association with the requested account (or none at all, when the cluster
  enforces associations);
- the association does not allow the requested QoS, or the QoS does not exist;
- the partition's ``AllowAccounts``/``DenyAccounts``/``AllowQos``/``DenyQos`` exclude the account/QoS;
- the association's or the QoS's per-job limits: ``MaxWall`` (time), ``MaxTRES`` (per job: ``node``,
  ``cpu``, ``mem``, ``gres/gpu``) and ``MaxTRESPerNode``.

Limits that depend on what else runs (``GrpTRES``, ``MaxJobs``, ``MaxSubmit``) are not a reason to
refuse: the job would wait. The partition's own ``MaxTime``/``MaxNodes`` are the selector's.

Read with Slurm's commands (``sacctmgr -P``, ``scontrol show config``, ``scontrol -o show partition``),
whichever transport submits, as utilisation is. :func:`read_accounting` returns ``None`` on a cluster
without accounting storage (``AccountingStorageType=accounting_storage/none``): nothing to check.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from schedulers.base import Resources, SchedulerError
from schedulers.slurm.commands import SlurmCommands
from schedulers.slurm.parsing import parse_scontrol_line

ASSOC_FIELDS = ("Cluster", "Account", "User", "Partition", "QOS", "DefaultQOS", "MaxTRES", "MaxWall",
                "MaxTRESPerNode")
QOS_FIELDS = ("Name", "MaxWall", "MaxTRES", "MaxTRESPerNode")
NAME_RE = re.compile(r"[A-Za-z0-9_.-]{1,64}")  # fullmatch: "$" would let a trailing newline in


# --- parsing -------------------------------------------------------------------------------------


def wall_minutes(text: str) -> int | None:
    """sacctmgr's ``MaxWall`` (``[D-]HH:MM:SS``, ``MM:SS`` or minutes) → minutes; ``""`` → ``None``."""
    text = text.strip()
    if not text or text.upper() in ("UNLIMITED", "INFINITE"):
        return None
    m = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", text)
    if not m:
        raise ValueError(f"MaxWall {text!r} is not [D-]HH:MM:SS")
    days, a, b, c = (int(g) if g else 0 for g in m.groups())
    if m.group(3) is None:
        return days * 1440 + a
    if m.group(4) is None:  # MM:SS
        return days * 1440 + a + (1 if b else 0)
    return days * 1440 + a * 60 + b + (1 if c else 0)


def parse_tres(text: str) -> dict[str, int]:
    """``gres/gpu=4,cpu=16,mem=32000M,node=2`` → ``{"gres/gpu": 4, "cpu": 16, "mem": 32000, "node": 2}``
    (memory in MB)."""
    out: dict[str, int] = {}
    for item in filter(None, (t.strip() for t in text.split(","))):
        name, _, value = item.partition("=")
        m = re.fullmatch(r"(\d+)([KMGT]?)", value)
        if not m:
            raise ValueError(f"TRES {item!r} is not NAME=COUNT")
        scale = {"": 1, "K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}[m.group(2)] if name == "mem" else 1
        out[name] = int(int(m.group(1)) * scale)
    return out


@dataclass(frozen=True)
class Association:
    """One ``sacctmgr show assoc`` row: a user may charge ``account`` (on ``partition``, when set)."""

    cluster: str
    account: str
    user: str
    partition: str
    qos: tuple[str, ...]
    default_qos: str
    max_tres: Mapping[str, int] = field(default_factory=dict)
    max_wall_min: int | None = None
    max_tres_per_node: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Qos:
    name: str
    max_wall_min: int | None = None
    max_tres: Mapping[str, int] = field(default_factory=dict)
    max_tres_per_node: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class PartitionAccess:
    """A partition's account/QoS lists (``None``: no such list, i.e. ALL allowed / none denied)."""

    name: str
    allow_accounts: tuple[str, ...] | None = None
    deny_accounts: tuple[str, ...] = ()
    allow_qos: tuple[str, ...] | None = None
    deny_qos: tuple[str, ...] = ()


def _rows(text: str, fields: Sequence[str]) -> list[dict[str, str]]:
    rows = []
    for line in text.splitlines():
        if line.strip():
            values = line.split("|")
            if len(values) < len(fields):
                raise ValueError(f"sacctmgr printed {line!r}; expected {len(fields)} fields {'|'.join(fields)}")
            rows.append(dict(zip(fields, values, strict=False)))
    return rows


def associations_from_sacctmgr(text: str) -> list[Association]:
    """``sacctmgr -n -P show assoc format=<ASSOC_FIELDS>`` → associations."""
    return [Association(
        cluster=r["Cluster"], account=r["Account"], user=r["User"], partition=r["Partition"],
        qos=tuple(q for q in r["QOS"].split(",") if q), default_qos=r["DefaultQOS"],
        max_tres=parse_tres(r["MaxTRES"]), max_wall_min=wall_minutes(r["MaxWall"]),
        max_tres_per_node=parse_tres(r["MaxTRESPerNode"]),
    ) for r in _rows(text, ASSOC_FIELDS)]


def qos_from_sacctmgr(text: str) -> dict[str, Qos]:
    """``sacctmgr -n -P show qos format=<QOS_FIELDS>`` → QoS by name."""
    return {r["Name"]: Qos(name=r["Name"], max_wall_min=wall_minutes(r["MaxWall"]), max_tres=parse_tres(r["MaxTRES"]),
                           max_tres_per_node=parse_tres(r["MaxTRESPerNode"])) for r in _rows(text, QOS_FIELDS)}


def partition_access_from_scontrol(text: str) -> dict[str, PartitionAccess]:
    def names(value: str | None) -> tuple[str, ...] | None:
        if value is None or value in ("", "ALL", "(null)"):
            return None
        return tuple(v for v in value.split(",") if v)

    out = {}
    for line in filter(str.strip, text.splitlines()):
        f = parse_scontrol_line(line)
        name = f.get("PartitionName", "")
        out[name] = PartitionAccess(name=name, allow_accounts=names(f.get("AllowAccounts")),
                                    deny_accounts=names(f.get("DenyAccounts")) or (),
                                    allow_qos=names(f.get("AllowQos")), deny_qos=names(f.get("DenyQos")) or ())
    return out


def config_values(text: str, *keys: str) -> dict[str, str]:
    """``scontrol show config`` (``Key = value`` lines) → the wanted keys."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() in keys:
            out[key.strip()] = value.strip()
    return out


# --- the accounting view of one user -------------------------------------------------------------


@dataclass(frozen=True)
class Accounting:
    """What the accounting database says about one Slurm user on one cluster."""

    user: str
    cluster: str
    enforce: tuple[str, ...]  # AccountingStorageEnforce: associations, limits, qos, ...
    default_account: str | None
    associations: tuple[Association, ...]
    qos: Mapping[str, Qos]
    partitions: Mapping[str, PartitionAccess]

    @property
    def accounts(self) -> list[str]:
        """The accounts the user may charge, the default first."""
        names = sorted({a.account for a in self.associations})
        if self.default_account in names:
            names.remove(self.default_account)
            names.insert(0, self.default_account)
        return names

    def qos_of(self, account: str) -> list[str]:
        """The QoS the user may ask for under ``account``, the association's default first."""
        out: list[str] = []
        for a in self.associations:
            if a.account == account:
                for q in (a.default_qos, *a.qos):
                    if q and q not in out:
                        out.append(q)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"user": self.user, "cluster": self.cluster, "default_account": self.default_account,
                "accounts": [{"account": a, "qos": self.qos_of(a)} for a in self.accounts],
                "associations": [asdict(a) for a in self.associations]}

    def problems(self, partition: str, res: Resources) -> list[str]:
        """Why the cluster would refuse ``res`` on ``partition`` for this user; ``[]`` when it would not."""
        account = res.account or self.default_account
        if not self.associations or account is None:
            if "associations" in self.enforce:
                return [f"Slurm user {self.user} has no association on cluster {self.cluster} (the cluster enforces "
                        f"associations); an admin adds one with: sacctmgr add user {self.user} account=ACCOUNT"]
            return []
        assocs = [a for a in self.associations if a.account == account and a.partition in ("", partition)]
        if not assocs:
            if any(a.account == account for a in self.associations):
                return [f"user {self.user}'s association with account {account} does not cover partition {partition}"]
            return [f"user {self.user} has no association with account {account} on cluster {self.cluster} "
                    f"({self.user} may charge: {', '.join(self.accounts)})"]
        assoc = next((a for a in assocs if a.partition == partition), assocs[0])
        qos_name = res.qos or assoc.default_qos or ("normal" if "normal" in assoc.qos else (assoc.qos or ("",))[0])
        out: list[str] = []
        if res.qos and res.qos not in self.qos:
            out.append(f"QoS {res.qos} does not exist on cluster {self.cluster} (QoS: {', '.join(sorted(self.qos))})")
        elif res.qos and res.qos not in assoc.qos:
            out.append(f"account {account} does not allow QoS {res.qos} for user {self.user} "
                       f"(allowed: {', '.join(assoc.qos) or 'none'})")
        out += _partition_access(self.partitions.get(partition), account, qos_name)
        out += _limits(f"account {account}", assoc.max_wall_min, assoc.max_tres, assoc.max_tres_per_node, res)
        qos = self.qos.get(qos_name)
        if qos is not None:
            out += _limits(f"QoS {qos_name}", qos.max_wall_min, qos.max_tres, qos.max_tres_per_node, res)
        return out


def _partition_access(access: PartitionAccess | None, account: str, qos: str) -> list[str]:
    if access is None:
        return []
    out = []
    if access.allow_accounts is not None and account not in access.allow_accounts:
        out.append(f"partition {access.name} allows only accounts {', '.join(access.allow_accounts)} "
                   f"(AllowAccounts), not {account}")
    if account in access.deny_accounts:
        out.append(f"partition {access.name} denies account {account} (DenyAccounts)")
    if qos and access.allow_qos is not None and qos not in access.allow_qos:
        out.append(f"partition {access.name} allows only QoS {', '.join(access.allow_qos)} (AllowQos), not {qos}")
    if qos and qos in access.deny_qos:
        out.append(f"partition {access.name} denies QoS {qos} (DenyQos)")
    return out


def request_tres(res: Resources) -> tuple[dict[str, int], dict[str, int]]:
    """The request as TRES: ``(per job, per node)``."""
    procs = res.gpus_per_node if res.gpus_per_node > 0 else res.tasks_per_node
    node = {"node": 1, "cpu": procs * res.cpus_per_task, "gres/gpu": res.gpus_per_node, "mem": res.mem_mb or 0}
    job = {k: v * res.nodes for k, v in node.items()}
    return job, node


_TRES_WORDS = {"node": "node(s)", "cpu": "CPUs", "gres/gpu": "GPUs", "mem": "MB of memory"}


def _limits(who: str, wall: int | None, max_tres: Mapping[str, int], per_node: Mapping[str, int],
            res: Resources) -> list[str]:
    out = []
    if wall is not None and res.time_limit_min > wall:
        out.append(f"{who} allows at most {wall} min per job (MaxWall); the request asks {res.time_limit_min} min")
    job, node = request_tres(res)
    for limits, asked, what, name in ((max_tres, job, "per job", "MaxTRES"),
                                      (per_node, node, "per node", "MaxTRESPerNode")):
        for tres, limit in limits.items():
            if asked.get(tres, 0) > limit:
                words = _TRES_WORDS.get(tres, tres)
                out.append(f"{who} allows at most {limit} {words} {what} ({name} {tres}={limit}); "
                           f"the request needs {asked[tres]}")
    return out


def read_accounting(user: str, commands: SlurmCommands | None = None) -> Accounting | None:
    """``user``'s associations, the QoS and the partitions' access lists; ``None`` without accounting."""
    if not NAME_RE.fullmatch(user):
        raise SchedulerError(f"Slurm user name {user!r} is not a user name")
    cmds = commands or SlurmCommands.from_env()
    config = config_values(cmds.run(["scontrol", "show", "config"]).stdout,
                           "AccountingStorageType", "AccountingStorageEnforce", "ClusterName")
    if config.get("AccountingStorageType", "accounting_storage/none") == "accounting_storage/none":
        return None
    cluster = config.get("ClusterName", "")
    hint = "slurmdbd must be running (dev cluster: scripts/devcluster.sh start --with dbd)"
    assoc_text = cmds.run(["sacctmgr", "-n", "-P", "show", "assoc", "where", f"user={user}", f"cluster={cluster}",
                           f"format={','.join(ASSOC_FIELDS)}"], hint=hint).stdout
    qos_text = cmds.run(["sacctmgr", "-n", "-P", "show", "qos", f"format={','.join(QOS_FIELDS)}"], hint=hint).stdout
    user_text = cmds.run(["sacctmgr", "-n", "-P", "show", "user", user, "format=User,DefaultAccount"], hint=hint).stdout
    parts = cmds.run(["scontrol", "-o", "show", "partition"]).stdout
    try:
        associations = [a for a in associations_from_sacctmgr(assoc_text) if a.user == user]
        qos = qos_from_sacctmgr(qos_text)
    except ValueError as exc:
        raise SchedulerError(f"cannot read the accounting database's answer: {exc}") from exc
    default = next((r.split("|")[1] for r in user_text.splitlines() if r.split("|")[0] == user), "") or None
    enforce = tuple(e for e in config.get("AccountingStorageEnforce", "").split(",") if e and e != "none")
    return Accounting(user=user, cluster=cluster, enforce=enforce, default_account=default,
                      associations=tuple(associations), qos=qos, partitions=partition_access_from_scontrol(parts))


def record_words(doc: Mapping[str, Any]) -> str:
    """A finished job's accounting record (:class:`~schedulers.base.JobAccounting` as a dict) in one
    line: account, QoS, elapsed, CPU time, max RSS, exit code and state."""
    def num(key: str, fmt: str) -> str:
        value = doc.get(key)
        return fmt.format(value) if isinstance(value, int | float) and not isinstance(value, bool) else "-"

    elapsed = doc.get("elapsed_s")
    mins, secs = divmod(int(elapsed), 60) if isinstance(elapsed, int) else (None, None)
    code = f"signal {doc['signal']}" if doc.get("signal") is not None else num("exit_code", "{}")
    return (f"account {doc.get('account') or '-'}, QoS {doc.get('qos') or '-'}, elapsed "
            f"{f'{mins}:{secs:02d}' if mins is not None else '-'}, CPU time {num('cpu_time_s', '{:.1f} s')}, "
            f"max RSS {num('max_rss_mb', '{:.1f} MB')}, exit code {code} ({doc.get('state') or '?'})")
