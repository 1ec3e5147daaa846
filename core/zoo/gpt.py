"""Decoder-only language models (GPT-2, Radford et al. 2019): token and learned position embeddings,
pre-norm causal transformer layers with the tanh GELU, a final LayerNorm and a head tied to the token
embedding. ``gpt2_small`` is GPT-2 small layer for layer (HuggingFace ``gpt2``: 124,439,808 parameters with
the head tied); ``gpt_mini`` is a byte-level model small enough to train on these machines' CPUs."""

from __future__ import annotations

from typing import Any

from core.spec import PipelineSpec
from core.zoo import zoo_model
from core.zoo.builder import GraphBuilder

_GPT_TRAINING: dict[str, Any] = {  # nanoGPT's GPT-2 recipe, per epoch of windows
    "epochs": 1,
    "loss": "cross_entropy",
    "optimizer": {"name": "adamw", "lr": 6e-4, "weight_decay": 0.1},
    "schedule": {"name": "warmup_cosine", "warmup_epochs": 0},
    "gradient_clip_norm": 1.0,
    "precision": "auto",
    "resources": {"nodes": 2, "gpus_per_node": 4, "cpus_per_task": 8, "time_limit_min": 1440, "partition": "gpu"},
    "checkpoint": {"every_steps": 1000},
}


def _gpt(g: GraphBuilder, vocab: int, width: int, depth: int, heads: int, dropout: float) -> str:
    """Input → Embedding wte → PositionalEmbedding wpe → depth pre-norm causal tanh-GELU layers →
    LayerNorm ln_f → Linear lm_head tied to wte (no bias)."""
    x = g.add("Input", id="tokens", dtype="int64")
    x = g.add("Embedding", x, id="wte", num_embeddings=vocab, embedding_dim=width, init_std=0.02)
    x = g.add("PositionalEmbedding", x, id="wpe")
    if dropout:
        x = g.add("Dropout", x, id="drop", p=dropout)
    for i in range(depth):
        x = g.add("TransformerEncoderLayer", x, id=f"h{i}", num_heads=heads, dim_feedforward=4 * width,
                  dropout=dropout, activation="gelu_tanh", norm_first=True, causal=True)
    x = g.add("LayerNorm", x, id="ln_f")
    return g.add("Linear", x, id="lm_head", out_features=vocab, bias=False, tie_to="wte")


def _lm_data(source: str, block_size: int, vocab_size: int, batch_size: int) -> dict[str, Any]:
    return {"source": source, "task": "language_modeling", "block_size": block_size, "vocab_size": vocab_size,
            "batch_size": batch_size, "validation_split": 0.1}


@zoo_model("gpt2_small", "GPT-2 small (124,439,808 parameters, head tied to the token embedding), 1024 tokens")
def gpt2_small() -> PipelineSpec:
    g = GraphBuilder()
    g.add("Output", _gpt(g, vocab=50257, width=768, depth=12, heads=12, dropout=0.1), id="output")
    return g.spec("gpt2_small", "GPT-2 small (Radford et al. 2019), HuggingFace gpt2's layout, on a nanoGPT-style "
                  "token file (uint16 GPT-2 BPE ids).", _lm_data("openwebtext/train.bin", 1024, 50257, 12),
                  _GPT_TRAINING)


@zoo_model("gpt_mini", "a byte-level GPT (3 layers of width 128, 64 tokens) that trains on a CPU in minutes")
def gpt_mini() -> PipelineSpec:
    g = GraphBuilder()
    g.add("Output", _gpt(g, vocab=256, width=128, depth=3, heads=4, dropout=0.0), id="output")
    training = {**_GPT_TRAINING, "epochs": 5, "optimizer": {"name": "adamw", "lr": 1e-3, "weight_decay": 0.1},
                "resources": {"nodes": 1, "gpus_per_node": 0, "cpus_per_task": 4, "time_limit_min": 60},
                "checkpoint": {"every_steps": None}, "precision": "fp32"}
    return g.spec("gpt_mini", "A small GPT reading text byte by byte (vocabulary 256): no tokenizer needed.",
                  _lm_data("text/corpus.txt", 64, 256, 32), training)
