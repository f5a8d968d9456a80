"""Starts a thread as a sub-thread of the run that calls this tool, through the kernel socket.

The runner listens on $KIWI_KERNEL for this run (config.kernel); POST /execute starts the
thread as the caller, in the caller's execution context narrowed by `permissions`, with
`budget` narrowing what the caller has left.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import sys

__version__ = "1.0.0"
SHOWN = ("thread", "session", "answer", "usage", "budget", "stopped", "budget_exhausted", "context")


class KernelConnection(http.client.HTTPConnection):
    """HTTP over the kernel's Unix socket."""

    def __init__(self, path: str) -> None:
        super().__init__("kiwi")
        self.socket_path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.socket_path)


def main() -> int:
    params = json.load(sys.stdin)
    ref, _, version = str(params["thread"]).partition("@")
    body: dict = {"item_id": ref, "parameters": params.get("inputs") or {}}
    if version:
        body["version"] = version
    if params.get("permissions"):
        body["permissions"] = params["permissions"]
    if params.get("budget"):
        body["limits"] = params["budget"]
    connection = KernelConnection(os.environ["KIWI_KERNEL"])
    connection.request("POST", "/execute", json.dumps(body), {"Content-Type": "application/json"})
    answer = json.loads(connection.getresponse().read())
    output = answer.get("output") if isinstance(answer.get("output"), dict) else {}
    shown = {"status": answer.get("status", "error"), **{k: output[k] for k in SHOWN if k in output}}
    if answer.get("is_error"):
        shown["error"] = answer.get("error")
    json.dump(shown, sys.stdout)
    print()
    return 1 if answer.get("is_error") else 0


if __name__ == "__main__":
    sys.exit(main())
