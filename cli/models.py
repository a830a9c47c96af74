"""`keras-elmo models`: the catalog of published models, and fetching one ahead of use.

`keras-elmo models` lists every model of the catalog (`keras_elmo/pretrained/catalog.json`,
and `KERAS_ELMO_CATALOG`'s): name, language, format (bilm-tf, elmoformanylangs,
tfhub-module), sizes, download size (stated by the catalog, else recorded at download) and
whether it is in the cache; then the models cached under no catalog name (from URLs:
`url-<hash>` folders), each with its size and the URLs it came from. `keras-elmo models
download NAME...` fetches models into the cache now (a name of the list, or the URL of a
model archive), so that later commands, or a machine without a network sharing the cache
folder, find them there. Any command that reads a model takes the name too and fetches it
on first use.
docs/pretrained.md: the cache, offline use, mirrors.

Example:
    keras-elmo models
    keras-elmo models --language zh
    keras-elmo models download elmo-small efml-zhs
"""

import argparse
import os

_EPILOG = """examples:
  keras-elmo models                          # the catalog, and what is cached
  keras-elmo models --language zh            # Chinese models only
  keras-elmo models download efml-zhs        # fetch one now (checked, then cached)
  keras-elmo models verify efml-zhs          # re-hash the cached files in full
  keras-elmo embed efml-zhs in.txt out.hdf5  # any command takes a name

environment: KERAS_ELMO_CACHE (the cache folder), KERAS_ELMO_OFFLINE=1 (cache only),
KERAS_ELMO_MIRROR=URL (an artifact server with the same paths), KERAS_ELMO_CATALOG=FILE
(entries of your own), KERAS_ELMO_DOWNLOAD_TIMEOUT=SECONDS (docs/pretrained.md)."""


