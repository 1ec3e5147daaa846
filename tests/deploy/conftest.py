"""Fixtures for the deployment tests: the real dev Slurm cluster (see tests/slurm_fixture.py)."""

from tests.slurm_fixture import slurm_cluster  # noqa: F401  (re-exported as a fixture)
