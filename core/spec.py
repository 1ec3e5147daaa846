"""The pipeline spec: the one contract between the editor, the CLI, the mappers and the tests.

Three sections mirror the editor's three layers: ``data``, ``model`` and ``training``.
All models are strict (unknown keys are errors) and frozen. The spec carries
``schema_version``; documents written for an older version are upgraded by the
functions registered in :mod:`core.upgrades` before they are validated here, never
silently reinterpreted.

Only the *structure* and the *types* of the document are checked here. Whether an
op exists, whether its parameters are in range and whether shapes agree is the
validator's job (:mod:`core.validate`), which reports every problem at once.
"""

from __future__ import annotations

import hashlib
import json
import keyword
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints, model_validator

from core.frameworks import FRAMEWORKS

SCHEMA_VERSION = 2

# Ids end up in error messages, file names and (as comments) in generated code.
# Restricting their alphabet keeps all of those safe by construction; the
# streamlit-flow component's own ids (`st-flow-node_<nanoid>`) fit it.
ID_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$"
NodeId = Annotated[str, StringConstraints(pattern=ID_PATTERN)]
FreeText = Annotated[str, StringConstraints(max_length=2000)]

MAX_NODES = 20_000


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=False, validate_default=True, allow_inf_nan=False)


# --------------------------------------------------------------------------- data layer


class Resize(Strict):
    """Resize images to ``size`` = [height, width] (bilinear)."""

    op: Literal["resize"] = "resize"
    size: tuple[Annotated[int, Field(ge=1, le=8192)], Annotated[int, Field(ge=1, le=8192)]]


class ScaleToUnit(Strict):
    """Divide by ``max_value`` so values fall in [0, 1] (255 for 8-bit images, 16 for sklearn digits)."""

    op: Literal["scale"] = "scale"
    max_value: Annotated[float, Field(gt=0)] | None = None


class Normalize(Strict):
    """Per-channel ``(x - mean) / std``; mean/std computed from the training split when omitted."""

    op: Literal["normalize"] = "normalize"
    mean: list[float] | None = None
    std: list[Annotated[float, Field(gt=0)]] | None = None


class Standardize(Strict):
    """Tabular columns to zero mean, unit variance (statistics from the training split)."""

    op: Literal["standardize"] = "standardize"


class OneHot(Strict):
    """Expand the listed categorical feature columns into one-hot columns."""

    op: Literal["one_hot"] = "one_hot"
    columns: list[FreeText] = Field(default_factory=list)


class LabelEncode(Strict):
    """Map the target's distinct values (strings or numbers) to 0..K-1, sorted."""

    op: Literal["label_encode"] = "label_encode"


class Tokenize(Strict):
    """Split a text column into word ids (vocabulary from the training split), padded to ``max_length``."""

    op: Literal["tokenize"] = "tokenize"
    column: FreeText = "text"
    vocab_size: Annotated[int, Field(ge=4, le=1_000_000)] = 20_000
    max_length: Annotated[int, Field(ge=1, le=65_536)] = 128
    lowercase: bool = True


Preprocessing = Annotated[
    Resize | ScaleToUnit | Normalize | Standardize | OneHot | LabelEncode | Tokenize,
    Field(discriminator="op"),
]


class RandomCrop(Strict):
    op: Literal["random_crop"] = "random_crop"
    padding: Annotated[int, Field(ge=0, le=512)] = 4


class HorizontalFlip(Strict):
    op: Literal["horizontal_flip"] = "horizontal_flip"
    p: Annotated[float, Field(ge=0, le=1)] = 0.5


class Rotation(Strict):
    op: Literal["rotation"] = "rotation"
    degrees: Annotated[float, Field(ge=0, le=180)] = 15.0


class ColorJitter(Strict):
    op: Literal["color_jitter"] = "color_jitter"
    brightness: Annotated[float, Field(ge=0, le=1)] = 0.2
    contrast: Annotated[float, Field(ge=0, le=1)] = 0.2


