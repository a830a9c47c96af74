"""POS tagging of People's Daily 1998 with and without ELMo, at several training sizes.

Data: `keras-elmo data people-daily --out DATA` (DATA/train.conll, DATA/heldout.conll: the
biLM's own split, by document, ~5% held out; 44 PKU tags). A seeded `--dev-sentences` of
train is kept aside for early stopping; the fractions (`--fractions`, default 1%, 10%,
100%: the paper's section 5.4) are seeded samples of the rest. The held-out split is
the test set, never used for any choice.

Both arms: word embeddings (64-d, random init, words seen >= 2 times in the training
sample; others share the OOV vector), dropout 0.5, biLSTM(128) per direction, softmax over
the tags; Adam 1e-3, batch 32, at most `--epochs` epochs per fraction with early stopping
(patience 2) on dev accuracy, best epoch restored; same seed. The ELMo arm adds `ScalarMix`
over the frozen biLM's layers (dropout 0.5) to the word embeddings. The biLM layers are
computed once (`LayerStore`); after training, the 100% ELMo tagger is rebuilt on raw
strings with `ElmoLayer` and scored again on the held-out text, end to end.

Writes OUT/pos_tagger.json (every figure) and OUT/pos_tagger.md (the table); prints both.

Example:
    python examples/pos_tagger.py --data data/people_daily --model runs/people_daily_small \\
        --out results/
"""

import json
import os
import sys
import time

import _example


def parse_args(argv):
    parser = _example.parser(__doc__)
    _example.add_task_arguments(parser, batch_size=32)
    parser.add_argument("--data", required=True, help="directory with train/heldout.conll")
    parser.add_argument("--fractions", type=float, nargs="+", default=[0.01, 0.1, 1.0])
    parser.add_argument("--epochs", type=int, nargs="+", default=[30, 10, 8],
                        help="most epochs per fraction (default 30 10 8; early stopping on dev decides within)")
    parser.add_argument("--max-train-len", type=int, default=100,
                        help="training sentences are cut to this many tokens (test: never)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-sentences", type=int, default=None,
                        help="read only this many sentences of each file (for quick runs)")
    args = parser.parse_args(argv)
    if len(args.epochs) != len(args.fractions):
        parser.error(f"--epochs needs one value per fraction; received {args.epochs} for "
                     f"{args.fractions}")
    return args


