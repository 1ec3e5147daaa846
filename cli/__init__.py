"""FlowTrain's command line: one module per command group, each with ``register(subparsers)``.

``spec`` (schema, zoo, validate, summary, ops), ``codegen`` (generate,
support-table), ``runs`` (frameworks, select, run, runs, status, logs, cancel), ``sweeps`` (sweep,
sweeps), ``calibrate`` (calibrate, speeds), ``equivalence`` (check-equivalence), ``lockstep`` (check-training),
``export``
(export-onnx), ``onnx_import`` (import-onnx), ``data`` (example-data), ``predict`` (predict, models), ``sample`` (sample), ``tensorboard`` (tensorboard) and
``settings_schema`` (settings-schema). ``flowtrain.py`` wires them together
(:data:`COMMAND_MODULES`).
"""

from __future__ import annotations

from cli import (
    calibrate,
    codegen,
    data,
    equivalence,
    export,
    lockstep,
    onnx_import,
    predict,
    runs,
    sample,
    settings_schema,
    spec,
    sweeps,
    tensorboard,
)

# In the order `python -m flowtrain --help` lists them.
COMMAND_MODULES = (spec, codegen, runs, sweeps, calibrate, equivalence, lockstep, export, onnx_import, data, predict,
                   sample, tensorboard, settings_schema)
