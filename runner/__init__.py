"""Kiwi runner: turns a tool reference into a result through one RPC and two primitives."""

__version__ = "0.1.0"