def add_parser(subparsers):
    """Registers `models`, `models download` and `models verify` (no heavy imports here)."""
    parser = subparsers.add_parser(
        "models", help="list the published models by name; download one ahead of use",
        description="Lists the published ELMo models that every command and "
                    "keras_elmo.load_bilm accept by name: name, language, format, LSTM size "
                    "/ projection, output dimension, parameters, download size, and where "
                    "it is cached.", epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--language", metavar="CODE",
                        help="only the models of this language (a code such as en, de, zh: "
                             "zh matches zh-Hans and zh-Hant)")
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    download = actions.add_parser(
        "download", help="fetch models into the cache now",
        description="Downloads each model (a catalog name, or the URL of a model archive) "
                    "into the cache, checks it and keeps it; a model already cached is "
                    "checked against what was downloaded and kept as it is.",
        epilog="example:\n  keras-elmo models download elmo-small efml-zhs",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    download.add_argument("names", nargs="+", metavar="NAME", help="model names or URLs")
    download.add_argument("--force", action="store_true",
                          help="download afresh even when cached (the cached copy is "
                               "replaced once the new one is complete and checked)")
    download.add_argument("--quiet", action="store_true",
                          help="no progress lines; print the model directories only")
    download.set_defaults(run=run_download)
    verify = actions.add_parser(
        "verify", help="re-hash cached models in full against what was downloaded",
        description="Reads every file of each cached model and checks its sha256 against "
                    "the manifest written when it was downloaded (a load checks each file's "
                    "size, mtime, ctime and inode, and hashes only a file whose stat "
                    "changed). One line per model; exit status 0 when every file is intact, "
                    "1 when a model is changed or not cached.",
        epilog="example:\n  keras-elmo models verify elmo-small efml-zhs",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    verify.add_argument("names", nargs="+", metavar="NAME",
                        help="model names, archive URLs, or url-<hash> folders of the cache")
    verify.set_defaults(run=run_verify)
    parser.set_defaults(run=run_list, action=None)


def run_list(args):
    """Prints the catalog (one line per model) and the cache folder; returns 0."""
    from keras_elmo.pretrained import settings
    from keras_elmo.pretrained.catalog import load_catalog
    from keras_elmo.pretrained.model_cache import (cached_keys, cached_model_dir, cached_size,
                                                   read_manifest, source_urls)
    from keras_elmo.process.storage_errors import format_bytes

    catalog = load_catalog()
    root = settings.cache_root()
    entries = list(catalog)
    if args.language:
        wanted = args.language.lower()
        entries = [e for e in entries if e.language.lower() == wanted
                   or e.language.lower().split("-")[0] == wanted]
        if not entries:
            codes = sorted({e.language for e in catalog})
            raise ValueError(f"no model of language {args.language!r}; expected one of "
                             f"{', '.join(codes)}.")
    rows = [("NAME", "LANGUAGE", "FORMAT", "LSTM/PROJ", "OUTPUT", "PARAMS", "SIZE", "CACHED")]
    cached_count = 0
    for entry in entries:
        stated = [f.size for f in entry.files]
        manifest = read_manifest(os.path.join(root, entry.name))
        cached = cached_model_dir(root, entry.name, entry.files) is not None
        cached_count += cached
        if all(stated):
            size = format_bytes(sum(stated))
        elif manifest is not None:
            size = format_bytes(sum(d.get("size", 0) for d in manifest.get("downloads", [])))
        else:
            size = "?"
        rows.append((entry.name, entry.language, _or(entry.format),
                     f"{_or(entry.lstm_dim)}/{_or(entry.projection_dim)}",
                     _or(entry.output_dim),
                     f"{entry.parameters_millions:g}M" if entry.parameters_millions else "?",
                     size,
                     format_bytes(cached_size(root, entry.name)) if cached else "no"))
    _print_table(rows)
    others = [] if args.language else [key for key in cached_keys(root) if key not in catalog]
    more = f"; {len(others)} more cached from URLs (below)" if others else ""
    print(f"\n{len(entries)} models, {cached_count} cached in {root}{more}; '?': no public "
          "source states it (a download's size is recorded when it is fetched). Use a name "
          "wherever a model goes; `keras-elmo models download NAME` fetches it now.")
    if others:
        print("\ncached from URLs (give the same URLs again, or the folder, to use one):")
        _print_table([(key, format_bytes(cached_size(root, key)),
                       " ".join(source_urls(read_manifest(os.path.join(root, key)))))
                      for key in others], indent="  ")
    return 0


def _print_table(rows, indent=""):
    """`rows` (tuples) in columns, each as wide as its widest value."""
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print(indent + "  ".join(str(value).ljust(width)
                                 for value, width in zip(row, widths)).rstrip())


def run_download(args):
    """Fetches each model into the cache; prints where each is; returns 0."""
    from keras_elmo.pretrained.resolve import download_model

    for name in args.names:
        path = download_model(name, force=args.force, progress=not args.quiet)
        print(path if args.quiet else f"{name}: {path}")
    return 0


def run_verify(args):
    """Re-hashes each cached model in full; one line each; returns 0 when all are intact,
    else 1."""
    import time

    from keras_elmo.pretrained import settings
    from keras_elmo.pretrained.fetch_plan import cache_key
    from keras_elmo.pretrained.model_cache import (CacheChangedError, read_manifest,
                                                   verify_cached)
    from keras_elmo.process.storage_errors import format_bytes

    root = settings.cache_root()
    failed = 0
    for name in args.names:
        folder = os.path.join(root, cache_key(name, root))
        if read_manifest(folder) is None:
            failed += 1
            print(f"{name}: not in the cache ({folder}); expected a model downloaded there "
                  f"(`keras-elmo models download {name}`).")
            continue
        start = time.perf_counter()
        try:
            summary = verify_cached(root, os.path.basename(folder), name, full=True)
        except CacheChangedError as error:
            failed += 1
            print(f"{name}: {error}")
            continue
        print(f"{name}: intact, {summary['files']} files, {format_bytes(summary['bytes'])} "
              f"hashed in {time.perf_counter() - start:.1f} s ({folder})")
    return 1 if failed else 0


def _or(value):
    return "?" if value is None else value
