"""Format a byte count for people: parameters as JSON on stdin, result as JSON on stdout."""

import json
import sys

import humanize

params = json.load(sys.stdin)
size = humanize.naturalsize(params["bytes"], binary=bool(params.get("binary", False)))
print(json.dumps({"bytes": params["bytes"], "human": size}))
