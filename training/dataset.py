"""The tf.data input pipeline of biLM training: text files -> batches of whole sentences.

Batches hold whole sentences, not fixed windows. The keras-elmo biLM is stateless (every
sentence starts from zero state), so training on whole sentences trains exactly the model
that is used later. Steps, all inside tf.data:

1. files (a sorted list of one-sentence-per-line shards) are shuffled with seed
   `seed + epoch` and read interleaved; lines go through a seeded shuffle buffer, so a
   resumed run sees the same order for the same epoch;
2. each line is tokenised in-graph (`tokenize_lines`): pre-tokenised text is split on
   whitespace exactly as Python's `str.split()` does (the vocabulary is counted that way),
   raw text by script (`keras_elmo.text.unicode_script`); raw Chinese under `"jieba"` is
   segmented once before the pipeline (`keras_elmo.training.segmented_corpus`, cached) and
   the segmented copy is split on whitespace; blank lines are dropped;
3. a sentence longer than `max_sentence_tokens` is cut into consecutive chunks of at most
   that many tokens and each chunk is trained as its own sentence;
4. each sentence becomes `<S> t1 ... tn </S>` and sentences of similar length are batched
   with a token budget (`bucket_by_sequence_length`): `sentences * padded_length <=
   batch_tokens`, at most `batch_size` sentences, padded to the batch's longest sentence
   (to the bucket's longest possible one when `jit_compile`: fewer shapes to compile);
5. tokens become char ids (`keras_elmo.text.string_char_ids.tf_padded_char_ids`, padding
   rows all zero) and vocabulary ids (out-of-vocabulary -> `<UNK>`).

Example:
>>> dataset = make_dataset(["train.txt"], vocab, config, epoch=0)
>>> batch = next(iter(dataset))
>>> batch["char_ids"].shape, batch["token_ids"].shape  # (B, T, 50), (B, T)
"""

import tensorflow as tf

from keras_elmo import constants
from keras_elmo.text.string_char_ids import tf_padded_char_ids
from keras_elmo.text.vocabulary_lookup import VocabularyLookup
from keras_elmo.text.tokenizers import IN_GRAPH_TOKENIZERS, is_in_graph
from keras_elmo.training.segmented_corpus import segment_files
from keras_elmo.text.whitespace import split_whitespace

#: Lines tokenised per tf.data map call.
_LINES_PER_MAP = 256

#: Batches the pipeline keeps ready ahead of the training step.
_PREFETCH_BATCHES = 8


def tokenize_lines(lines, tokenizer="whitespace"):
    """Splits lines into tokens, in-graph: tf.string `(N,)` -> `tf.RaggedTensor` `(N, (n))`.

    Args:
        lines: tf.string `(N,)`, one sentence per line.
        tokenizer: `"whitespace"`: the line is already tokenised; split on every Unicode
            whitespace (`\\u00a0` and `\\u3000` included), as Python's `str.split()`.
            `"unicode-script"`: raw text; split on whitespace and between
            scripts/punctuation ("hello," -> "hello", ","), Han and kana per character
            (`keras_elmo.text.unicode_script`). A Python tokeniser (`"jieba"`) is not run here:
            `make_dataset` reads its segmented copies (`segment_files`) with `"whitespace"`.

    Example:
    >>> tokenize_lines(tf.constant(["a\\u00a0b  c"])).to_list()
    [[b'a', b'b', b'c']]
    """
    lines = tf.convert_to_tensor(lines, tf.string)
    if tokenizer == "whitespace":
        return split_whitespace(lines)
    if tokenizer == "unicode-script":
        from keras_elmo.text.unicode_script import split_unicode_script

        return split_unicode_script(lines)
    raise ValueError(f"tokenize_lines runs the in-graph tokenizers {IN_GRAPH_TOKENIZERS}; "
                     f"received {tokenizer!r} (a Python tokenizer such as jieba is applied "
                     "first with keras_elmo.training.segmented_corpus.segment_files).")


def pipeline_input(files, tokenizer):
    """`(files, in-graph tokenizer)` the pipeline reads for a corpus under `tokenizer`:
    the files themselves, or (jieba) their segmented copies read with `"whitespace"`."""
    if is_in_graph(tokenizer):
        return list(files), tokenizer
    return segment_files(files, tokenizer), "whitespace"


