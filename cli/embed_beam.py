"""`keras-elmo embed ... --runner RUNNER`: the embedder as an Apache Beam pipeline.

`keras-elmo embed MODEL INPUT OUTDIR --runner RUNNER [--num-workers N] [Beam options]`:
INPUT is a file or a glob of files, OUTDIR receives one HDF5 file per shard of lines and a
`manifest.json` (`keras_elmo.embedding.beam_pipeline`). MODEL may be a catalog name or a URL
(`keras-elmo models`): each worker then fetches it into its own cache (once per machine,
under the cache's lock), so no path needs to be shared. `embed`'s flags keep their meaning
(`--all/--top/--average/--mixed`, `--mix-weights`, `--batch-size`, `--max-tokens`,
`--max-length`, `--vocab`, `--no-token-cache`, `--dtype`, `--tokenizer`,
`--forget-sentences`); `--use-sentence-keys` is refused (a shard's datasets are named by
their global index). Options this parser does not know go to Beam, written
`--name=value` (`--project=my-project`, `--temp_location=gs://...`) and checked against
Beam's own options.

`--runner DirectRunner --num-workers N` runs N worker processes on this machine (Beam's
`multi_processing` mode; one process, this one, for N = 1), each with its share of the
cores (`keras_elmo.process.cpu_setup.worker_thread_layout`) unless TensorFlow's thread
variables were set by the user. On other runners the workers size themselves, and their
own options set how many there are.

While a local pipeline runs, what its processes print (Beam's records, each worker's
traceback of a failure) goes to a log file: a failure is one line naming it, a success
removes it. Without Apache Beam installed, `--runner` is one line saying what to install.

Example:
    keras-elmo embed runs/pd sentences.txt shards --runner DirectRunner --num-workers 2
    keras-elmo embed runs/pd "corpus/*.txt" shards --runner DirectRunner --top --shard-lines 2048
"""

import contextlib
import logging
import os
import re
import sys
import tempfile

from keras_elmo.cli.model_args import model_files
from keras_elmo.cli.tokenizer_option import resolve_tokenizer
from keras_elmo.process.cpu_setup import (thread_layout_set_by_user, usable_cores,
                                          worker_thread_layout)
from keras_elmo.validation import check_int

#: What `--runner` needs, in the one line it prints without it.
INSTALL = 'pip install "keras-elmo[beam]" (or pip install "apache-beam>=2.60")'
#: The runners that run on this machine, where `--num-workers` means worker processes.
DIRECT_RUNNERS = ("DirectRunner", "BundleBasedDirectRunner")
#: The log of a local pipeline's processes (module docstring), kept when the run fails.
LOG_PREFIX = "keras-elmo-beam-"


def add_arguments(parser):
    """Adds `--runner`, `--num-workers` and `--shard-lines` to `embed`'s parser."""
    parser.add_argument("--runner", metavar="RUNNER", default=None,
                        help="run as an Apache Beam pipeline on RUNNER (DirectRunner, "
                             "DataflowRunner, FlinkRunner, SparkRunner, ...): INPUT may be a "
                             "glob, OUTPUT is a folder of HDF5 shards and a manifest.json; "
                             "other options go to Beam as --name=value (needs "
                             "pip install \"keras-elmo[beam]\")")
    parser.add_argument("--num-workers", type=int, default=None, metavar="N",
                        help="with --runner DirectRunner: worker processes on this machine "
                             "(default: the usable cores), each with its share of the cores")
    parser.add_argument("--shard-lines", type=int, default=None, metavar="N",
                        help="with --runner: most lines per shard (default: one shard per "
                             "worker with DirectRunner, at most 4096 lines each)")
    parser.set_defaults(passes_unknown=_passes_unknown)


def _passes_unknown(args):
    """Whether `keras-elmo` hands the options it does not know on (to Beam, with --runner)."""
    return args.runner is not None


def require_beam():
    """Imports Apache Beam (its import-time log lines held back); one line if it is missing.

    Raises:
        ValueError: Beam is not installed (the line says what to install).
    """
    root = logging.getLogger()
    handlers = list(root.handlers)
    logging.disable(logging.WARNING)  # "apitools not found ..." on every import of Beam
    try:
        import apache_beam  # noqa: F401
    except ImportError as error:
        raise ValueError(f"--runner needs Apache Beam, which is not installed ({error}): "
                         f"{INSTALL}.") from None
    finally:
        logging.disable(logging.NOTSET)
        for handler in root.handlers[len(handlers):]:
            root.removeHandler(handler)


