"""The embedder as an Apache Beam pipeline: `EmbedFilesToShards` (files in, HDF5 shards and a
manifest out: `keras-elmo embed --runner`) and `EmbedSentences` (a `PTransform` for a user's
own pipeline: `(index, sentence)` in, `(index, vectors)` out).

`EmbedFilesToShards`, on a pipeline's start:

    files (sorted) -> count lines, keep offsets (a file per element)  [beam_shards.index_file]
                   -> plan the shards (one step over all files)        [beam_shards.plan_shards]
                   -> spread them over the workers (GroupByKey on the shard's first index)
                   -> embed each shard and write its file              [EmbedShardFn]
                   -> check every index once, then write manifest.json [beam_shards.check_shards]

Each worker process loads the model once (`beam_worker.embedding_worker`, called from
`DoFn.setup`) and embeds a shard as `keras-elmo embed` embeds a file. A shard's file name is
fixed by its range of indices and written atomically, so a retried bundle (a runner runs a
failed bundle again; Beam's BundleBasedDirectRunner up to 4 times, Dataflow up to 4 times in
batch) rewrites the same files with the same content, and a shard never exists half
written. The last step reads every shard's record, refuses a missing, repeated or
overlapping index, and writes the manifest only then: a folder with a manifest is complete.

Only the Beam path imports this module (and Apache Beam): `import keras_elmo` and
`keras-elmo embed` without `--runner` never do.

Example:
>>> import apache_beam as beam  # doctest: +SKIP
>>> settings = EmbeddingSettings(model_dir="runs/pd", output_format="top")  # doctest: +SKIP
>>> with beam.Pipeline() as pipeline:  # doctest: +SKIP
...     _ = pipeline | EmbedFilesToShards("corpus/*.txt", "shards/", settings)
>>> with beam.Pipeline() as pipeline:  # doctest: +SKIP
...     vectors = (pipeline | beam.Create([(0, "人民 日报"), (1, ["新年", "讲话"])])
...                | EmbedSentences(settings))  # (index, float32 (n, 2P))
"""

import contextlib
import time

import apache_beam as beam
from apache_beam.utils.windowed_value import WindowedValue

from keras_elmo.embedding import beam_shards
from keras_elmo.embedding.beam_worker import EmbeddingSettings, embedding_worker
from keras_elmo.embedding.bilm_runner import DEFAULT_SORT_BATCHES


class EmbedShardFn(beam.DoFn):
    """`Shard` -> its file in `output_dir` (`beam_shards.write_shard`) -> its record; the
    model is loaded in `setup`, once per worker process."""

    def __init__(self, settings, output_dir):
        self.settings = settings
        self.output_dir = output_dir
        self._worker = None

    def setup(self):
        self._worker = embedding_worker(self.settings)

    def process(self, shard):
        start = time.perf_counter()
        lines = beam_shards.read_shard_lines(shard)
        # Closed on an error too: the biLM's worker thread is joined before the next try.
        with contextlib.closing(self._worker.embed_lines(lines)) as embedded:
            record = beam_shards.write_shard(
                self.output_dir, shard, embedded,
                keep_sentence_index=self.settings.keep_sentence_index)
        record["seconds"] = round(time.perf_counter() - start, 3)  # reading to the file's rename
        yield record


class EmbedSentencesFn(beam.DoFn):
    """`(index, sentence)` -> `(index, vectors)`: the elements of a bundle are gathered into
    windows of `batch_size * 32` sentences (as `embed` reads a file) and embedded in length
    order; the last window of a bundle at its end."""

    def __init__(self, settings):
        self.settings = settings
        self._worker = None
        self._pending = []

    def setup(self):
        self._worker = embedding_worker(self.settings)

    def start_bundle(self):
        self._pending = []

    def process(self, element, window=beam.DoFn.WindowParam,
                timestamp=beam.DoFn.TimestampParam):
        self._pending.append((element, window, timestamp))
        if len(self._pending) >= self.settings.batch_size * DEFAULT_SORT_BATCHES:
            yield from self._flush()

    def finish_bundle(self):
        yield from self._flush()

    def _flush(self):
        pending, self._pending = self._pending, []
        places = {element[0]: (window, timestamp) for element, window, timestamp in pending}
        if len(places) != len(pending):
            raise ValueError("EmbedSentences needs distinct indices in a bundle; received "
                             f"{len(pending) - len(places)} repeated.")
        for index, vectors in self._worker.embed_sentences(e for e, _, _ in pending):
            window, timestamp = places[index]
            yield WindowedValue((index, vectors), timestamp, [window])