def chunk_sentences(sentences, max_tokens):
    """Cuts every sentence into chunks of at most `max_tokens`; drops empty sentences.

    Args:
        sentences: `tf.RaggedTensor` `(N, (n))` of tokens.
        max_tokens: int, chunk length.

    Returns:
        `tf.RaggedTensor` `(num_chunks, (m))` with `1 <= m <= max_tokens`, in order.

    Example:
    >>> chunk_sentences(tf.ragged.constant([["a", "b", "c"], []]), 2).to_list()
    [[b'a', b'b'], [b'c']]
    """
    lengths = tf.cast(sentences.row_lengths(), tf.int32)  # (N,)
    num_chunks = (lengths + max_tokens - 1) // max_tokens  # (N,), 0 for an empty sentence
    chunk_index = tf.ragged.range(num_chunks).flat_values  # (num_chunks,)
    parent_length = tf.repeat(lengths, num_chunks)  # (num_chunks,)
    chunk_lengths = tf.minimum(max_tokens, parent_length - chunk_index * max_tokens)
    return tf.RaggedTensor.from_row_lengths(sentences.flat_values, chunk_lengths)


def bucket_boundaries(max_length):
    """Padded-length bucket edges for sentences of 3 .. `max_length` tokens (boundaries incl.)."""
    edges, edge, step = [], 4, 2
    while edge <= max_length:
        edges.append(edge)
        step = max(2, edge // 8)
        edge += step
    return edges


def line_dataset(files, shuffle, seed=0, shuffle_buffer=1):
    """Lines of the files: shuffled files interleaved + a seeded line buffer, or in order."""
    files_ds = tf.data.Dataset.from_tensor_slices(list(files))
    if not shuffle:
        return files_ds.flat_map(tf.data.TextLineDataset)
    files_ds = files_ds.shuffle(len(files), seed=seed, reshuffle_each_iteration=False)
    lines = files_ds.interleave(tf.data.TextLineDataset, cycle_length=min(len(files), 8),
                                block_length=16)
    return lines.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=False)


