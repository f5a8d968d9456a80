"""The system calls no tool needs, refused inside every sandbox (a seccomp filter).

The namespaces decide what a sandboxed process can see; this filter narrows what it can ask
the kernel for: no new user namespace (where an unprivileged process would get capabilities
over namespaces of its own), no mounts, no ptrace of its neighbours, no BPF, perf events,
userfaultfd, io_uring, keyrings, kernel modules or reboot. Each is refused with EPERM (clone3
with ENOSYS, so the C library falls back to clone, whose flags the filter can read).

The filter is compiled once per runner by libseccomp (through pyseccomp) into a BPF file in
the runner's sandbox directory; bubblewrap loads it (`--seccomp FD`) just before the tool
starts. Where libseccomp is missing, there is no filter, and `Sandbox.problem` does not
refuse for it: the namespaces, the uid and the capabilities are the containment, the filter
narrows the kernel's surface (what `kiwi show` says).
"""

from __future__ import annotations

import errno
import logging
from pathlib import Path

logger = logging.getLogger("kiwi.sandbox")

REFUSED = (
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "setns",
    "unshare",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "keyctl",
    "add_key",
    "request_key",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "open_by_handle_at",
    "name_to_handle_at",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "move_mount",
    "open_tree",
    "mount_setattr",
    "swapon",
    "swapoff",
    "reboot",
    "acct",
    "quotactl",
    "syslog",
    "iopl",
    "ioperm",
)
CLONE_NEWUSER = 0x10000000


def write_filter(path: Path) -> str | None:
    """Compile the filter into `path` (BPF); None when done, else why there is no filter."""
    try:
        import pyseccomp as seccomp
    except (ImportError, OSError) as exc:  # the package, or libseccomp.so.2 it loads
        return f"no seccomp filter: libseccomp is unavailable ({exc})"
    try:
        f = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
        for name in REFUSED:
            try:
                f.add_rule(seccomp.ERRNO(errno.EPERM), name)
            except (RuntimeError, ValueError):  # a call this architecture does not have
                logger.debug("seccomp: %s is not a system call here", name)
        f.add_rule(seccomp.ERRNO(errno.EPERM), "clone", seccomp.Arg(0, seccomp.MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER))
        f.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")  # its flags are out of a filter's reach
        with open(path, "wb") as out:
            f.export_bpf(out)
        path.chmod(0o644)
    except Exception as exc:  # a filter that cannot be made is said, not fatal
        return f"no seccomp filter: {exc}"
    return None
