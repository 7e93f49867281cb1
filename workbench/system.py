"""What this process may take: the memory limit that applies to it (beam search's beams, a batch's rows).

beam.py and batch.py refuse, before any work, a search or a batch that would not fit in `budget` bytes; the
programs pass them memory_budget(), half of the least limit the machine, its container or ulimit sets.
"""

import os

CGROUP_ROOT = "/sys/fs/cgroup"
UNLIMITED = 1 << 62  # cgroup v1 writes "no limit" as a number near 2**63


def memory_budget():
    """Half of the least memory limit that applies to this process: the machine's physical memory,
    its cgroup's (a container's: v2 memory.max, v1 memory.limit_in_bytes) and RLIMIT_AS (ulimit -v),
    each where the system has one; 8 GB where it says none (Windows)."""
    limits = [limit for limit in (physical_memory(), cgroup_memory_limit(), address_space_limit()) if limit]
    return min(limits) // 2 if limits else 8 << 30


def physical_memory():
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):  # Windows has no sysconf
        return None


def address_space_limit():
    try:
        import resource  # POSIX only
    except ImportError:
        return None
    soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    return None if soft == resource.RLIM_INFINITY else soft


def cgroup_memory_limit(root=CGROUP_ROOT, membership="/proc/self/cgroup"):
    """The least memory limit of this process's cgroup and its parents (Linux); None where none is set."""
    try:
        with open(membership, encoding="utf-8") as f:
            lines = f.read(1 << 16).splitlines()
    except (OSError, ValueError):  # ValueError: not UTF-8, which no kernel writes: as unreadable
        return None
    found = []
    for line in lines:
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if controllers == "":  # v2: one hierarchy, memory.max; "max" is no limit
            found += cgroup_values(root, path, "memory.max")
        elif "memory" in controllers.split(","):  # v1: the memory controller's own hierarchy
            found += cgroup_values(os.path.join(root, "memory"), path, "memory.limit_in_bytes")
    limits = [n for n in found if n < UNLIMITED]
    return min(limits) if limits else None


def cgroup_values(root, path, name):
    """The numbers in `name` from the cgroup at path up to the root (in a container the path may not
    be visible, and its own cgroup is the root), wherever the file exists."""
    values, parts = [], [p for p in path.strip("/").split("/") if p]
    for depth in range(len(parts), -1, -1):
        try:
            with open(os.path.join(root, *parts[:depth], name), encoding="utf-8") as f:
                text = f.read(64).strip()
        except (OSError, ValueError):  # ValueError: not UTF-8, which no kernel writes: as unreadable
            continue
        if text.isascii() and text.isdigit():  # not "²", which isdigit() takes and int() refuses
            values.append(int(text))
    return values