class GaussianNoise(Strict):
    op: Literal["gaussian_noise"] = "gaussian_noise"
    std: Annotated[float, Field(ge=0, le=10)] = 0.05


Augmentation = Annotated[
    RandomCrop | HorizontalFlip | Rotation | ColorJitter | GaussianNoise,
    Field(discriminator="op"),
]

DataFormat = Literal["auto", "builtin", "csv", "parquet", "npz", "npy", "image_folder", "webdataset"]
# segmentation: one class index per pixel (a mask the image's height and width), docs/segmentation.md;
# language_modeling: next-token prediction over a token stream, docs/language-models.md
Task = Literal["classification", "regression", "segmentation", "language_modeling"]
Loading = Literal["auto", "memory", "stream"]


# a folder name inside the source, never a path: the source alone is pinned inside the user's data roots
MASK_FOLDER_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$"


class DataSpec(Strict):
    """Where the training data is and how it becomes batches."""

    source: Annotated[str, StringConstraints(min_length=1, max_length=4096)] = Field(
        "sklearn:digits",
        description="A built-in dataset ('sklearn:digits', 'sklearn:iris', 'sklearn:wine', "
        "'sklearn:breast_cancer') or a path under a configured data root.",
    )
    format: DataFormat = "auto"
    size: Annotated[int, Field(ge=0)] | None = Field(None, description="Number of samples (detected).")
    sample_shape: list[Annotated[int, Field(ge=1)]] | None = Field(
        None, description="Shape of one raw sample before preprocessing (detected)."
    )
    target: FreeText = Field("label", description="Target column (CSV/Parquet) or array key (NPZ).")
    task: Task = "classification"
    num_classes: Annotated[int, Field(ge=1, le=10_000_000)] | None = None
    # language_modeling: a token stream (.npy / .bin of token ids, or text files tokenized to bytes) read as
    # windows of block_size + 1 tokens: the model sees block_size ids and predicts the next id at each.
    block_size: Annotated[int, Field(ge=1, le=1_048_576)] | None = Field(
        None, description="language_modeling: tokens the model reads at once (its context length).")
    vocab_size: Annotated[int, Field(ge=1, le=10_000_000)] | None = Field(
        None, description="language_modeling: token ids are 0 … vocab_size − 1 (256 for byte-level text).")
    input_shape: list[Annotated[int, Field(ge=1)]] | None = Field(
        None, description="Shape of one sample as the model sees it (after preprocessing), no batch axis."
    )
    batch_size: Annotated[int, Field(ge=1, le=1_048_576)] = 64
    validation_split: Annotated[float, Field(ge=0.0, lt=1.0)] = 0.1
    test_split: Annotated[float, Field(ge=0.0, lt=1.0)] = 0.0
    shuffle: bool = True
    num_workers: Annotated[int, Field(ge=0, le=256)] = 2
    loading: Loading = Field(
        "auto",
        description="'memory': decode the whole source before the first step; 'stream': keep only the file "
        "list in memory and decode each batch in the loader's workers; 'auto': stream sources whose decoded "
        "samples would take more than 1 GiB.",
    )
    preprocessing: list[Preprocessing] = Field(default_factory=list)
    augmentation: list[Augmentation] = Field(default_factory=list)
    # -- segmentation (task: segmentation) ---------------------------------------------------------
    mask_folder: Annotated[str, StringConstraints(pattern=MASK_FOLDER_PATTERN)] = Field(
        "masks", description="Segmentation from an image folder: the folder beside 'images' inside the source "
        "that holds one PNG mask of class indices per image, with the image's stem.",
    )
    ignore_index: Annotated[int, Field(ge=0, le=65_535)] | None = Field(
        None, description="Segmentation: the mask value of pixels that count in neither loss nor metrics "
        "(often 255).",
    )

    @model_validator(mode="after")
    def _splits_leave_training_data(self) -> DataSpec:
        if self.validation_split + self.test_split >= 1.0:
            raise ValueError(
                f"validation_split + test_split = {self.validation_split + self.test_split:g} leaves no "
                "training data; make their sum smaller than 1"
            )
        return self


