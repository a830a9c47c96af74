"""Handing back the library pages TensorFlow's import touched and never uses again (Linux).

`import tensorflow` maps its shared libraries (over 1 GB of code and constants) and runs
their start-up code, which registers every op and kernel the libraries hold: that touches
page after page, and each touched page stays in the process's resident set. On the machines
of this project the import leaves 359 MiB of such pages resident (most of it
`libtensorflow_cc.so`), while a published-size biLM, loaded and run at batch 1 and 32, reads
back only ~70 MiB of them: the rest is a quarter of the command's peak resident memory for
nothing.

`release_library_pages()` asks the kernel to drop this process's mapping of every page of
a read-only file mapping that holds no private copy (`madvise(MADV_DONTNEED)`). Nothing is
lost: the pages are clean copies of the files and stay in the operating system's file
cache; a page the process needs again is mapped back by its next access (a minor page fault
while the file cache holds it, as it does unless memory runs short). Mappings with private
copies (relocated read-only data), writable, locked or deleted ones are left alone. The
`keras-elmo` command line calls it right after importing TensorFlow; a Python program calls
it once after its imports.

Example:
>>> import tensorflow as tf  # doctest: +SKIP
>>> from keras_elmo.process.library_pages import release_library_pages
>>> released = release_library_pages()  # MiB no longer resident (0 off Linux)  # doctest: +SKIP
"""

import collections
import ctypes
import re

from keras_elmo.process.process_memory import glibc

#: `madvise` advice of Linux's mman.h: drop this process's mapping of the pages.
_MADV_DONTNEED = 4

#: One mapping of `/proc/self/smaps`: its address range, what is resident and how much of
#: that is a private copy.
Mapping = collections.namedtuple("Mapping", ["start", "end", "perms", "path", "rss_kib",
                                             "anonymous_kib", "locked_kib"])

_HEADER = re.compile(r"^([0-9a-f]+)-([0-9a-f]+) (\S{4}) \S+ \S+ \S+\s*(.*)$")


def parse_smaps(text):
    """The mappings listed in the text of `/proc/<pid>/smaps`, as `Mapping`s."""
    mappings, current = [], None
    for line in text.splitlines():
        header = _HEADER.match(line)
        if header:
            if current is not None:
                mappings.append(Mapping(**current))
            start, end, perms, path = header.groups()
            current = dict(start=int(start, 16), end=int(end, 16), perms=perms,
                           path=path.strip(), rss_kib=0, anonymous_kib=0, locked_kib=0)
            continue
        field, _, value = line.partition(":")
        key = {"Rss": "rss_kib", "Anonymous": "anonymous_kib", "Locked": "locked_kib"}.get(field)
        if current is not None and key is not None:
            current[key] = int(value.split()[0])
    if current is not None:
        mappings.append(Mapping(**current))
    return mappings


def releasable(mapping):
    """True for a resident, read-only mapping of a file that holds only clean file pages.

    Writable mappings, mappings with private (anonymous) copies such as relocated read-only
    data, locked ones, deleted files and anything without a file (heap, stacks, `[vdso]`)
    are never released.
    """
    return (mapping.path.startswith("/") and not mapping.path.endswith("(deleted)")
            and "w" not in mapping.perms and mapping.rss_kib > 0
            and mapping.anonymous_kib == 0 and mapping.locked_kib == 0)


def release_library_pages(smaps="/proc/self/smaps"):
    """Drops this process's resident pages of read-only file mappings (module docstring).

    Call it after the imports (TensorFlow, Keras), before loading a model: what the process
    touches again comes back from the file cache by itself.

    Args:
        smaps: str, the mappings' listing of this process (Linux's `/proc/self/smaps`).

    Returns:
        float: MiB of file pages no longer resident (0.0 where there is no such listing or
        no glibc, e.g. macOS).

    Example:
    >>> release_library_pages() >= 0.0
    True
    """
    try:
        with open(smaps) as listing:
            mappings = parse_smaps(listing.read())
    except OSError:
        return 0.0
    libc = glibc()
    if libc is None:
        return 0.0
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    released_kib = 0
    for mapping in filter(releasable, mappings):
        if libc.madvise(mapping.start, mapping.end - mapping.start, _MADV_DONTNEED) == 0:
            released_kib += mapping.rss_kib
    return released_kib / 1024
