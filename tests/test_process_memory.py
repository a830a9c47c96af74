"""`keras_elmo.process.process_memory`: freed large blocks go back to the OS (glibc), bad input refused."""

import subprocess
import sys

import pytest

from keras_elmo.process.process_memory import limit_malloc_retention, release_freed_memory

# Frees one 16 MiB block (glibc then raises its mmap threshold to 16 MiB), then allocates,
# touches and frees 64 blocks of 2 MiB, and prints the resident MiB gained by that.
_CHURN = r"""
import ctypes, ctypes.util, sys
from keras_elmo.process.process_memory import limit_malloc_retention
if sys.argv[1] == "limited":
    assert limit_malloc_retention(1 << 20)
libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20
big = libc.malloc(16 << 20); ctypes.memset(big, 1, 16 << 20); libc.free(big)
before = rss()
blocks = [libc.malloc(2 << 20) for _ in range(64)]
for b in blocks:
    ctypes.memset(b, 1, 2 << 20)
for b in blocks[:-1]:  # the last one stays, so the heap's top cannot simply shrink
    libc.free(b)
print(round(rss() - before))
"""


def _churn(mode):
    done = subprocess.run([sys.executable, "-c", _CHURN, mode], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return int(done.stdout.strip())


@pytest.mark.skipif(not sys.platform.startswith("linux") or not release_freed_memory(),
                    reason="glibc only")
def test_freed_blocks_are_returned_only_with_the_limit():
    kept_default, kept_limited = _churn("default"), _churn("limited")
    assert kept_default >= 100  # 63 freed 2 MiB blocks (126 MiB) stay resident by default
    assert kept_limited <= 8  # each block was its own mapping, unmapped when freed


@pytest.mark.parametrize("bad", [0, 1000, 64 << 20, 1.5, True, "1M"])
def test_threshold_out_of_range_is_refused(bad):
    with pytest.raises(ValueError, match=r"131072 \(128 KiB\) to 33554432 \(32 MiB\); "
                                         f"received {bad!r}"):
        limit_malloc_retention(bad)


_ALLOCATOR = r"""
from keras_elmo.process.process_memory import tensorflow_allocator
print(tensorflow_allocator())
"""


@pytest.mark.parametrize("env, expected", [
    ({"TF_ENABLE_ONEDNN_OPTS": "0"}, "system"),
    ({"TF_ENABLE_ONEDNN_OPTS": "1", "TF_ONEDNN_USE_SYSTEM_ALLOCATOR": "1"}, "onednn-system"),
    ({"TF_ENABLE_ONEDNN_OPTS": "1", "TF_ONEDNN_USE_SYSTEM_ALLOCATOR": "0"}, "onednn-pool"),
])
def test_tensorflow_allocator_follows_the_onednn_switches(env, expected):
    import os

    done = subprocess.run([sys.executable, "-c", _ALLOCATOR], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", **env})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == expected
