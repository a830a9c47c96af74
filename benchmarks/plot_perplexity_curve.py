"""Held-out perplexity against training minutes, with the trigram as a horizontal line.

Reads logs (one or more, one line each on the plot) of `bash scripts/main.sh` (its
`RUN.main.log`) or any log of `keras-elmo train --heldout` runs, resumed ones included.
Points come from two kinds of lines:

- in-training evaluations (`keras-elmo train ... --heldout H --eval-every N`):
  `step N | held-out perplexity: forward F | backward B | average A (K sentences) | 0:05:02`,
  at the run's clock (evaluations included);
- after a run: `stopped (...) at step N ..., S s; wrote ...` and then the full evaluation's
  `forward perplexity:` / `backward perplexity:` (`keras-elmo train --heldout` or
  `keras-elmo perplexity`), at S seconds summed over the resumed segments before it.

`benchmarks/ngram_baseline.py` prints `forward ppl:`: the trigram's line.

    python benchmarks/plot_perplexity_curve.py runs/people_daily_small.main.log --out docs/perplexity_curve.png
"""

import argparse
import re
import sys

_STOPPED = re.compile(r"^stopped \(\w+\) at step (\d+) .*?, (\d+) s; wrote")
_PERPLEXITY = re.compile(r"^(forward|backward) perplexity:\s+([\d.]+)")
_TRIGRAM = re.compile(r"^(forward|backward) ppl: ([\d.]+)")
_DURING = re.compile(r"^step (\d+) \| held-out perplexity: forward ([\d.]+) \| backward "
                     r"([\d.]+) \| .* \| (\d+):(\d\d):(\d\d)$")


def parse_log(path):
    """`(points, trigram)`: points `[(minutes, step, forward, backward)]` in order,
    trigram `{"forward": ppl, "backward": ppl}` (empty when the log has none)."""
    points, trigram, seconds, step, pending = [], {}, 0.0, None, {}
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            line = line.strip()
            if match := _DURING.match(line):
                hours, minutes, secs = (int(match.group(k)) for k in (4, 5, 6))
                clock = seconds + 3600 * hours + 60 * minutes + secs  # this segment's clock
                points.append((clock / 60.0, int(match.group(1)), float(match.group(2)),
                               float(match.group(3))))
            elif match := _STOPPED.match(line):
                step, seconds = int(match.group(1)), seconds + float(match.group(2))
            elif match := _PERPLEXITY.match(line):
                pending[match.group(1)] = float(match.group(2))
                if len(pending) == 2:
                    if step is None:
                        raise ValueError(f"{path}: a perplexity before any 'stopped ...' line.")
                    points.append((seconds / 60.0, step, pending["forward"], pending["backward"]))
                    pending = {}
            elif match := _TRIGRAM.match(line):
                trigram[match.group(1)] = float(match.group(2))
    if not points:
        raise ValueError(f"{path}: no held-out perplexity found; expected the log of "
                         "scripts/main.sh or of keras-elmo train --heldout.")
    return points, trigram


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("logs", nargs="+",
                        help="logs of scripts/main.sh or of keras-elmo train --heldout")
    parser.add_argument("--labels", nargs="+", help="one label per log (default: file names)")
    parser.add_argument("--out", default="docs/perplexity_curve.png", help="PNG to write")
    args = parser.parse_args(argv)
    if args.labels and len(args.labels) != len(args.logs):
        print(f"plot_perplexity_curve: error: {len(args.labels)} labels for {len(args.logs)} "
              "logs; give one per log.", file=sys.stderr)
        return 2
    try:
        parsed = [parse_log(path) for path in args.logs]
    except (ValueError, OSError) as error:
        print(f"plot_perplexity_curve: error: {error}", file=sys.stderr)
        return 2
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6.4, 4.0))
    trigram = None
    for (points, tri), label in zip(parsed, args.labels or args.logs):
        minutes = [0.0] + [p[0] for p in points]
        axis.plot(minutes[1:], [p[2] for p in points], "o-", label=f"biLM forward ({label})")
        for p in points:
            print(f"{label}: {p[0]:.1f} min, step {p[1]}: held-out forward {p[2]:.1f}, "
                  f"backward {p[3]:.1f}")
        trigram = trigram or tri.get("forward")
    if trigram:
        axis.axhline(trigram, color="gray", linestyle="--",
                     label=f"Kneser-Ney trigram forward ({trigram:.1f})")
        axis.axhline(0.75 * trigram, color="gray", linestyle=":",
                     label=f"0.75 x trigram ({0.75 * trigram:.1f})")
    axis.set_xlabel("training minutes (2 CPU cores, shared)")
    axis.set_ylabel("held-out perplexity (full softmax)")
    axis.set_yscale("log")
    axis.grid(True, which="both", alpha=0.3)
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(args.out, dpi=100)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
