"""The `help` meta-tool: the whole MCP surface explained in sections an agent can ask for one
at a time; its text is the contract an agent reads, so it lives apart from the code."""

from __future__ import annotations

from typing import Annotated

from mcp_types import CallToolResult
from pydantic import Field

from ...errors import UsageError
from .results import guarded, ok
from .state import ServerState

__all__ = ["HELP", "HELP_TOPICS", "help"]

HELP_TOPICS = ("overview", "item_types", "search", "load", "execute", "errors", "examples", "protocol")

Topic = Annotated[
    str | None,
    Field(
        description="One section: " + ", ".join(HELP_TOPICS) + ". Leave out for the whole guide.",
        json_schema_extra={"enum": [*HELP_TOPICS, None]},
    ),
]


async def help(state: ServerState, topic: Topic = None) -> CallToolResult:
    """Explain Kiwi's MCP surface: item types, the four tools, actions, query modifiers,
    parameters, errors and hints, with examples. Call it first if unsure."""
    del state  # the guide is the same for every server

    async def call() -> CallToolResult:
        if topic in (None, "", "all"):
            text = "\n\n".join(HELP[t] for t in HELP_TOPICS)
        elif topic in HELP:
            text = HELP[topic]
        else:
            raise UsageError(f"unknown help topic {topic!r}", hint="topics: " + ", ".join(HELP_TOPICS))
        return ok(text, {"topic": topic or "all", "topics": list(HELP_TOPICS), "text": text})

    return await guarded("help", call)


