"""The blocks of docs/backends.md and docs/migrating.md that run on Keras' JAX and PyTorch
backends, run under them as written.

A block for one backend is marked for tests/test_docs_run.py (which runs the documents on
TensorFlow) with `<!-- doc-test: skip (KERAS_BACKEND=NAME; tests/test_backends_docs.py runs
it) -->`; here it runs under that backend. The unmarked python blocks of docs/backends.md
are for every backend: they run on TensorFlow there, on JAX and PyTorch here. Each backend's
blocks run in a process of its own (`python tests/test_backends_docs.py BACKEND DIRECTORY
RESULT`, `KERAS_BACKEND` set in its environment), each block in a fresh namespace, in a
directory where a tiny published-layout model stands in for `elmo_options.json` +
`elmo_weights.hdf5`. After a block ran, its checks (`CHECKS`) read its namespace: what the
document's comments say of the layers (frozen biLM, trained mix, masks, devices) holds.
"""

import json
import os
import re
import subprocess
import sys

import pytest

import doc_blocks

#: The documents with blocks for the JAX and PyTorch backends.
DOCUMENTS = ("docs/backends.md", "docs/migrating.md")
#: The document whose unmarked python blocks run on every backend.
EVERY_BACKEND = "docs/backends.md"
BACKENDS = ("jax", "torch")
#: A skip reason that gives a block to one backend.
_MARKER = re.compile(r"^KERAS_BACKEND=(\w+); tests/test_backends_docs\.py runs it$")
#: The stand-in model's files, under the documents' names.
OPTIONS_FILE, WEIGHT_FILE = "elmo_options.json", "elmo_weights.hdf5"
#: Seconds a backend's process may take.
TIMEOUT = 300


def backend_blocks(backend):
    """The python blocks that run under `backend`, in document order."""
    blocks = []
    for document in DOCUMENTS:
        for block in doc_blocks.document_blocks(document):
            marker = _MARKER.match(block.skip or "")
            if block.language == "python" and (
                    (marker and marker.group(1) == backend)
                    or (block.skip is None and document == EVERY_BACKEND)):
                blocks.append(block)
    return blocks


# --- what the blocks' comments say, checked on their namespaces -------------------------------
def _numpy(values):
    from keras import ops

    return [ops.convert_to_numpy(value) for value in values]


def _assert_bilm_as_loaded(elmo):
    """The layer's biLM holds the stand-in file's weights: no training step moved them."""
    import numpy as np

    import keras_elmo

    loaded = keras_elmo.BiLM.from_weights(OPTIONS_FILE, WEIGHT_FILE)
    for got, want in zip(_numpy(elmo.bilm.weights), _numpy(loaded.weights), strict=True):
        np.testing.assert_array_equal(got, want)


def _assert_mix_trained(elmo):
    """The mix left its initial `s = 0`, `gamma = 1`."""
    import numpy as np

    mix = elmo.scalar_mixes[0]
    scalars, gamma = _numpy([mix.scalar_parameters, mix.gamma])
    assert np.any(scalars != 0) and gamma != 1, (scalars, gamma)


def check_torch_habits(namespace):
    import torch

    elmo, vectors = namespace["elmo"], namespace["vectors"]
    assert isinstance(elmo, torch.nn.Module)
    assert tuple(vectors.shape) == (2, 3, 16) and not vectors.requires_grad
    assert not vectors[1, 1:].any()  # zeros where padded
    assert sorted(tuple(p.shape) for p in namespace["trainable"]) == [(), (3,)]
    assert not any(p.requires_grad for p in elmo.bilm.parameters())
    assert str(next(elmo.parameters()).device) == "cpu"  # no GPU here
    fresh = type(elmo).from_weights(OPTIONS_FILE, WEIGHT_FILE)  # an optimizer's before a call
    assert sum(p.requires_grad for p in fresh.parameters()) == 2
    _assert_mix_trained(elmo)
    _assert_bilm_as_loaded(elmo)


def check_fit(namespace):
    assert namespace["tagger"].predict(namespace["x"], verbose=0).shape == (2, 3, 3)
    _assert_mix_trained(namespace["elmo"])


def check_jax_step(namespace):
    import jax
    import numpy as np

    assert isinstance(namespace["loss"], jax.Array) and np.isfinite(float(namespace["loss"]))
    _assert_mix_trained(namespace["elmo"])
    _assert_bilm_as_loaded(namespace["elmo"])


def check_allennlp_replacement(namespace):
    import torch

    representations, ids = namespace["representations"], namespace["character_ids"]
    assert isinstance(representations, list) and len(representations) == 2
    assert all(isinstance(r, torch.Tensor) and tuple(r.shape) == (2, 3, 16)
               for r in representations)
    want = torch.tensor([[True, True, True], [True, False, False]])
    assert torch.equal(namespace["mask"], want)
    assert all(torch.equal(mask, want) for mask in namespace["elmo"].compute_mask(ids))


def check_torch_state_dict(namespace):
    import torch

    assert namespace["same"] is True
    names = list(namespace["model"].state_dict())
    assert len(names) == len(set(names)) and "elmo.bilm.token_embedder.char_embeddings" in names
    assert not namespace["model"].elmo.training  # eval() reached the layer
    _assert_mix_trained(namespace["model"].elmo)
    assert isinstance(namespace["again"], torch.nn.Module)


