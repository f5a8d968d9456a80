"""Tests of the sandbox: bubblewrap confinement and the egress proxy."""
