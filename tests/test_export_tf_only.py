"""The exported SavedModel in processes that have TensorFlow only, and `saved_model_cli`.

The subprocess makes Keras, keras-elmo and tensorflow-text unimportable (as if not
installed, see `HIDE_PACKAGES`), imports only tensorflow (+ numpy, json), loads the
SavedModel and calls every signature; the outputs are compared here with the eager Keras
model. No `import tensorflow_text` is needed: the graph uses core TensorFlow string ops only.
The processes of the selected tests start together, when the first of them runs
(`processes`).
"""

import json
import os
import shutil
import subprocess

import numpy as np
import pytest

import keras_elmo
from test_export_helpers import (BATCHES, MIX, assert_outputs_close, eager_reference,
                                 finish_python, padded, start_python)

pytestmark = pytest.mark.slow

SAVED_MODEL_CLI = shutil.which("saved_model_cli")

TF_ONLY_SCRIPT = """
import json
import numpy as np
import tensorflow as tf

loaded = tf.saved_model.load({path!r})
with open({requests!r}) as f:
    requests = json.load(f)
results = {{}}
for index, (signature, inputs) in enumerate(requests):
    function = loaded.signatures[signature]
    specs = function.structured_input_signature[1]
    outputs = function(**{{k: tf.constant(v, dtype=specs[k].dtype) for k, v in inputs.items()}})
    for name, value in outputs.items():
        value = value.numpy()
        results[f"{{index}}/{{name}}"] = value.astype(bytes) if value.dtype == object else value
np.savez({out!r}, **results)
importable = []
for name in ("keras", "keras_elmo", "tensorflow_text"):
    try:
        __import__(name)
        importable.append(name)
    except ImportError:
        pass
print(json.dumps({{"importable": importable,
                  "hidden_but_imported": sorted(m for m in sys.modules
                                                if m.split(".")[0] in HIDDEN)}}))
"""

PLAIN_SCRIPT = """
import tensorflow as tf
loaded = tf.saved_model.load({path!r})
loaded.signatures["default"](text=tf.constant(["a b"]))
print("tensorflow_text" in sys.modules)
"""


@pytest.fixture(scope="module")
def exported(exported_tiny_model, tmp_path_factory):
    """Tiny model dir with a scalar_mix.json, exported to serving/1 (once per session,
    conftest.py); `root` a folder for what the tests write."""
    return dict(exported_tiny_model, root=tmp_path_factory.mktemp("tf_only"))


def _all_requests():
    """The TF-only process's requests: `(signature, inputs)`, both batches through every
    signature, then an empty text and an empty sentence."""
    return _requests(BATCHES[0]) + _requests(BATCHES[1]) + [
        ("default", {"text": ["", "   "]}),
        ("tokens", {"tokens": [["", ""]], "sequence_len": [0]})]


def _cli(*args):
    return subprocess.Popen([SAVED_MODEL_CLI, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))


def _start_tf_only(exported):
    root = exported["root"]
    with open(root / "requests.json", "w") as f:
        json.dump(_all_requests(), f)
    return start_python(TF_ONLY_SCRIPT.format(path=exported["path"],
                                              out=str(root / "outputs.npz"),
                                              requests=str(root / "requests.json")))


def _start_cli_run(exported):
    tokens, lengths = padded(BATCHES[0])
    exprs = f"tokens={tokens.tolist()!r};sequence_len={lengths.tolist()!r}"
    return _cli("run", "--dir", exported["path"], "--tag_set", "serve", "--signature_def",
                "tokens", "--input_exprs", exprs, "--outdir", str(exported["root"] / "cli_out"))


#: test name -> what starts its process.
STARTS = {
    "test_every_signature_in_a_tensorflow_only_process_equals_the_eager_model": _start_tf_only,
    "test_loading_without_hiding_needs_no_tensorflow_text":
        lambda exported: start_python(PLAIN_SCRIPT.format(path=exported["path"]), hide=False),
    "test_saved_model_cli_show_lists_the_signatures":
        lambda exported: _cli("show", "--dir", exported["path"], "--all"),
    "test_saved_model_cli_run_on_tokens": _start_cli_run,
}


