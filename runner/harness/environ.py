"""Which of the runner's environment variables a plan may read.

A `${VAR}` in a tool's config, or a name in its env_passthrough, reads the runner's
environment: the server's secrets live there. The registry says, per plan, which variables
that may be (the plan's `allowed_variables`: names, or prefixes written `PREFIX_*`): those
its admin-published elements use, and those an admin granted to the tool's namespace. Every
other variable is simply absent for that plan: expanding it fails as for an unset variable,
and passthrough skips it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

# A plan from a registry that does not say (an older schema, an in-memory test registry) reads
# only what every program needs and holds nothing secret.
BASIC = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "SSL_CERT_FILE", "SSL_CERT_DIR")


def allowed_environ(environ: Mapping[str, str], allowed: Iterable[str] | None) -> dict[str, str]:
    """The variables of `environ` that `allowed` names (exactly, or by a `PREFIX_*`)."""
    patterns = tuple(BASIC if allowed is None else allowed)
    names = {p for p in patterns if not p.endswith("*")}
    prefixes = tuple(p[:-1] for p in patterns if p.endswith("*"))
    return {k: v for k, v in environ.items() if k in names or (prefixes and k.startswith(prefixes))}
