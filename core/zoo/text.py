"""Text classifiers over a tokenized CSV column."""

from __future__ import annotations

from typing import Any

from core.spec import PipelineSpec
from core.zoo import zoo_model
from core.zoo.builder import GraphBuilder

VOCAB = 20_000
LENGTH = 200


def _text_data() -> dict[str, Any]:
    return {
        "source": "text/reviews.csv",
        "format": "csv",
        "target": "label",
        "num_classes": 2,
        "batch_size": 64,
        "validation_split": 0.1,
        "preprocessing": [
            {"op": "tokenize", "column": "text", "vocab_size": VOCAB, "max_length": LENGTH},
            {"op": "label_encode"},
        ],
    }


_TRAINING: dict[str, Any] = {
    "epochs": 5,
    "loss": "cross_entropy",
    "optimizer": {"name": "adamw", "lr": 1e-3, "weight_decay": 0.01},
    "schedule": {"name": "warmup_cosine", "warmup_epochs": 1},
    "gradient_clip_norm": 1.0,
    "resources": {"nodes": 1, "gpus_per_node": 1, "cpus_per_task": 4, "time_limit_min": 120},
}


@zoo_model("lstm_text_classifier", "Embedding → bidirectional LSTM → Linear, for a text CSV column")
def lstm_text_classifier() -> PipelineSpec:
    g = GraphBuilder()
    x = g.add("Input", id="tokens", dtype="int64")
    x = g.chain(
        x,
        ("Embedding", {"num_embeddings": VOCAB, "embedding_dim": 128}),
        ("LSTM", {"hidden_size": 128, "bidirectional": True}),
        ("Dropout", {"p": 0.3}),
        ("Linear", {"out_features": 2}),
    )
    g.add("Output", x, id="output")
    return g.spec("lstm_text_classifier", "Sentiment-style classifier with a bidirectional LSTM.",
                  _text_data(), _TRAINING)


@zoo_model("transformer_text_classifier", "Embedding + positions → 2 transformer encoder layers → mean → Linear")
def transformer_text_classifier() -> PipelineSpec:
    g = GraphBuilder()
    layer = _transformer_layer(g)
    x = g.add("Input", id="tokens", dtype="int64")
    x = g.chain(x, ("Embedding", {"num_embeddings": VOCAB, "embedding_dim": 128}), ("PositionalEmbedding", {}))
    for i in range(2):
        x = g.add(layer, x, id=f"encoder{i}", width=128, num_heads=4, dim_feedforward=256, dropout=0.1)
    x = g.chain(x, ("SequencePool", {"mode": "mean"}), ("Linear", {"out_features": 2}))
    g.add("Output", x, id="output")
    return g.spec("transformer_text_classifier", "Small transformer encoder classifier.", _text_data(), _TRAINING)


def _transformer_layer(g: GraphBuilder) -> str:
    """Define the block ``transformer_layer``: a post-norm transformer encoder layer written out
    (self-attention and a ReLU feed-forward, each with dropout, a residual Add and a LayerNorm), with
    the parameters and MACs of the TransformerEncoderLayer op."""
    body = GraphBuilder()
    drop = {"p": {"param": "dropout"}}
    attn = body.add("MultiheadAttention", "x", id="self_attn", num_heads={"param": "num_heads"},
                    dropout={"param": "dropout"})
    x = body.add("Add", "x", body.add("Dropout", attn, id="dropout1", **drop), id="residual1")
    x = body.add("LayerNorm", x, id="norm1")
    ff = body.add("Linear", x, id="linear1", out_features={"param": "dim_feedforward"})
    ff = body.add("Dropout", body.add("ReLU", ff, id="activation"), id="dropout_ff", **drop)
    ff = body.add("Dropout", body.add("Linear", ff, id="linear2", out_features={"param": "width"}), id="dropout2",
                  **drop)
    out = body.add("LayerNorm", body.add("Add", x, ff, id="residual2"), id="norm2")
    params = {"width": 128, "num_heads": 4, "dim_feedforward": 256, "dropout": 0.1}
    return g.block("transformer_layer", "Transformer encoder layer (post-norm), the TransformerEncoderLayer op "
                   "written out", params, body, out)
