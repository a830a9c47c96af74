"""The second use of a cached model: its cache check before (every file hashed) and after (stat).

Builds a cache of its own in a temporary folder: one model of the published size (a random
`weights.hdf5` of 374,434,792 bytes, as AllenNLP's original ELMo, and an options.json) with
its manifest, as a download leaves it. Then times, interleaved, `repeats` times each:

- before: every file hashed in full at each use (what each load did until issue 57; today
  `keras-elmo models verify`: `verify_cached(..., full=True)`);
- after: the load's check (`fetch` of the cached model: the manifest read, each file's
  stat compared with the one recorded at landing, nothing hashed).

Prints the medians with their range, the CPU model (/proc/cpuinfo) and the load
(/proc/loadavg) before and after. The file is hashed once before timing, so both variants
read it from the page cache, as a second load right after the first does.

Example:
    python benchmarks/cache_check.py
    python benchmarks/cache_check.py --repeats 9 --size-bytes 1000000 --dir /tmp
"""

import os
import shutil
import statistics
import tempfile
import time

from _common import doc_parser, format_samples, print_load, report
from keras_elmo.pretrained.fetch import fetch
from keras_elmo.pretrained.fetch_plan import FetchPlan
from keras_elmo.pretrained.model_cache import verify_cached, write_manifest

#: AllenNLP's original ELMo weights file, in bytes (elmo_2x4096_512_2048cnn_2xhighway).
PUBLISHED_WEIGHTS_BYTES = 374_434_792
_CHUNK = 1 << 24


def cpu_model():
    """The CPU's model name from /proc/cpuinfo (or `"unknown"`)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def build_cache(root, key, size):
    """Writes `root/key` as a download leaves it: weights.hdf5 (`size` random bytes),
    options.json and the manifest (sizes, sha256s, stats)."""
    folder = os.path.join(root, key)
    os.makedirs(folder)
    with open(os.path.join(folder, "weights.hdf5"), "wb") as handle:
        left = size
        while left:
            block = os.urandom(min(_CHUNK, left))
            handle.write(block)
            left -= len(block)
    with open(os.path.join(folder, "options.json"), "w", encoding="utf-8") as handle:
        handle.write('{"lstm": {"dim": 4096, "projection_dim": 512, "n_layers": 2}}\n')
    write_manifest(folder, key, {"name": key, "download": key}, [], ".", None)
    return folder


def main():
    parser = doc_parser(__doc__)
    parser.add_argument("--repeats", type=int, default=7, help="timings of each variant (7)")
    parser.add_argument("--size-bytes", type=int, default=PUBLISHED_WEIGHTS_BYTES,
                        help=f"bytes of the weights file ({PUBLISHED_WEIGHTS_BYTES:,})")
    parser.add_argument("--dir", default=None, help="where the temporary cache goes (TMPDIR)")
    args = parser.parse_args()
    if args.repeats < 1 or args.size_bytes < 1:
        parser.error(f"--repeats and --size-bytes must be >= 1; received {args.repeats} and "
                     f"{args.size_bytes}")
    print(f"cpu: {cpu_model()}")
    print_load("before")
    root = tempfile.mkdtemp(prefix="keras-elmo-cache-check-", dir=args.dir)
    try:
        key = "published-size"
        build_cache(root, key, args.size_bytes)
        plan = FetchPlan(key, key, "options+weights", (), key)
        verify_cached(root, key, full=True)  # into the page cache, as after a first load
        before, after = [], []
        for _ in range(args.repeats):  # interleaved: the same load for both
            start = time.perf_counter()
            summary = verify_cached(root, key, full=True)
            before.append(time.perf_counter() - start)
            start = time.perf_counter()
            fetch(plan, root=root, offline=True)
            after.append(time.perf_counter() - start)
        report("model", f"{summary['files']} files, {summary['bytes']:,} bytes")
        report("before (each file hashed at each use)",
               format_samples([s * 1000 for s in before], "ms", digits=1))
        report("after (stat compared, nothing hashed)",
               format_samples([s * 1000 for s in after], "ms", digits=3))
        report("speed-up (medians)",
               f"{statistics.median(before) / statistics.median(after):,.0f}x")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print_load("after")


if __name__ == "__main__":
    main()
