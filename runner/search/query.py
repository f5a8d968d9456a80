"""A search query as Kiwi reads it: words plus modifiers, parsed once for what happens
before and beside the registry's search.

The registry parses its own modifiers (public.search_tools: type:, category:, mcp:,
namespace:); this module reads them the same way for the two things done outside SQL:
which words are embedded (the words alone, never the modifiers) and how the local spaces
are filtered. One modifier is Kiwi's own and never reaches the registry:

    local:          only the local spaces' tools (.ai/tools, ~/.ai/tools); the registry is not asked
    local:project   only the project space's
    local:user      only the user space's
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.refs import normalize_ref
from ..errors import UsageError

LOCAL_MODIFIER = "local:"
ANY_SPACE = "any"
SPACES = ("project", "user")  # as runner/registry/spaces.py names them


@dataclass(frozen=True)
class Query:
    """One query, its modifiers read out. `registry_query` is what search_tools is sent (the
    query without `local:`); `text` is the words alone, what is matched and embedded."""

    registry_query: str
    text: str
    tool_type: str | None = None
    category: str | None = None
    mcp: str | None = None
    namespace: str | None = None
    local: str | None = None  # None: no local: modifier; ANY_SPACE, "project" or "user"

    @property
    def local_only(self) -> bool:
        return self.local is not None

    def wants_space(self, space: str) -> bool:
        return self.local in (None, ANY_SPACE, space)


def parse(query: str, *, tool_type: str | None = None, category: str | None = None) -> Query:
    """Read `query` as search_tools does: a word `type:T`, `category:C`, `mcp:S` or
    `namespace:N` (any case, a value after the colon) is a modifier and wins over the
    option of the same name; every other word is text. `local:[project|user]` is read here."""
    kept: list[str] = []
    words: list[str] = []
    found: dict[str, str | None] = {
        "tool_type": (tool_type or "").strip() or None,
        "category": (category or "").strip().lower() or None,
        "mcp": None,
        "namespace": None,
    }
    local: str | None = None
    for word in query.split():
        lower = word.lower()
        if lower.startswith(LOCAL_MODIFIER):
            local = _local_space(lower[len(LOCAL_MODIFIER) :])
            continue
        kept.append(word)
        key, value = _modifier(word)
        if key is None:
            words.append(word)
        else:
            found[key] = value
    return Query(registry_query=" ".join(kept), text=" ".join(words), local=local, **found)


def _modifier(word: str) -> tuple[str | None, str | None]:
    """(field, value) when `word` is a modifier search_tools reads, else (None, None)."""
    name, colon, value = word.partition(":")
    if not colon or not value:
        return None, None
    name = name.lower()
    if name == "type":
        return "tool_type", value
    if name == "category":
        return "category", value.lower()
    if name == "mcp":
        return "mcp", normalize_ref(value.lower())
    if name == "namespace":
        return "namespace", value.lower()
    return None, None


def _local_space(value: str) -> str:
    if not value:
        return ANY_SPACE
    if value in SPACES:
        return value
    raise UsageError(
        f"local:{value} names no local space",
        hint="local: searches both local spaces; local:project only .ai/tools, local:user only ~/.ai/tools",
    )
