"""`keras_elmo.process.library_pages`: the pages TensorFlow's import touched leave the
resident set, nothing else is touched, and the model computes the same numbers after."""

import json
import os
import subprocess
import sys

import pytest

from keras_elmo.process.library_pages import parse_smaps, release_library_pages, releasable

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_SMAPS = """\
7f0000000000-7f0000400000 r-xp 00000000 fd:01 1234   /usr/lib/libcode.so
Rss:                1024 kB
Anonymous:             0 kB
Locked:                0 kB
7f0000400000-7f0000500000 r--p 00400000 fd:01 1234   /usr/lib/libcode.so
Rss:                 256 kB
Anonymous:            64 kB
Locked:                0 kB
7f0000500000-7f0000600000 rw-p 00500000 fd:01 1234   /usr/lib/libcode.so
Rss:                  32 kB
Anonymous:            32 kB
Locked:                0 kB
7f0000600000-7f0000700000 r--p 00000000 fd:01 99     /tmp/gone.so (deleted)
Rss:                  16 kB
Anonymous:             0 kB
Locked:                0 kB
7f0000700000-7f0000800000 r--p 00000000 fd:01 98     /usr/lib/locked.so
Rss:                  16 kB
Anonymous:             0 kB
Locked:               16 kB
7f0000800000-7f0000900000 r--p 00000000 fd:01 97     /usr/lib/cold.so
Rss:                   0 kB
Anonymous:             0 kB
Locked:                0 kB
55d000000000-55d000100000 rw-p 00000000 00:00 0      [heap]
Rss:                 128 kB
Anonymous:           128 kB
Locked:                0 kB
7ffd00000000-7ffd00002000 r-xp 00000000 00:00 0      [vdso]
Rss:                   8 kB
Anonymous:             0 kB
Locked:                0 kB
7f0000900000-7f0000a00000 r--s 00000000 fd:01 96     /data/weights.bin
Rss:                 512 kB
Anonymous:             0 kB
Locked:                0 kB
"""


def test_parse_smaps_reads_ranges_and_sizes():
    mappings = parse_smaps(_SMAPS)
    assert len(mappings) == 9
    code = mappings[0]
    assert (code.start, code.end, code.perms, code.path) == (
        0x7f0000000000, 0x7f0000400000, "r-xp", "/usr/lib/libcode.so")
    assert (code.rss_kib, code.anonymous_kib, code.locked_kib) == (1024, 0, 0)
    assert mappings[3].path == "/tmp/gone.so (deleted)"
    assert mappings[6].path == "[heap]" and mappings[6].anonymous_kib == 128


def test_only_clean_read_only_file_pages_are_releasable():
    """Code and clean read-only file pages; never relocated data, writable, locked, deleted
    or anonymous mappings."""
    chosen = [m.path for m in parse_smaps(_SMAPS) if releasable(m)]
    assert chosen == ["/usr/lib/libcode.so", "/data/weights.bin"]
    assert [m.perms for m in parse_smaps(_SMAPS) if releasable(m)] == ["r-xp", "r--s"]


def test_no_listing_releases_nothing(tmp_path):
    assert release_library_pages(str(tmp_path / "no-smaps")) == 0.0


# Imports TensorFlow, embeds with a small seeded biLM, releases the library pages, embeds
# again through a fresh trace (code paths mapped back in), and prints what happened.
_RELEASE = r"""
import json, sys
import numpy as np
import tensorflow as tf
import keras
import keras_elmo
from keras_elmo.process.library_pages import release_library_pages

def file_mib():
    for line in open("/proc/self/status"):
        if line.startswith("RssFile:"):
            return int(line.split()[1]) / 1024

keras.utils.set_random_seed(3)
bilm = keras_elmo.BiLM(keras_elmo.BiLMOptions.tiny())
ids = keras_elmo.batch_to_ids([["ein", "Satz"], ["zwei", "Sätze", "hier"]])
before = tf.function(lambda x: bilm(x, training=False))(ids)
touched = file_mib()
released = release_library_pages()
after_release = file_mib()
after = tf.function(lambda x: bilm(x, training=False))(ids)
same = all(np.array_equal(a, b) for a, b in zip(tf.nest.flatten(before), tf.nest.flatten(after)))
print(json.dumps({"touched": touched, "released": released, "after_release": after_release,
                  "same": bool(same)}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's /proc/self/smaps")
def test_release_after_tensorflow_import_keeps_the_numbers():
    done = subprocess.run([sys.executable, "-c", _RELEASE], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["same"], "the biLM's outputs changed after the release"
    # TensorFlow's import leaves hundreds of MiB of its libraries resident; most go
    assert result["touched"] > 150, result
    assert result["released"] > 0.6 * result["touched"], result
    assert result["after_release"] < 0.4 * result["touched"], result


# The resident MiB of mapped files after TensorFlow's import: plain, or as the command line
# imports it.
_IMPORT = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
if sys.argv[2] == "command":
    from cli.quiet import import_tensorflow
    import_tensorflow()
else:
    import tensorflow
for line in open("/proc/self/status"):
    if line.startswith("RssFile:"):
        print(json.dumps(int(line.split()[1]) / 1024))
"""


def _file_mib_after_import(how):
    done = subprocess.run([sys.executable, "-c", _IMPORT, REPO, how], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's /proc/self/status")
def test_command_line_import_leaves_few_library_pages_resident():
    plain, command = _file_mib_after_import("plain"), _file_mib_after_import("command")
    assert command < 0.4 * plain, (command, plain)
