"""One arm of a downstream experiment: compile, fit with early stopping on a dev set,
predict the test set, time it. Shared by `examples/pos_tagger.py` and `examples/sentiment.py`.

Example:
>>> result = train_arm(task, model, train, dev, test, gold, epochs=10)  # doctest: +SKIP
>>> result["test_accuracy"], result["seconds"]
"""

import hashlib
import json
import os
import time

import keras

from keras_elmo.process.progress import Progress
from keras_elmo.formats.model_files import OPTIONS_FILE, VOCAB_FILE, WEIGHTS_FILE
from tasks.downstream import accuracy, predict
from tasks.layer_store import LayerStore


def build_store(runner, sentences, path, label, fingerprint=None):
    """A `LayerStore` of `sentences`, with a progress line; returns `(store, seconds)`.

    With a `fingerprint` (any JSON value naming the biLM, e.g. `model_fingerprint(dir)`),
    a store left at `path` by an earlier run with the same fingerprint and sentence
    lengths is reused (`path + ".json"` records them); without one it is always rebuilt.
    """
    start = time.perf_counter()
    lengths = [len(tokens) for tokens in sentences]
    record = {"fingerprint": fingerprint, "lengths_sha1": hashlib.sha1(
        json.dumps(lengths).encode()).hexdigest(), "num_layers": runner.num_output_layers,
        "dim": runner.output_dim}
    if fingerprint is not None and os.path.isfile(path) and os.path.isfile(path + ".json"):
        with open(path + ".json", encoding="utf-8") as f:
            if json.load(f) == record:
                print(f"{label}: reusing {path}", flush=True)
                return LayerStore(path, lengths, runner.num_output_layers,
                                  runner.output_dim), time.perf_counter() - start
    progress = Progress(len(sentences), label=label)
    store = LayerStore.build(runner, sentences, path, progress=progress)
    with open(path + ".json", "w", encoding="utf-8") as f:
        json.dump(record, f)
    return store, time.perf_counter() - start


def model_fingerprint(model_dir):
    """Names a MODEL_DIR's weights: path, size and modification time of its files."""
    files = [os.path.join(model_dir, name) for name in (OPTIONS_FILE, WEIGHTS_FILE, VOCAB_FILE)]
    return [[os.path.abspath(f), os.path.getsize(f), os.path.getmtime(f)]
            for f in files if os.path.isfile(f)]


def train_arm(task, model, train, dev, test, gold, epochs, patience=2, learning_rate=1e-3,
              verbose=0):
    """Fits `model` (the `task.training_model()`), keeps the best dev epoch, scores `test`.

    Args:
        task: its `TaskLayers` (for the mix weights).
        model: the compiled-to-be training model.
        train, dev, test: `Batches`.
        gold: test labels, in the order of `test.word_ids`.
        epochs: int, most epochs; patience: epochs without dev gain before stopping.

    Returns:
        dict: `test_accuracy`, `predictions`, `epochs_run`, `best_epoch`, `dev_accuracy`,
        `seconds` (fit + predict), `mix` (softmax(s), gamma, or None).
    """
    tagger = task.task == "tagger"
    metric = "sparse_categorical_accuracy"
    model.compile(optimizer=keras.optimizers.Adam(learning_rate),
                  loss="sparse_categorical_crossentropy",
                  **({"weighted_metrics": [metric]} if tagger else {"metrics": [metric]}))
    stop = keras.callbacks.EarlyStopping(monitor=f"val_{metric}", mode="max",
                                         patience=patience, restore_best_weights=True)
    start = time.perf_counter()
    history = model.fit(train, validation_data=dev, epochs=epochs, callbacks=[stop],
                        verbose=verbose)
    dev_scores = history.history[f"val_{metric}"]
    best = max(range(len(dev_scores)), key=lambda e: dev_scores[e])
    predictions = predict(model, test)
    return {"test_accuracy": accuracy(predictions, gold), "predictions": predictions,
            "epochs_run": len(dev_scores), "best_epoch": best + 1,
            "dev_accuracy": float(dev_scores[best]), "seconds": time.perf_counter() - start,
            "mix": task.mix_weights()}