@pytest.fixture(scope="module")
def processes(exported, request):
    """test name -> its process, started when the first of these tests runs for every one
    of them selected in this session, all at once (each is mostly loading and tracing, on
    one core)."""
    selected = {item.originalname for item in request.session.items
                if item.module is request.module}
    if SAVED_MODEL_CLI is None:
        selected -= {name for name in STARTS if "saved_model_cli" in name}
    started = {name: start(exported) for name, start in STARTS.items() if name in selected}
    yield started
    for process in started.values():  # a test that failed before it waited for its own
        if process.poll() is None:
            process.kill()
            process.communicate()


def _finished(processes, request):
    """The running test's process, finished (`subprocess.CompletedProcess`)."""
    return finish_python(processes[request.node.originalname], timeout=120)


def _requests(sentences):
    tokens, lengths = padded(sentences)
    return [("tokens", {"tokens": tokens.tolist(), "sequence_len": lengths.tolist()}),
            ("default", {"text": [" ".join(s) for s in sentences]}),
            ("serving_default", {"text": [" ".join(s) for s in sentences]}),
            ("char_ids", {"char_ids": keras_elmo.batch_to_ids(sentences).tolist()})]


def test_every_signature_in_a_tensorflow_only_process_equals_the_eager_model(exported,
                                                                           processes, request):
    requests = _all_requests()
    proc = _finished(processes, request)  # TF_ONLY_SCRIPT on requests.json
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report == {"importable": [], "hidden_but_imported": []}
    results = np.load(exported["root"] / "outputs.npz")
    for index, (signature, _) in enumerate(requests[:8]):
        sentences = BATCHES[index // 4]
        got = {key.split("/", 1)[1]: results[key] for key in results.files
               if key.startswith(f"{index}/")}
        expected = eager_reference(exported["options"], exported["weights"], sentences, mix=MIX)
        assert_outputs_close(got, expected, f"TF-only {signature} batch {len(sentences)}")
    for index, shape in ((8, (2, 0)), (9, (1, 2))):
        assert results[f"{index}/sequence_mask"].shape == shape
        assert not results[f"{index}/sequence_mask"].any()
        assert results[f"{index}/default"].shape == (shape[0], 16)
        assert not results[f"{index}/default"].any() and not results[f"{index}/elmo"].any()


def test_loading_without_hiding_needs_no_tensorflow_text(processes, request):
    """A plain `import tensorflow` process never imports tensorflow_text either."""
    proc = _finished(processes, request)  # PLAIN_SCRIPT, nothing hidden
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == "False"


@pytest.mark.skipif(SAVED_MODEL_CLI is None, reason="saved_model_cli not on PATH")
def test_saved_model_cli_show_lists_the_signatures(processes, request):
    proc = _finished(processes, request)  # saved_model_cli show --all
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = proc.stdout
    for signature in ("tokens", "default", "char_ids", "serving_default"):
        assert f"signature_def['{signature}']" in text
    for name in ("inputs['tokens']", "inputs['sequence_len']", "inputs['text']",
                 "inputs['char_ids']", "outputs['word_emb']", "outputs['lstm_outputs1']",
                 "outputs['lstm_outputs2']", "outputs['elmo']", "outputs['default']",
                 "outputs['sequence_mask']", "outputs['tokens']"):
        assert name in text, name
    assert "shape: (-1, -1, 50)" in text and "dtype: DT_STRING" in text


@pytest.mark.skipif(SAVED_MODEL_CLI is None, reason="saved_model_cli not on PATH")
def test_saved_model_cli_run_on_tokens(exported, processes, request):
    """`saved_model_cli run` loads through a TF1 session, as TF Serving does."""
    sentences = BATCHES[0]
    outdir = str(exported["root"] / "cli_out")
    proc = _finished(processes, request)  # saved_model_cli run, signature tokens, BATCHES[0]
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = {name[:-len(".npy")]: np.load(os.path.join(outdir, name))
           for name in os.listdir(outdir)}
    expected = eager_reference(exported["options"], exported["weights"], sentences, mix=MIX)
    assert_outputs_close(got, expected, "saved_model_cli run tokens")