def make_dataset(files, vocab, config, epoch=0, shuffle=True, skip_batches=0, input_context=None,
                 token_vocabulary=None):
    """Batches of one epoch over `files`, as described in the module docstring.

    Args:
        files: list of str, one-sentence-per-line text files.
        vocab: `keras_elmo.training.vocabulary.Vocabulary` (target ids; OOV -> `<UNK>`).
        config: `keras_elmo.training.config.TrainingConfig` (tokenizer, chunk length, batch budget,
            shuffle buffer, seed, char length).
        epoch: int, selects the shuffling seed `config.seed + epoch`.
        shuffle: bool, False for evaluation (files and lines in order).
        skip_batches: int, batches of this epoch already consumed (resume); counted over
            the whole job, before sharding.
        input_context: `tf.distribute.InputContext` or None; with several input pipelines
            each keeps every `num_input_pipelines`-th batch.
        token_vocabulary: a vocabulary model's `keras_elmo.TokenVocabulary` (its char and
            word ids), None for a byte model.

    Returns:
        `tf.data.Dataset` of dicts `{"char_ids": int32 (B, T, max_chars), "token_ids": int32
        (B, T)}` (and `"word_ids"` int32 (B, T) for a vocabulary model with words): `T` includes `<S>` and `</S>`; padded positions have all-zero char ids and
        token id 0.
    """
    if not files:
        raise ValueError("make_dataset needs at least one corpus file; received none.")
    max_length = config.max_sentence_tokens + 2
    files, tokenizer = pipeline_input(files, config.tokenizer)
    lines = line_dataset(files, shuffle, config.seed + epoch, config.shuffle_buffer)

    def split(batch_of_lines):  # (n,) -> ragged (chunks, (m))
        return chunk_sentences(tokenize_lines(batch_of_lines, tokenizer),
                               config.max_sentence_tokens)

    sentences = lines.batch(_LINES_PER_MAP).map(split).unbatch()  # (m,) tf.string each

    def add_boundaries(tokens):  # (m,) -> (m + 2,)
        return tf.concat([[constants.BOS_TOKEN], tokens, [constants.EOS_TOKEN]], axis=0)

    sentences = sentences.map(add_boundaries)
    edges = bucket_boundaries(max_length)
    if config.jit_compile and (not edges or edges[-1] <= max_length):
        edges.append(max_length + 1)  # every length below the last edge
    largest = [edge - 1 for edge in edges] + [max_length]  # longest sentence per bucket
    sizes = [max(1, min(config.batch_size, config.batch_tokens // n)) for n in largest]
    # An XLA-compiled step compiles once per batch shape: then every batch of a bucket is
    # padded to the bucket's longest length, so there are a few shapes, not one per length.
    batches = sentences.bucket_by_sequence_length(
        lambda tokens: tf.shape(tokens)[0], bucket_boundaries=edges, bucket_batch_sizes=sizes,
        padded_shapes=[None], padding_values=b"", drop_remainder=False,
        pad_to_bucket_boundary=config.jit_compile)  # (B, T) tf.string
    if skip_batches:
        batches = batches.skip(skip_batches)
    if input_context is not None and input_context.num_input_pipelines > 1:
        batches = batches.shard(input_context.num_input_pipelines,
                                input_context.input_pipeline_id)
    table = vocabulary_table(vocab)
    max_chars = config.options.max_characters_per_token
    if config.options.char_vocabulary and token_vocabulary is None:
        raise ValueError("make_dataset of a vocabulary model (char_vocabulary) needs its "
                         "token_vocabulary; received None.")
    lookup = VocabularyLookup(token_vocabulary) if config.options.char_vocabulary else None

    def to_ids(tokens):  # (B, T) tf.string -> dict
        is_token = tf.not_equal(tokens, "")
        token_ids = tf.where(is_token, tf.cast(table.lookup(tokens), tf.int32), 0)
        if lookup is None:
            return {"char_ids": tf_padded_char_ids(tokens, max_chars), "token_ids": token_ids}
        # The softmax reads <S> and </S>; the model's vocabulary spells its own boundaries.
        spelled = tf.where(tf.equal(tokens, constants.BOS_TOKEN),
                           token_vocabulary.begin_sentence_token, tokens)
        spelled = tf.where(tf.equal(tokens, constants.EOS_TOKEN),
                           token_vocabulary.end_sentence_token, spelled)
        return {**lookup.padded_ids(spelled), "token_ids": token_ids}

    batches = batches.map(to_ids, num_parallel_calls=tf.data.AUTOTUNE,
                          deterministic=True).prefetch(_PREFETCH_BATCHES)
    return batches.with_options(_pipeline_options())


def _pipeline_options():
    """tf.data options of every pipeline here: no autotuning thread.

    Each epoch (and each evaluation) builds a new pipeline. With autotuning on, destroying
    the previous iterator waits for tf.data's model thread to finish an optimisation pass,
    seconds per epoch on 2 busy cores (docs/performance.md). The pipeline is a small part of
    a training step, so fixed parallelism (the core count, `AUTOTUNE` without autotuning)
    and a fixed prefetch lose nothing.
    """
    options = tf.data.Options()
    options.autotune.enabled = False
    return options


def vocabulary_table(vocab):
    """`tf.lookup.StaticHashTable` token -> id (int64), unknown tokens -> `vocab.unk_id`."""
    tokens = tf.constant(vocab.tokens, tf.string)
    ids = tf.range(len(vocab), dtype=tf.int64)
    initializer = tf.lookup.KeyValueTensorInitializer(tokens, ids)
    return tf.lookup.StaticHashTable(initializer, default_value=vocab.unk_id)


def corpus_size(files, tokenizer="whitespace"):
    """`(sentences, tokens)` of the corpus as the pipeline tokenises it (blank lines skipped)."""
    files, tokenizer = pipeline_input(files, tokenizer)
    lines = line_dataset(files, shuffle=False).batch(4096)

    def counts(batch):
        lengths = tokenize_lines(batch, tokenizer).row_lengths()  # (n,) int64
        return tf.stack([tf.math.count_nonzero(lengths), tf.reduce_sum(lengths)])

    total = lines.map(counts).reduce(tf.zeros(2, tf.int64), lambda a, b: a + b)
    return int(total[0]), int(total[1])
