"""Every process a tool starts runs confined: bubblewrap namespaces, an unprivileged uid, limits, egress.

profile.py    the profile (network, fs, limits) read from a plan's merged config
confine.py    one process's bubblewrap command line, and which limit ended it
cgroups.py    per-run memory and process limits (cgroup v1 or v2)
egress.py     the allow-listed egress proxy, carried into a sandbox over a unix socket
sandbox.py    the runner's Sandbox, which makes a Confinement per process
state.py      the runner's own sandbox files' directory: gone with the runner, even a killed one
"""

from .confine import ENV_DIR, TOOL_DIR, Confinement, Mount
from .profile import Limits, Profile, profile_from
from .sandbox import Sandbox, SandboxUnavailable

__all__ = [
    "ENV_DIR",
    "TOOL_DIR",
    "Confinement",
    "Limits",
    "Mount",
    "Profile",
    "Sandbox",
    "SandboxUnavailable",
    "profile_from",
]
