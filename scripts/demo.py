"""Show the registry at work from Python: a chain, a merged execution plan, a search.

Until the runner lands this is what `make demo` runs; every figure comes from the SQL
functions a client would call.
"""

from __future__ import annotations

import json
import os

import psycopg

URL = os.environ.get("KIWI_DATABASE_URL", "postgresql://postgres:postgres@127.0.0.1:54322/postgres")


def heading(text: str) -> None:
    print(f"\n== {text}")


def main() -> None:
    with psycopg.connect(URL, autocommit=True) as conn:
        heading("select * from resolve_executor_chain('format_bytes')")
        for depth, tool_id, tool_type, executor, version, content_hash in conn.execute(
            "select depth, tool_id, tool_type, executor_id, version, content_hash"
            " from resolve_executor_chain('format_bytes')"
        ):
            print(f"  {depth}  {tool_id:<16} {tool_type:<10} -> {executor or '-':<16} {version}  {content_hash[:12]}")

        heading("select resolve_execution_plan('format_bytes')  (config merged in SQL)")
        plan = conn.execute("select resolve_execution_plan('format_bytes')").fetchone()[0]
        print("  chain:     ", " -> ".join(link["tool_id"] for link in plan["chain"]))
        print("  primitive: ", plan["primitive"])
        print("  config:")
        for key, value in plan["config"].items():
            text = json.dumps(value)
            print(f"    {key:<17} {text if len(text) <= 90 else text[:87] + '...'}")
        print("  parameters:", json.dumps(plan["parameters"]))
        print(
            "  files:     ",
            ", ".join(f"{f['path']} ({f['size_bytes']} B, sha256 {f['sha256'][:12]})" for f in plan["files"]),
        )

        heading("select * from resolve_executor_chains_batch(array['hello_world', 'no_such_tool', 'http_echo'])")
        for requested, depth, tool_id, error in conn.execute(
            "select requested_tool_id, depth, tool_id, error from "
            "resolve_executor_chains_batch(array['hello_world', 'no_such_tool', 'http_echo'])"
        ):
            print(f"  {requested:<14} {depth if depth is not None else '-'}  {tool_id or ''}{error or ''}")

        for query in ("helo wrld", "type:python", "mcp server category:mcp", "bytes"):
            heading(f"select * from search_tools('{query}')")
            rows = conn.execute(
                "select tool_id, tool_type, rank, description from search_tools(%s, p_limit => 5)",
                (query,),
            ).fetchall()
            for tool_id, tool_type, rank, description in rows:
                print(f"  {rank:6.2f}  {tool_id:<20} {tool_type:<10} {description[:60]}")
            if not rows:
                print("  (nothing)")

        heading("select tool_id, tool_type, latest_version, executor_chain from tool_catalog")
        for tool_id, tool_type, version, chain in conn.execute(
            "select tool_id, tool_type, latest_version, executor_chain from tool_catalog"
        ):
            print(f"  {tool_id:<20} {tool_type:<10} {version:<7} {chain}")


if __name__ == "__main__":
    main()