HELP: dict[str, str] = {
    "overview": """\
# Kiwi MCP server

Kiwi is a registry of versioned items. Four tools:
  search(query, item_type?, limit?)                 find items
  load(item_id, item_type?, version?, include_content?)  read one: manifest, chain, parameters, files
  execute(action, item_id?, parameters?, version?, manifest?, files?, confirm?)
                                                    run | dry_run | create | update | publish | delete
                                                    | import (an MCP server's tools)
  help(topic?)                                      this guide; topics: overview, item_types, search,
                                                    load, execute, errors, examples, protocol
Usual flow: search -> load (read the parameters) -> execute action=dry_run (optional) -> action=run.
Directives are also MCP prompts and knowledge entries MCP resources (topic protocol).""",
    "item_types": """\
## Item types (item_type)
  directive  instructions for an agent (tool_type directive); load gives their text, run renders them
  knowledge  reference text (tool_type knowledge); load or run returns the text; it has no executor
  tool       anything executable: script, api, runtime, primitive, mcp_server, mcp_tool, composite, thread
Every item has an executor chain: the item, then what runs it, down to a primitive
(e.g. hello_world -> bash_runtime -> subprocess). item_type filters search and checks load.""",
    "search": """\
## search
  query     words (typos tolerated) plus modifiers, which can be combined:
              type:T        a tool type (script, api, mcp_tool, ...) or tools on runtime T (type:python)
              category:C    a category or subcategory
              mcp:S         tools served by MCP server S (e.g. mcp:github)
              namespace:N   items of namespace N
              local:        only the local spaces' tools (.ai/tools, ~/.ai/tools), when this
                            server serves them (kiwi serve --local-spaces)
            a sentence works: any of its words match, and its meaning
            empty query: everything, most used first
  item_type directive | tool | knowledge (optional)
  limit     1-200, default 20
Returns items [{item_id, item_type, tool_type, name, description, latest_version, matched_by
(id | words | meaning | words+meaning), source (registry | local:project | local:user), ...}]
and search_mode (hybrid, or lexical: why the meaning was not used).""",
    "load": """\
## load
  item_id          tool_id, namespace/tool_id, or id@version
  item_type        optional; an error if the item is of another type
  version          optional; default the latest
  include_content  file text; default yes for directives/knowledge, no for tools
Returns {item_id, item_type, tool_type, version, content_hash, manifest, executor_chain,
parameters (JSON Schema: what execute's `parameters` must satisfy), files [{path, sha256,
size_bytes, is_entrypoint, content_text?}]}.""",
    "execute": """\
## execute
  action=run      item_id, parameters {..} per the item's schema, version?  -> {tool_id, version,
                  status (success|error|timeout), output, error, exit_code, duration_ms, executor_chain}
  action=dry_run  the same arguments; resolves the chain, checks parameters, validates files and
                  config, prepares the environment, but does not run -> executor_chain, validation
  action=create   manifest + files: publish a NEW item (refused if the id exists)
  action=update   manifest + files: publish a new version of an EXISTING item (bump `version`)
  action=publish  manifest + files: publish as given (new item or new version)
  action=yank     item_id=id@version: withdraw that version (still runnable when pinned, never latest);
                  parameters {reason}? optional
  action=deprecate  item_id=id@version: it still runs, but every run of it warns with
                  parameters {message}? (say what to use instead)
  action=delete   item_id: without confirm=true only shows what would be deleted; with it, removes
                  the item and all its versions (refused while other items execute on it)
  action=import   item_id of an mcp_server: start it (as its registry row says; nothing else is
                  taken from the request), call tools/list, and publish one mcp_tool per tool as
                  <server>.<tool> -> {server, ok, counts, tools [{tool_id, tool, status, version,
                  previous_version, changed, error}]}. status: created (1.0.0), unchanged (nothing
                  published), changed (a new minor version; `changed` names description and/or
                  inputSchema), missing (no longer listed; kept, not deleted). Re-import any time.
  action=approve  approval_id (or item_id): approve a pending call; parameters {reason}? optional.
  action=deny     the same, denying it. Never from the session that requested the call.
Approvals: a run of a tool under an approval policy does not run; it answers with an error of kind
approval_pending carrying approval {id, expires_at}. After a person runs `kiwi approve ID` (an
owner of the tool's namespace other than you, or an admin), call run again with the same
parameters and approval_id=ID: it runs once (dry_run needs no approval).
Who you are: every call acts as the server's caller (over HTTP, your bearer token's user), so you
see, run and change what that user may. Publish into your own namespace (manifest `namespace`);
`public` and writes that choose a command (runtimes, primitives, MCP servers, builtin or official
tools) are an admin's.
  action=open_context  item_id? (a directive, or none), context? (the parent), permissions? (narrower)
                  -> context {id, directive, permissions}. Running a directive opens one too (its
                  result has `context`). Pass context=ID to run/dry_run: a call outside its permissions
                  (tools, mcp server.tool, shell command, fs_read/fs_write against the path
                  parameters a tool or its MCP server declares, and net/fs_read/fs_write against
                  what a tool's sandbox reaches) is refused and audited; a child context can
                  only narrow its parent's permissions.
  action=rollback  item_id: a run that answered with `checkpoint` (a tool with config.mutates_state,
                  run in a directive's context), or that context (its first checkpoint): the working
                  tree is restored to the checkpoint taken before it. Only your own runs.
Manifest keys: tool_id, tool_type (script, api, directive, knowledge, ...), executor (e.g.
python_runtime, bash_runtime, node_runtime, directive_runtime, http_client; none for knowledge),
version (semver), name, description, category, tags, entrypoint (a file path), config,
parameters: [{name, type, required, description, default, enum}] or a JSON Schema, outputs.
Files: [{path, content_text, is_entrypoint}]. A script gets its parameters as one JSON object on
stdin and as KIWI_PARAM_<NAME> variables; JSON printed on stdout is its structured output.
Versions are immutable: publishing the same version with other content is refused.""",
    "errors": """\
## Errors
Every failure is a tool result with isError=true. Its text reads `error: <what went wrong>` and
`hint: <what to do>`; structured content has {error: {kind, message, hint}} (a failed run also
carries the run result). Kinds: usage / invalid_parameters (fix the arguments; load shows the
schema), not_found (search for the id), refused / integrity / config (the registry or runner will
not go on: read the message), registry_unavailable (the database is down), timeout, internal,
rate_limited (a rate limit is full: structured content has retry_after_s, seconds to wait),
approval_pending (nothing ran: structured content has approval {id, expires_at}; see execute),
approval_refused (the approval_id is pending, denied, expired, used, or for other parameters).
permission_denied: the call is outside its context's permissions; structured content names it.
Every run and dry_run is audited (public.audit_log), allowed or refused.
The server keeps answering after any error.""",
    "examples": """\
## Examples
  search(query="hello")                     search(query="type:python csv", limit=5)
  search(query="", item_type="knowledge")   search(query="mcp:github issues")
  load(item_id="hello_world")
  execute(action="dry_run", item_id="hello_world", parameters={"name": "Ada"})
  execute(action="run", item_id="hello_world", parameters={"name": "Ada"})
      -> structured {"status": "success", "output": {"greeting": "Hello, Ada!"}, ...}
  execute(action="create", manifest={"tool_id": "shout", "tool_type": "script",
          "executor": "bash_runtime", "version": "1.0.0", "description": "Upper-cases text",
          "entrypoint": "shout.sh", "parameters": [{"name": "text", "type": "string", "required": true}]},
          files=[{"path": "shout.sh", "is_entrypoint": true,
                  "content_text": "printf '%s' \\"$KIWI_PARAM_TEXT\\" | tr a-z A-Z"}])
  execute(action="delete", item_id="shout")                -> asks to confirm
  execute(action="delete", item_id="shout", confirm=true)  -> deleted
  execute(action="import", item_id="github")               -> github.create_issue, ... published
  execute(action="run", item_id="github.create_issue", parameters={...})""",
    "protocol": """\
## Beyond the four tools (MCP), all as the caller: you see what you may read
  prompts      each directive is a prompt named by its ref (ref@version pins one); prompts/get
               fills its declared inputs (required, enum, default) and embeds the knowledge it cites
  resources    each knowledge entry is kiwi://knowledge/<ref>@<version> (that version for ever) or
               kiwi://knowledge/<ref> (the latest); resources/list, read, templates/list
  completion   completion/complete: a prompt argument's enum (or examples, default); a template's {ref}
  logging      logging/setLevel (default info): while execute runs a tool, its stderr lines come as
               log notifications for that call; with a progressToken, as progress too
  changes      tools/, prompts/, resources/list_changed when the registry changes; resources/subscribe
               to an entry's URI for resources/updated
  tasks        (2025-11-25) execute(action="run") with `task` in the tools/call params answers at once
               with a task, run by a kiwi worker; tasks/get polls it (input_required: it waits for an
               approval), tasks/result waits for its answer, tasks/list, tasks/cancel. Any instance answers.
A server started as `kiwi serve --directive REF` offers that directive's tools as ordinary MCP tools
instead of these four (direct mode), each call checked as execute run in its context.""",
}
