"""Runs keras-elmo's models under one Keras backend and writes what they computed.

`tests/test_backends.py` runs this file in a subprocess per backend (`KERAS_BACKEND` is
chosen before Keras is imported, so a backend cannot change inside one process), then holds
every result to the TensorFlow backend's and to the numpy reference in its own process.

Usage: KERAS_BACKEND=jax python tests/backend_checks.py WORKDIR
    WORKDIR holds what the TensorFlow side made (`cases.json`, the weight files, `inputs.npz`,
    `tf_model.keras`, `tf_model.weights.h5`); this writes `WORKDIR/<backend>/results.npz`
    (arrays), `results.json` (facts and error messages) and its own `.keras` and
    `.weights.h5` files for the TensorFlow side to load.
"""

import json
import os
import sys
import time
import traceback

import keras
import numpy as np
from keras import ops

import keras_elmo
from keras_elmo import ElmoLayer, ElmoPreprocessor
from keras_elmo.models.bilm import BiLM

BACKEND = keras.backend.backend()


def numpy(x):
    return np.asarray(ops.convert_to_numpy(x))


def variable_values(variables):
    return {v.path: numpy(v) for v in variables}


def tagger(elmo, num_tags=3):
    """A small Keras tagger over `elmo`: char ids -> tag probabilities per token."""
    ids = keras.Input(shape=(None, elmo.options.max_characters_per_token), dtype="int32")
    tags = keras.layers.Dense(num_tags, activation="softmax")(elmo(ids))
    return keras.Model(ids, tags)


def gradients(layer, ids, weights):
    """d sum(layer(ids) * weights) / d every trainable variable, by variable path."""
    if BACKEND == "jax":
        import jax

        trainable = [v.value for v in layer.trainable_variables]
        frozen = [v.value for v in layer.non_trainable_variables]

        def loss(values):
            out, _ = layer.stateless_call(values, frozen, ids, training=False)
            return (out * weights).sum()

        grads = jax.grad(loss)(trainable)
        return {v.path: np.asarray(g) for v, g in zip(layer.trainable_variables, grads)}
    import torch

    for v in layer.trainable_variables:
        v.value.grad = None
    out = layer(torch.as_tensor(ids))
    (out * torch.as_tensor(weights)).sum().backward()
    return {v.path: v.value.grad.detach().cpu().numpy() for v in layer.trainable_variables}


def share_compiled_scans(cache_dir):
    """On JAX, a compilation cache in `cache_dir` for this process: every eager call traces
    its LSTM `lax.scan` anew (a new jaxpr, so JAX's in-memory cache misses), and the cache
    hands back the executable of a scan compiled before with the same program and shapes
    (of another call or another layer), the same executable a compile would give."""
    if BACKEND != "jax":
        return
    import jax

    jax.config.update("jax_compilation_cache_dir", cache_dir)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.1)  # skip tiny ops


