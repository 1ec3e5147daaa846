"""Runs generated Keras ``model.py`` files on given weights and inputs (one TensorFlow process for many cases).

    python tests/mapping/keras_model_worker.py CASES.json

CASES.json lists ``{"dir", "weights", "input", "output", "roundtrip"}``: ``dir`` holds a generated
``model.py``; the worker builds the model, loads the canonical weights, writes
``forward_numpy(input)`` to ``output`` and ``canonical_weights(model)`` to ``roundtrip``.
"""

from __future__ import annotations

import importlib
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402


def main(cases_path: str) -> None:
    cases = json.loads(open(cases_path, encoding="utf-8").read())
    for case in cases:
        sys.path.insert(0, case["dir"])
        sys.modules.pop("model", None)
        module = importlib.import_module("model")
        keras.utils.set_random_seed(0)
        model = module.build_model()
        arrays = dict(np.load(case["weights"]))
        module.load_canonical_weights(model, arrays)
        np.save(case["output"], module.forward_numpy(model, np.load(case["input"])))
        np.savez(case["roundtrip"], **module.canonical_weights(model))
        sys.path.remove(case["dir"])
        keras.backend.clear_session()


if __name__ == "__main__":
    main(sys.argv[1])