def check_jax_plain_call(namespace):
    import jax

    assert isinstance(namespace["vectors"], jax.Array)
    assert tuple(namespace["vectors"].shape) == (2, 3, 16)
    assert bool(jax.numpy.allclose(namespace["doubled"], 2 * namespace["vectors"]))
    assert bool(jax.numpy.allclose(namespace["baked"](namespace["ids"]), namespace["first"]))


def check_jax_compilation_cache(namespace):
    import jax

    assert os.path.isdir("jax-cache") and os.listdir("jax-cache")  # the executable kept
    assert tuple(namespace["vectors"].shape) == (1, 3, 16)
    from jax.experimental.compilation_cache import compilation_cache

    compilation_cache.set_cache_dir(None)  # the blocks after it: no cache
    compilation_cache.reset_cache()


def check_preprocessor(namespace):
    import numpy as np

    assert isinstance(namespace["ids"], np.ndarray) and namespace["ids"].shape == (2, 3, 50)


#: A phrase of a block -> the check of its namespace.
CHECKS = {"torch.optim.Adam": check_torch_habits, "tagger.fit": check_fit,
          "jax.value_and_grad": check_jax_step,
          "representations = elmo(character_ids)": check_allennlp_replacement,
          "ElmoPreprocessor()": check_preprocessor,
          'torch.save(model.state_dict(), "tagger.pt")': check_torch_state_dict,
          "baked = jax.jit": check_jax_plain_call,
          "enable_compilation_cache(": check_jax_compilation_cache}


def _check_of(block):
    checks = [check for phrase, check in CHECKS.items() if phrase in block.code]
    if len(checks) != 1:
        raise ValueError(f"{block.where}: expected one check of CHECKS; found {len(checks)}.")
    return checks[0]


# --- the tests --------------------------------------------------------------------------------
def test_each_backend_has_its_blocks_and_each_a_check():
    """Every marked block names its own backend in its first lines, as a reader sets it."""
    for backend in BACKENDS:
        blocks = backend_blocks(backend)
        assert len(blocks) >= 2, backend
        for block in blocks:
            _check_of(block)
            if block.skip:
                assert f'os.environ["KERAS_BACKEND"] = "{backend}"' in block.code, block.where
    documents = {block.document for block in backend_blocks("torch")}
    assert documents == set(DOCUMENTS)
    marked = [block for document in DOCUMENTS for block in doc_blocks.document_blocks(document)
              if "KERAS_BACKEND" in (block.skip or "")]
    assert all(_MARKER.match(block.skip) for block in marked), [b.skip for b in marked]


def test_the_allennlp_section_shows_its_lines_beside_ours():
    text = open(os.path.join(doc_blocks.ROOT, "docs", "migrating.md"), encoding="utf-8").read()
    section = text[text.index("## From AllenNLP's Elmo (PyTorch)"):text.index("## From bilm-tf")]
    for line in ("from allennlp.modules.elmo import Elmo, batch_to_ids",
                 "Elmo(options_file, weight_file, num_output_representations=2, dropout=0.5)",
                 "character_ids = batch_to_ids(sentences)", "embeddings = elmo(character_ids)",
                 'embeddings["elmo_representations"]', 'embeddings["mask"]',
                 "```python peer"):
        assert line in section, line


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_backend_blocks_run(backend, tmp_path):
    result = tmp_path / "result.json"
    env = dict(os.environ, KERAS_BACKEND=backend, KERAS_TORCH_DEVICE="cpu")
    done = subprocess.run([sys.executable, os.path.abspath(__file__), backend, str(tmp_path),
                           str(result)], cwd=str(tmp_path), env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert result.exists(), f"exit {done.returncode}:\n{done.stderr[-3000:]}"
    report = json.loads(result.read_text(encoding="utf-8"))
    if report["failure"]:
        pytest.fail(report["failure"], pytrace=False)
    assert report["backend"] == backend
    assert report["ran"] == [block.where for block in backend_blocks(backend)]


# --- the backend's process --------------------------------------------------------------------
def _write_stand_in():
    """A tiny random biLM in the published layout, under the documents' file names."""
    import shutil
    import tempfile

    import keras

    import keras_elmo

    keras.utils.set_random_seed(7)
    with tempfile.TemporaryDirectory(dir=".") as folder:
        keras_elmo.save_published(keras_elmo.BiLM(keras_elmo.BiLMOptions.tiny()), folder)
        shutil.move(os.path.join(folder, "options.json"), OPTIONS_FILE)
        shutil.move(os.path.join(folder, "weights.hdf5"), WEIGHT_FILE)


def _run(backend, directory, result):
    """Runs `backend`'s blocks in `directory`, each with its check; writes the JSON report
    `{"backend", "ran": [where], "failure": None or the failing block's place and error}`."""
    import contextlib
    import io
    import traceback

    os.chdir(directory)
    _write_stand_in()
    import keras

    report = {"backend": keras.backend.backend(), "ran": [], "failure": None}
    for block in backend_blocks(backend):
        namespace = {"__name__": "__doc_block__"}
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                doc_blocks.run_python(block, namespace)
            _check_of(block)(namespace)
        except Exception:  # noqa: BLE001 - reported with the block's place
            report["failure"] = f"{block.where} ({backend}):\n{traceback.format_exc()}"
            break
        report["ran"].append(block.where)
    with open(result, "w", encoding="utf-8") as handle:
        json.dump(report, handle)


if __name__ == "__main__":
    _run(*sys.argv[1:])
