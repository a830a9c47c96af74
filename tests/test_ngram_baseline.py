"""Kneser-Ney trigram baseline: normalisation, a hand-computed toy perplexity, the script."""

import collections
import importlib.util
import math
import os

import numpy as np
import pytest

from keras_elmo.evaluation.ngram_baseline import KneserNeyTrigram, evaluate_baseline
from keras_elmo.training.vocabulary import Vocabulary

BOS, EOS, UNK, A, B = 0, 1, 2, 3, 4
VOCAB = Vocabulary(["<S>", "</S>", "<UNK>", "a", "b"])
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def zipf_corpus(seed, vocab_size=30, sentences=200):
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, vocab_size - 2)
    return [list(rng.choice(np.arange(3, vocab_size), size=rng.integers(1, 8),
                            p=weights / weights.sum())) for _ in range(sentences)]


@pytest.mark.parametrize("discount", [None, 0.5, 1.0])
def test_probabilities_sum_to_one_over_the_vocabulary(discount):
    model = KneserNeyTrigram(30, BOS, EOS, discount).fit(zipf_corpus(0))
    every = np.arange(30)
    seen_trigram_context = (BOS, BOS)
    seen_bigram_context_only = (29, 3)  # rare pair; v=3 is a seen bigram context
    unseen = (2, 2)  # <UNK> never occurs in training
    for u, v in [seen_trigram_context, seen_bigram_context_only, unseen, (3, 4), (EOS, 7)]:
        p = model.probabilities(u, v, every)
        assert p[BOS] == 0.0
        assert np.all(p[1:] > 0.0)
        np.testing.assert_allclose(p.sum(), 1.0, rtol=1e-12)


def test_modified_discounts_follow_chen_goodman():
    corpus = zipf_corpus(1, sentences=3000)
    model = KneserNeyTrigram(30, BOS, EOS).fit(corpus)
    # Independent count of trigram count-of-counts n1..n4, then D_k = k - (k+1) Y n_{k+1}/n_k.
    trigrams = collections.Counter()
    for sentence in corpus:
        padded = [BOS, BOS] + list(sentence) + [EOS]
        trigrams.update(zip(padded, padded[1:], padded[2:]))
    n = [sum(1 for c in trigrams.values() if c == k) for k in (1, 2, 3, 4)]
    y = n[0] / (n[0] + 2 * n[1])
    expected = [0.0] + [k - (k + 1) * y * n[k] / n[k - 1] for k in (1, 2, 3)]
    np.testing.assert_allclose(model.discounts[3], expected, rtol=1e-12)
    for order in (1, 2, 3):
        d = model.discounts[order]
        assert d[0] == 0.0 and 0.0 < d[1] <= 1.0 and 0.0 < d[2] <= 2.0 and 0.0 < d[3] <= 3.0


def test_degenerate_counts_fall_back_to_one_discount():
    model = KneserNeyTrigram(5, BOS, EOS).fit([[A, B], [A]])
    np.testing.assert_array_equal(model.discounts[3], [0.0, 0.75, 0.75, 0.75])


