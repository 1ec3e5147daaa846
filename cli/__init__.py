"""FlowTrain's command line: one module per command group, each with ``register(subparsers)``.

``spec`` (schema, templates, template, validate, summary, ops), ``codegen`` (generate,
support-table), ``runs`` (frameworks, select, run, runs, status, logs, cancel), ``equivalence``
(check-equivalence), ``export`` (export-onnx) and ``data`` (example-data). ``flowtrain.py`` wires them together (:data:`COMMAND_MODULES`).
"""

from __future__ import annotations

from cli import codegen, data, equivalence, export, runs, spec

# In the order `python -m flowtrain --help` lists them.
COMMAND_MODULES = (spec, codegen, runs, equivalence, export, data)
