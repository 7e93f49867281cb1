"""File permissions that hold for root too, so the permission tests run in CI (which runs as root).

Root ignores permission bits because it holds two capabilities, CAP_DAC_OVERRIDE and
CAP_DAC_READ_SEARCH (capabilities(7)). Without them, root is an owner like any other, and
a file it chmods to 0 is unreadable to it. Both helpers are Linux only; elsewhere, or where
the kernel refuses, they report that they could not, and the test skips.
"""
import contextlib
import ctypes
import ctypes.util
import os
import sys

CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_SETPCAP = 1, 2, 8
OVERRIDES = (1 << CAP_DAC_OVERRIDE) | (1 << CAP_DAC_READ_SEARCH)
PR_CAPBSET_DROP = 24
LINUX_CAPABILITY_VERSION_3 = 0x20080522


class CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def libc():
    return ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True) if sys.platform.startswith("linux") else None


def capabilities():
    """(libc, header, data) holding the calling thread's capability sets (capget(2)), or None off Linux."""
    c = libc()
    header, data = CapHeader(LINUX_CAPABILITY_VERSION_3, 0), (CapData * 2)()
    if c is None or c.capget(ctypes.byref(header), data) != 0:
        return None
    return c, header, data


def permissions_bind():
    """Whether permission bits stop this process now (always, unless it runs as root)."""
    return os.name == "posix" and os.geteuid() != 0


@contextlib.contextmanager
def permissions_binding_root():
    """Inside the block, the calling thread obeys permission bits even as root; yields whether it does.

    Only the effective set is cleared (capabilities are per thread on Linux), and the
    permitted set keeps both, so the block's end can raise them again.
    """
    if permissions_bind():
        yield True
        return
    caps = capabilities()
    if caps is None or caps[2][0].effective & OVERRIDES != OVERRIDES:
        yield False
        return
    c, header, data = caps
    saved = data[0].effective
    data[0].effective = saved & ~OVERRIDES
    if c.capset(ctypes.byref(header), data) != 0:
        yield False
        return
    try:
        yield True
    finally:
        data[0].effective = saved
        assert c.capset(ctypes.byref(header), data) == 0, "could not give the test process its capabilities back"


def drop_root_overrides():
    """This process, and every program it runs from now on, obeys permission bits as root.

    Exec gives root every capability of the bounding set, so the two are dropped from
    that set, which exec cannot undo (it needs CAP_SETPCAP).
    """
    c = libc()
    for cap in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
        if c.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "cannot drop a capability")


def bound_command(command):
    """`command` (a list for subprocess.run) made to obey permission bits, or None where it cannot be.

    Non-root programs obey them already; for root, this file runs first as a wrapper that
    drops the two capabilities and then execs the command (rather than a preexec_fn,
    which is unsafe in a process with threads, as pytest's is).
    """
    if permissions_bind():
        return list(command)
    caps = capabilities()
    if caps is None or not caps[2][0].effective & (1 << CAP_SETPCAP):  # without it the bounding set cannot shrink
        return None
    return [sys.executable, os.path.abspath(__file__), *map(str, command)]


if __name__ == "__main__":  # python tests/permissions.py PROGRAM ARGS...: PROGRAM without the overrides
    drop_root_overrides()
    os.execvp(sys.argv[1], sys.argv[1:])
