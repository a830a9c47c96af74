"""Issue 27's input contract, the same in Python, `keras-elmo embed` and the SavedModel: one
vector per token, always.

- invalid UTF-8: the bytes are dropped inside their token, the token stays (Python bytes,
  SavedModel); a file that is not UTF-8 is refused naming the line and token (CLI);
- a token longer than `C - 2` bytes is cut there (docs/model.md section 1);
- a sentence longer than `max_length` tokens runs in windows of `max_length` tokens;
- an empty sentence gives an empty entry.

The SavedModel is loaded with `tf.saved_model.load` in a subprocess where keras, keras_elmo
and tensorflow_text cannot be imported (`test_export_helpers.run_python`); its outputs are
compared here with `ElmoEmbedder`'s.
"""

import json
import os

import h5py
import numpy as np
import pytest

from keras_elmo import ElmoEmbedder
from keras_elmo.cli.main import main
from keras_elmo.text.sentence_windows import windows
from keras_elmo.export import export_model_dir
from test_export_helpers import make_model_dir, run_python

ATOL = 1e-5
#: Tokens per window of every path here (the export's max_length, --max-length).
MAX_LENGTH = 3
P = 8  # projection_dim of the tiny model

#: name -> (raw sentence bytes, the equivalent tokens as the Python path takes them; a
#: token of invalid bytes only is the word of no characters, which `""` is not: an empty
#: string is no token)
CASES = {
    "invalid_utf8": (b"ab\xff c \xfe d", ["ab", "c", b"\xfe", "d"]),
    "only_invalid": (b"\xff\xfe", [b"\xff"]),
    "long_token": (("x" * 60 + " " + "\u00e9" * 30).encode(), ["x" * 48, "\u00e9" * 24]),
    "long_sentence": (b"a b c d e f g", list("abcdefg")),
    "empty": (b"", []),
    "blank": (b" \t\xc2\xa0 ", []),
}

TF_ONLY = """
import json
import numpy as np
import tensorflow as tf

loaded = tf.saved_model.load({path!r})
with open({requests!r}) as f:
    texts = [bytes.fromhex(t) for t in json.load(f)]
results = {{}}
default = loaded.signatures["default"](text=tf.constant(texts))
for name, value in default.items():
    value = value.numpy()
    results["default/" + name] = value.astype(bytes) if value.dtype == object else value
tokens = default["tokens"]
lengths = tf.reduce_sum(tf.cast(default["sequence_mask"], tf.int32), axis=1)
for name, value in loaded.signatures["tokens"](tokens=tokens, sequence_len=lengths).items():
    results["tokens/" + name] = value.numpy()  # tokens returns numbers only
np.savez({out!r}, **results)
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in HIDDEN)))
"""


@pytest.fixture(scope="module")
def contract(tmp_path_factory):
    root = tmp_path_factory.mktemp("contract")
    make_model_dir(str(root / "model"))
    path = export_model_dir(str(root / "model"), str(root / "serving"), version=1,
                            max_length=MAX_LENGTH)
    embedder = ElmoEmbedder(str(root / "model"), token_cache=False, max_length=MAX_LENGTH)
    return dict(root=root, path=path, embedder=embedder, model=str(root / "model"))


def _alone(embedder, tokens):
    """(L + 1, n, 2P): each window of the sentence run alone through the biLM."""
    import keras_elmo

    parts = [np.asarray(embedder.bilm(keras_elmo.batch_to_ids([tokens[a:b]]))["layers"])[0]
             for a, b in windows(len(tokens), MAX_LENGTH)]
    return np.concatenate(parts, axis=1)


