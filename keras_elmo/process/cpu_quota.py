"""A container's CPU quota, read from the cgroup files as the kernel writes them.

`docker run --cpus=2` on a 64-core host leaves the process 64 cores of affinity and 2 cores'
worth of CPU time: sized for 64, TensorFlow's thread pools are throttled. `cpu_quota()` reads
the quota (cgroup v2 `cpu.max`, v1 `cpu.cfs_quota_us` over `cpu.cfs_period_us`) as JVMs
and Go's automaxprocs do; `keras_elmo.process.cpu_setup.usable_cores` takes the smaller of
the affinity and the quota rounded up. Standard library only.

Example:
>>> cpu_quota("/tmp/fake_root")  # a tree with sys/fs/cgroup/cpu.max "200000 100000"  # doctest: +SKIP
2.0
"""

import logging
import os
import re

#: A folder standing in for "/" where `cpu_quota` reads /proc/self/cgroup,
#: /proc/self/mountinfo and the cgroup files: for tests (a fake tree) and for a container
#: that sees the kernel's files under another folder. Unset: "/".
CGROUP_ROOT_VARIABLE = "KERAS_ELMO_CGROUP_ROOT"
#: `(file, content)` of the malformed quota files warned about in this process.
_warned = set()


def cpu_quota(root=None):
    """Cores' worth of CPU time this process's cgroup allows (quota / period, e.g. 2.0 under
    `docker run --cpus=2`), the smallest on its path up the hierarchy; None where there is
    no quota or none can be read.

    Read as the kernel exposes it: the process's cgroup from /proc/self/cgroup (cgroup v1's
    line with the `cpu` controller where there is one, else v2's `0::` line), its mount
    from /proc/self/mountinfo (v2: /sys/fs/cgroup where none is listed), then at each level
    from the process's cgroup up to the mount, v2's `cpu.max` ("QUOTA PERIOD" or "max
    PERIOD") or v1's `cpu.cfs_quota_us` (-1: none) over `cpu.cfs_period_us`. A missing or
    unreadable file is no limit; a file that does not read as the kernel writes it is no
    limit too, with one warning (logger `keras_elmo`) that quotes it: start-up goes on.

    Args:
        root: str or None: the folder standing in for "/" (`CGROUP_ROOT_VARIABLE`).
    """
    root = (os.environ.get(CGROUP_ROOT_VARIABLE) or "/") if root is None else root
    limits = [_level_limit(level, version) for level, version in _cgroup_levels(root)]
    limits = [limit for limit in limits if limit is not None]
    return min(limits) if limits else None


def _cgroup_levels(root):
    """`(folder, version)` of each level of this process's CPU cgroup, from its own up to
    its mount point (`cpu_quota`); empty where none is found."""
    memberships = {}  # version -> the process's cgroup path
    for line in _read_lines(os.path.join(root, "proc/self/cgroup")):
        hierarchy, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if hierarchy == "0" and not controllers:
            memberships.setdefault(2, path)
        elif "cpu" in controllers.split(","):
            memberships.setdefault(1, path)
    mounts = {}  # version -> (the mount's root in the hierarchy, its mount point)
    for line in _read_lines(os.path.join(root, "proc/self/mountinfo")):
        fields = line.split()
        if " - " not in line or len(fields) < 5:
            continue
        fstype, _, options = (line.split(" - ", 1)[1].split() + ["", ""])[:3]
        if fstype == "cgroup" and "cpu" in options.split(","):
            mounts.setdefault(1, (_unescape(fields[3]), _unescape(fields[4])))
        elif fstype == "cgroup2":
            mounts.setdefault(2, (_unescape(fields[3]), _unescape(fields[4])))
    mounts.setdefault(2, ("/", "/sys/fs/cgroup"))
    version = 1 if 1 in memberships and 1 in mounts else 2
    if version not in memberships:
        return []
    mount_root, mount_point = mounts[version]
    path = memberships[version]
    if mount_root != "/":  # a container's view: the mount shows its own cgroup as "/"
        inside = path == mount_root or path.startswith(mount_root.rstrip("/") + "/")
        path = path[len(mount_root):] if inside else "/"
    top = os.path.join(root, mount_point.lstrip("/"))
    parts = [part for part in path.split("/") if part and part != ".."]
    return [(os.path.join(top, *parts[:depth]), version)
            for depth in range(len(parts), -1, -1)]


def _level_limit(folder, version):
    """The quota of one cgroup folder in cores (None: no limit, or nothing read)."""
    if version == 2:
        name = os.path.join(folder, "cpu.max")
        text = _read_text(name)
        if text is None:
            return None
        fields = text.split()
        if fields[:1] == ["max"] and len(fields) <= 2 and _positive(fields[1:] or ["1"]):
            return None
        if len(fields) == 2 and _positive(fields):
            return int(fields[0]) / int(fields[1])
        return _malformed(name, text, '"QUOTA PERIOD" or "max PERIOD" (microseconds)')
    name = os.path.join(folder, "cpu.cfs_quota_us")
    text = _read_text(name)
    if text is None or text.strip() == "-1":
        return None
    if not _positive([text]):
        return _malformed(name, text, "microseconds > 0, or -1 for no quota")
    period_name = os.path.join(folder, "cpu.cfs_period_us")
    period = _read_text(period_name)
    if period is None or not _positive([period]):
        return _malformed(period_name, period, "microseconds > 0")
    return int(text) / int(period)


def _positive(fields):
    """True when every field is a whole number > 0."""
    return all(re.fullmatch(r"[0-9]+", field.strip()) and int(field) > 0 for field in fields)


def _malformed(name, text, expected):
    """Warns once per file and content that it was read as no quota; returns None."""
    if (name, text) not in _warned:
        _warned.add((name, text))
        logging.getLogger("keras_elmo").warning(
            "CPU quota: %s holds %r; expected %s: read as no quota", name, text, expected)
    return None


def _read_text(name):
    """The file's text stripped (None where it cannot be read)."""
    try:
        with open(name, encoding="utf-8", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return None


def _read_lines(name):
    """The file's lines, without their line ends (none where it cannot be read)."""
    text = _read_text(name)
    return text.splitlines() if text else []


def _unescape(field):
    """A /proc/self/mountinfo path field with its octal escapes (`\\040`: a space) undone."""
    return re.sub(r"\\([0-7]{3})", lambda match: chr(int(match.group(1), 8)), field)
