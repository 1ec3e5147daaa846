"""Graph checks and the shape-inference driver.

:func:`analyse` never raises on a bad spec: it returns every node it could infer and
every problem it found (the editor shows both live). :func:`validate` raises one
:class:`~core.errors.SpecError` listing all problems. Everything is linear in the size
of the graph: no recursion, no quadratic scans.
"""

from __future__ import annotations

import difflib
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Any

from core import datasets, segmentation
from core.block_expansion import Expansion, Origin, expansion
from core.errors import Problem, SpecError
from core.ops import REGISTRY, Op, ShapeError, Tensor
from core.ops.registry import ParamError
from core.spec import NodeSpec, PipelineSpec

MAX_TOTAL_PARAMS = 20_000_000_000  # 80 GB of float32 weights: beyond any single training job here
MAX_SAMPLE_ELEMENTS = 2**31 - 1  # one sample's activation must be indexable with int32
IMAGE_AUGMENTATIONS = ("random_crop", "horizontal_flip", "rotation", "color_jitter")


@dataclass(frozen=True)
class NodeInfo:
    id: str
    op: str
    params: dict[str, Any]
    inputs: tuple[str, ...]  # source node ids, in port order
    output: Tensor
    n_params: int
    macs: int


@dataclass
class Analysis:
    """What validation found. With blocks, ``nodes`` are the expanded graph's (ids like
    ``layer1_0__conv1``, see :mod:`core.block_expansion`), ``flat`` is that graph's spec, ``origins`` says
    which use and block each expanded node came from, and ``uses`` holds one summary per use
    (its output, and the parameters and MACs of all its layers)."""

    spec: PipelineSpec
    nodes: dict[str, NodeInfo] = field(default_factory=dict)  # inferred nodes, in topological order
    problems: list[Problem] = field(default_factory=list)
    input_id: str | None = None
    output_id: str | None = None
    flat: PipelineSpec | None = None
    origins: dict[str, Origin] = field(default_factory=dict)
    uses: dict[str, NodeInfo] = field(default_factory=dict)
    use_outputs: dict[str, str] = field(default_factory=dict)  # use -> flat id of the node giving its output
    use_ports: dict[str, list[str]] = field(default_factory=dict)  # use -> flat source of each input port

    @property
    def graph(self) -> PipelineSpec:
        """The spec whose nodes ``nodes`` describes: the expanded one when there are blocks."""
        return self.flat if self.flat is not None else self.spec

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def total_params(self) -> int:
        return sum(n.n_params for n in self.nodes.values())

    @property
    def total_macs(self) -> int:
        return sum(n.macs for n in self.nodes.values())

    def problems_for(self, node_id: str) -> list[Problem]:
        return [p for p in self.problems if p.node == node_id]

    def summary(self) -> dict[str, Any]:
        """Layers of the (expanded) graph, totals, and with blocks one row per use (``uses``)."""
        uses = {"uses": [{"id": u.id, "block": u.op, "output_shape": list(u.output.shape), "params": u.n_params,
                          "macs": u.macs} for u in self.uses.values()]} if self.uses else {}
        return {
            **uses,
            "name": self.spec.name,
            "layers": [
                {"id": n.id, "op": n.op, "output_shape": list(n.output.shape), "dtype": n.output.dtype,
                 "params": n.n_params, "macs": n.macs, "inputs": list(n.inputs)}
                for n in self.nodes.values()
            ],
            "params": self.total_params,
            "macs": self.total_macs,
        }


def validate(spec: PipelineSpec) -> Analysis:
    result = analyse(spec)
    if result.problems:
        raise SpecError(result.problems)
    return result


def analyse(spec: PipelineSpec) -> Analysis:
    if not spec.model.blocks:
        result = _Analyser(spec)
        result.run()
        result.out.problems.extend(tie_problems(result.out, result.preds))
        return result.out
    expanded = expansion(spec)
    result = _Analyser(expanded.spec, expanded.opaque)
    result.run()
    out = result.out
    out.spec, out.flat, out.origins = spec, expanded.spec, expanded.origins
    out.problems.extend(tie_problems(out, result.preds))
    out.problems[:] = expanded.problems + [_locate(p, expanded) for p in out.problems]
    out.uses = _use_summaries(spec, out, expanded.outputs)
    out.use_outputs = {u: f for u, f in expanded.outputs.items() if u in out.uses}
    out.use_ports = {u: expanded.ports[u] for u in out.use_outputs}
    return out