# --------------------------------------------------------------------------- graph layer


class Position(Strict):
    x: float = 0.0
    y: float = 0.0


class NodeSpec(Strict):
    """One layer of the network. ``params`` are checked against the op's declaration by the validator."""

    id: NodeId
    op: Annotated[str, StringConstraints(min_length=1, max_length=64)]
    params: dict[str, Any] = Field(default_factory=dict)
    label: FreeText | None = None
    position: Position | None = None


class EdgeSpec(Strict):
    """A tensor flowing from ``source`` to ``target``; ``port`` orders the inputs of Add/Concat."""

    source: NodeId
    target: NodeId
    port: Annotated[int, Field(ge=0, le=1024)] | None = None


# Block and block-parameter names become Python identifiers (class and argument names) in the
# generated programs, so their alphabet is an identifier's, and a Python keyword (None, class…) is refused.
BLOCK_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"


def _not_a_keyword(name: str) -> str:
    if keyword.iskeyword(name):
        raise ValueError(f"{name!r} is a Python keyword, and block and block-parameter names become names in "
                         f"the generated programs; choose another name (such as {name.lower()}_)")
    return name


BlockName = Annotated[str, StringConstraints(pattern=BLOCK_NAME_PATTERN), AfterValidator(_not_a_keyword)]
BlockParamType = Literal["int", "float", "bool", "str", "ints"]
MAX_BLOCKS = 1_000

_PARAM_TYPE_CHECKS: dict[str, Any] = {
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "bool": lambda v: isinstance(v, bool),
    "str": lambda v: isinstance(v, str) and len(v) <= 2000,
    "ints": lambda v: isinstance(v, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in v),
}


class BlockParam(Strict):
    """A parameter of a block: a use of the block sets it (or takes ``default``); inside the block a
    node's param value ``{"param": NAME}`` stands for it."""

    name: BlockName
    type: BlockParamType = "int"
    default: Any
    description: FreeText = ""

    @model_validator(mode="after")
    def _default_has_the_type(self) -> BlockParam:
        if not param_value_fits(self.type, self.default):
            raise ValueError(f"default {self.default!r} of block parameter {self.name!r} is not of type {self.type}")
        return self


def param_value_fits(kind: str, value: Any) -> bool:
    """Whether ``value`` is a value of a block parameter of type ``kind`` (``None`` never is)."""
    return bool(_PARAM_TYPE_CHECKS[kind](value))


class BlockSpec(Strict):
    """A named subgraph defined once and used as one node (``op`` = the block's name) many times.

    ``inputs`` are its ordered input ports (a use's incoming edges map to them by ``port`` order);
    edges inside the block may start at a port name. ``output`` is the node whose output the block
    returns. Node ids are local to the block. See docs/blocks.md.
    """

    name: BlockName
    description: FreeText = ""
    inputs: list[NodeId] = Field(default_factory=lambda: ["x"], min_length=1, max_length=64)
    params: list[BlockParam] = Field(default_factory=list, max_length=256)
    nodes: list[NodeSpec] = Field(default_factory=list, max_length=MAX_NODES)
    edges: list[EdgeSpec] = Field(default_factory=list, max_length=4 * MAX_NODES)
    output: NodeId

    def param(self, name: str) -> BlockParam:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)


class ModelSpec(Strict):
    nodes: list[NodeSpec] = Field(default_factory=list, max_length=MAX_NODES)
    edges: list[EdgeSpec] = Field(default_factory=list, max_length=4 * MAX_NODES)
    blocks: list[BlockSpec] = Field(default_factory=list, max_length=MAX_BLOCKS)

    def block(self, name: str) -> BlockSpec | None:
        """The block called ``name``, or None when ``name`` is not a block (an op, or unknown)."""
        for b in self.blocks:
            if b.name == name:
                return b
        return None