@pytest.mark.slow
def test_saved_model_in_a_tensorflow_only_process_gives_one_vector_per_token(contract):
    root = contract["root"]
    names = list(CASES)
    with open(root / "requests.json", "w") as f:
        json.dump([CASES[name][0].hex() for name in names], f)
    out = str(root / "outputs.npz")
    proc = run_python(TF_ONLY.format(path=contract["path"], requests=str(root / "requests.json"),
                                     out=out), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []  # nothing of ours imported
    results = np.load(out)
    for signature in ("default", "tokens"):
        mask = results[f"{signature}/sequence_mask"]
        for row, name in enumerate(names):
            raw, tokens = CASES[name]
            split = raw.decode("utf-8", "surrogateescape").split()  # the documented split
            assert mask[row].sum() == len(tokens) == len(split), (signature, name)
            expected = _alone(contract["embedder"], tokens)  # (L + 1, n, 2P)
            python = contract["embedder"].embed_sentence(raw)
            np.testing.assert_allclose(python, expected, atol=ATOL, rtol=0, err_msg=name)
            n = len(tokens)
            got = results[f"{signature}/word_emb"][row, :n]
            np.testing.assert_allclose(got, expected[0, :, :P], atol=ATOL, rtol=0,
                                       err_msg=f"{signature} {name}")
            for j in (1, 2):
                got = results[f"{signature}/lstm_outputs{j}"][row]
                np.testing.assert_allclose(got[:n], expected[j], atol=ATOL, rtol=0,
                                           err_msg=f"{signature} {name} layer {j}")
                assert not got[n:].any(), (signature, name)
            if not tokens:  # an empty entry: no vector, a zero mean
                assert not results[f"{signature}/default"][row].any()
    # The default signature's tokens are the caller's own bytes, invalid ones included.
    assert results["default/tokens"][0, :4].tolist() == [b"ab\xff", b"c", b"\xfe", b"d"]


def test_python_bytes_and_str_follow_the_same_rules(contract):
    embedder = contract["embedder"]
    for name, (raw, tokens) in CASES.items():
        expected = _alone(embedder, tokens)
        got = embedder.embed_sentence(raw)
        assert got.shape == (3, len(tokens), 2 * P), name
        np.testing.assert_allclose(got, expected, atol=ATOL, rtol=0, err_msg=name)
    # A token given as bytes, or as str holding surrogate escapes, is the same token.
    as_bytes = embedder.embed_sentence([b"ab\xff", b"\xfe"])
    as_str = embedder.embed_sentence(["ab\udcff", "\udcfe"])
    np.testing.assert_allclose(as_bytes, as_str, atol=0, rtol=0)
    np.testing.assert_allclose(as_bytes, _alone(embedder, ["ab", b"\xfe"]), atol=ATOL, rtol=0)
    # An over-long sentence keeps every token: 7 in, 7 out, in windows of 3.
    assert embedder.embed_sentence(list("abcdefg")).shape == (3, 7, 2 * P)
    assert embedder.embed_sentence([]).shape == (3, 0, 2 * P)


def test_cli_follows_the_same_rules(contract, tmp_path, capsys):
    lines = ["x" * 60 + " " + "\u00e9" * 30, "a b c d e f g", "", "ab c"]
    text = tmp_path / "in.txt"
    text.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = str(tmp_path / "out.hdf5")
    code = main(["embed", contract["model"], str(text), out, "--max-length", str(MAX_LENGTH),
                 "--quiet"])
    assert code == 0 and capsys.readouterr() == ("", "")
    expected = [CASES["long_token"][1], CASES["long_sentence"][1], [], ["ab", "c"]]
    with h5py.File(out, "r") as f:
        for key, tokens in enumerate(expected):
            np.testing.assert_allclose(f[str(key)][...], _alone(contract["embedder"], tokens),
                                       atol=ATOL, rtol=0, err_msg=str(key))


def test_cli_refuses_a_file_that_is_not_utf8_naming_sentence_and_token(contract, tmp_path,
                                                                       capsys):
    text = tmp_path / "latin1.txt"
    text.write_bytes(b"good line\nun caf\xe9 au lait\n")
    out = tmp_path / "out.hdf5"
    assert main(["embed", contract["model"], str(text), str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("keras-elmo embed: error: ")
    assert "line 2: not UTF-8 (invalid continuation byte at byte 3 of token b'caf\\xe9'); " in err
    assert not out.exists()


@pytest.mark.parametrize("argv, message", [
    (["--max-length", "0"], "--max-length must be a positive int; received 0"),
    (["--max-tokens", "0"], "--max-tokens must be a positive int or 'none' (no budget); "
                            "received '0'"),
])
def test_cli_refuses_bad_limits_in_one_line(contract, tmp_path, capsys, argv, message):
    text = tmp_path / "in.txt"
    text.write_text("a b\n", encoding="utf-8")
    assert main(["embed", contract["model"], str(text), str(tmp_path / "o.hdf5"), *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err
    assert not os.path.exists(tmp_path / "o.hdf5")


def test_python_refuses_a_bad_max_length_in_one_line(contract):
    with pytest.raises(ValueError, match=r"max_length must be a positive int; received 0"):
        ElmoEmbedder(contract["model"], token_cache=False, max_length=0)
