"""Giving freed memory back to the operating system (glibc's allocator; no-op elsewhere).

TensorFlow's CPU tensors come from `malloc`. glibc serves a large block with its own
`mmap` (returned at `free`) only while the block is above a threshold that it raises,
up to 32 MB, each time such a block is freed: after a few calls of a large model every
activation buffer comes from the heap, and the heap keeps what was freed. A published-size
biLM then holds well over 100 MB it no longer uses, on top of its 357 MiB of weights.

- `release_freed_memory()` hands back the heap's free pages now (`malloc_trim(0)`); the
  weight loader and writer call it when they are done.
- `limit_malloc_retention()` fixes the threshold, so every block of at least
  `threshold_bytes` is mapped and unmapped on its own, and nothing large stays behind. It
  changes the whole process's allocator: the `keras-elmo` command line and the benchmarks
  call it at start-up; a library user calls it when memory matters more than the small
  cost of mapping large buffers afresh.

Example:
>>> from keras_elmo.process.process_memory import limit_malloc_retention, release_freed_memory
>>> limit_malloc_retention()  # True with glibc, else False
True
>>> release_freed_memory()
True
"""

import ctypes
import ctypes.util
import functools

#: `mallopt` parameter numbers of glibc's malloc.h.
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
#: Default fixed mmap threshold: blocks of 4 MiB and more (activations of whole sequences,
#: weight matrices) are returned at once. The published LSTM's per-step tensors at batch 32
#: (2 MiB) stay below it and keep reusing heap memory: mapping them afresh at every step
#: (a 1 MiB threshold) saved ~90 MiB of peak at batch 32 but cost 5-10% of its speed here.
DEFAULT_MMAP_THRESHOLD = 4 << 20


@functools.lru_cache(maxsize=1)
def glibc():
    """The C library (`ctypes.CDLL`) if it is glibc (it has `malloc_trim`), else None.

    Example:
    >>> glibc() is None or hasattr(glibc(), "mallopt")
    True
    """
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
    except OSError:
        return None
    if not (hasattr(libc, "malloc_trim") and hasattr(libc, "mallopt")):
        return None
    return libc


def release_freed_memory():
    """Returns the allocator's free heap pages to the OS (`malloc_trim(0)`).

    Returns:
        bool: True if glibc's `malloc_trim` ran, False where there is none (macOS, musl).

    Example:
    >>> release_freed_memory()  # after loading weights or a large batch
    True
    """
    libc = glibc()
    if libc is None:
        return False
    libc.malloc_trim(ctypes.c_size_t(0))
    return True


def limit_malloc_retention(threshold_bytes=DEFAULT_MMAP_THRESHOLD):
    """Makes glibc map every block of at least `threshold_bytes` on its own, for the rest
    of the process (and stop raising that threshold), so large freed buffers go back to
    the OS at once instead of staying in the heap.

    Args:
        threshold_bytes: int, 128 KiB .. 32 MiB (4 MiB).

    Returns:
        bool: True if the allocator took the setting, False without glibc.

    Raises:
        ValueError: `threshold_bytes` out of range.

    Example:
    >>> limit_malloc_retention(8 << 20)
    True
    """
    if (not isinstance(threshold_bytes, int) or isinstance(threshold_bytes, bool)
            or not 128 << 10 <= threshold_bytes <= 32 << 20):
        raise ValueError("threshold_bytes must be an int from 131072 (128 KiB) to 33554432 "
                         f"(32 MiB); received {threshold_bytes!r}.")
    libc = glibc()
    if libc is None:
        return False
    done = libc.mallopt(_M_MMAP_THRESHOLD, ctypes.c_int(threshold_bytes))
    # The heap's top is trimmed when this much is free there (glibc's default is 128 KiB,
    # but fixing the mmap threshold would otherwise leave it at its raised value).
    libc.mallopt(_M_TRIM_THRESHOLD, ctypes.c_int(threshold_bytes))
    return bool(done)


def tensorflow_allocator():
    """Which allocator serves TensorFlow's large CPU tensors in this process.

    TensorFlow turns oneDNN on by default on CPUs with AVX512_VNNI / AVX512_BF16 / AMX (and
    when `TF_ENABLE_ONEDNN_OPTS=1`). Its oneDNN allocator then keeps every large block it
    ever served in a pool of its own (BFC): freed tensors are reused by TensorFlow but never
    go back to the OS, and neither `limit_malloc_retention` nor `release_freed_memory`
    reaches them. A published biLM loaded into random-initialised variables would hold its
    weights twice (measured: 1,430 vs 990 MiB after loading), which is why `from_weights`
    builds with zeros and fills them in place (`BiLM(zero_init=True)`); the pool
    still keeps the largest batch's activations. `TF_ONEDNN_USE_SYSTEM_ALLOCATOR=1` set
    before TensorFlow starts sends those blocks to `malloc` instead (slower at batch 32 on a
    machine of this project, 8-17%, in exchange for the memory).

    Returns:
        str: `"onednn-pool"`, `"onednn-system"` (oneDNN with the system allocator) or
        `"system"` (oneDNN off). Imports TensorFlow.

    Example:
    >>> tensorflow_allocator() in ("onednn-pool", "onednn-system", "system")
    True
    """
    import os

    from tensorflow.python.util import _pywrap_util_port

    if not _pywrap_util_port.IsMklEnabled():
        return "system"
    flag = os.environ.get("TF_ONEDNN_USE_SYSTEM_ALLOCATOR", "").strip().lower()
    return "onednn-system" if flag in ("1", "true") else "onednn-pool"