# --------------------------------------------------------------------------- training layer


SlurmName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.-]{1,64}$")]


class ResourcesSpec(Strict):
    """What the job asks of the cluster. ``account`` and ``qos`` are Slurm's (``--account``,
    ``--qos``); ``None`` leaves them to the user's defaults in the accounting database. Optional with
    defaults, so documents written before they existed stay schema version 1."""

    nodes: Annotated[int, Field(ge=1, le=4096)] = 1
    gpus_per_node: Annotated[int, Field(ge=0, le=64)] = 0
    cpus_per_task: Annotated[int, Field(ge=1, le=1024)] = 2
    mem_gb: Annotated[float, Field(gt=0, le=65_536)] | None = None
    time_limit_min: Annotated[int, Field(ge=1, le=525_600)] = 60
    partition: SlurmName | None = None
    account: SlurmName | None = None
    qos: SlurmName | None = None


class OptimizerSpec(Strict):
    """``weight_decay`` means the same in every framework: decoupled for AdamW, L2 for SGD/Adam."""

    name: Literal["sgd", "adam", "adamw"] = "adamw"
    lr: Annotated[float, Field(gt=0, le=10)] = 1e-3
    momentum: Annotated[float, Field(ge=0, lt=1)] = 0.9
    nesterov: bool = False
    weight_decay: Annotated[float, Field(ge=0, le=1)] = 0.0
    betas: tuple[Annotated[float, Field(ge=0, lt=1)], Annotated[float, Field(ge=0, lt=1)]] = (0.9, 0.999)
    eps: Annotated[float, Field(gt=0, le=1)] = 1e-8


class ScheduleSpec(Strict):
    name: Literal["constant", "step", "cosine", "warmup_cosine", "plateau"] = "constant"
    step_size: Annotated[int, Field(ge=1)] = 10
    gamma: Annotated[float, Field(gt=0, le=1)] = 0.1
    warmup_epochs: Annotated[int, Field(ge=0)] = 1
    min_lr: Annotated[float, Field(ge=0)] = 0.0
    patience: Annotated[int, Field(ge=0)] = 3
    factor: Annotated[float, Field(gt=0, lt=1)] = 0.5


class CheckpointSpec(Strict):
    every_steps: Annotated[int, Field(ge=1)] | None = 200
    every_epoch: bool = True
    keep: Annotated[int, Field(ge=1, le=1000)] = 2


class EarlyStoppingSpec(Strict):
    patience: Annotated[int, Field(ge=1)] | None = None
    monitor: Literal["val_loss", "val_accuracy"] = "val_loss"
    min_delta: Annotated[float, Field(ge=0)] = 0.0


Switch = Literal["auto", "on", "off"]


class PerformanceSpec(Strict):
    """Speed practices of the generated code; ``auto`` turns each on where it helps (GPU present, …)."""

    compile: Switch = "auto"
    channels_last: Switch = "auto"
    device_data: Switch = "auto"
    xla: Switch = "auto"


# "auto" or one of the frameworks (built from the one list, so a new framework needs no edit here).
FrameworkChoice = Literal[("auto", *FRAMEWORKS)]  # type: ignore[valid-type]


