"""The graphs the framework tests run in groups (tests/frameworks/conftest.py runs each group once
per session, one subprocess per framework): the op catalogue's cases and the zoo templates."""

from __future__ import annotations

from core import zoo
from core.equivalence import BATCH_ONE
from tests.op_cases import flatten_linear_spec, specs, tied_head_spec

TOLERANCE = 1e-4
ONE_OP = {**specs(), "flatten-linear": flatten_linear_spec(), "tied-head": tied_head_spec(),
          "tied-head-nobias": tied_head_spec(bias=False)}
ZOO = [e.name for e in zoo.entries()]
# Validated and counted only (tests/core/test_zoo.py), never run in CI: ViT-B/16's 86.6 M weights in three
# frameworks cost more than they tell beyond vit_cifar, which has every op it has.
COUNTED_ONLY = ("vit_b_16", "gpt2_small")  # GPT-2 small: 124 M weights, (1024, 50257) outputs per sample
ZOO_SMALL = [n for n in ZOO if n not in BATCH_ONE and n not in COUNTED_ONLY]  # small enough for a CPU at the
# sizes of small_zoo_spec
