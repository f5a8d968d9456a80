"""Tenant YAML, parsed within bounds: the one loader for manifests and tool.yaml files.

YAML's anchors and aliases let a kilobyte name a gigabyte: `a: &a [x, x, ...]`, `b: &b [*a,
*a, ...]`, ... is a few nodes after parsing (an alias is the node it names, shared) but as
many as its expansion once anything walks it as a tree (json.dumps, the registry). PyYAML's C
composer also recurses in C on nesting (200,000 `[`: a segmentation fault, the whole server
gone), its Python one up to a RecursionError. So a document is read in four steps, each
bounded by the input's size: its length (MAX_YAML_BYTES); its nesting, counted on the scanner's
tokens before anything recurses (MAX_YAML_DEPTH); its expanded size, summed over the composed
nodes once each, a shared node counted as often as it is used, with an early exit and no
recursion (MAX_YAML_EXPANDED); and only then its construction. Aliases in a small manifest
(`<<: *defaults`) keep working; an alias that contains itself is refused.
"""

from __future__ import annotations

from typing import Any

import yaml

__all__ = ["MAX_YAML_BYTES", "MAX_YAML_DEPTH", "MAX_YAML_EXPANDED", "YamlTooLarge", "load_yaml"]

# Four times the registry's default limits of a manifest (256 KiB as JSON, its tool.yaml as
# written): above them the registry's own, configurable, limit answers.
MAX_YAML_BYTES = 1024 * 1024
MAX_YAML_EXPANDED = 1024 * 1024  # text of every scalar with aliases expanded, plus 8 a node
MAX_YAML_DEPTH = 64  # nested collections

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_OPENS = (
    yaml.BlockSequenceStartToken,
    yaml.BlockMappingStartToken,
    yaml.FlowSequenceStartToken,
    yaml.FlowMappingStartToken,
)
_CLOSES = (yaml.BlockEndToken, yaml.FlowSequenceEndToken, yaml.FlowMappingEndToken)


class YamlTooLarge(ValueError):
    """A YAML document over one of this module's limits; the message names the limit."""


def load_yaml(text: str | bytes) -> Any:
    """The document in `text`, as yaml.safe_load reads it, or YamlTooLarge (over a limit) or
    yaml.YAMLError (not YAML; UnicodeDecodeError for bytes that are not UTF-8)."""
    try:
        size = len(text) if isinstance(text, bytes) else len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise yaml.YAMLError("it is not valid Unicode text (it holds a lone surrogate)") from None
    if size > MAX_YAML_BYTES:
        raise YamlTooLarge(f"the YAML is {size} bytes; at most {MAX_YAML_BYTES} bytes are read (MAX_YAML_BYTES)")
    source = text.decode("utf-8") if isinstance(text, bytes) else text
    _check_depth(source)
    loader = _Loader(source)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_expanded(node)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _check_depth(source: str) -> None:
    """Refuse nesting deeper than MAX_YAML_DEPTH, seen on the tokens: the scanner keeps a
    list of indentations, where the composer would recurse."""
    scanner = _Loader(source)
    depth = 0
    try:
        while (token := scanner.get_token()) is not None:
            if isinstance(token, _OPENS):
                depth += 1
                if depth > MAX_YAML_DEPTH:
                    mark = token.start_mark
                    raise YamlTooLarge(
                        f"the YAML nests deeper than {MAX_YAML_DEPTH} levels (MAX_YAML_DEPTH), "
                        f"at line {mark.line + 1}, column {mark.column + 1}"
                    )
            elif isinstance(token, _CLOSES):
                depth -= 1
    finally:
        scanner.dispose()


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _check_expanded(root: yaml.Node) -> None:
    """Refuse a document whose expansion exceeds MAX_YAML_EXPANDED, or that contains itself:
    each distinct node is sized once (depth first, an explicit stack), an alias as its node's size."""
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        if finished:
            on_path.discard(key)
            size = 8 + sum(sizes[id(child)] for child in _children(node))
        elif key in sizes:
            continue
        elif isinstance(node, yaml.ScalarNode):
            size = 8 + len(node.value)
        elif key in on_path:
            mark = node.start_mark
            raise YamlTooLarge(f"the YAML contains itself through an alias (line {mark.line + 1})")
        else:
            on_path.add(key)
            stack.append((node, True))
            stack.extend((child, False) for child in _children(node) if id(child) not in sizes)
            continue
        if size > MAX_YAML_EXPANDED:
            raise YamlTooLarge(
                f"the YAML, its aliases expanded, is larger than {MAX_YAML_EXPANDED} bytes (MAX_YAML_EXPANDED): "
                "repeat less through anchors and aliases"
            )
        sizes[key] = size
