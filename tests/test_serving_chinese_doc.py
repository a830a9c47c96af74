"""docs/serving.md, "Chinese and other text without spaces between words": its jieba client,
run as written against an exported model, shows the segmented tokens in `tokens`."""

import os
import re

import pytest
import tensorflow as tf

import keras_elmo
from keras_elmo.export import export_saved_model
from test_export_helpers import make_model_dir

DOC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs",
                   "serving.md")
SECTION = "## Chinese and other text without spaces between words"


def _client_code():
    text = open(DOC, encoding="utf-8").read()
    section = text[text.index(SECTION):]
    return re.search(r"```python\n(.*?)\n```", section, flags=re.S).group(1)


@pytest.mark.slow
def test_the_documented_jieba_client_runs_and_its_tokens_are_jieba_words(tmp_path):
    options, weights = make_model_dir(str(tmp_path / "model"))
    path = export_saved_model(keras_elmo.BiLM.from_weights(options, weights),
                              str(tmp_path / "elmo" / "1"))
    code = _client_code().replace('"serving/elmo/1"', repr(str(path)))
    namespace = {}
    exec(compile(code, "serving.md", "exec"), namespace)  # the client, as documented
    tokens = [[t.decode("utf-8") for t in row] for row in namespace["out"]["tokens"].numpy()]
    assert tokens == [["我", "爱", "北京", "天安门", "。"], ["他", "打篮球", "。", "", ""]]
    assert namespace["out"]["elmo"].shape[:2] == (2, 5)
    # Unsegmented, `default` sees one token per sentence: what the section warns about.
    raw = namespace["elmo"].signatures["default"](text=tf.constant(namespace["raw"]))
    assert raw["tokens"].shape == (2, 1)


@pytest.mark.slow
def test_export_of_a_jieba_model_says_to_segment_first(tmp_path, capsys):
    import json

    from keras_elmo.cli.main import main

    options, _ = make_model_dir(str(tmp_path / "model"))
    with open(options, encoding="utf-8") as handle:
        data = json.load(handle)
    with open(options, "w", encoding="utf-8") as handle:
        json.dump(dict(data, tokenizer="jieba"), handle)
    assert main(["export", str(tmp_path / "model"), str(tmp_path / "out")]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1].startswith("note: the model was trained with --tokenizer jieba; the "
                                "`default` signature splits on whitespace only")
    assert SECTION[3:] in lines[-1]
