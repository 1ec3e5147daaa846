"""FlowTrain's command line: one module per command group, each with ``register(subparsers)``.

``spec`` (schema, templates, template, validate, summary, ops), ``codegen`` (generate,
support-table), ``runs`` (frameworks, select, run, runs, status, logs, cancel), ``sweeps`` (sweep,
sweeps), ``calibrate`` (calibrate, speeds), ``equivalence`` (check-equivalence), ``lockstep`` (check-training), ``export``
(export-onnx), ``onnx_import`` (import-onnx) and ``data`` (example-data). ``flowtrain.py`` wires them together
(:data:`COMMAND_MODULES`).
"""

from __future__ import annotations

from cli import calibrate, codegen, data, equivalence, export, lockstep, onnx_import, runs, spec, sweeps

# In the order `python -m flowtrain --help` lists them.
COMMAND_MODULES = (spec, codegen, runs, sweeps, calibrate, equivalence, lockstep, export, onnx_import, data)
