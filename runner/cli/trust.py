"""kiwi keys / sign / verify / lock: the trust commands.

kiwi keys generate [--name N]   a new Ed25519 signing key (private key stays on disk, 0600)
kiwi keys list                  the signing keys here, with their fingerprints
kiwi sign TOOL[@V] [--key N]    sign a published version's content_hash
kiwi verify TOOL[@V]            each element of the chain: trusted, unsigned, untrusted, altered
kiwi lock [TOOL ...] [--update] record (or move) the exact chain in the project's kiwi.lock;
                                with no TOOL, check every locked tool for drift
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..config import Settings
from ..errors import IntegrityError, Refused, UsageError


def add_trust_commands(sub: Any) -> None:
    """Register `kiwi keys`, `kiwi sign`, `kiwi verify` and `kiwi lock` on the top-level subparsers."""
    keys = sub.add_parser("keys", help="Ed25519 signing keys: generate, list")
    keys_sub = keys.add_subparsers(dest="keys_command", required=True, metavar="ACTION")
    gen = keys_sub.add_parser("generate", help="create a signing key (KIWI_KEYS_DIR, default ~/.config/kiwi/keys)")
    gen.add_argument("--name", default="default", help="the key's name (default: default)")
    gen.add_argument("--json", action="store_true", help="print one JSON object")
    gen.set_defaults(handler=cmd_keys_generate)
    ls = keys_sub.add_parser("list", help="the signing keys here and their fingerprints")
    ls.add_argument("--json", action="store_true", help="print a JSON array")
    ls.set_defaults(handler=cmd_keys_list)

    sign = sub.add_parser("sign", help="sign a published version's content_hash with your key")
    sign.add_argument("tool", metavar="TOOL", help="tool or tool@version (default: the latest)")
    sign.add_argument("--version", metavar="V", help="sign this version")
    sign.add_argument("--key", default="default", metavar="NAME", help="key name or PEM path (default: default)")
    sign.add_argument("--json", action="store_true", help="print the registry's answer as JSON")
    sign.set_defaults(handler=cmd_sign)

    verify = sub.add_parser("verify", help="check every element of a tool's chain against the trusted keys")
    verify.add_argument("tool", metavar="TOOL")
    verify.add_argument("--version", metavar="V")
    verify.add_argument("--json", action="store_true", help="print a JSON array, one object per element")
    verify.set_defaults(handler=cmd_verify)

    lock = sub.add_parser("lock", help="pin tools' exact chains in the project's kiwi.lock")
    lock.add_argument("tools", nargs="*", metavar="TOOL", help="tools to lock (none: check every locked tool)")
    lock.add_argument("--update", action="store_true", help="move locked tools to what the registry has now")
    lock.add_argument("--json", action="store_true", help="print the locked entries as JSON")
    lock.set_defaults(handler=cmd_lock)


def _print(args: argparse.Namespace, data: Any, text: str) -> None:
    print(json.dumps(data, ensure_ascii=False, default=str) if args.json else text)


async def cmd_keys_generate(args: argparse.Namespace) -> int:
    from ..trust.keys import generate

    settings = Settings.load()
    key = generate(settings.keys_dir, args.name)
    data = {"name": key.name, "path": str(key.path), "public_key": key.public_text, "fingerprint": key.fingerprint}
    text = (
        f"created {key.name}: {key.path} (keep it private)\n"
        f"public key:  {key.public_text}\nfingerprint: {key.fingerprint}\n\n"
        "to trust it for a namespace, add to config.toml:\n"
        f'[trust.keys]\npublic = ["{key.public_text}"]'
    )
    _print(args, data, text)
    return 0


async def cmd_keys_list(args: argparse.Namespace) -> int:
    from ..trust.keys import list_keys

    keys = list_keys(Settings.load().keys_dir)
    data = [
        {"name": k.name, "path": str(k.path), "public_key": k.public_text, "fingerprint": k.fingerprint} for k in keys
    ]
    if not keys and not args.json:
        print("no signing keys: create one with `kiwi keys generate`", file=sys.stderr)
        return 0
    _print(args, data, "\n".join(f"{k.name:<16} {k.fingerprint[:16]}  {k.public_text}" for k in keys))
    return 0


async def cmd_sign(args: argparse.Namespace) -> int:
    from ..core.refs import split_ref
    from ..registry import opened as open_registry
    from ..trust.keys import load
    from ..trust.signing import sign
    from ..trust.verify import stored_content_altered

    tool, version = split_ref(args.tool, args.version)
    settings = Settings.load()
    key = load(settings.keys_dir, args.key)
    async with open_registry() as registry:
        rows = await registry.attestations(tool, version)
        root = rows[0]
        altered = stored_content_altered(root)  # never vouch for an altered row
        if altered is not None:
            raise IntegrityError(f"{root['tool_id']}@{root['version']} is altered: {altered}; not signing")
        sig = sign(key, root["content_hash"])
        answer = await registry.sign(
            root["tool_id"], root["version"], sig["content_hash"], sig["public_key"], sig["signature"]
        )
    what = "signed" if answer.get("created") else "already signed by this key"
    _print(args, answer, f"{what}: {answer['tool_id']}@{answer['version']} with key {answer['key_fingerprint'][:16]}")
    return 0


async def cmd_verify(args: argparse.Namespace) -> int:
    from ..core.refs import split_ref
    from ..handlers import standard_dispatcher
    from ..harness.run import Runner
    from ..registry import connect

    tool, version = split_ref(args.tool, args.version)
    settings = Settings.load()
    runner = Runner(connect(settings), settings, dispatcher=standard_dispatcher())
    try:
        plan = await runner.registry.plan(tool, version)  # published, not local
        verdicts = await runner.verify(plan)
    finally:
        await runner.aclose()
    _print(
        args,
        [v.as_dict() for v in verdicts],
        "\n".join(f"{v.state:<14} {v.tool_id}@{v.version}  {v.detail}" for v in verdicts),
    )
    if not verdicts or all(v.ok for v in verdicts):
        return 0
    return IntegrityError.exit_code


async def cmd_lock(args: argparse.Namespace) -> int:
    from ..core.refs import normalize_ref, split_ref
    from ..registry import opened as open_registry
    from ..trust.lockfile import LockedTool, Lockfile

    settings = Settings.load()
    lockfile = Lockfile(settings.lockfile)
    locked = dict(lockfile.tools())
    if not args.tools and not args.update:
        return await _check_locks(args, lockfile, locked)
    wanted = [split_ref(t, None) for t in args.tools] or [(ref, None) for ref in locked]
    if not wanted:
        raise UsageError("nothing is locked yet", hint="lock a tool: kiwi lock TOOL")
    changes: list[str] = []
    async with open_registry() as registry:
        for ref, version in wanted:
            plan = await registry.plan(ref, version)
            entry = LockedTool.from_plan(plan)
            key = normalize_ref(ref)
            old = locked.get(key)
            if old is not None and old != entry and not args.update:
                moved = old.drift(plan) or [f"{old.tool_id} {old.version} -> {plan.version}"]
                raise Refused(
                    f"{key} is locked at {old.version} and the registry moved: " + "; ".join(moved),
                    hint=f"move the lock on purpose: kiwi lock --update {key}",
                )
            if old != entry:
                changes.append(
                    f"{'updated' if old else 'locked'} {key}@{entry.version}: "
                    + " -> ".join(f"{c.tool_id}@{c.version}" for c in entry.chain)
                )
            locked[key] = entry
    if changes:
        lockfile.write(locked)
    _print(
        args,
        {"lockfile": str(lockfile.path), "changed": changes, "tools": {k: v.as_json() for k, v in locked.items()}},
        "\n".join(changes)
        + ("\n" if changes else "")
        + f"{lockfile.path}: {len(locked)} tool(s), "
        + ("updated" if changes else "unchanged"),
    )
    return 0


async def _check_locks(args: argparse.Namespace, lockfile: Any, locked: dict[str, Any]) -> int:
    """`kiwi lock` alone: every locked tool against the registry; exit 4 when any drifted."""
    from ..registry import opened as open_registry

    if not locked:
        raise UsageError(f"no lockfile at {lockfile.path}", hint="lock a tool: kiwi lock TOOL")
    report: dict[str, list[str]] = {}
    async with open_registry() as registry:
        for ref, entry in locked.items():
            plan = await registry.plan(ref, entry.version)
            report[ref] = entry.drift(plan)
    lines = [
        f"{'drift' if moved else 'ok':<6} {ref}" + (": " + "; ".join(moved) if moved else "")
        for ref, moved in report.items()
    ]
    _print(args, {"lockfile": str(lockfile.path), "drift": report}, "\n".join(lines))
    return Refused.exit_code if any(report.values()) else 0
