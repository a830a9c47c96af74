"""The published ELMo models by name: the catalog, and a download cache that can be trusted.

    catalog.json           the models (data, not code): names, sizes, sources, URLs
    catalog.py             reads it (and the user's, KERAS_ELMO_CATALOG); names, nearest names
    catalog_schema.py      checks an entry field by field, one line per mistake
    catalog_entry.py       an entry and its files as Python sees them; the mirror's URLs
    settings.py            the environment variables: cache, offline, mirror, timeout
    resolve.py             a directory, a name or a URL, made local (`resolve_model`)
    fetch_plan.py          what to fetch: a catalog entry, an archive's URL (TF Hub and
                           Kaggle handles), a local archive, an options/weights pair
    fetch.py               a model into the cache once: lock, download, unpack, check
    http_download.py       one file over HTTP: resumed, retried, next mirror, checked
    download_progress.py   its progress line (a terminal) or two lines (a log)
    download_lock.py       one process downloads a model, the others wait; no lock file stays
    archives.py            zip / tar unpacked, refusing what would write elsewhere
    model_check.py         what was downloaded read as loading will, and held against the
                           sizes its catalog entry states, before it is kept
    model_cache.py         one folder per model, its manifest, the checks at every use
    catalog_table.py       the catalog as Markdown tables (README.md, docs/pretrained.md)

Standard library only (and `keras_elmo.formats` for the model checks); no TensorFlow.
docs/pretrained.md describes the use.
"""
