"""Empty batches, empty sentences and bad ids under one Keras backend: what it computes and
the errors it raises, for `tests/test_backend_edge_cases.py` to hold to TensorFlow's.

Usage: KERAS_BACKEND=jax python tests/backend_edge_checks.py WORKDIR
    (the test runs `run(WORKDIR)` in its own TensorFlow process too)
    WORKDIR holds `cases.json` (the model's files, the id batches' names, the bad inputs) and
    `inputs.npz` (the id batches); this writes `WORKDIR/<backend>.npz` (outputs by case) and
    `WORKDIR/<backend>.json` (errors by case: `{"type": ..., "message": ...}`, or an output
    case's traceback under `"failed:<case>"`).
"""

import json
import os
import sys
import traceback

import keras
import numpy as np
from keras import ops

from keras_elmo import BiLM, ElmoEmbedder, ElmoLayer

BACKEND = keras.backend.backend()


def numpy(x):
    return np.asarray(ops.convert_to_numpy(x))


def flatten(name, out, arrays):
    """`arrays[name/...]` = every tensor of an output (a tensor, a list or a dict)."""
    if isinstance(out, dict):
        for key, value in out.items():
            flatten(f"{name}/{key}", value, arrays)
    elif isinstance(out, (list, tuple)):
        for i, value in enumerate(out):
            flatten(f"{name}/{i}", value, arrays)
    else:
        arrays[name] = numpy(out)


def layers_of(bilm):
    """The layers of the checks: the biLM, and ElmoLayers over it (1 mix; 2 layer-normed
    mixes with `return_layers`; `return_layers` without mixes)."""
    return {"bilm": bilm,
            "elmo1": ElmoLayer(bilm),
            "elmo2": ElmoLayer(bilm, num_output_representations=2, do_layer_norm=True,
                               return_layers=True),
            "only_layers": ElmoLayer(bilm, num_output_representations=0, return_layers=True)}


def error_of(call):
    """`{"type", "message"}` of the exception `call()` raises (None if it raises none)."""
    try:
        out = call()
        if BACKEND == "jax":
            import jax

            jax.block_until_ready(out)
    except Exception as error:  # pylint: disable=broad-except
        return {"type": type(error).__name__, "message": str(error)}
    return None


def backend_tensor(ids):
    """`ids` as this backend's own tensor (a concrete JAX array, a torch tensor, an eager
    TensorFlow tensor)."""
    if BACKEND == "tensorflow":
        import tensorflow as tf

        return tf.constant(ids)
    if BACKEND == "jax":
        import jax.numpy as jnp

        return jnp.asarray(ids)
    import torch

    return torch.as_tensor(ids)


def run(workdir):
    cases = json.load(open(os.path.join(workdir, "cases.json")))
    inputs = dict(np.load(os.path.join(workdir, "inputs.npz")))
    bilm = BiLM.from_weights(cases["options"], cases["weights"])
    arrays, facts = {}, {"backend": BACKEND}

    def output(name, call):
        try:
            flatten(name, call(), arrays)
        except Exception:  # pylint: disable=broad-except
            facts[f"failed:{name}"] = traceback.format_exc()

    layers = layers_of(bilm)
    for batch in cases["batches"]:
        ids = inputs[batch]
        # every layer on the batch of no rows, fewer on the others (each call of a layer on
        # a new shape compiles on JAX: the test's time)
        for layer_name in cases["layers"][batch]:
            output(f"{layer_name}/{batch}", lambda: layers[layer_name](ids))
        if BACKEND == "jax" and batch == cases["batches_without_tokens"][0]:
            import jax  # traced: a user's jax.jit over the stateless call

            elmo = layers["elmo2"]
            trainable = [v.value for v in elmo.trainable_variables]
            frozen = [v.value for v in elmo.non_trainable_variables]
            jitted = jax.jit(lambda t, f, x: elmo.stateless_call(t, f, x)[0])
            output(f"elmo2_jit/{batch}", lambda: jitted(trainable, frozen, ids))
    empty = inputs[cases["batches_without_tokens"][0]]
    output("elmo1_own_tensor/b_empty", lambda: layers["elmo1"](backend_tensor(empty)))
    embedder = ElmoEmbedder(os.path.dirname(cases["options"]), token_cache=False)
    for name, sentences in cases["embed_sentences"].items():
        output(f"embed/{name}", lambda: embedder.embed_batch(sentences))
    output("embed_file", lambda: embed_file(embedder, cases["embed_file"], workdir))

    bad = {name: np.asarray(value, dtype=cases["bad_dtypes"][name])
           for name, value in cases["bad_inputs"].items()}
    for name, ids in bad.items():
        facts[f"ElmoLayer/{name}"] = error_of(lambda: layers["elmo1"](ids))
        facts[f"BiLM/{name}"] = error_of(lambda: bilm(ids))
    facts["ElmoLayer/dict_without_char_ids"] = error_of(
        lambda: layers["elmo1"]({"chars": inputs["b_two"]}))
    facts["ElmoLayer/strings"] = error_of(lambda: layers["elmo1"](np.array([["a", "b"]])))
    facts["ElmoLayer/own_tensor/id_300"] = error_of(
        lambda: layers["elmo1"](backend_tensor(bad["id_300"])))
    if BACKEND == "jax":
        import jax

        elmo = layers["elmo1"]
        trainable = [v.value for v in elmo.trainable_variables]
        frozen = [v.value for v in elmo.non_trainable_variables]
        jitted = jax.jit(lambda t, f, x: elmo.stateless_call(t, f, x)[0])
        facts["jit/id_300"] = error_of(lambda: jitted(trainable, frozen, bad["id_300"]))

    # A word model (ELMoForManyLangs, char and word ids): no rows, then its wrong inputs.
    words_bilm = BiLM.from_efml(cases["word_model"])
    empty = words_bilm.batch_to_ids([])
    output("word_model/b_empty", lambda: words_bilm(empty))
    ids = words_bilm.batch_to_ids([["a", "b"]])
    high_word = dict(ids, word_ids=np.full_like(ids["word_ids"], cases["word_id_too_high"]))
    for name, value in {"char_ids_alone": ids["char_ids"], "word_id_too_high": high_word,
                        "word_ids_shape": dict(ids, word_ids=ids["word_ids"][:, :1])}.items():
        facts[f"word_model/{name}"] = error_of(lambda: words_bilm(value))

    np.savez(os.path.join(workdir, f"{BACKEND}.npz"), **arrays)
    with open(os.path.join(workdir, f"{BACKEND}.json"), "w") as f:
        json.dump(facts, f, indent=1)


def embed_file(embedder, text_file, workdir):
    """What `keras-elmo embed` writes for a file with empty lines: every line's dataset."""
    import h5py

    out = os.path.join(workdir, f"{BACKEND}_embed.hdf5")
    embedder.embed_file(text_file, out)
    with h5py.File(out, "r") as f:
        return [np.asarray(f[key]) for key in sorted((k for k in f if k.isdigit()), key=int)]


if __name__ == "__main__":
    run(sys.argv[1])