def main(argv=None):
    args = parse_args(argv)
    _example.import_tensorflow()
    import keras

    from keras_elmo.embedding.bilm_runner import BiLMRunner
    from tasks.datasets import build_word_index, encode, read_conll, subsample
    from tasks.downstream import Batches, TaskLayers, accuracy, predict_text
    from tasks.experiment import build_store, model_fingerprint, train_arm
    from keras_elmo.formats.model_files import VOCAB_FILE
    from keras_elmo.embedding.loaders import load_bilm, load_token_cache, model_files

    started = time.perf_counter()
    options_file, weight_file = model_files(args.model)
    os.makedirs(args.out, exist_ok=True)
    layers_dir = args.layers_dir or args.out
    os.makedirs(layers_dir, exist_ok=True)
    train = read_conll(os.path.join(args.data, "train.conll"), args.max_sentences)
    test = read_conll(os.path.join(args.data, "heldout.conll"), args.max_sentences)
    dev_rows = set(subsample(range(len(train)), min(1.0, args.dev_sentences / len(train)),
                             seed=args.seed))
    pool = [i for i in range(len(train)) if i not in dev_rows]
    tags = sorted({tag for _, sentence_tags in train for tag in sentence_tags})
    tag_index = {tag: i for i, tag in enumerate(tags)}

    bilm = load_bilm(args.model)
    vocab = os.path.join(args.model, VOCAB_FILE)
    cache = load_token_cache(bilm, vocab) if os.path.isfile(vocab) else None
    runner = BiLMRunner(bilm, token_cache=cache, batch_size=64)
    fingerprint = model_fingerprint(args.model) if args.keep_layers else None
    train_store, train_seconds = build_store(
        runner, [t for t, _ in train], os.path.join(layers_dir, "train_layers.f16"),
        "biLM layers, train", fingerprint)
    test_store, test_seconds = build_store(
        runner, [t for t, _ in test], os.path.join(layers_dir, "heldout_layers.f16"),
        "biLM layers, heldout", fingerprint)
    results = {"command": "python examples/pos_tagger.py " + " ".join(argv or sys.argv[1:]),
               "train_sentences": len(pool), "dev_sentences": len(dev_rows),
               "test_sentences": len(test), "test_tokens": sum(len(t) for t, _ in test),
               "tags": len(tags), "bilm_seconds": train_seconds + test_seconds, "runs": []}
    gold = [[tag_index.get(tag, -1) for tag in sentence_tags] for _, sentence_tags in test]
    dev = sorted(dev_rows)

    for fraction, epochs in zip(args.fractions, args.epochs):
        rows = subsample(pool, fraction, seed=args.seed)
        word_index = build_word_index([train[i][0] for i in rows], min_count=2)
        words = sorted(word_index, key=word_index.get)

        def batches(indices, data, store, shuffle=False, max_len=None):
            return Batches([encode(data[i][0], word_index) for i in indices],
                           [[tag_index.get(t, 0) for t in data[i][1]] for i in indices],
                           indices=indices, store=store, batch_size=args.batch_size,
                           max_len=max_len, shuffle=shuffle, seed=args.seed)

        oov = [[w not in word_index for w in tokens] for tokens, _ in test]
        for arm in ("baseline", "elmo"):
            keras.utils.set_random_seed(args.seed)
            store, test_layers = (train_store, test_store) if arm == "elmo" else (None, None)
            task = TaskLayers("tagger", len(words) + 2, len(tags),
                              elmo_dim=bilm.output_dim if arm == "elmo" else None,
                              word_dim=args.word_dim, lstm_units=args.lstm_units,
                              elmo_dropout=args.elmo_dropout, do_layer_norm=args.layer_norm)
            model = task.training_model(bilm.num_output_layers)
            test_batches = batches(range(len(test)), test, test_layers)
            run = train_arm(task, model, batches(rows, train, store, True, args.max_train_len),
                            batches(dev, train, store), test_batches, gold, epochs,
                            patience=args.patience, learning_rate=args.learning_rate)
            predictions = run.pop("predictions")
            pairs = [(p == g, o) for ps, gs, os_ in zip(predictions, gold, oov)
                     for p, g, o in zip(ps, gs, os_)]
            run.update(arm=arm, fraction=fraction, sentences=len(rows), words=len(words),
                       oov_accuracy=_share([c for c, o in pairs if o]),
                       oov_tokens=sum(o for _, o in pairs),
                       in_vocabulary_accuracy=_share([c for c, o in pairs if not o]))
            if arm == "elmo" and fraction == max(args.fractions) and not args.no_text_check:
                text_model = task.text_model(words, options_file, weight_file)
                start = time.perf_counter()
                text_predictions = predict_text(text_model, [t for t, _ in test])
                run["text_check"] = {
                    "test_accuracy": accuracy(text_predictions, gold),
                    "same_predictions": accuracy(text_predictions, predictions),
                    "seconds": time.perf_counter() - start}
            results["runs"].append(run)
            print(_run_line(run), flush=True)

    results["seconds"] = time.perf_counter() - started
    table = markdown_table(results)
    with open(os.path.join(args.out, "pos_tagger.json"), "w", encoding="utf-8") as f:
        json.dump(results, f, indent=2)
    with open(os.path.join(args.out, "pos_tagger.md"), "w", encoding="utf-8") as f:
        f.write(table)
    for name in ("train_layers.f16", "heldout_layers.f16"):
        for path in ([] if args.keep_layers else [name, name + ".json"]):
            os.remove(os.path.join(layers_dir, path))
    print(table)
    return results


def _share(flags):
    return sum(flags) / len(flags) if flags else float("nan")


def _run_line(run):
    return (f"{run['arm']:8s} {run['fraction']:>6.0%} ({run['sentences']} sentences): "
            f"test acc {run['test_accuracy']:.4f}, OOV {run['oov_accuracy']:.4f}, "
            f"epochs {run['epochs_run']} (best {run['best_epoch']}), {run['seconds']:.0f} s"
            + (f", ElmoLayer on text: {run['text_check']['test_accuracy']:.4f} "
               f"({run['text_check']['same_predictions']:.2%} same)"
               if "text_check" in run else ""))


def markdown_table(results):
    """The accuracy table: one row per fraction, both arms, gain, OOV accuracy."""
    runs = {(r["fraction"], r["arm"]): r for r in results["runs"]}
    lines = [f"POS tagging, People's Daily 1998 held-out ({results['test_sentences']:,} "
             f"sentences, {results['test_tokens']:,} tokens, {results['tags']} tags); "
             f"token accuracy:", "",
             "| training sentences | without ELMo | with ELMo | gain | OOV without | "
             "OOV with | OOV share |", "|---|---|---|---|---|---|---|"]
    for fraction in sorted({f for f, _ in runs}):
        base, elmo = runs[(fraction, "baseline")], runs[(fraction, "elmo")]
        share = base["oov_tokens"] / results["test_tokens"]
        lines.append(f"| {fraction:.0%} ({base['sentences']:,}) | "
                     f"{base['test_accuracy']:.2%} | {elmo['test_accuracy']:.2%} | "
                     f"{100 * (elmo['test_accuracy'] - base['test_accuracy']):+.2f} | "
                     f"{base['oov_accuracy']:.2%} | {elmo['oov_accuracy']:.2%} | {share:.1%} |")
    lines += ["", f"Wall time {results['seconds'] / 60:.1f} min (biLM layers "
              f"{results['bilm_seconds'] / 60:.1f} min). Command: `{results['command']}`", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
