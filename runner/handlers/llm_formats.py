"""The two wire formats a thread speaks: request building and response parsing only.

    anthropic_messages   POST /v1/messages        system + messages, tools [{name, description,
                                                   input_schema}]; replies content blocks
                                                   (text, tool_use), usage.input/output_tokens
    openai_chat          POST /chat/completions    messages (system first), tools [{type: function,
                                                   function: {name, description, parameters}}];
                                                   replies choices[0].message (content, tool_calls),
                                                   usage.prompt/completion_tokens

Each format keeps the conversation in its own shape (`messages`); the thread sees only
`Turn`s (text, tool calls, tokens) and hands back tool results as `Result`s.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["FORMATS", "Call", "Format", "Result", "Tool", "Turn", "format_named"]


@dataclass(frozen=True)
class Tool:
    name: str  # as the provider sees it (^[A-Za-z0-9_-]{1,64}$)
    description: str
    schema: dict[str, Any]


@dataclass(frozen=True)
class Call:
    id: str
    name: str
    arguments: dict[str, Any]
    bad_arguments: str | None = None  # the model's arguments were not a JSON object


@dataclass
class Turn:
    text: str
    calls: list[Call] = field(default_factory=list)
    tokens: int = 0
    stop_reason: str | None = None
    input_tokens: int = 0  # as the provider's usage splits them: what each is priced at
    output_tokens: int = 0


@dataclass(frozen=True)
class Result:
    call: Call
    text: str
    is_error: bool


class Format(Protocol):
    def request(
        self, model: str, system: str, messages: list[dict[str, Any]], tools: list[Tool], max_tokens: int
    ) -> dict[str, Any]: ...

    def user(self, text: str) -> dict[str, Any]: ...

    def parse(self, reply: dict[str, Any]) -> tuple[Turn, dict[str, Any]]:
        """The turn, and the assistant message to append to the conversation."""
        ...

    def results(self, results: list[Result]) -> list[dict[str, Any]]: ...


class AnthropicMessages:
    def request(
        self, model: str, system: str, messages: list[dict[str, Any]], tools: list[Tool], max_tokens: int
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "system": system, "messages": messages}
        if tools:
            body["tools"] = [{"name": t.name, "description": t.description, "input_schema": t.schema} for t in tools]
        return body

    def user(self, text: str) -> dict[str, Any]:
        return {"role": "user", "content": text}

    def parse(self, reply: dict[str, Any]) -> tuple[Turn, dict[str, Any]]:
        blocks = reply.get("content") or []
        text = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
        calls = [
            Call(id=str(b.get("id")), name=str(b.get("name")), arguments=b.get("input") or {})
            for b in blocks
            if b.get("type") == "tool_use"
        ]
        usage = reply.get("usage") or {}
        read, wrote = int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0)
        turn = Turn(text, calls, read + wrote, reply.get("stop_reason"), read, wrote)
        return turn, {"role": "assistant", "content": blocks}

    def results(self, results: list[Result]) -> list[dict[str, Any]]:
        content = [
            {"type": "tool_result", "tool_use_id": r.call.id, "content": r.text, "is_error": r.is_error}
            for r in results
        ]
        return [{"role": "user", "content": content}]


class OpenAIChat:
    def request(
        self, model: str, system: str, messages: list[dict[str, Any]], tools: list[Tool], max_tokens: int
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": model,
            "max_tokens": max_tokens,
            "messages": [{"role": "system", "content": system}, *messages],
        }
        if tools:
            body["tools"] = [
                {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.schema}}
                for t in tools
            ]
        return body

    def user(self, text: str) -> dict[str, Any]:
        return {"role": "user", "content": text}

    def parse(self, reply: dict[str, Any]) -> tuple[Turn, dict[str, Any]]:
        choice = (reply.get("choices") or [{}])[0]
        message = choice.get("message") or {}
        calls = []
        for c in message.get("tool_calls") or []:
            fn = c.get("function") or {}
            raw = fn.get("arguments") or "{}"
            bad: str | None
            try:
                args = json.loads(raw) if isinstance(raw, str) else raw
            except json.JSONDecodeError as e:
                args, bad = {}, f"arguments are not JSON: {e}"
            else:
                bad = None if isinstance(args, dict) else "arguments are not a JSON object"
                args = args if isinstance(args, dict) else {}
            calls.append(Call(id=str(c.get("id")), name=str(fn.get("name")), arguments=args, bad_arguments=bad))
        usage = reply.get("usage") or {}
        read, wrote = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
        tokens = int(usage.get("total_tokens") or 0) or read + wrote
        assistant = {"role": "assistant", "content": message.get("content")}
        if message.get("tool_calls"):
            assistant["tool_calls"] = message["tool_calls"]
        turn = Turn(message.get("content") or "", calls, tokens, choice.get("finish_reason"), read, wrote)
        return turn, assistant

    def results(self, results: list[Result]) -> list[dict[str, Any]]:
        return [{"role": "tool", "tool_call_id": r.call.id, "content": r.text} for r in results]


FORMATS: dict[str, Format] = {"anthropic_messages": AnthropicMessages(), "openai_chat": OpenAIChat()}


def format_named(name: str) -> Format | None:
    return FORMATS.get(name)
