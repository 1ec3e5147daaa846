"""FlowTrain's command line: one module per command group, each with ``register(subparsers)``.

``spec`` (schema, templates, template, validate, summary, ops), ``codegen`` (generate,
support-table), ``runs`` (frameworks, select, run, runs, status, logs, cancel), ``sweeps`` (sweep,
sweeps), ``calibrate`` (calibrate, speeds), ``equivalence`` (check-equivalence), ``export``
(export-onnx), ``onnx_import`` (import-onnx), ``data`` (example-data) and ``predict`` (predict, models). ``flowtrain.py`` wires them together
(:data:`COMMAND_MODULES`).
"""

from __future__ import annotations

from cli import calibrate, codegen, data, equivalence, export, onnx_import, predict, runs, spec, sweeps

# In the order `python -m flowtrain --help` lists them.
COMMAND_MODULES = (spec, codegen, runs, sweeps, calibrate, equivalence, export, onnx_import, data, predict)
