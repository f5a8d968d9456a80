"""The /etc every sandbox sees: a small tree the runner writes once, bound read-only.

A program needs a few files of /etc (the dynamic linker's cache, time zone, name service
order, MIME types, TLS roots) and a passwd naming its user; nothing else of the host's /etc
(shadow, ssh host keys, the machine's configuration) belongs in a sandbox. The files are
copied when the runner first confines a process, so one bind mount serves them all (each
mount costs a sandbox's start about 0.3 ms); the TLS roots (/etc/ssl/certs) and the
alternatives links (/etc/alternatives: /usr/bin/awk points there) are bound over it, as
their host directories. A file the host changes later is seen by the next runner.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

COPIED = ("ld.so.cache", "localtime", "nsswitch.conf", "mime.types", "ca-certificates.conf", "ssl/openssl.cnf")
BOUND = ("ssl/certs", "alternatives")  # bound from the host, over empty directories of the tree


def write_etc(root: Path) -> Path:
    """Write the tree under `root`/etc; return it."""
    etc = root / "etc"
    etc.mkdir(mode=0o755)
    for name in COPIED:
        source, target = Path("/etc") / name, etc / name
        target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        with contextlib.suppress(OSError):
            if source.is_symlink():  # localtime: a link into /usr/share/zoneinfo, which the sandbox has
                os.symlink(os.readlink(source), target)
            elif source.is_file():
                shutil.copyfile(source, target)
                target.chmod(0o644)
    for name in BOUND:
        if (Path("/etc") / name).is_dir():
            (etc / name).mkdir(mode=0o755, parents=True, exist_ok=True)
    uid, gid = os.getuid(), os.getgid()
    users = "root:x:0:0:root:/root:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/tmp:/usr/sbin/nologin\n"
    groups = "root:x:0:\nnogroup:x:65534:\n"
    if uid not in (0, 65534):
        users += f"kiwi:x:{uid}:{gid}:kiwi:/tmp:/usr/sbin/nologin\n"
        groups += f"kiwi:x:{gid}:\n"
    for name, text in (
        ("passwd", users),
        ("group", groups),
        ("hosts", "127.0.0.1 localhost kiwi-sandbox\n::1 localhost\n"),
    ):
        (etc / name).write_text(text)
        (etc / name).chmod(0o644)
    for d in (etc, *(p for p in etc.rglob("*") if p.is_dir() and not p.is_symlink())):
        d.chmod(0o755)
    return etc


def bound() -> list[str]:
    """The host directories bound over the tree, where the host has them."""
    return [f"/etc/{name}" for name in BOUND if (Path("/etc") / name).is_dir()]