def tie_problems(out: Analysis, preds: dict[str, list[tuple[int | None, int, str]]]) -> list[Problem]:
    """A ``tie_to`` (a Linear sharing an Embedding's table) must name an Embedding that feeds the node,
    whose table ``(V, E)`` is the Linear's weight ``(out_features, in_features)``; both outside blocks
    (a block's class cannot reach a layer of the model around it)."""
    problems: list[Problem] = []
    for node in out.nodes.values():
        target = node.params.get("tie_to")
        if target is None:
            continue
        loc = f"model.nodes[{node.id}].params.tie_to"

        def refuse(message: str, node_id: str = node.id, loc: str = loc, target: str = target, **kw: Any) -> None:
            problems.append(Problem(loc, message, node=node_id, received=repr(target), **kw))

        if node.id in out.origins:
            refuse("a Linear inside a block cannot be tied", fix="move the tied head out of the block")
            continue
        info = out.nodes.get(target)
        if info is None or target in out.origins:
            refuse("names no node of the graph outside a block", expected="the id of an Embedding node",
                   fix="name the token Embedding whose table this head shares, or clear tie_to")
            continue
        if info.op != "Embedding":
            refuse(f"names a {info.op} node", expected="an Embedding node (its table is the shared weight)",
                   fix="name the token Embedding, or clear tie_to")
            continue
        vocab, width = info.params["num_embeddings"], info.params["embedding_dim"]
        fin = out.nodes[node.inputs[0]].output.shape[-1] if node.inputs else None
        if (node.params["out_features"], fin) != (vocab, width):
            refuse(f"{target}'s table is {vocab}×{width} but this Linear's weight is "
                   f"{node.params['out_features']}×{fin} (out_features × input width)",
                   expected=f"out_features {vocab} and an input of width {width}",
                   fix=f"set out_features to {vocab} and feed it {width} features, or tie another node")
            continue
        if not _upstream(node.id, target, preds):
            refuse(f"{target} does not feed this Linear", expected="an Embedding upstream of the head",
                   fix="tie the head to the Embedding its input comes from")
    return problems


def _upstream(node_id: str, target: str, preds: dict[str, list[tuple[int | None, int, str]]]) -> bool:
    """Whether ``target`` is an ancestor of ``node_id``."""
    seen, stack = {node_id}, [node_id]
    while stack:
        for _, _, src in preds.get(stack.pop(), ()):
            if src == target:
                return True
            if src not in seen:
                seen.add(src)
                stack.append(src)
    return False


def _locate(problem: Problem, expanded: Expansion) -> Problem:
    """A problem of the expanded graph, located where the user wrote it (use > block > inner node)."""
    location, node = problem.location, problem.node
    if location.startswith("model.edges["):
        index, _, rest = location[len("model.edges["):].partition("]")
        if index.isdigit() and int(index) < len(expanded.edge_locations):
            location = expanded.edge_locations[int(index)] + rest
    elif location.startswith("model.nodes["):
        flat_node, _, rest = location[len("model.nodes["):].partition("]")
        if flat_node in expanded.origins:
            location = expanded.origins[flat_node].location(rest)
    if node in expanded.origins:
        node = expanded.origins[node].use
    return replace(problem, location=location, node=node)


def _use_summaries(spec: PipelineSpec, out: Analysis, outputs: dict[str, str]) -> dict[str, NodeInfo]:
    """One NodeInfo per top-level use of a block whose output was inferred."""
    members: dict[str, list[NodeInfo]] = {}
    for node_id, info in out.nodes.items():
        origin = out.origins.get(node_id)
        if origin is not None:
            members.setdefault(origin.use, []).append(info)
    uses: dict[str, NodeInfo] = {}
    for node in spec.model.nodes:
        producer = out.nodes.get(outputs.get(node.id, ""))
        if producer is None:
            continue
        uses[node.id] = NodeInfo(node.id, node.op, dict(node.params), (), producer.output,
                                 sum(i.n_params for i in members[node.id]), sum(i.macs for i in members[node.id]))
    return uses


