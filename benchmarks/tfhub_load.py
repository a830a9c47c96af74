"""Loading a TF1 Hub ELMo module: TensorFlow's own loader against keras-elmo's, and the second use.

Builds (once, kept under --dir) a TF1 Hub module of Google's `elmo` kind with the test
builder (`tests/tfhub_module_builder.py`: bilm-tf's graph exported by tensorflow_hub 0.13):
at `--size published` the published sizes (LSTM 4096, projection 512, 2048 char filters,
2 highways, char dim 16; 374 MB of random float32 weights), at `--size tiny` the fixture
`tests/fixtures/tfhub/google_elmo` copied. Then times, interleaved (the order turning each
round), each variant in a fresh Python process of its own (nothing warm in the process; the
page cache is warm after the first round):

- `tf-loader`: TensorFlow, the peer: `tf.saved_model.load(dir)` and one
  `signatures["tokens"]` call on a batch of 2 sentences;
- `ours-dir`: `ElmoLayer.from_preset(dir)` and one call on the same batch, a user's own
  directory: every tensor's CRC-32C checked;
- `ours-cache`: `ElmoLayer.from_preset("https://tfhub.dev/google/elmo/3")` with the module
  in the download cache (`KERAS_ELMO_CACHE`), fetched once beforehand from a local HTTP
  server (`tests/model_mirror.py`'s `MirrorServer` as `KERAS_ELMO_MIRROR`, which a URL is
  looked for on first): the second use, the cache's stat check standing in for the
  checksums;
- `read-crc`, `read-nocrc`: `read_tfhub_module(dir)` alone, with and without checksums;
- `parse-pb`: `saved_model.pb` read and decoded alone (`read_saved_model`).

Per variant: the seconds of the work after the imports (load, and the call where there is
one; the headline), the imports' and the whole process's, as median (min..max); the peak
anonymous memory of the process (RssAnon sampled every 5 ms from this process) and its
VmHWM and RssAnon read from /proc/self/status at its end. Also the CPU model and flags, the
load before and after, and a 2048^3 float32 matmul rate sampled between rounds.

Example:
    python benchmarks/tfhub_load.py --size published --repeats 3 --dir /tmp --keep
    python benchmarks/tfhub_load.py --size tiny --repeats 1
"""

import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time

from _common import (STARTING_ENVIRONMENT, MatmulProbe, doc_parser, format_samples,
                     median_spread, print_load, report)
from _memory_sampler import MemorySampler
from cache_check import cpu_model

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TESTS = os.path.join(ROOT, "tests")
VARIANTS = ("tf-loader", "ours-dir", "ours-cache", "read-crc", "read-nocrc", "parse-pb")
#: What the cached variant loads: the tfhub.dev handle, answered by the mirror at its path.
CACHED_NAME, MIRROR_PATH = "https://tfhub.dev/google/elmo/3", os.path.join("google", "elmo", "3")
PUBLISHED_OPTIONS = {
    "char_cnn": {"activation": "relu", "embedding": {"dim": 16},
                 "filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512],
                             [7, 1024]],
                 "max_characters_per_token": 50, "n_characters": 262, "n_highway": 2},
    "lstm": {"cell_clip": 3, "dim": 4096, "n_layers": 2, "proj_clip": 3, "projection_dim": 512,
             "use_skip_connections": True},
}
TOKENS = [["the", "cat", "sat", "on", "the", "mat", "."], ["a", "dog", "", "", "", "", ""]]

#: Builds the published-size module in a child (tf.compat.v1 with v2 behaviour off).
_BUILD = """
import json, sys
sys.path.insert(0, sys.argv[1])
import tfhub_module_builder as b
tf, hub, bilm = b.import_tools(b.ensure_tools(sys.argv[2]))
options_file, weight_file = b.write_input_model(sys.argv[3], json.loads(sys.argv[5]))
b.export_module(tf, hub, b.google_module_fn(tf, hub, bilm, options_file, weight_file),
                sys.argv[4], b.MIX["google_elmo"])
"""

