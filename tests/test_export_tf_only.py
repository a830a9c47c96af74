"""The exported SavedModel in processes that have TensorFlow only, and `saved_model_cli`.

The subprocess makes Keras, keras-elmo and tensorflow-text unimportable (as if not
installed, see `HIDE_PACKAGES`), imports only tensorflow (+ numpy, json), loads the
SavedModel and calls every signature; the outputs are compared here with the eager Keras
model. No `import tensorflow_text` is needed: the graph uses core TensorFlow string ops only.
"""

import json
import os
import shutil
import subprocess

import numpy as np
import pytest

import keras_elmo
from keras_elmo.export import export_model_dir
from test_export_helpers import (BATCHES, MIX, assert_outputs_close, eager_reference,
                                 make_model_dir, padded, run_python)

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


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    root = tmp_path_factory.mktemp("tf_only")
    options, weights = make_model_dir(str(root / "model"))
    with open(root / "model" / "scalar_mix.json", "w") as f:
        json.dump(MIX, f)
    path = export_model_dir(str(root / "model"), str(root / "serving"), version=1)
    return dict(root=root, path=path, options=options, weights=weights)


def _requests(sentences):
    tokens, lengths = padded(sentences)
    return [("tokens", {"tokens": tokens.tolist(), "sequence_len": lengths.tolist()}),
            ("default", {"text": [" ".join(s) for s in sentences]}),
            ("serving_default", {"text": [" ".join(s) for s in sentences]}),
            ("char_ids", {"char_ids": keras_elmo.batch_to_ids(sentences).tolist()})]


def test_every_signature_in_a_tensorflow_only_process_equals_the_eager_model(exported):
    root = exported["root"]
    requests = _requests(BATCHES[0]) + _requests(BATCHES[1]) + [
        ("default", {"text": ["", "   "]}),
        ("tokens", {"tokens": [["", ""]], "sequence_len": [0]})]
    with open(root / "requests.json", "w") as f:
        json.dump(requests, f)
    out = str(root / "outputs.npz")
    proc = run_python(TF_ONLY_SCRIPT.format(path=exported["path"], out=out,
                                            requests=str(root / "requests.json")))
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report == {"importable": [], "hidden_but_imported": []}
    results = np.load(out)
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


def test_loading_without_hiding_needs_no_tensorflow_text(exported):
    """A plain `import tensorflow` process never imports tensorflow_text either."""
    proc = run_python(f"""
import tensorflow as tf
loaded = tf.saved_model.load({exported['path']!r})
loaded.signatures["default"](text=tf.constant(["a b"]))
print("tensorflow_text" in sys.modules)
""", hide=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == "False"


@pytest.mark.skipif(SAVED_MODEL_CLI is None, reason="saved_model_cli not on PATH")
def test_saved_model_cli_show_lists_the_signatures(exported):
    proc = subprocess.run([SAVED_MODEL_CLI, "show", "--dir", exported["path"], "--all"],
                          capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
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
def test_saved_model_cli_run_on_tokens(exported):
    """`saved_model_cli run` loads through a TF1 session, as TF Serving does."""
    sentences = BATCHES[0]
    tokens, lengths = padded(sentences)
    exprs = f"tokens={tokens.tolist()!r};sequence_len={lengths.tolist()!r}"
    outdir = str(exported["root"] / "cli_out")
    proc = subprocess.run(
        [SAVED_MODEL_CLI, "run", "--dir", exported["path"], "--tag_set", "serve",
         "--signature_def", "tokens", "--input_exprs", exprs, "--outdir", outdir],
        capture_output=True, text=True, timeout=120,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = {name[:-len(".npy")]: np.load(os.path.join(outdir, name))
           for name in os.listdir(outdir)}
    expected = eager_reference(exported["options"], exported["weights"], sentences, mix=MIX)
    assert_outputs_close(got, expected, "saved_model_cli run tokens")