class _Analyser:
    def __init__(self, spec: PipelineSpec, opaque: set[str] | None = None) -> None:
        self.spec = spec
        self.opaque = opaque or set()  # uses of blocks whose problems are already reported
        self.out = Analysis(spec)
        self.problems = self.out.problems
        self.nodes: dict[str, NodeSpec] = {}
        self.ops: dict[str, type[Op]] = {}
        self.params: dict[str, dict[str, Any]] = {}
        self.preds: dict[str, list[tuple[int | None, int, str]]] = {}  # target -> (port, edge index, source)
        self.succs: dict[str, list[str]] = {}
        self.broken: set[str] = set()  # nodes whose own definition is wrong: do not infer them

    def problem(self, location: str, message: str, node: str | None = None, **kw: Any) -> None:
        self.problems.append(Problem(location, message, node=node, **kw))

    def run(self) -> None:
        self._nodes()
        self._edges()
        self._endpoints()
        order = self._topological_order()
        self._reachability()
        self._infer(order)
        self._totals()
        self._data_layer()

    # ------------------------------------------------------------------ nodes and parameters

    def _nodes(self) -> None:
        for node in self.spec.model.nodes:
            loc = f"model.nodes[{node.id}]"
            if node.id in self.nodes:
                self.problem(f"{loc}.id", "is used by more than one node", node.id,
                             fix="give every node its own id")
                continue
            self.nodes[node.id] = node
            self.preds[node.id] = []
            self.succs[node.id] = []
            if node.id in self.opaque:
                self.broken.add(node.id)
                continue
            if node.op not in REGISTRY:
                close = difflib.get_close_matches(node.op, REGISTRY.names(), n=3)
                hint = f"did you mean {' or '.join(close)}? " if close else ""
                self.problem(f"{loc}.op", "unknown op", node.id, received=repr(node.op)[:80],
                             expected="one of " + ", ".join(REGISTRY.names()),
                             fix=f"{hint}pick an op from the palette or `python -m flowtrain schema`")
                self.broken.add(node.id)
                continue
            op = REGISTRY.get(node.op)
            self.ops[node.id] = op
            self.params[node.id] = self._params(node, op, loc)

    def _params(self, node: NodeSpec, op: type[Op], loc: str) -> dict[str, Any]:
        declared = {p.name: p for p in op.params}
        values: dict[str, Any] = {}
        for key in node.params:
            if key not in declared:
                valid = ", ".join(declared) or "none"
                self.problem(f"{loc}.params.{_safe(key)}", f"{op.name} has no such parameter", node.id,
                             expected=f"one of: {valid}", fix="remove it or check its spelling")
                self.broken.add(node.id)
        for name, prm in declared.items():
            if name not in node.params:
                if prm.required:
                    self.problem(f"{loc}.params.{name}", "required parameter is missing", node.id,
                                 expected=prm.describe(), fix=f"set {name} in the node's form")
                    self.broken.add(node.id)
                    continue
                values[name] = prm.check(prm.default)  # normalised like a given value (1 → (1, 1))
                continue
            try:
                values[name] = prm.check(node.params[name])
            except ParamError as err:
                self.problem(f"{loc}.params.{name}", err.message, node.id,
                             received=_short(node.params[name]), expected=err.expected)
                self.broken.add(node.id)
        return values

    # ------------------------------------------------------------------ edges, arity, ports

    def _edges(self) -> None:
        seen: set[tuple[str, str]] = set()
        for i, edge in enumerate(self.spec.model.edges):
            loc = f"model.edges[{i}]"
            missing = [end for end in (edge.source, edge.target) if end not in self.nodes]
            if missing:
                self.problem(loc, "connects a node that does not exist", None,
                             received=f"{edge.source} → {edge.target}", expected="ids of existing nodes",
                             fix=f"remove the edge or add node(s) {', '.join(missing)}")
                continue
            if edge.source == edge.target:
                self.problem(loc, "connects a node to itself", edge.source, received=f"{edge.source} → {edge.target}",
                             fix="remove this edge: a layer cannot feed itself")
                self.broken.add(edge.source)
                continue
            if (edge.source, edge.target) in seen:
                self.problem(loc, "duplicates an earlier edge", edge.target,
                             received=f"{edge.source} → {edge.target}",
                             fix="remove it (to use a tensor twice in an Add, route it through separate layers)")
                continue
            seen.add((edge.source, edge.target))
            self.preds[edge.target].append((edge.port, i, edge.source))
            self.succs[edge.source].append(edge.target)

        for node_id, op in self.ops.items():
            n_in = len(self.preds[node_id])
            loc = f"model.nodes[{node_id}]"
            if n_in < op.min_inputs or (op.max_inputs is not None and n_in > op.max_inputs):
                if op.max_inputs == 0:
                    want = "no inputs"
                elif op.max_inputs == op.min_inputs:
                    want = f"exactly {op.min_inputs} input(s)"
                else:
                    want = f"{op.min_inputs} to {op.max_inputs} inputs"
                fix = ("connect the previous layer to it" if n_in < op.min_inputs else
                       "remove extra incoming edges, or join them first with an Add or Concat")
                self.problem(f"{loc}.inputs", f"{op.name} has {n_in} incoming edge(s)", node_id,
                             received=str(n_in), expected=want, fix=fix)
                self.broken.add(node_id)
            if op.ordered_inputs and n_in:
                ports = [port for port, _, _ in self.preds[node_id]]
                if any(p is not None for p in ports):
                    if sorted(p if p is not None else -1 for p in ports) != list(range(n_in)):
                        self.problem(f"{loc}.inputs", "input ports must number the inputs 0, 1, … once each",
                                     node_id, received=str(sorted(ports, key=lambda v: (v is None, v))),
                                     expected=str(list(range(n_in))), fix="set a distinct port on every incoming edge")
                        self.broken.add(node_id)
            # Port order first; edges without ports keep the order they were drawn in.
            self.preds[node_id].sort(key=lambda e: (e[0] if e[0] is not None else 1 << 30, e[1]))

    def _endpoints(self) -> None:
        inputs = [i for i, op in self.ops.items() if op.name == "Input"]
        outputs = [i for i, op in self.ops.items() if op.name == "Output"]
        if len(inputs) != 1:
            self.problem("model.nodes", f"the graph has {len(inputs)} Input nodes", inputs[1] if len(inputs) > 1 else None,
                         received=", ".join(inputs) or "none", expected="exactly one Input",
                         fix="add an Input node from the palette" if not inputs else "keep one Input node")
        if len(outputs) != 1:
            self.problem("model.nodes", f"the graph has {len(outputs)} Output nodes",
                         outputs[1] if len(outputs) > 1 else None, received=", ".join(outputs) or "none",
                         expected="exactly one Output", fix="add an Output node after the last layer"
                         if not outputs else "keep one Output node")
        self.out.input_id = inputs[0] if len(inputs) == 1 else None
        self.out.output_id = outputs[0] if len(outputs) == 1 else None
        for o in outputs:
            if self.succs[o]:
                self.problem(f"model.nodes[{o}]", "the Output node feeds other layers", o,
                             fix="the Output must be the last node: remove its outgoing edges")

    # ------------------------------------------------------------------ graph structure

    def _topological_order(self) -> list[str]:
        indeg = {n: len(self.preds[n]) for n in self.nodes}
        queue = deque(n for n, d in indeg.items() if d == 0)
        order: list[str] = []
        while queue:
            n = queue.popleft()
            order.append(n)
            for s in self.succs[n]:
                indeg[s] -= 1
                if indeg[s] == 0:
                    queue.append(s)
        if len(order) < len(self.nodes):
            left = {n for n, d in indeg.items() if d > 0}
            for cycle in _cycles(left, self.succs):
                shown = " → ".join(cycle[:12]) + (" → …" if len(cycle) > 12 else "") + f" → {cycle[0]}"
                for n in cycle:
                    self.problem(f"model.nodes[{n}]", "is part of a cycle", n, received=shown,
                                 expected="a graph without cycles (data flows one way, Input to Output)",
                                 fix="remove one of the edges of the cycle")
                self.broken.update(cycle)
        return order

    def _reachability(self) -> None:
        if self.out.input_id:
            reach = _reach(self.out.input_id, self.succs)
            for n in self.nodes:
                if n not in reach and self.nodes[n].op != "Input":
                    self.problem(f"model.nodes[{n}]", "is not connected to the Input", n,
                                 fix="connect it to the rest of the graph, or delete it")
        if self.out.output_id:
            preds = {n: [s for _, _, s in v] for n, v in self.preds.items()}
            back = _reach(self.out.output_id, preds)
            for n in self.nodes:
                if n not in back and self.nodes[n].op != "Output":
                    self.problem(f"model.nodes[{n}]", "does not lead to the Output: its result is never used", n,
                                 fix="connect it towards the Output, or delete it")

    # ------------------------------------------------------------------ shapes

    def _infer(self, order: list[str]) -> None:
        for node_id in order:
            if node_id in self.broken or node_id not in self.ops:
                continue
            op = self.ops[node_id]
            sources = tuple(s for _, _, s in self.preds[node_id])
            if any(s not in self.out.nodes for s in sources):
                continue  # an upstream problem is already reported
            ins = [self.out.nodes[s].output for s in sources]
            params = self.params[node_id]
            if op.name == "Input":
                params = self._input_params(node_id, params)
            loc = f"model.nodes[{node_id}]"
            if op.input_dtype is not None and any(t.dtype != op.input_dtype for t in ins):
                got = ", ".join(sorted({t.dtype for t in ins}))
                fix = ("set the Input's dtype to int64 and tokenize the data" if op.input_dtype == "int64"
                       else "token ids (int64) must pass through an Embedding first")
                self.problem(f"{loc}.inputs", f"{op.name} cannot take {got} values", node_id, received=got,
                             expected=op.input_dtype, fix=fix)
                continue
            try:
                out = op.infer(ins, params)
            except ShapeError as err:
                where = f"{loc}.params.{err.field}" if err.field else f"{loc}.inputs"
                shapes = ", ".join(str(t) for t in ins) or "none"
                self.problem(where, err.message, node_id, received=f"input shape {shapes}",
                             expected=err.expected, fix=err.fix)
                continue
            if out.numel > MAX_SAMPLE_ELEMENTS:
                self.problem(loc, f"its output {out} has {out.numel:,} elements per sample", node_id,
                             expected=f"at most {MAX_SAMPLE_ELEMENTS:,}", fix="reduce the layer sizes")
                continue
            n_params = op.count_params(ins, params, out)
            macs = op.count_macs(ins, params, out)
            self.out.nodes[node_id] = NodeInfo(node_id, op.name, params, sources, out, n_params, macs)

    def _input_params(self, node_id: str, params: dict[str, Any]) -> dict[str, Any]:
        data_in = datasets.model_input(self.spec.data)
        if params["shape"] is None and data_in is not None:
            return {**params, "shape": data_in[0], "dtype": data_in[1] if "dtype" not in
                    self.nodes[node_id].params else params["dtype"]}
        return params

    def _totals(self) -> None:
        total = self.out.total_params
        if total > MAX_TOTAL_PARAMS:
            biggest = max(self.out.nodes.values(), key=lambda n: n.n_params)
            self.problem("model", f"the model has {total:,} parameters", biggest.id,
                         expected=f"at most {MAX_TOTAL_PARAMS:,}",
                         fix=f"the largest layer is {biggest.id} ({biggest.op}, {biggest.n_params:,}); make it smaller")

    # ------------------------------------------------------------------ data layer

    def _data_layer(self) -> None:
        data = self.spec.data
        training = self.spec.training
        info = datasets.builtin(data.source)
        if data.source.startswith("sklearn:") and info is None:
            self.problem("data.source", "unknown built-in dataset", received=repr(data.source),
                         expected="one of " + ", ".join(datasets.BUILTIN),
                         fix="pick a built-in dataset or a file under a data root")
        if data.task == "classification" and training.loss in ("mse", "mae"):
            self.problem("training.loss", f"{training.loss} is a regression loss but data.task is classification",
                         received=training.loss, expected="cross_entropy or bce_with_logits",
                         fix="choose cross_entropy, or set data.task to regression")
        if data.task == "regression" and training.loss == "cross_entropy":
            self.problem("training.loss", "cross_entropy needs class labels but data.task is regression",
                         received=training.loss, expected="mse or mae", fix="choose mse/mae or set task to classification")
        if data.task == "language_modeling":
            self._language_modeling()
        in_id, out_id = self.out.input_id, self.out.output_id
        data_in = datasets.model_input(data)
        if in_id and in_id in self.out.nodes and data_in is not None:
            got = self.out.nodes[in_id].output
            if got.shape != tuple(data_in[0]):
                self.problem(f"model.nodes[{in_id}].params.shape", "does not match what the data layer yields",
                             in_id, received=str(Tensor(got.shape)),
                             expected=f"{Tensor(tuple(data_in[0]))} (from {data.source} after preprocessing)",
                             fix="set the Input's shape to the data's, or add a resize step in the data layer")
            elif got.dtype != data_in[1]:
                self.problem(f"model.nodes[{in_id}].params.dtype", "does not match what the data layer yields",
                             in_id, received=got.dtype, expected=data_in[1])
        if in_id and in_id in self.out.nodes:
            self._augmentation(self.out.nodes[in_id].output)
        self.problems += segmentation.spec_problems(  # its own module: the task's checks in one place
            self.spec, self.out.nodes[in_id].output if in_id in self.out.nodes else None,
            self.out.nodes[out_id].output if out_id in self.out.nodes else None, out_id)
        classes = datasets.num_classes(data)
        if out_id and out_id in self.out.nodes and data.task == "classification" and classes:
            got = self.out.nodes[out_id].output
            want = (1,) if training.loss == "bce_with_logits" and classes == 2 else (classes,)
            if got.shape != want and not (training.loss == "bce_with_logits" and got.shape == (classes,)):
                self.problem(f"model.nodes[{out_id}].inputs", "the prediction does not match the number of classes",
                             out_id, received=str(got), expected=f"{Tensor(want)} ({classes} classes in {data.source})",
                             fix=f"make the last Linear's out_features {want[0]}")


    def _language_modeling(self) -> None:
        """A language model reads block_size token ids and predicts, at each position, the next of vocab_size."""
        data, training = self.spec.data, self.spec.training
        for key, what in (("block_size", "the tokens the model reads at once, e.g. 256"),
                          ("vocab_size", "the number of token ids, e.g. 256 for byte-level text")):
            if getattr(data, key) is None:
                self.problem(f"data.{key}", "is needed for language_modeling", expected=what,
                             fix=f"set data.{key}")
        if training.loss != "cross_entropy":
            self.problem("training.loss", f"{training.loss} cannot train a language model", received=training.loss,
                         expected="cross_entropy (next-token cross-entropy over every position)",
                         fix="choose cross_entropy")
        if data.format not in ("auto", "npy"):
            self.problem("data.format", "a language model reads a token stream", received=data.format,
                         expected="auto or npy (a .npy or nanoGPT .bin array of token ids, or a text file read as bytes)",
                         fix="set data.format to auto")
        for i, step in enumerate(data.preprocessing):
            self.problem(f"data.preprocessing[{i}]", f"{step.op} does not apply to a token stream", received=step.op,
                         fix="remove the step: the token ids go to the model as they are")
        out_id = self.out.output_id
        if data.block_size and data.vocab_size and out_id and out_id in self.out.nodes:
            got, want = self.out.nodes[out_id].output, (data.block_size, data.vocab_size)
            if got.shape != want:
                self.problem(f"model.nodes[{out_id}].inputs", "a language model predicts vocab_size scores at every "
                             "position", out_id, received=str(got), expected=f"{Tensor(want)} (block_size × vocab_size)",
                             fix=f"end the model in a Linear with out_features {data.vocab_size} on the sequence")

    def _augmentation(self, sample: Tensor) -> None:
        """Image augmentations need image samples; noise needs float samples."""
        for i, aug in enumerate(self.spec.data.augmentation):
            if aug.op in IMAGE_AUGMENTATIONS and len(sample.shape) != 3:
                self.problem(f"data.augmentation[{i}]", f"{aug.op} needs images (C, H, W)",
                             received=f"samples of shape {sample}", fix=f"remove the {aug.op} step, or use image data")
            elif aug.op == "gaussian_noise" and sample.dtype != "float32":
                self.problem(f"data.augmentation[{i}]", "gaussian_noise needs float inputs",
                             received=f"{sample.dtype} token ids", fix="remove the gaussian_noise step")


def _reach(start: str, adj: dict[str, list[str]]) -> set[str]:
    seen = {start}
    stack = [start]
    while stack:
        for nxt in adj[stack.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return seen


def _cycles(nodes: set[str], succs: dict[str, list[str]]) -> list[list[str]]:
    """Strongly connected components with a cycle among ``nodes`` (iterative Tarjan), each in edge order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    result: list[list[str]] = []
    counter = 0
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter([s for s in succs[root] if s in nodes]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter([s for s in succs[w] if s in nodes])))
                    advanced = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    result.append(comp[::-1])
    return result


def _safe(key: str) -> str:
    return repr(key)[1:-1][:64]


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