#: One variant in a fresh process: argv variant, module (a directory or a name), tokens.
_CHILD = """
import json, sys, time
variant, module, tokens = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
start = time.perf_counter()
if variant == "tf-loader":
    import tensorflow as tf
elif variant.startswith("ours"):
    import tensorflow as tf
    import keras_elmo
else:
    from keras_elmo.formats.tfhub_module import read_saved_model, read_tfhub_module
imported = time.perf_counter()
if variant == "tf-loader":
    model = tf.saved_model.load(module)
    lengths = [sum(1 for t in row if t) for row in tokens]
    out = model.signatures["tokens"](tokens=tf.constant(tokens),
                                     sequence_len=tf.constant(lengths, tf.int32))
    shape = tuple(out["elmo"].numpy().shape)
elif variant.startswith("ours"):
    layer = keras_elmo.ElmoLayer.from_preset(module)
    shape = tuple(layer(tf.constant(tokens)).numpy().shape)
elif variant == "parse-pb":
    shape = len(read_saved_model(module + "/saved_model.pb")["meta_graphs"])
else:
    found = read_tfhub_module(module, verify_checksums=variant == "read-crc")
    shape = sum(a.size for a in found.arrays.values())
done = time.perf_counter()
status = dict(line.split(":", 1) for line in open("/proc/self/status") if ":" in line)
mib = lambda key: int(status[key].split()[0]) / 1024.0
print("RESULT " + json.dumps({"import_s": imported - start, "work_s": done - imported,
                              "shape": str(shape), "vmhwm": mib("VmHWM"),
                              "rss_anon_end": mib("RssAnon")}))
"""


def build_module(work, size, cache):
    """The module directory under `work`, built on the first call (a `.built` marker)."""
    module = os.path.join(work, "module")
    if os.path.isfile(os.path.join(work, ".built")):
        return module
    shutil.rmtree(module, ignore_errors=True)
    start = time.perf_counter()
    if size == "tiny":
        shutil.copytree(os.path.join(TESTS, "fixtures", "tfhub", "google_elmo"), module)
    else:
        subprocess.run([sys.executable, "-c", _BUILD, TESTS, cache,
                        os.path.join(work, "input_model"), module,
                        json.dumps(PUBLISHED_OPTIONS)], check=True, env=STARTING_ENVIRONMENT)
        shutil.rmtree(os.path.join(work, "input_model"))
    archive = os.path.join(work, "mirror", MIRROR_PATH)
    os.makedirs(os.path.dirname(archive), exist_ok=True)
    with tarfile.open(archive, "w:gz", compresslevel=1) as tar:  # as tfhub.dev serves it
        for name in sorted(os.listdir(module)):
            tar.add(os.path.join(module, name), "./" + name)
    open(os.path.join(work, ".built"), "w").close()
    report("module built", f"{time.perf_counter() - start:.1f} s")
    return module


def module_sizes(module):
    """`"saved_model.pb N bytes, variables/ M bytes"` of a module directory."""
    pb = os.path.getsize(os.path.join(module, "saved_model.pb"))
    folder = os.path.join(module, "variables")
    variables = sum(os.path.getsize(os.path.join(folder, n)) for n in os.listdir(folder))
    return f"saved_model.pb {pb:,} bytes, variables/ {variables:,} bytes"


def run_child(variant, module, env):
    """Runs one variant in a fresh process; its figures, with the whole process's seconds
    and the peak anonymous memory sampled from here."""
    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-c", _CHILD, variant, module,
                              json.dumps(TOKENS)], env=env, cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sampler = MemorySampler(child.pid)
    stdout, stderr = child.communicate()
    sampler.close()
    wall = time.perf_counter() - start
    results = [line for line in stdout.splitlines() if line.startswith("RESULT ")]
    if child.returncode or not results:
        raise RuntimeError(f"{variant} failed (exit {child.returncode}):\n{stderr[-3000:]}")
    figures = json.loads(results[-1][len("RESULT "):])
    figures.update(process_s=wall, anon_peak=sampler.peak().get("anon", 0.0))
    return figures


def describe(samples, key, unit="s", digits=2):
    """`median (min..max)` of one figure over the runs."""
    values = [s[key] for s in samples]
    median, _ = median_spread(values)
    return f"{median:,.{digits}f} ({min(values):,.{digits}f}..{max(values):,.{digits}f}) {unit}"


