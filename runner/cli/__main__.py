"""`python -m runner.cli`."""

from .warm import entrypoint

entrypoint()
