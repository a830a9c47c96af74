"""Export time and SavedModel size of the published configuration (random weights).

Writes options.json + weights.hdf5 of `BiLMOptions.published()` (or the `--config` preset)
with random weights, then times what `keras-elmo export MODEL_DIR OUT_DIR` does (read the
weight file, build, trace the three signatures, save) `--repeats` times, interleaved with
nothing else, and reports the median and range. Then measures, in a fresh process with TensorFlow only, the time to
`tf.saved_model.load` the export and to embed one sentence (a serving cold start).

The machine is shared: the load average is printed first; compare runs only at similar load.

Example:
    python benchmarks/export_size.py --workdir /tmp/elmo_export_bench
    python benchmarks/export_size.py --config tiny --repeats 1   # a quick check that it runs
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


COLD_START = """
import json, time
t0 = time.perf_counter()
import tensorflow as tf
t1 = time.perf_counter()
elmo = tf.saved_model.load({path!r})
t2 = time.perf_counter()
out = elmo.signatures["default"](text=tf.constant(["The cat sat on the mat ."]))
t3 = time.perf_counter()
out = elmo.signatures["default"](text=tf.constant(["The cat sat on the mat ."]))
t4 = time.perf_counter()
print(json.dumps({{"import_s": t1 - t0, "load_s": t2 - t1, "first_call_s": t3 - t2,
                  "second_call_s": t4 - t3, "elmo_shape": out["elmo"].shape.as_list()}}))
"""


def directory_bytes(path):
    """Total size of the files under `path`."""
    return sum(os.path.getsize(os.path.join(root, name))
               for root, _, names in os.walk(path) for name in names)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workdir", default=None, help="scratch directory (default: a temp dir)")
    parser.add_argument("--repeats", type=int, default=3, help="timed exports (default 3)")
    parser.add_argument("--config", default="published", choices=("published", "small", "tiny"),
                        help="BiLMOptions preset (default: published)")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        print(f"export_size: error: --repeats must be >= 1; received {args.repeats}",
              file=sys.stderr)
        return 2
    from keras_elmo.cli.tensorflow_start import import_tensorflow

    import_tensorflow()  # as the keras-elmo command starts
    import keras_elmo
    from keras_elmo.export import export_from_files
    from keras_elmo.formats.weight_file import save_published

    print(f"load average (1, 5, 15 min): {os.getloadavg()}; cpus: {os.cpu_count()}")
    workdir = args.workdir or tempfile.mkdtemp(prefix="elmo_export_bench_")
    os.makedirs(workdir, exist_ok=True)
    model_dir = os.path.join(workdir, "model")
    bilm = keras_elmo.BiLM(getattr(keras_elmo.BiLMOptions, args.config)())
    params = bilm.count_params()
    options_file, weight_file = save_published(bilm, model_dir)
    del bilm
    print(f"{args.config} configuration: {params:,} parameters; weights.hdf5 "
          f"{os.path.getsize(weight_file) / 2**20:.1f} MB")

    seconds = []
    path = None
    for repeat in range(args.repeats):
        path = os.path.join(workdir, "serving", "elmo", str(repeat + 1))
        start = time.perf_counter()
        export_from_files(options_file, weight_file, path, overwrite=True)
        seconds.append(time.perf_counter() - start)
        print(f"export {repeat + 1}: {seconds[-1]:.1f} s")
    total = directory_bytes(path)
    variables = directory_bytes(os.path.join(path, "variables"))
    graph = os.path.getsize(os.path.join(path, "saved_model.pb"))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.run([sys.executable, "-c", COLD_START.format(path=path)],
                          capture_output=True, text=True, env=env, cwd="/", timeout=600)
    if proc.returncode != 0:
        print(f"export_size: error: loading the export failed:\n{proc.stderr[-2000:]}",
              file=sys.stderr)
        return 1
    cold = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"export seconds: median {statistics.median(seconds):.1f} "
          f"(min {min(seconds):.1f}, max {max(seconds):.1f}, n={len(seconds)})")
    print(f"SavedModel MB: {total / 2**20:.1f} (variables {variables / 2**20:.1f}, "
          f"saved_model.pb {graph / 2**20:.2f})")
    print(f"TF-only cold start: import {cold['import_s']:.1f} s, load {cold['load_s']:.1f} s, "
          f"first call {cold['first_call_s']:.2f} s, second call {cold['second_call_s']:.2f} s "
          f"(elmo {cold['elmo_shape']})")
    if args.workdir is None:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