def pipeline_options(runner, num_workers, beam_arguments):
    """Beam's `PipelineOptions` of the command line.

    Raises:
        ValueError: an argument Beam does not know, or not written `--name[=value]`.
    """
    import argparse

    from apache_beam.options.pipeline_options import PipelineOptions

    words = [word for word in beam_arguments if not word.startswith("--")]
    if words:
        raise ValueError(f"unexpected arguments {words}: with --runner the options this command "
                         "does not know go to Beam, written --name=value (e.g. "
                         "--project=my-project); received " + " ".join(beam_arguments) + ".")
    parser = argparse.ArgumentParser(allow_abbrev=False)
    for options_class in _subclasses(PipelineOptions):
        options_class._add_argparse_args(parser)  # noqa: SLF001 - how Beam reads its options
    _, unknown = parser.parse_known_args(beam_arguments)
    if unknown:
        raise ValueError(f"unknown Beam pipeline options {unknown}; expected Beam's options "
                         "(apache_beam.options.pipeline_options), written --name=value.")
    direct = {}
    if runner in DIRECT_RUNNERS:
        direct = {"direct_num_workers": num_workers,
                  "direct_running_mode": "multi_processing" if num_workers > 1 else "in_memory"}
    quiet = {}  # a worker's records below ERROR: none (local workers' go to the run's log)
    if not any(word.startswith("--default_sdk_harness_log_level") for word in beam_arguments):
        quiet = {"default_sdk_harness_log_level": "ERROR"}
    return PipelineOptions(list(beam_arguments), runner=runner, **direct, **quiet)


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def run(args, output_format, max_tokens):
    """Runs the pipeline for `embed`'s parsed arguments; prints one line; returns 0."""
    if args.use_sentence_keys:
        raise ValueError("--use-sentence-keys cannot be used with --runner: a shard's datasets "
                         "are named by their global index (the position over the sorted input "
                         "files, line by line).")
    direct = args.runner in DIRECT_RUNNERS
    if args.num_workers is not None and not direct:
        raise ValueError(f"--num-workers is the DirectRunner's worker processes; received "
                         f"--runner {args.runner}: use that runner's own option (Dataflow "
                         "--num_workers=N, Flink --parallelism=N).")
    num_workers = check_int("--num-workers", args.num_workers if args.num_workers is not None
                            else usable_cores())
    shard_lines = (None if args.shard_lines is None
                   else check_int("--shard-lines", args.shard_lines))
    files = model_files(args)
    tokenizer = resolve_tokenizer(args, files.options_file)
    if args.mix_weights and not os.path.isfile(args.mix_weights):
        raise FileNotFoundError(f"mix weights file not found: {args.mix_weights}.")
    vocab = None if args.no_token_cache else (args.vocab or files.vocab_file)
    if vocab is not None and not os.path.isfile(vocab):
        raise FileNotFoundError(f"vocabulary file not found: {vocab} (expected one token per "
                                "line).")
    require_beam()
    options = pipeline_options(args.runner, num_workers, getattr(args, "unknown", []))
    from keras_elmo.embedding import beam_shards

    paths = beam_shards.match_inputs(args.input)
    if all(beam_shards.is_local(path) for path in paths):
        from keras_elmo.text.text_files import check_utf8

        check_utf8(paths)  # refused before any work, as `embed` does
    layout = None
    if direct and not thread_layout_set_by_user():
        layout = worker_thread_layout(max(1, usable_cores() // num_workers))
    if args.cuda_device is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = str(args.cuda_device if args.cuda_device >= 0
                                                 else -1)
    if args.quiet:
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    from keras_elmo.embedding.beam_pipeline import run_pipeline
    from keras_elmo.embedding.beam_worker import EmbeddingSettings

    absolute = lambda path: path and os.path.abspath(path)  # noqa: E731 - workers' cwd may differ
    model = (absolute(args.model_dir), absolute(args.options), absolute(args.weights))
    token_cache = absolute(vocab) or False
    if args.model_source is not None:  # a name or URL: each worker fetches it into its cache
        model = args.model_source
        token_cache = absolute(args.vocab) or bool(vocab)  # the worker's copy of vocab.txt
    settings = EmbeddingSettings(
        model_dir=model[0], options_file=model[1], weight_file=model[2],
        output_format=output_format,
        mix_file=absolute(args.mix_weights), token_cache=token_cache,
        tokenizer=tokenizer, dtype=args.dtype, batch_size=args.batch_size,
        max_length=args.max_length, max_tokens=max_tokens,
        keep_sentence_index=not args.forget_sentences, thread_layout=layout)
    output_dir = (os.path.abspath(args.output) if beam_shards.is_local(args.output)
                  else args.output)
    if args.dtype == "bfloat16" and direct:  # the workers' warning, on this terminal
        from keras_elmo.process.cpu_setup import warn_if_bfloat16_is_emulated

        warn_if_bfloat16_is_emulated()
    log = _LocalLog() if direct else None
    try:
        with log if direct else contextlib.nullcontext():
            manifest = run_pipeline(args.input, output_dir, settings, options,
                                    shard_lines=shard_lines,
                                    num_workers=num_workers if direct else None)
    except KeyboardInterrupt:  # Ctrl-C, SIGTERM: `main` says so; the log goes
        if log is not None:
            log.remove()
        raise
    except Exception as error:  # noqa: BLE001 - a runner's failure: one line, no traceback
        kept = f" (the workers' log: {log.path})" if log is not None and log.keep() else ""
        storage = _storage_fault(error)
        failure = ValueError(f"the Beam pipeline failed ({args.runner}): "
                             f"{(storage or _last_line(error)).rstrip('.')}; "
                             f"{os.path.join(args.output, 'manifest.json')} was not written"
                             f"{kept}.")
        if storage is not None:  # a full disk, a quota, a read-only folder: as every command
            from keras_elmo.process.storage_errors import StorageError

            failure.exit_code = StorageError.exit_code
        raise failure from None
    if log is not None:
        log.remove()
    if args.quiet:
        return 0
    rate = manifest["tokens"] / max(manifest["seconds"], 1e-9)
    workers = f", {num_workers} worker processes" if direct else ""
    print(f"wrote {args.output}: {manifest['sentences']:,} sentences in "
          f"{len(manifest['shards']):,} shards and manifest.json, {output_format}, "
          f"{manifest['tokens']:,} tokens ({tokenizer}), {manifest['empty_lines']:,} empty "
          f"lines; {manifest['seconds']:.1f} s ({rate:,.0f} tokens/s) on {args.runner}{workers}")
    return 0


class _LocalLog:
    """While a local pipeline runs, what its processes write to stderr (Beam's records, a
    failed bundle's traceback printed by each worker, their start-up lines) goes to a log
    file instead of the terminal: a failure then ends the run as one line that names the
    file (`keep`); after a success the file is removed (`remove`)."""

    def __init__(self):
        handle, self.path = tempfile.mkstemp(prefix=LOG_PREFIX, suffix=".log")
        os.close(handle)
        self._saved = None
        self._beam_level = None

    def __enter__(self):
        beam_logger = logging.getLogger("apache_beam")
        self._beam_level = beam_logger.level
        beam_logger.setLevel(logging.ERROR)  # a failure's records, into the log
        sys.stderr.flush()
        self._saved = os.dup(2)
        with open(self.path, "ab") as log:
            os.dup2(log.fileno(), 2)  # the workers, started now, inherit it
        return self

    def __exit__(self, *exc_info):
        sys.stderr.flush()
        os.dup2(self._saved, 2)
        os.close(self._saved)
        logging.getLogger("apache_beam").setLevel(self._beam_level)

    def keep(self):
        """True when the log holds anything (then it stays, for the error line to name)."""
        if os.path.getsize(self.path):
            return True
        self.remove()
        return False

    def remove(self):
        with contextlib.suppress(OSError):
            os.remove(self.path)


def _storage_fault(error):
    """The line of the `StorageError` that failed the pipeline (raised in this process, or
    in a worker whose traceback came back as text), or None."""
    from keras_elmo.process.storage_errors import StorageError

    seen = error
    while seen is not None:
        if isinstance(seen, StorageError):
            return str(seen)
        seen = seen.__cause__ or seen.__context__
    found = re.search(r"StorageError: (cannot write [^\n]*?)(?: \[while running [^\n]*)?$",
                      str(error), re.MULTILINE)
    return found.group(1) if found else None


def _last_line(error):
    """The last non-blank line of an error's text (a runner's error ends with the cause)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[-1] if lines else type(error).__name__
