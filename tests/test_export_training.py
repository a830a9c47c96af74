"""Models that train through the exported SavedModel, each client in its own process.

Each subprocess has nothing of keras-elmo (nor tensorflow-text) importable; it builds a
model on the export, trains it a few steps on a tiny separable task (is "good" in the
sentence / is this token "good") and prints a JSON report: loss before and after, and
which of the export's variables changed. The clients:
- Keras 3 `keras.layers.TFSMLayer` + Dense + `fit`, with `trainable=False` (nothing of
  the export changes) and `trainable=True` (only the mix's `s` and `gamma` change);
- tensorflow_hub `hub.KerasLayer` under tf_keras (`TF_USE_LEGACY_KERAS=1`, set only in that
  process) on the `default` and `tokens` signatures, and `trainable=True` without a
  signature (the module's `__call__`), which trains only the mix;
- a raw `tf.GradientTape` over signature calls, eagerly and in a `tf.function`, in a
  process with TensorFlow only.
The clients of the selected tests start together, when the first of them runs.
`pytest -s` prints the reports.
"""

import importlib.util
import json

import pytest

from keras_elmo.export import export_model_dir
from test_export_helpers import HIDDEN, OURS, finish_python, make_model_dir, start_python

pytestmark = pytest.mark.slow

MIX_NAMES = ["scalar_mix/gamma:0", "scalar_mix/scalar_parameters:0"]

#: Shared by every client script: the task and the report.
PRELUDE = """
import json
import numpy as np
import tensorflow as tf

PATH = {path!r}
TEXT = ["good film", "bad film", "a good plot", "a bad plot", "good", "bad",
        "the good one", "the bad one"]
LABELS = np.array([1, 0, 1, 0, 1, 0, 1, 0], np.float32)
TOKENS = [s.split() for s in TEXT]
WIDTH = max(len(t) for t in TOKENS)
PADDED = np.array([t + [""] * (WIDTH - len(t)) for t in TOKENS])
LENGTHS = np.array([len(t) for t in TOKENS], np.int32)
TAGS = (PADDED == "good").astype(np.float32)[..., None]  # (batch, WIDTH, 1)

def snapshot(variables):
    return {{v.name: v.numpy().copy() for v in variables}}

def changed(before, variables):
    return sorted(v.name for v in variables if not np.array_equal(before[v.name], v.numpy()))

def report(**fields):
    print(json.dumps(fields))
"""

KERAS3_SCRIPT = """
import keras
keras.utils.set_random_seed(0)

def train(trainable, optimizer, steps=8):
    layer = keras.layers.TFSMLayer(PATH, call_endpoint="default", trainable=trainable)
    text = keras.Input(shape=(), dtype="string", name="text")
    scores = keras.layers.Dense(1, activation="sigmoid")(layer(text)["default"])
    model = keras.Model(text, scores)
    model.compile(optimizer, "binary_crossentropy")
    ours = list(layer.weights)
    before = snapshot(ours)
    x, y = tf.constant(TEXT), tf.constant(LABELS)
    loss_before = float(model.evaluate(x, y, verbose=0))
    model.fit(x, y, epochs=steps, batch_size=len(TEXT), verbose=0)
    report(client=f"keras3 TFSMLayer default trainable={trainable}",
           optimizer=type(optimizer).__name__, loss_before=loss_before,
           loss_after=float(model.evaluate(x, y, verbose=0)), changed=changed(before, ours),
           trainable_weights=[w.name for w in layer.trainable_weights],
           num_weights=len(ours))

train(False, keras.optimizers.Adam(0.05))
# Keras 3.15's TFSMLayer names its weights "<tf name>:0"; an optimizer with slot variables
# (Adam, momentum) then fails to name them, so the trainable layer trains with plain SGD.
train(True, keras.optimizers.SGD(0.5))
"""

HUB_SCRIPT = """
import tensorflow_hub as hub
import tf_keras
assert tf.keras.__name__.startswith("tf_keras"), tf.keras.__name__
tf_keras.utils.set_random_seed(0)

def train(client, layer, inputs, outputs, x, y, steps=8):
    head = tf_keras.layers.Dense(1, activation="sigmoid")(outputs)
    model = tf_keras.Model(inputs, head)
    model.compile(tf_keras.optimizers.Adam(0.05), "binary_crossentropy")
    ours = list(layer.weights)
    before = snapshot(ours)
    loss_before = float(model.evaluate(x, y, verbose=0))
    model.fit(x, y, epochs=steps, batch_size=len(TEXT), verbose=0)
    report(client=client, optimizer="Adam", loss_before=loss_before,
           loss_after=float(model.evaluate(x, y, verbose=0)), changed=changed(before, ours),
           trainable_weights=[w.name for w in layer.trainable_weights],
           num_weights=len(ours))

text = tf_keras.Input(shape=(), dtype=tf.string, name="text")
layer = hub.KerasLayer(PATH, signature="default", output_key="default")
train("hub.KerasLayer signature=default", layer, text, layer(text),
      tf.constant(TEXT), LABELS)

tokens = tf_keras.Input(shape=(None,), dtype=tf.string, name="tokens")
lengths = tf_keras.Input(shape=(), dtype=tf.int32, name="sequence_len")
layer = hub.KerasLayer(PATH, signature="tokens", output_key="elmo")
train("hub.KerasLayer signature=tokens (token tagging)", layer, [tokens, lengths],
      layer({"tokens": tokens, "sequence_len": lengths}),
      [tf.constant(PADDED), tf.constant(LENGTHS)], TAGS)

layer = hub.KerasLayer(PATH, trainable=True, output_key="default")
train("hub.KerasLayer trainable=True (__call__)", layer, text, layer(text),
      tf.constant(TEXT), LABELS)
"""

