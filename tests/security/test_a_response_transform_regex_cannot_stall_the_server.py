"""Finding: an HTTP tool's `response_transform` is a tenant's JSONPath, and python-jsonpath
matched its `=~ /re/`, `match()` and `search()` with Python's backtracking `re` on the
server's event loop: `=~ /(a+)+$/` over forty almost-matching characters would take hours.
They now run on the linear engine every tenant pattern uses
(runner/primitives/linear_jsonpath.py); a pattern that needs backtracking matches nothing.

Today's code would hang for hours, so the requests run in a child process under a deadline
(subprocess.TimeoutExpired fails the test); no timing is asserted.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT

CHILD = r"""
import asyncio, json, sys
from runner import Invocation, Plan
from runner.primitives.http_client import HttpClientPrimitive
from tests.primitives.http_server import serve

ALMOST = "a" * 40 + "!"
TRANSFORMS = sys.argv[1:]


async def main(base):
    primitive = HttpClientPrimitive()
    answers = {}
    for transform in TRANSFORMS:
        plan = Plan(tool_id="example", version="1.0.0", tool_type="api", content_hash="0" * 64,
                    primitive="http_client", executor_id="http_client", chain=[], parameters=None,
                    config={"method": "POST", "url": base + "/echo", "response_transform": transform})
        params = {"items": [{"name": ALMOST}, {"name": "aaa"}, {"name": "ABC"}]}
        outcome = await primitive.run(Invocation(plan=plan, params=params, environ={}))
        answers[transform] = [outcome.status, outcome.output if outcome.status == "success" else None]
    await primitive.aclose()
    print(json.dumps(answers))


with serve() as base:
    asyncio.run(main(base))
"""


@pytest.mark.slow
def test_regular_expressions_in_a_response_transform_match_in_linear_time() -> None:
    transforms = {
        "$.body.items[?@.name =~ /(a+)+$/].name": ["success", "aaa"],
        "$.body.items[?match(@.name, '(a+)+')].name": ["success", "aaa"],
        "$.body.items[?search(@.name, '(a|aa)+!')].name": ["success", "a" * 40 + "!"],
        "$.body.items[?@.name =~ /abc/i].name": ["success", "ABC"],
        # lookaround needs backtracking: the pattern matches nothing, as an invalid one would
        "$.body.items[?match(@.name, 'a(?=a)a+')].name": ["error", None],
    }
    done = subprocess.run(
        [sys.executable, "-c", CHILD, *transforms],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == transforms
