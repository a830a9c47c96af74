"""What JAX and PyTorch users write, run under one Keras backend; writes what it saw.

`tests/test_backend_habits.py` runs this file in a subprocess per backend (Keras fixes its
backend at import) and holds the results to the TensorFlow backend's numbers.

Usage: KERAS_BACKEND=jax python tests/backend_habits_checks.py WORKDIR [STEP]
    WORKDIR holds `cases.json` and `inputs.npz` (the TensorFlow side's); this writes
    `WORKDIR/<backend>[-STEP]/results.npz` and `results.json`. Under PyTorch, STEP "save"
    writes a state dict for a later process, STEP "load" loads it.
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
from keras_elmo import ElmoLayer
from keras_elmo.models.bilm import BiLM

BACKEND = keras.backend.backend()


def numpy(x):
    return np.asarray(ops.convert_to_numpy(x))


def weight_model(elmo):
    """A Keras model of `elmo` alone: what `save_weights` / `load_weights` work on."""
    ids = keras.Input(shape=(None, elmo.options.max_characters_per_token), dtype="int32")
    return keras.Model(ids, elmo(ids))


class Recorder:
    """Runs named checks; an exception is recorded as `error:NAME` (the test side fails)."""

    def __init__(self):
        self.arrays, self.facts = {}, {"backend": BACKEND}

    def check(self, name, fn):
        start = time.perf_counter()
        try:
            fn()
        except Exception as error:
            self.facts[f"error:{name}"] = "".join(
                traceback.format_exception_only(error)).strip()
            self.facts[f"trace:{name}"] = traceback.format_exc()
        self.facts[f"seconds:{name}"] = round(time.perf_counter() - start, 2)

    def message(self, name, fn, *errors):
        """The message of the error `fn` raises (None when it raises none)."""
        try:
            fn()
            self.facts[f"message/{name}"] = None
        except errors as error:
            self.facts[f"message/{name}"] = str(error)


def jax_checks(rec, cases, inputs, files):
    import jax
    import jax.numpy as jnp

    compiles = []
    jax.monitoring.register_event_duration_secs_listener(
        lambda event, seconds, **kwargs: compiles.append(event)
        if event == "/jax/core/compile/backend_compile_duration" else None)

    def loading():
        before = len(compiles)
        ElmoLayer.from_weights(files["options"], files["weights"])
        rec.facts["compiles/loading"] = len(compiles) - before

    def eager_calls():
        elmo = ElmoLayer.from_weights(files["options"], files["weights"], return_layers=True)
        counts = []
        for batch in cases["batches"]:  # shapes of one class share one compiled function
            before = len(compiles)
            out = elmo(inputs[f"ids_{batch}"])
            rec.arrays[f"eager/elmo/{batch}"] = numpy(out["elmo"])
            rec.arrays[f"eager/layers/{batch}"] = numpy(out["layers"])
            counts.append(len(compiles) - before)
        rec.facts["compiles/per_call"] = counts
        bilm = BiLM.from_weights(files["options"], files["weights"])
        out = bilm(inputs["ids_b3"])
        rec.arrays["eager/bilm/b3"] = numpy(out["layers"])
        rec.arrays["eager/bilm_mask/b3"] = numpy(out["mask"])

    def fresh_values():
        elmo = ElmoLayer.from_weights(files["options"], files["weights"])
        ids = inputs["ids_b3"]
        first = numpy(elmo(ids))
        elmo.scalar_mixes[0].gamma.assign(2.0)
        rec.arrays["fresh/first"] = first
        rec.arrays["fresh/assign"] = numpy(elmo(ids))
        weights = elmo.get_weights()
        weights[-1] = np.array(0.5, "float32")  # gamma, the last weight
        elmo.set_weights(weights)
        rec.arrays["fresh/set_weights"] = numpy(elmo(ids))
        weight_model(elmo).load_weights(cases["mix_weights"])  # gamma 1.7, s [0.3, -0.2, 0.5]
        rec.arrays["fresh/load_weights"] = numpy(elmo(ids))
        # a closure under the user's own jit reads the values it was traced with
        closure = jax.jit(lambda x: elmo(x))
        rec.arrays["jit/closure"] = numpy(closure(ids))
        stateless = jax.jit(lambda t, n, x: elmo.stateless_call(t, n, x)[0])
        rec.arrays["jit/stateless"] = numpy(stateless(
            [v.value for v in elmo.trainable_variables],
            [v.value for v in elmo.non_trainable_variables], jnp.asarray(ids)))

    def dropout():
        elmo = ElmoLayer.from_weights(files["options"], files["weights"], dropout=0.5)
        ids = inputs["ids_b3"]
        first, second = numpy(elmo(ids, training=True)), numpy(elmo(ids, training=True))
        kept = numpy(elmo(ids))
        rec.facts["dropout/differs"] = bool(np.any((first == 0) != (second == 0)))
        rec.facts["dropout/zeroed"] = float(np.mean(first[kept != 0] == 0))

    rec.check("loading", loading)
    rec.check("eager_calls", eager_calls)
    rec.check("fresh_values", fresh_values)
    rec.check("dropout", dropout)


def torch_checks(rec, cases, inputs, files, out_dir, step):
    import torch

    ids = torch.as_tensor(inputs["ids_b3"])
    state_file = os.path.join(os.path.dirname(out_dir), "torch_state.pt")

    def elmo_with_trained_mix():
        elmo = ElmoLayer.from_weights(files["options"], files["weights"], dropout=0.5)
        weight_model(elmo).load_weights(cases["mix_weights"])
        return elmo

    def save():
        elmo = elmo_with_trained_mix()
        names = list(elmo.state_dict())
        rec.facts["state/names"] = names
        rec.facts["state/num_variables"] = len(elmo.variables)
        torch.save(elmo.state_dict(), state_file)
        with torch.no_grad():
            rec.arrays["state/saved"] = numpy(elmo(ids))

    def load():
        fresh = ElmoLayer.from_weights(files["options"], files["weights"], dropout=0.5)
        with torch.no_grad():
            rec.arrays["state/fresh"] = numpy(fresh(ids))
        rec.facts["state/load_result"] = str(fresh.load_state_dict(torch.load(state_file)))
        rec.facts["state/names"] = list(fresh.state_dict())
        with torch.no_grad():
            rec.arrays["state/loaded"] = numpy(fresh(ids))

    def in_a_module():
        class Tagger(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.elmo = ElmoLayer.from_weights(files["options"], files["weights"],
                                                   dropout=0.5)
                self.tags = torch.nn.Linear(self.elmo.bilm.output_dim, 3)

            def forward(self, x):
                return self.tags(self.elmo(x))

        trained = Tagger()
        weight_model(trained.elmo).load_weights(cases["mix_weights"])
        again = Tagger()
        rec.facts["module/load_result"] = str(again.load_state_dict(trained.state_dict()))
        rec.facts["module/names"] = list(trained.state_dict())
        with torch.no_grad():
            rec.facts["module/difference"] = float((trained(ids) - again(ids)).abs().max())
        rec.facts["module/new_mode"] = trained.elmo.training
        trained.train()
        with torch.no_grad():
            first, second = numpy(trained.elmo(ids)), numpy(trained.elmo(ids))
        rec.facts["mode/train_drops"] = bool(np.any(first != second))
        rec.facts["mode/train_passed_false"] = float(np.max(np.abs(
            numpy(trained.elmo(ids, training=False)) - numpy(trained.elmo(ids, training=False)))))
        trained.eval()
        with torch.no_grad():
            first, second = numpy(trained.elmo(ids)), numpy(trained.elmo(ids))
        rec.facts["mode/eval_difference"] = float(np.max(np.abs(first - second)))

    def refusals():
        elmo = elmo_with_trained_mix()
        rec.message("half", elmo.half, ValueError)
        rec.message("to_bfloat16", lambda: elmo.to(torch.bfloat16), ValueError)
        rec.message("double", elmo.double, ValueError)
        elmo.to("cpu")  # a device move goes on
        rec.facts["dtype_after_refusals"] = str(elmo.scalar_mixes[0].gamma.value.dtype)
        state = elmo.state_dict()
        misshapen = dict(state, **{"scalar_mixes.0.gamma": torch.zeros(3)})
        rec.message("misshapen", lambda: elmo.load_state_dict(misshapen), RuntimeError)
        missing = {k: v for k, v in state.items() if k != "scalar_mixes.0.gamma"}
        rec.message("missing", lambda: elmo.load_state_dict(missing), RuntimeError)
        unexpected = dict(state, extra=torch.zeros(1))
        rec.message("unexpected", lambda: elmo.load_state_dict(unexpected), RuntimeError)

    if step == "save":
        rec.check("save", save)
        rec.check("in_a_module", in_a_module)
        rec.check("refusals", refusals)
    else:
        rec.check("load", load)


def run(workdir, step=None):
    cases = json.load(open(os.path.join(workdir, "cases.json")))
    inputs = dict(np.load(os.path.join(workdir, "inputs.npz")))
    out_dir = os.path.join(workdir, BACKEND + (f"-{step}" if step else ""))
    os.makedirs(out_dir, exist_ok=True)
    rec = Recorder()
    files = cases["model"]
    if BACKEND == "jax":
        jax_checks(rec, cases, inputs, files)
    else:
        torch_checks(rec, cases, inputs, files, out_dir, step)
    np.savez(os.path.join(out_dir, "results.npz"), **rec.arrays)
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(rec.facts, f, indent=1)


if __name__ == "__main__":
    run(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