TAPE_SCRIPT = """
loaded = tf.saved_model.load(PATH)
w = tf.Variable(tf.zeros([16, 1]))
b = tf.Variable(0.0)
trained = [w, b] + list(loaded.trainable_variables)

def loss_of(scores, labels):
    return tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels, scores))

def default_loss():
    out = loaded.signatures["default"](text=tf.constant(TEXT))
    return loss_of((out["default"] @ w)[:, 0] + b, LABELS)

def tokens_loss():
    out = loaded.signatures["tokens"](tokens=tf.constant(PADDED),
                                      sequence_len=tf.constant(LENGTHS))
    return loss_of((out["elmo"] @ w)[..., 0] + b, TAGS[..., 0])

def train(name, loss_fn, compiled, steps=8):
    def step():
        with tf.GradientTape() as tape:
            loss = loss_fn()
        for variable, grad in zip(trained, tape.gradient(loss, trained)):
            variable.assign_sub(0.5 * grad)
        return loss
    run = tf.function(step) if compiled else step
    w.assign(tf.zeros_like(w))
    b.assign(0.0)
    before = snapshot(loaded.variables)
    loss_before = float(loss_fn())
    for _ in range(steps):
        run()
    report(client=f"raw GradientTape, {name}", optimizer="SGD 0.5", loss_before=loss_before,
           loss_after=float(loss_fn()), changed=changed(before, loaded.variables),
           trainable_weights=[v.name for v in loaded.trainable_variables],
           num_weights=len(loaded.variables))

train("signature default, eager", default_loss, compiled=False)
train("signature tokens, in a tf.function", tokens_loss, compiled=True)
"""

NOTHING_OF_OURS = """
report(imported=sorted(m for m in sys.modules if m.split(".")[0] in HIDDEN))
"""


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    root = tmp_path_factory.mktemp("training")
    make_model_dir(str(root / "model"))
    return export_model_dir(str(root / "model"), str(root / "elmo"))


HAS_HUB = (importlib.util.find_spec("tensorflow_hub") is not None
           and importlib.util.find_spec("tf_keras") is not None)

#: test name -> its client: (script, packages hidden, environment added).
CLIENTS = {
    "test_keras3_tfsm_layer_trains_the_head_and_with_trainable_true_only_the_mix":
        (KERAS3_SCRIPT, OURS, None),
    "test_tensorflow_hub_keras_layer_under_tf_keras":
        (HUB_SCRIPT, OURS, {"TF_USE_LEGACY_KERAS": "1"}),
    "test_raw_gradient_tape_over_signature_calls_in_a_tensorflow_only_process":
        (TAPE_SCRIPT, HIDDEN, None),
}


@pytest.fixture(scope="module")
def clients(exported, request):
    """test name -> its client's process, started when the first of these tests runs for
    every one of them selected in this session, all at once (each is mostly tracing, on one
    core)."""
    selected = {item.originalname for item in request.session.items
                if item.module is request.module}
    if not HAS_HUB:
        selected.discard("test_tensorflow_hub_keras_layer_under_tf_keras")
    processes = {name: start_python(PRELUDE.format(path=exported) + script + NOTHING_OF_OURS,
                                    hidden=hidden, env=env)
                 for name, (script, hidden, env) in CLIENTS.items() if name in selected}
    yield processes
    for process in processes.values():  # a test that failed before it waited for its own
        if process.poll() is None:
            process.kill()
            process.communicate()


def _run(clients, request):
    """Waits for the client of the running test; returns its JSON reports (the last one is
    the import check)."""
    proc = finish_python(clients[request.node.originalname], timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    reports = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert reports[-1] == {"imported": []}, reports[-1]
    for entry in reports[:-1]:
        print(f"\n{entry['client']} ({entry['optimizer']}): loss {entry['loss_before']:.4f} -> "
              f"{entry['loss_after']:.4f}; changed: {entry['changed']}")
    return reports[:-1]


def _check(entry, trains_mix, mix_names=MIX_NAMES):
    assert entry["loss_after"] < 0.95 * entry["loss_before"], entry
    assert entry["num_weights"] == 31, entry  # all of the export's variables, 29 + s + gamma
    if trains_mix:
        assert entry["changed"] == mix_names, entry
        assert sorted(entry["trainable_weights"]) == mix_names, entry
    else:
        assert entry["changed"] == [], entry
        assert entry["trainable_weights"] == [], entry


def test_keras3_tfsm_layer_trains_the_head_and_with_trainable_true_only_the_mix(clients,
                                                                                request):
    frozen, trainable = _run(clients, request)  # KERAS3_SCRIPT
    _check(frozen, trains_mix=False)
    # TFSMLayer names its weights after the variables, "/" replaced by "_".
    _check(trainable, trains_mix=True,
           mix_names=[name.replace("/", "_") for name in MIX_NAMES])


@pytest.mark.skipif(not HAS_HUB, reason="tensorflow-hub and tf-keras are in the `test` extra")
def test_tensorflow_hub_keras_layer_under_tf_keras(clients, request):
    default, tokens, trainable = _run(clients, request)  # HUB_SCRIPT, TF_USE_LEGACY_KERAS=1
    _check(default, trains_mix=False)
    _check(tokens, trains_mix=False)
    _check(trainable, trains_mix=True)


def test_raw_gradient_tape_over_signature_calls_in_a_tensorflow_only_process(clients,
                                                                              request):
    for entry in _run(clients, request):  # TAPE_SCRIPT, TensorFlow only
        _check(entry, trains_mix=True)