class TrainingSpec(Strict):
    framework: FrameworkChoice = "auto"
    resources: ResourcesSpec = Field(default_factory=ResourcesSpec)
    epochs: Annotated[int, Field(ge=1, le=100_000)] = 10
    samples_per_epoch: Annotated[int, Field(ge=1)] | None = None
    loss: Literal["cross_entropy", "mse", "mae", "bce_with_logits", "cross_entropy_dice"] = "cross_entropy"
    label_smoothing: Annotated[float, Field(ge=0, lt=1)] = 0.0
    optimizer: OptimizerSpec = Field(default_factory=OptimizerSpec)
    schedule: ScheduleSpec = Field(default_factory=ScheduleSpec)
    precision: Literal["auto", "fp32", "bf16"] = "auto"
    seed: Annotated[int, Field(ge=0, le=2**31 - 1)] = 0
    gradient_clip_norm: Annotated[float, Field(gt=0)] | None = None
    early_stopping: EarlyStoppingSpec = Field(default_factory=EarlyStoppingSpec)
    checkpoint: CheckpointSpec = Field(default_factory=CheckpointSpec)
    log_every_steps: Annotated[int, Field(ge=1)] = 50
    performance: PerformanceSpec = Field(default_factory=PerformanceSpec)
    # Added within schema version 1 (default None, so older documents read unchanged).
    init_weights: Annotated[str, StringConstraints(min_length=1, max_length=4096)] | None = Field(
        None, description="Canonical weights (.npz, keys '<node id>/<name>') a fresh run starts from, e.g. an "
        "imported ONNX model's: a path under your data roots, or next to the spec file.")
    # Added within schema version 2 (default None, so older documents read and hash unchanged).
    restarts: Annotated[int, Field(ge=0, le=100)] | None = Field(
        None, description="How often a failed run restarts from its newest checkpoint within its allocation "
        "(a rank that died: killed, out of memory, a lost node). Default: 2 on Slurm, 0 locally.")


# --------------------------------------------------------------------------- the document


class PipelineSpec(Strict):
    schema_version: Literal[2] = SCHEMA_VERSION
    name: Annotated[str, StringConstraints(min_length=1, max_length=200)] = "pipeline"
    description: FreeText = ""
    data: DataSpec = Field(default_factory=DataSpec)
    model: ModelSpec = Field(default_factory=ModelSpec)
    training: TrainingSpec = Field(default_factory=TrainingSpec)

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.model_dump(mode="json", exclude_none=False), indent=indent, ensure_ascii=False)

    def spec_hash(self) -> str:
        """A stable hash of the content (sorted keys, no whitespace); positions and labels excluded.

        A spec without blocks hashes exactly as its version-1 document did (no ``blocks`` key,
        ``schema_version`` 1): version 2 only added blocks, so the same pipeline keeps its hash and
        the runs registered before the upgrade still match it.
        """
        doc = self.model_dump(mode="json")
        nodes = list(doc["model"]["nodes"])
        for block in doc["model"]["blocks"]:
            nodes += block["nodes"]
        for node in nodes:
            node.pop("position", None)
            node.pop("label", None)
        if not doc["model"]["blocks"]:
            del doc["model"]["blocks"]
            doc["schema_version"] = 1
        resources = doc["training"]["resources"]
        for key in ("account", "qos"):  # added within version 1: unset hashes as before they existed
            if resources.get(key) is None:
                resources.pop(key, None)
        if doc["training"].get("init_weights") is None:  # added within version 1 too
            doc["training"].pop("init_weights", None)
        if doc["training"].get("restarts") is None:  # added within version 2: unset hashes as before
            doc["training"].pop("restarts", None)
        if doc["data"].get("loading") == "auto":  # added within version 1 too: its default hashes as before
            doc["data"].pop("loading", None)
        if doc["data"].get("mask_folder") == "masks":  # segmentation's fields, added within version 2: their
            doc["data"].pop("mask_folder", None)  # defaults hash as before they existed
        if doc["data"].get("ignore_index") is None:
            doc["data"].pop("ignore_index", None)
        for key in ("block_size", "vocab_size"):  # added within version 2 (language modelling): unset hashes as before
            if doc["data"].get(key) is None:
                doc["data"].pop(key, None)
        canonical = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(canonical.encode()).hexdigest()

    def node(self, node_id: str) -> NodeSpec:
        for n in self.model.nodes:
            if n.id == node_id:
                return n
        raise KeyError(node_id)


def json_schema() -> dict[str, Any]:
    """The JSON Schema of the current spec version (``python -m flowtrain schema``)."""
    schema = PipelineSpec.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = f"FlowTrain pipeline spec (schema_version {SCHEMA_VERSION})"
    return schema
