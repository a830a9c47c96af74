"""Memory of loading an ELMoForManyLangs model directory: `keras_elmo.load_bilm(DIR)`.

Each round loads the model in a fresh process (a child of this script) and reports the
process's anonymous memory (`RssAnon`, sampled every 5 ms, peak RSS beside) before the load,
at its peak and after it, next to the size of the model's weights: a loader that copies the
model once peaks at about the weights above the starting point, plus one tensor in flight.
The model is a directory as downloaded (make a published-size one with EFML's own code, e.g.
`efml.sh make-model DIR --size published --han 6000`).

Example:
    python benchmarks/efml_load_memory.py /tmp/zhs_published --repeats 3
"""

import json
import os
import subprocess
import sys

from _common import doc_parser, print_load  # noqa: E402

_CHILD = """
import json, sys, time
sys.path.insert(0, {here!r})
from _memory_sampler import MemorySampler
from keras_elmo.cli.tensorflow_start import import_tensorflow
import_tensorflow()
import keras_elmo
with MemorySampler(interval=0.005) as sampler:
    before = sampler.take()
    start = time.perf_counter()
    bilm = keras_elmo.load_bilm({model!r})
    seconds = time.perf_counter() - start
    peak = sampler.take()
    after = sampler.read()
weights = sum(v.numpy().nbytes for v in bilm.weights) / 2**20
print(json.dumps(dict(weights=weights, before=before["anon"], peak=peak["anon"],
                      peak_rss=peak["rss"], after=after["anon"], seconds=seconds)))
"""


def main(argv=None):
    parser = doc_parser(__doc__)
    parser.add_argument("model", help="an ELMoForManyLangs model directory")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    here = os.path.dirname(os.path.abspath(__file__))
    print_load("before")
    for _ in range(args.repeats):
        out = subprocess.run([sys.executable, "-c", _CHILD.format(here=here, model=args.model)],
                             capture_output=True, text=True, check=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"weights {r['weights']:,.0f} MiB; anonymous memory before the load "
              f"{r['before']:,.0f} MiB, peak {r['peak']:,.0f} (+{r['peak'] - r['before']:,.0f}"
              f"), after {r['after']:,.0f}; peak RSS {r['peak_rss']:,.0f} MiB; "
              f"{r['seconds']:.1f} s")
    print_load("after")


if __name__ == "__main__":
    main()
