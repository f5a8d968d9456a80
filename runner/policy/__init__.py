"""Policy: whether a call may go on, decided in one place for every entry point.

`Gate` (gate.py) admits or refuses a run: the execution context's permissions
(permissions.py), the rate limits and approvals (one database round trip), and an audit
row for every call. Refusals are `Denied` errors that `kiwi run`, Kiwi's MCP server and
threads each render in their own way.
"""

from .gate import APPROVE_HINT, Admission, Call, Denied, Gate

__all__ = ["APPROVE_HINT", "Admission", "Call", "Denied", "Gate"]
