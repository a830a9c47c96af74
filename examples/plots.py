"""PNG plots of the downstream results: sample efficiency and learned mix weights.

Reads OUT/pos_tagger.json (from examples/pos_tagger.py) and, if present,
OUT/sentiment.json (examples/sentiment.py), and writes:
- OUT/sample_efficiency.png: held-out tagging accuracy against the number of training
  sentences (log scale), with and without ELMo (the paper's section 5.4, Figure 1);
- OUT/mix_weights.png: the learned `softmax(s)` of each ELMo run's scalar mix, one bar per
  biLM layer (0 = char CNN, then the biLSTM layers), `gamma` in the legend (the paper's
  section 5.5, Figure 2).

Example:
    python examples/plots.py --out results/
"""

import json
import os
import sys

import _example


def parse_args(argv):
    parser = _example.parser(__doc__)
    parser.add_argument("--out", required=True, help="directory holding pos_tagger.json")
    return parser.parse_args(argv)


def _load(path):
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def plot_sample_efficiency(tagger, path):
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(5.5, 4))
    for arm, label, style in (("baseline", "without ELMo", "o--"), ("elmo", "with ELMo", "s-")):
        runs = sorted((r for r in tagger["runs"] if r["arm"] == arm),
                      key=lambda r: r["sentences"])
        xs, ys = [r["sentences"] for r in runs], [100 * r["test_accuracy"] for r in runs]
        axes.plot(xs, ys, style, label=label)
        for x, y, r in zip(xs, ys, runs):
            axes.annotate(f"{y:.1f}", (x, y), textcoords="offset points",
                          xytext=(0, 6 if arm == "elmo" else -14), ha="center", fontsize=8)
    axes.set_xscale("log")
    axes.margins(x=0.08, y=0.1)
    axes.set_xlabel("training sentences (log scale)")
    axes.set_ylabel("held-out token accuracy (%)")
    axes.set_title("POS tagging, People's Daily 1998: sample efficiency")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(loc="lower right")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def plot_mix_weights(runs, path):
    """`runs`: list of (label, {"softmax_s": [...], "gamma": g})."""
    import matplotlib.pyplot as plt

    num_layers = len(runs[0][1]["softmax_s"])
    width = 0.8 / len(runs)
    figure, axes = plt.subplots(figsize=(6, 4))
    for k, (label, mix) in enumerate(runs):
        xs = [j + (k - (len(runs) - 1) / 2) * width for j in range(num_layers)]
        axes.bar(xs, mix["softmax_s"], width, label=f"{label} (gamma {mix['gamma']:.2f})")
    axes.axhline(1.0 / num_layers, color="grey", linestyle=":", linewidth=1,
                 label="even mix (initial)")
    axes.set_xticks(range(num_layers))
    axes.set_xticklabels(["0 (char CNN)"] + [f"{j} (biLSTM)" for j in range(1, num_layers)])
    axes.set_xlabel("biLM layer")
    axes.set_ylabel("softmax(s)_j")
    axes.set_title("Learned ELMo scalar-mix weights")
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def main(argv=None):
    args = parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")
    tagger = _load(os.path.join(args.out, "pos_tagger.json"))
    sentiment = _load(os.path.join(args.out, "sentiment.json"))
    if tagger is None and sentiment is None:
        raise SystemExit(f"plots.py: error: {args.out} has neither pos_tagger.json nor "
                         "sentiment.json; run examples/pos_tagger.py / sentiment.py first.")
    written = []
    mixes = []
    if tagger is not None:
        path = os.path.join(args.out, "sample_efficiency.png")
        plot_sample_efficiency(tagger, path)
        written.append(path)
        mixes += [(f"POS {r['fraction']:.0%}", r["mix"]) for r in tagger["runs"]
                  if r["arm"] == "elmo"]
    if sentiment is not None:
        mixes += [("sentiment", r["mix"]) for r in sentiment["runs"] if r["arm"] == "elmo"]
    if mixes:
        path = os.path.join(args.out, "mix_weights.png")
        plot_mix_weights(mixes, path)
        written.append(path)
    for label, mix in mixes:
        print(f"{label}: softmax(s) = [{', '.join(f'{w:.3f}' for w in mix['softmax_s'])}], "
              f"gamma = {mix['gamma']:.3f}")
    print("wrote " + ", ".join(written))
    return written


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
