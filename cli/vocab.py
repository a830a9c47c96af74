"""`keras-elmo vocab`: build a biLM vocabulary file from one-sentence-per-line text.

Example:
    keras-elmo vocab --train 'data/people_daily/train.txt' --out data/vocab.txt --min-count 3
    keras-elmo vocab --train raw_chinese.txt --tokenizer jieba --out data/vocab.txt
"""

import os

from keras_elmo.cli.path_checks import check_writable
from keras_elmo.cli.tokenizer_option import add_tokenizer_argument, resolve_tokenizer


def add_parser(subparsers):
    """Registers `vocab` (no heavy imports here)."""
    parser = subparsers.add_parser(
        "vocab", help="build a vocabulary file (<S>, </S>, <UNK>, then by frequency)",
        description="Counts the tokens of one-sentence-per-line files (split as --tokenizer "
                    "says; train with the same --tokenizer) and writes one token per line: "
                    "<S>, </S>, <UNK>, then by count (desc), ties by token.")
    parser.add_argument("--train", required=True, nargs="+", metavar="GLOB",
                        help="training text files or glob patterns (quote the glob)")
    parser.add_argument("--out", required=True, metavar="FILE", help="vocabulary file to write")
    parser.add_argument("--min-count", type=int, default=1, metavar="N",
                        help="keep tokens seen at least N times (default 1)")
    parser.add_argument("--max-size", type=int, default=None, metavar="N",
                        help="at most N tokens in all, the 3 special tokens included")
    add_tokenizer_argument(parser, from_model=False)
    parser.set_defaults(run=run)


def run(args):
    """Builds and writes the vocabulary; returns the exit code."""
    from keras_elmo.process.storage_errors import storage_guard
    from keras_elmo.training.corpus import expand_corpus
    from keras_elmo.training.vocabulary import token_counts, vocabulary_from_counts

    vocabulary_from_counts({}, args.min_count, args.max_size)  # reject bad numbers early
    tokenizer = resolve_tokenizer(args)
    paths = expand_corpus(args.train)
    if os.path.isdir(args.out):
        raise ValueError(f"Expected --out to be a file path. Received a directory: {args.out!r}")
    check_writable(args.out, "the vocabulary")  # before the corpus is read, not after
    counts = token_counts(paths, tokenizer)  # a line that is not UTF-8: file and line named
    if not counts:
        raise ValueError(f"the corpus {' '.join(args.train)} holds no token (expected one "
                         "sentence per line); nothing written.")
    vocabulary = vocabulary_from_counts(counts, args.min_count, args.max_size)
    directory = os.path.dirname(os.path.abspath(args.out))
    with storage_guard(args.out, "the vocabulary"):  # a read-only parent: one line
        os.makedirs(directory, exist_ok=True)
    vocabulary.save(args.out)
    total = sum(counts.values())
    by = "" if tokenizer == "whitespace" else f", tokenizer {tokenizer}"
    covered = sum(counts[token] for token in vocabulary.tokens if token in counts)
    coverage = covered / total if total else 0.0
    print(f"wrote {args.out}: {len(vocabulary)} tokens (3 special) from {len(counts)} distinct "
          f"in {total} training tokens ({len(paths)} file(s){by}); covers {coverage:.2%}")
    return 0
