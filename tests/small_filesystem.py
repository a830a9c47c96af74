"""A small real filesystem for the storage-fault tests: a tmpfs of a few MB mounted in a
test's folder, filled to leave a chosen number of bytes free, remounted read-only.

Mounting needs root (CI runs as root) and a kernel that lets this process mount; where it
cannot, `unavailable()` says why and the tests skip with that reason.

Example:
    reason = unavailable()
    with small_filesystem(tmp_path / "disk", size_kib=3072) as disk:
        disk.leave_free(100 * 1024)      # a filler takes the rest
        ...                              # write into disk.path, see it fail
        disk.remove_filler()
"""

import contextlib
import os
import subprocess

FILLER = "filler"


def unavailable():
    """Why no tmpfs can be mounted here (None when one can)."""
    if os.name != "posix" or not hasattr(os, "geteuid"):
        return "tmpfs mounts need Linux"
    if os.geteuid() != 0:
        return "mounting a small tmpfs needs root (CI runs as root)"
    probe = f"/tmp/keras-elmo-mount-probe-{os.getpid()}"
    os.makedirs(probe, exist_ok=True)
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", probe],
                              capture_output=True, text=True)
        if done.returncode != 0:
            return f"mount -t tmpfs is not permitted here: {done.stderr.strip()[:200]}"
        subprocess.run(["umount", probe], capture_output=True)
        return None
    except FileNotFoundError:
        return "no mount command"
    finally:
        with contextlib.suppress(OSError):
            os.rmdir(probe)


class SmallFilesystem:
    """A mounted tmpfs at `path`."""

    def __init__(self, path):
        self.path = str(path)

    def free(self):
        stats = os.statvfs(self.path)
        return stats.f_bavail * stats.f_frsize

    def leave_free(self, nbytes):
        """Grows or shrinks the filler file so that about `nbytes` stay free (in pages)."""
        filler = os.path.join(self.path, FILLER)
        current = os.path.getsize(filler) if os.path.exists(filler) else 0
        target = max(current + self.free() - nbytes, 0)
        with open(filler, "ab") as handle:
            handle.truncate(target)
            if target > current:
                os.posix_fallocate(handle.fileno(), current, target - current)

    def fill(self):
        """Leaves no byte free (also while another process writes there)."""
        with open(os.path.join(self.path, FILLER), "ab", buffering=0) as handle:
            for chunk in (b"\0" * (1 << 20), b"\0" * 4096):
                with contextlib.suppress(OSError):
                    while True:
                        handle.write(chunk)

    def remove_filler(self):
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(self.path, FILLER))

    def remount(self, mode):
        """`"ro"` or `"rw"`."""
        subprocess.run(["mount", "-o", f"remount,{mode}", self.path], check=True,
                       capture_output=True)

    def entries(self):
        """Every name in the filesystem except the filler, relative, sorted."""
        found = []
        for root, dirs, names in os.walk(self.path):
            for name in dirs + names:
                found.append(os.path.relpath(os.path.join(root, name), self.path))
        return sorted(name for name in found if name != FILLER)


@contextlib.contextmanager
def small_filesystem(path, size_kib):
    """Mounts a tmpfs of `size_kib` KiB at `path` (created) for the block; unmounts after."""
    path = str(path)
    os.makedirs(path, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kib}k", "tmpfs", path],
                   check=True, capture_output=True)
    try:
        yield SmallFilesystem(path)
    finally:
        done = subprocess.run(["umount", path], capture_output=True)
        if done.returncode != 0:  # still busy (a process of a failed test): detach it
            subprocess.run(["umount", "-l", path], capture_output=True)