def run(workdir):
    cases = json.load(open(os.path.join(workdir, "cases.json")))
    inputs = dict(np.load(os.path.join(workdir, "inputs.npz")))
    out_dir = os.path.join(workdir, BACKEND)
    os.makedirs(out_dir, exist_ok=True)
    share_compiled_scans(os.path.join(out_dir, "compilation_cache"))
    arrays, facts = {}, {"backend": BACKEND}

    def check(name, fn):
        start = time.perf_counter()
        try:
            fn()
        except Exception as error:  # recorded; the TensorFlow side fails the named test
            facts[f"error:{name}"] = "".join(traceback.format_exception_only(error)).strip()
            facts[f"trace:{name}"] = traceback.format_exc()
        facts[f"seconds:{name}"] = round(time.perf_counter() - start, 2)

    def inference():
        for model, files in cases["models"].items():
            bilm = BiLM.from_weights(files["options"], files["weights"])
            for batch in cases["batches"]:
                out = bilm(inputs[f"ids_{batch}"])
                arrays[f"layers/{model}/{batch}"] = numpy(out["layers"])
                arrays[f"mask/{model}/{batch}"] = numpy(out["mask"])
            # every output a traced call computes too (Keras' predict: jit on JAX)
            arrays[f"predicted/{model}"] = bilm.predict(inputs["ids_b3"], verbose=0)["layers"]

    def elmo_layer():
        files = cases["models"]["tiny"]
        layer = ElmoLayer.from_weights(files["options"], files["weights"],
                                       num_output_representations=2, return_layers=True)
        out = layer(inputs["ids_b3"])
        arrays["elmo/mix0"], arrays["elmo/mix1"] = numpy(out["elmo"][0]), numpy(out["elmo"][1])
        arrays["elmo/layers"] = numpy(out["layers"])
        single = ElmoLayer.from_weights(files["options"], files["weights"], dropout=0.5)
        arrays["elmo/mask"] = numpy(single.compute_mask(inputs["ids_b3"]))
        keras.utils.set_random_seed(3)
        dropped = numpy(single(inputs["ids_b3"], training=True))
        kept = numpy(single(inputs["ids_b3"], training=False))
        real = kept != 0
        facts["dropout_zeroed_fraction"] = float(np.mean(dropped[real] == 0))
        arrays["elmo/inference"] = kept

    def gradient():
        files = cases["models"]["tiny"]
        layer = ElmoLayer.from_weights(files["options"], files["weights"], trainable_bilm=True,
                                       name="elmo")
        for path, grad in gradients(layer, inputs["ids_b3"], inputs["grad_weights"]).items():
            arrays[f"grad/{path}"] = grad

    def training():
        files = cases["models"]["tiny"]
        for trainable_bilm in (False, True):
            keras.utils.set_random_seed(0)
            elmo = ElmoLayer.from_weights(files["options"], files["weights"],
                                          trainable_bilm=trainable_bilm)
            model = tagger(elmo)
            model.compile(optimizer=keras.optimizers.SGD(0.5),
                          loss="sparse_categorical_crossentropy")
            before = variable_values(elmo.bilm.weights)
            mix_before = variable_values(elmo.scalar_mixes[0].weights)
            history = model.fit(inputs["ids_b30"], inputs["tags_b30"], batch_size=10,
                                epochs=2, verbose=0)
            key = "fine_tuned" if trainable_bilm else "frozen"
            facts[f"fit/{key}/losses"] = [float(x) for x in history.history["loss"]]
            facts[f"fit/{key}/bilm_change"] = max(
                float(np.max(np.abs(numpy(v) - before[v.path]))) for v in elmo.bilm.weights)
            facts[f"fit/{key}/mix_change"] = max(
                float(np.max(np.abs(numpy(v) - mix_before[v.path])))
                for v in elmo.scalar_mixes[0].weights)
            facts[f"fit/{key}/trainable_weights"] = len(model.trainable_weights)
            facts[f"fit/{key}/evaluate"] = float(
                model.evaluate(inputs["ids_b3"], inputs["tags_b3"], verbose=0))
            predicted = model.predict(inputs["ids_b3"], verbose=0)
            facts[f"fit/{key}/predict_shape"] = list(predicted.shape)

    def stateful():
        files = cases["models"]["tiny"]
        bilm = BiLM.from_weights(files["options"], files["weights"], stateful=True)
        arrays["stateful/first"] = numpy(bilm(inputs["ids_b3"])["layers"])
        arrays["stateful/second"] = numpy(bilm(inputs["ids_b3"])["layers"])
        bilm.reset_states()
        arrays["stateful/reset"] = numpy(bilm(inputs["ids_b3"])["layers"])

    def keras_files():
        loaded = keras.models.load_model(os.path.join(workdir, "tf_model.keras"))
        arrays["keras_file/from_tf"] = numpy(loaded(inputs["ids_b3"]))
        files = cases["models"]["tiny"]
        model = tagger(ElmoLayer.from_weights(files["options"], files["weights"]))
        model.load_weights(os.path.join(workdir, "tf_model.weights.h5"))
        arrays["weights_file/from_tf"] = numpy(model(inputs["ids_b3"]))
        model.save(os.path.join(out_dir, "model.keras"))
        model.save_weights(os.path.join(out_dir, "model.weights.h5"))
        arrays["keras_file/saved_here"] = numpy(model(inputs["ids_b3"]))

    def loaders():
        efml = keras_elmo.load_bilm(cases["efml_dir"])
        ids = efml.batch_to_ids(cases["efml_sentences"])
        arrays["efml/layers"] = numpy(efml(ids)["layers"])
        published = keras_elmo.load_bilm(os.path.dirname(cases["models"]["tiny"]["options"]))
        arrays["load_bilm/layers"] = numpy(published(inputs["ids_b3"])["layers"])

    def preprocessor():
        files = cases["models"]["tiny"]
        bilm = BiLM.from_weights(files["options"], files["weights"])
        pre = ElmoPreprocessor.from_bilm(bilm)
        arrays["preprocessor/ids"] = np.asarray(pre(cases["sentences_b3"]))
        import tensorflow as tf  # installed beside this backend: tf.data under it

        tokens = tf.ragged.constant(cases["sentences_b3"])
        dataset = tf.data.Dataset.from_tensor_slices(tokens).batch(3).map(pre)
        arrays["preprocessor/tf_data"] = next(iter(dataset)).numpy()
        efml = keras_elmo.load_bilm(cases["efml_dir"])
        efml_ids = ElmoPreprocessor.from_bilm(efml)(cases["efml_sentences"])
        arrays["preprocessor/efml_char_ids"] = np.asarray(
            efml_ids["char_ids"] if isinstance(efml_ids, dict) else efml_ids)

    def errors():
        files = cases["models"]["tiny"]
        layer = ElmoLayer.from_weights(files["options"], files["weights"])
        for name, value in (("strings", np.array([["a", "b"]])), ("lists", [["a", "b"]])):
            try:
                layer(value)
                facts[f"message/{name}"] = None
            except ValueError as error:
                facts[f"message/{name}"] = str(error)
        for implementation in ("sequence_gradient", "one_row_loop"):
            try:
                BiLM(keras_elmo.BiLMOptions.tiny(), implementation=implementation)
                facts[f"message/{implementation}"] = None
            except ValueError as error:
                facts[f"message/{implementation}"] = str(error)

    for name, fn in (("inference", inference), ("elmo_layer", elmo_layer),
                     ("gradient", gradient), ("training", training), ("stateful", stateful),
                     ("keras_files", keras_files), ("loaders", loaders),
                     ("preprocessor", preprocessor), ("errors", errors)):
        check(name, fn)
    np.savez(os.path.join(out_dir, "results.npz"), **arrays)
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(facts, f, indent=1)


if __name__ == "__main__":
    run(sys.argv[1])
