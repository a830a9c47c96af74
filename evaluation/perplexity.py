"""Held-out perplexity of a trained biLM, with the full softmax.

Every held-out sentence is read as in training (same tokenizer, long sentences cut into
chunks of `max_sentence_tokens`, each chunk framed `<S> ... </S>`), in file order, without
dropout; the report counts the sentences (non-blank lines) and, when some were cut, the
chunks scored. For n words a chunk has n + 1 targets per direction: the forward LM predicts
`t1 ... tn </S>`, the backward LM `<S> t1 ... tn`, so `</S>` and `<S>` are counted, and
out-of-vocabulary words are predicted as `<UNK>`.

    forward perplexity  = exp(sum forward NLL / targets)
    backward perplexity = exp(sum backward NLL / targets)
    average perplexity  = exp(0.5 * (forward mean NLL + backward mean NLL))
                        = sqrt(forward perplexity * backward perplexity)

Example:
>>> result = evaluate_model_dir("runs/small", ["heldout.txt"])
>>> sorted(result)
['average', 'backward', 'chunks', 'forward', 'max_sentence_tokens', 'sentences', 'targets',
 'tokenizer']
"""

import math

import tensorflow as tf

from keras_elmo.training.dataset import corpus_size, make_dataset
from keras_elmo.training.language_model import model_inputs

#: Upper bound on `batch rows x length x vocab` logits held at once (128 MB of float32).
_MAX_LOGITS = 2 ** 25


def evaluate(model, files, vocab, config):
    """Full-softmax perplexities of `model` on `files`.

    Args:
        model: `keras_elmo.training.language_model.LanguageModel`.
        files: list of str, one-sentence-per-line held-out files.
        vocab: the model's `Vocabulary`.
        config: the model's `TrainingConfig` (tokenizer, chunk length, batch budget).

    Returns:
        dict: `forward`, `backward`, `average` perplexities (floats), `targets` (targets
        per direction), `sentences` (non-blank lines), `chunks` (the pieces of at most
        `max_sentence_tokens` tokens that were scored: more than `sentences` when some
        sentence is longer) and `max_sentence_tokens`.

    Raises:
        ValueError: when the files hold no token.
    """
    budget = max(config.max_sentence_tokens + 2,
                 min(config.batch_tokens, _MAX_LOGITS // max(len(vocab), 1)))
    eval_config = config.replace(batch_tokens=budget, batch_size=max(1, budget // 3))
    dataset = make_dataset(files, vocab, eval_config, shuffle=False,
                           token_vocabulary=model.backbone.vocabulary)

    # No autograph: the model's branches are on Python values.
    @tf.function(input_signature=[dataset.element_spec], autograph=False)
    def batch_sums(batch):
        sums = model.nll_sums(model_inputs(batch), batch["token_ids"], training=False,
                              sampled=False)
        rows = tf.math.count_nonzero(batch["char_ids"][:, 0, 0], dtype=tf.int64)
        return sums["forward"], sums["backward"], sums["count"], rows

    forward = backward = count = 0.0
    chunks = 0
    for batch in dataset:
        f, b, c, rows = batch_sums(batch)
        forward += float(f)
        backward += float(b)
        count += float(c)
        chunks += int(rows)
    if count == 0:
        raise ValueError(f"the held-out files {list(files)} contain no token; expected "
                         "one sentence per line.")
    sentences, _ = corpus_size(files, config.tokenizer)  # before chunking
    forward_nll, backward_nll = forward / count, backward / count
    return {"forward": math.exp(forward_nll), "backward": math.exp(backward_nll),
            "average": math.exp(0.5 * (forward_nll + backward_nll)),
            "targets": int(count), "sentences": sentences, "chunks": chunks,
            "max_sentence_tokens": config.max_sentence_tokens, "tokenizer": config.tokenizer}


def evaluate_model_dir(model_dir, files, tokenizer=None):
    """Loads a model directory's newest checkpoint and evaluates it on `files`, tokenised
    by `tokenizer` (None: the tokeniser the model was trained with)."""
    from keras_elmo.training.model_dir import ModelDir

    directory = model_dir if isinstance(model_dir, ModelDir) else ModelDir(model_dir)
    config, vocab, model = directory.load_model()
    if tokenizer is not None:
        config = config.replace(tokenizer=tokenizer)
    return evaluate(model, files, vocab, config)


def format_report(result, heldout):
    """The lines `keras-elmo perplexity` prints.

    The first line names the chunks only when some sentence was longer than
    `max_sentence_tokens`, e.g. `held-out: h.txt (2,112 sentences (2,119 chunks of <= 100
    tokens), ... targets per direction, </S> and <S> included)`; and the tokeniser when it
    is not the whitespace split (`...; tokenizer jieba)`).
    """
    read = _count(result["sentences"], "sentence")
    if result["chunks"] != result["sentences"]:
        read += (f" ({_count(result['chunks'], 'chunk')} of <= "
                 f"{result['max_sentence_tokens']} tokens)")
    tokenizer = result.get("tokenizer", "whitespace")
    by = "" if tokenizer == "whitespace" else f"; tokenizer {tokenizer}"
    return "\n".join([
        f"held-out: {heldout} ({read}, {result['targets']:,} targets per direction, "
        f"</S> and <S> included{by})",
        f"forward perplexity:  {result['forward']:.2f}",
        f"backward perplexity: {result['backward']:.2f}",
        f"average perplexity:  {result['average']:.2f}",
    ])


def _count(number, noun):
    """`"1 sentence"`, `"2,112 sentences"`."""
    return f"{number:,} {noun}" + ("" if number == 1 else "s")