def test_toy_perplexity_matches_a_hand_computation(tmp_path):
    # Training "a b", "a"; discount 0.5. Forward events <S> <S> a b </S> and <S> <S> a </S>:
    #   trigram counts (<S><S>a)=2 (<S>ab)=1 (ab</S>)=1 (<S>a</S>)=1
    #   bigram (v w) continuation counts: (<S>a)=2 (raw: <S> has no left context),
    #   (ab)=1 (b</S>)=1 (a</S>)=1; unigram N1+(. w): a 1, b 1, </S> 2, <UNK> 0 (total 4).
    #   p1: leftover 0.5*3/4 spread over 4 ids -> </S> 1.5/4+0.09375 = 0.46875,
    #   a = b = 0.21875, <UNK> = 0.09375.
    #   p2(.|<S>) = (max(c-.5,0) + .5 p1)/2: p2(a) = 0.8046875, p2(<UNK>) = 0.0234375
    #   p2(.|a) = (max(c-.5,0) + 1.0 p1)/2: p2(b|a) = 0.359375;  p2(</S>|b) = 0.734375
    # Held-out "a b": p(a|<S><S>) = (1.5 + .5*.8046875)/2 = 0.951171875,
    #   p(b|<S>a) = (.5 + .359375)/2 = 0.4296875, p(</S>|a b) = .5 + .5*.734375 = 0.8671875
    # Held-out "c" (OOV): p(<UNK>|<S><S>) = .5*.0234375/2 = 0.005859375,
    #   p(</S>|<S><UNK>) = p1(</S>) = 0.46875 (both contexts unseen).
    forward = [0.951171875, 0.4296875, 0.8671875, 0.005859375, 0.46875]
    # Backward (reversed sentences "b a", "a"; held-out "b a", "c"), worked the same way:
    backward = [0.4296875, 0.8671875, 0.90234375, 0.0234375, 0.21875]
    (tmp_path / "train.txt").write_text("a b\na\n")
    (tmp_path / "heldout.txt").write_text("a b\nc\n")
    results = evaluate_baseline([str(tmp_path / "train.txt")], [str(tmp_path / "heldout.txt")],
                                VOCAB, discount=0.5)
    expected_forward = math.exp(-sum(map(math.log, forward)) / 5)
    expected_backward = math.exp(-sum(map(math.log, backward)) / 5)
    assert results["forward_perplexity"] == pytest.approx(expected_forward, rel=1e-12)
    assert results["backward_perplexity"] == pytest.approx(expected_backward, rel=1e-12)
    assert results["average_perplexity"] == pytest.approx(
        math.exp((math.log(expected_forward) + math.log(expected_backward)) / 2), rel=1e-12)
    assert (results["train_tokens"], results["heldout_tokens"]) == (3, 3)
    assert results["heldout_predictions"] == 5
    assert results["heldout_unk_rate"] == pytest.approx(1 / 3)


def test_event_probabilities_directly():
    model = KneserNeyTrigram(5, BOS, EOS, discount=0.5).fit([[A, B], [A]])
    np.testing.assert_allclose(
        model.probabilities([BOS, BOS, A], [BOS, A, B], [A, B, EOS]),
        [0.951171875, 0.4296875, 0.8671875], rtol=1e-12)


def test_argument_errors():
    with pytest.raises(ValueError, match="discount None or in"):
        KneserNeyTrigram(5, BOS, EOS, discount=1.5)
    with pytest.raises(ValueError, match="0 <= eos_id < 5"):
        KneserNeyTrigram(5, BOS, 7)
    with pytest.raises(ValueError, match=r"ids in \[0, 5\)"):
        KneserNeyTrigram(5, BOS, EOS).fit([[A, 9]])
    with pytest.raises(ValueError, match="not trained"):
        KneserNeyTrigram(5, BOS, EOS).probabilities(0, 0, 3)


def test_benchmark_script_prints_the_figures(tmp_path, capsys):
    (tmp_path / "train.txt").write_text("a b\na\n")
    (tmp_path / "heldout.txt").write_text("a b\nc\n")
    VOCAB.save(str(tmp_path / "vocab.txt"))
    spec = importlib.util.spec_from_file_location(
        "ngram_baseline_script", os.path.join(REPO, "benchmarks", "ngram_baseline.py"))
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.main(["--train", str(tmp_path / "train.txt"), "--heldout",
                        str(tmp_path / "heldout.txt"), "--vocab", str(tmp_path / "vocab.txt"),
                        "--discount", "0.5"]) == 0
    names = [line.split(":")[0] for line in capsys.readouterr().out.splitlines()]
    assert names == ["forward ppl", "backward ppl", "average ppl", "train tokens",
                     "heldout tokens", "seconds"]
    assert script.main(["--train", str(tmp_path / "nope*.txt"), "--heldout", "x",
                        "--vocab", str(tmp_path / "vocab.txt")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "No corpus file matches" in err
