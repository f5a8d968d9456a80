"""`python -m runner.cli`."""

from .main import entrypoint

entrypoint()
