"""Raw Chinese text from People's Daily: the segmented corpus with its spaces removed.

`keras-elmo data people-daily` writes People's Daily (January 1998) hand-segmented, one
sentence per line, words separated by spaces. Removing the spaces gives raw Chinese news,
as a user would have it: the input of the raw-text demonstration (`--tokenizer jieba` in
`vocab`, `train`, `perplexity` and `neighbors`, examples/README.md). Spaces inside a word
do not occur in the source (its words are whitespace-free), so nothing else changes; a
sentence is still one line, and the train/held-out split is the source's.

Example:
    keras-elmo data people-daily --out data/people_daily
    python examples/raw_chinese.py --data data/people_daily --out data/people_daily_raw
"""

import os
import sys

import _example

#: The splits of `keras-elmo data people-daily` made raw.
SPLITS = ("train", "heldout")


def parse_args(argv):
    parser = _example.parser(__doc__)
    parser.add_argument("--data", required=True,
                        help="directory of `keras-elmo data people-daily` (train.txt, heldout.txt)")
    parser.add_argument("--out", required=True, help="directory for the raw train.txt, heldout.txt")
    return parser.parse_args(argv)


def remove_spaces(line):
    """One segmented line as raw text: every whitespace removed, the newline kept.

    Example:
    >>> remove_spaces("迈向 充满 希望 的 新 世纪\\n")
    '迈向充满希望的新世纪\\n'
    """
    return "".join(line.split()) + "\n"


def make_raw(data_dir, out_dir):
    """Writes `out_dir/{train,heldout}.txt`; returns {split: (lines, characters)}."""
    from keras_elmo.process.atomic_file import atomic_writer

    sources = {split: os.path.join(data_dir, f"{split}.txt") for split in SPLITS}
    for split, path in sources.items():
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{path} not found; expected the output directory of "
                                    "`keras-elmo data people-daily --out DIR`.")
    os.makedirs(out_dir, exist_ok=True)
    stats = {}
    for split, path in sources.items():
        lines = characters = 0
        with open(path, encoding="utf-8") as source, \
                atomic_writer(os.path.join(out_dir, f"{split}.txt")) as out:
            for line in source:
                raw = remove_spaces(line)
                out.write(raw)
                lines += 1
                characters += len(raw) - 1
        stats[split] = (lines, characters)
    return stats


def main(argv=None):
    args = parse_args(argv)
    try:
        stats = make_raw(args.data, args.out)
    except (ValueError, OSError) as error:
        print(f"raw_chinese: error: {error}", file=sys.stderr)
        return 2
    for split, (lines, characters) in stats.items():
        print(f"wrote {os.path.join(args.out, split + '.txt')}: {lines:,} lines, "
              f"{characters:,} characters, no spaces")
    return 0


if __name__ == "__main__":
    sys.exit(main())
