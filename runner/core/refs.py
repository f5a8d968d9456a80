"""Tool references as the registry reads them (kiwi_internal.normalize_ref), parsed once.

`ToolRef.parse` is the one reader of `namespace/tool_id@version`: the CLI, the MCP meta-tools
and threads all go through it, each with its own wording of what went wrong. Imported by
`kiwi run`'s start-up path: keep it free of heavy imports.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import UsageError

PUBLIC = "public"  # the default namespace: `public/x` is `x`


def normalize_ref(ref: str) -> str:
    """`public/x` and ` x ` mean `x`: the public namespace is the default one."""
    ref = ref.strip()
    return ref[len("public/") :] if ref.startswith("public/") else ref


@dataclass(frozen=True)
class RefWords:
    """How one surface words a reference it cannot read (its flags and examples)."""

    version: str  # the separate version, as the surface spells it: "--version {}" or "version={}"
    conflict_hint: str | None
    no_tool: str
    no_tool_hint: str
    empty_version_hint: str | None  # None: an empty version means the latest, not an error


CLI_WORDS = RefWords(
    version="--version {}",
    conflict_hint=None,
    no_tool="no tool given",
    no_tool_hint="name a tool: kiwi run hello_world",
    empty_version_hint="give a version (tool@1.0.0 or --version 1.0.0), or none for the latest",
)
MCP_WORDS = RefWords(
    version="version={}",
    conflict_hint="give the version once",
    no_tool="no item_id given",
    no_tool_hint="name an item, e.g. item_id='hello_world'; find ids with search",
    empty_version_hint=None,
)


@dataclass(frozen=True)
class ToolRef:
    """`namespace/tool_id@version`; `namespace` is `public` when the reference names none."""

    namespace: str
    tool_id: str
    version: str | None = None

    @classmethod
    def parse(
        cls, text: str, version: str | None = None, words: RefWords = CLI_WORDS, *, strict: bool = True
    ) -> ToolRef:
        """`tool@1.2.0` is the same as `tool` with version 1.2.0 given apart (which must agree);
        the last `@` splits. `strict=False` never refuses: it reads what a failed or
        foreign request named (the separate version wins, empty parts stay empty)."""
        at: str | None
        ref, at_sign, at = text.strip().rpartition("@")
        if not at_sign:
            ref, at = at, None
        if words.empty_version_hint is None or not strict:
            version = version or None  # an empty version is the latest
        if at is not None:
            if strict and version is not None and version != at:
                raise UsageError(
                    f"two versions given: @{at} and {words.version.format(version)}", hint=words.conflict_hint
                )
            version = version or at
        ref = normalize_ref(ref)
        if strict and not ref:
            raise UsageError(words.no_tool, hint=words.no_tool_hint)
        if version is not None and not version:
            if strict and words.empty_version_hint is not None:
                raise UsageError("empty version", hint=words.empty_version_hint)
            version = None
        namespace, slash, tool_id = ref.partition("/")
        return cls(namespace, tool_id, version) if slash else cls(PUBLIC, ref, version)

    @classmethod
    def of_manifest(cls, manifest: object) -> ToolRef | None:
        """A manifest's identity: its `tool_id` in the namespace the tool_id names (`ns/tool`),
        else in its `namespace:`, else public; None for a manifest with no tool_id."""
        if not isinstance(manifest, dict) or not isinstance(manifest.get("tool_id"), str):
            return None
        tool_id = manifest["tool_id"].strip()
        namespace, slash, name = tool_id.partition("/")
        if not slash:
            given = manifest.get("namespace")
            namespace, name = (given if isinstance(given, str) else ""), tool_id
        return cls(namespace or PUBLIC, name)

    @property
    def ref(self) -> str:
        """The reference as the registry writes it: `tool_id` in public, `namespace/tool_id` elsewhere."""
        return self.tool_id if self.namespace == PUBLIC else f"{self.namespace}/{self.tool_id}"

    def __str__(self) -> str:
        return self.ref if self.version is None else f"{self.ref}@{self.version}"


def tool_name(ref: str) -> str:
    """The tool's name without its namespace: `x` for `ns/x` and for `x`."""
    return ToolRef.parse(ref, strict=False).tool_id


def split_ref(tool: str, version: str | None) -> tuple[str, str | None]:
    """`tool@1.2.0` is the same as `tool --version 1.2.0` (ToolRef.parse with the CLI's words)."""
    named = ToolRef.parse(tool, version)
    return named.ref, named.version