def cpu_flags():
    """The flags of /proc/cpuinfo that matter here, present or not."""
    try:
        with open("/proc/cpuinfo") as handle:
            flags = next((l.split(":", 1)[1].split() for l in handle if l.startswith("flags")), [])
    except OSError:
        flags = []
    return " ".join(f if f in flags else f"no-{f}" for f in ("avx2", "fma", "avx512f",
                                                             "avx512_bf16", "amx_tile"))


def main():
    parser = doc_parser(__doc__)
    parser.add_argument("--size", choices=("tiny", "published"), default="published",
                        help="the module's sizes (published)")
    parser.add_argument("--repeats", type=int, default=3, help="rounds (3)")
    parser.add_argument("--dir", default=None, help="where the work folder goes (TMPDIR)")
    parser.add_argument("--keep", action="store_true",
                        help="keep the work folder (module, archive, cache) for the next run")
    parser.add_argument("--builder-cache", default=os.path.join(
        os.path.expanduser("~"), ".cache", "keras_elmo_tfhub_builder"),
        help="where the builder's tools are installed (%(default)s)")
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS),
                        help="what to time (all)")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error(f"--repeats must be >= 1; received {args.repeats}")
    report("cpu", f"{cpu_model()}; flags {cpu_flags()}; {os.cpu_count()} cores")
    print_load("before")
    work = os.path.join(args.dir or tempfile.gettempdir(), f"keras-elmo-tfhub-load-{args.size}")
    os.makedirs(work, exist_ok=True)
    sys.path.insert(0, TESTS)
    from model_mirror import MirrorServer

    try:
        module = build_module(work, args.size, args.builder_cache)
        report("module", module_sizes(module))
        cache = os.path.join(work, "cache")
        shutil.rmtree(cache, ignore_errors=True)  # the first fetch below lands it afresh
        probe = MatmulProbe()
        samples = {v: [] for v in args.variants}
        with MirrorServer(os.path.join(work, "mirror")) as server:
            cached_env = dict(STARTING_ENVIRONMENT, KERAS_ELMO_CACHE=cache,
                              KERAS_ELMO_MIRROR=server.url)
            if "ours-cache" in args.variants:
                first = run_child("ours-cache", CACHED_NAME, cached_env)
                report("ours-cache, first use (download from 127.0.0.1, unpack, load, call)",
                       f"{first['work_s']:.2f} s, peak anonymous {first['anon_peak']:,.0f} MiB")
            for round_index in range(args.repeats):
                probe.sample()
                turn = round_index % len(args.variants)
                for variant in args.variants[turn:] + args.variants[:turn]:
                    cached = variant == "ours-cache"
                    figures = run_child(variant, CACHED_NAME if cached else module,
                                        cached_env if cached else STARTING_ENVIRONMENT)
                    samples[variant].append(figures)
                    print(f"round {round_index + 1} {variant}: work {figures['work_s']:.2f} s, "
                          f"imports {figures['import_s']:.2f} s, process "
                          f"{figures['process_s']:.2f} s, peak anonymous "
                          f"{figures['anon_peak']:,.0f} MiB, VmHWM {figures['vmhwm']:,.0f} MiB",
                          flush=True)
            probe.sample()
        for variant, runs in samples.items():
            report(variant, f"work {describe(runs, 'work_s')}; imports "
                   f"{describe(runs, 'import_s')}; process {describe(runs, 'process_s')}; "
                   f"peak anonymous {describe(runs, 'anon_peak', 'MiB', 0)}; VmHWM "
                   f"{describe(runs, 'vmhwm', 'MiB', 0)}; RssAnon at end "
                   f"{describe(runs, 'rss_anon_end', 'MiB', 0)}; output {runs[0]['shape']}")
        median = {v: median_spread([s["work_s"] for s in runs])[0] for v, runs in samples.items()}
        for ours in ("ours-dir", "ours-cache"):
            if ours in median and "tf-loader" in median:
                rounds = " / ".join(f"{a['work_s'] / b['work_s']:.2f}" for a, b in
                                    zip(samples[ours], samples["tf-loader"]))
                report(f"{ours} / tf-loader (load + call)",
                       f"{median[ours] / median['tf-loader']:.2f}x (round by round {rounds})")
        report("matmul 2048^3 float32", format_samples(probe.samples, "GFLOP/s"))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print_load("after")


if __name__ == "__main__":
    main()