class EmbedSentences(beam.PTransform):
    """ELMo vectors of sentences, as `keras-elmo embed` computes them.

    Input: a PCollection of `(index, sentence)`, `index` any hashable key (distinct within a
    bundle), `sentence` a `str` (tokenised by the model's tokenizer, or `settings`') or a
    list of `str` tokens. Output: `(index, vectors)`, float32 `(L + 1, n, 2P)` for
    `output_format="all"`, `(n, 2P)` otherwise (`n` may be 0).

    Args:
        settings: `EmbeddingSettings` (the model's files must be readable by the workers).

    Example:
    >>> vectors = pipeline | beam.Create([(0, "a b")]) | EmbedSentences(settings)  # doctest: +SKIP
    """

    def __init__(self, settings):
        super().__init__()
        self.settings = settings

    def expand(self, sentences):
        return sentences | "Embed" >> beam.ParDo(EmbedSentencesFn(self.settings))


def _plan(indexes, shard_lines, num_workers):
    return beam_shards.plan_shards(indexes, shard_lines, num_workers)


def _by_first_index(shard):
    return shard.first_index, shard


def _values(keyed):
    return keyed[1]


def finish(records, indexes, output_dir, description):
    """The last step: checks the shards (`beam_shards.check_shards`), removes an earlier
    run's shard files, writes the manifest; returns its path."""
    indexes = sorted(indexes, key=lambda index: index.number)
    total = sum(index.lines for index in indexes)
    ordered = beam_shards.check_shards(records, total, output_dir)
    names = [record["file"] for record in ordered]
    beam_shards.remove_unlisted_shards(output_dir, set(names))
    first, inputs = 0, []
    for index in indexes:
        inputs.append({"path": index.path, "lines": index.lines, "first_index": first})
        first += index.lines
    manifest = {
        "format": beam_shards.MANIFEST_FORMAT, "version": beam_shards.MANIFEST_VERSION,
        "sentences": total, "tokens": sum(r["tokens"] for r in ordered),
        "empty_lines": sum(r["empty_lines"] for r in ordered),
        "shards": [{key: record.get(key) for key in ("file", "first_index", "stop_index",
                                                      "sentences", "tokens", "writer",
                                                      "seconds")}
                   for record in ordered],
        "inputs": inputs, **description}
    return beam_shards.write_manifest(output_dir, manifest)


class EmbedFilesToShards(beam.PTransform):
    """Files in, shards and a manifest out (module docstring); applied to a pipeline.

    Args:
        input_pattern: a file or a glob (any filesystem Beam reads), matched now.
        output_dir: the folder of the shards (created; its old manifest removed when the
            pipeline is built).
        settings: `EmbeddingSettings`.
        shard_lines: int, most lines per shard; None: `beam_shards.default_shard_lines`.
        num_workers: int or None, the workers expected (for the default shard size).

    Output: a PCollection of one element, the manifest's path.
    """

    def __init__(self, input_pattern, output_dir, settings, shard_lines=None,
                 num_workers=None):
        super().__init__()
        self.paths = beam_shards.match_inputs(input_pattern)
        self.output_dir = output_dir
        self.settings = settings
        self.shard_lines = shard_lines
        self.num_workers = num_workers

    def expand(self, begin):
        beam_shards.prepare_output_dir(self.output_dir)
        indexes = (begin
                   | "Input files" >> beam.Create(list(enumerate(self.paths)))
                   | "Count lines" >> beam.MapTuple(beam_shards.index_file))
        records = (indexes
                   | "All files" >> beam.combiners.ToList()
                   | "Plan shards" >> beam.FlatMap(_plan, self.shard_lines, self.num_workers)
                   | "Key by index" >> beam.Map(_by_first_index)
                   | "Spread" >> beam.GroupByKey()
                   | "Shards" >> beam.FlatMap(_values)
                   | "Embed and write" >> beam.ParDo(EmbedShardFn(self.settings,
                                                                  self.output_dir)))
        description = {"model": {key: value for key, value in self.settings.describe().items()
                                 if key in ("model_dir", "options_file", "weight_file")},
                       "flags": {key: value for key, value in self.settings.describe().items()
                                 if key not in ("model_dir", "options_file", "weight_file")}}
        return (records
                | "All shards" >> beam.combiners.ToList()
                | "Check and manifest" >> beam.Map(finish, beam.pvalue.AsList(indexes),
                                                   self.output_dir, description))


def run_pipeline(input_pattern, output_dir, settings, options=None, shard_lines=None,
                 num_workers=None):
    """Runs `EmbedFilesToShards` in a pipeline of its own and waits for it.

    Args:
        input_pattern, output_dir, settings, shard_lines, num_workers: as
            `EmbedFilesToShards`.
        options: `apache_beam.options.pipeline_options.PipelineOptions` (None: the
            DirectRunner in this process).

    Returns:
        dict: the manifest, with `seconds` (the pipeline's wall time) added.
    """
    start = time.perf_counter()
    with beam.Pipeline(options=options) as pipeline:
        _ = pipeline | "Embed files" >> EmbedFilesToShards(
            input_pattern, output_dir, settings, shard_lines=shard_lines,
            num_workers=num_workers)
    manifest = beam_shards.read_manifest(output_dir)
    manifest["seconds"] = time.perf_counter() - start
    return manifest


__all__ = ["EmbedFilesToShards", "EmbedSentences", "EmbeddingSettings", "run_pipeline"]
