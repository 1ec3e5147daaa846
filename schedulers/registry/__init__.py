"""The run registry: records runs and sweeps in SQLite and answers questions about them.

``db`` (schema and migrations), ``records`` (the rows as dataclasses, the registry's errors),
``runs`` (:class:`~schedulers.registry.runs.RunRegistry`), ``sweeps`` (the sweep table) and
``files`` (a run directory's files, read without following links).
"""
