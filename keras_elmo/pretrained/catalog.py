"""The catalog of published ELMo models: `catalog.json` (data, not code), read and checked.

`catalog.json` beside this module lists each model under a short stable name (`elmo-small`,
`efml-zhs`, ...) with its language, sizes, training data, licence, source page, files (each
with its URLs, primary first, and its size and sha256 where a public source gives them;
then, optionally, a vocabulary that lands beside the model) and the references every fact
comes from (its `sources`; a file's stated size or sha256 cites its own). An entry takes the
fields of its `family` (`families`), overlaid with its own. `KERAS_ELMO_CATALOG=FILE` names
a catalog of the same schema whose entries add to or replace the package's, name by name.

Every field is checked where the file is read (`catalog_schema`); a wrong one is one
`CatalogError` line naming the file, the entry, the field, what was received and what was
expected. An unknown name is one `UnknownModelError` line listing the nearest names.

Example:
>>> catalog = load_catalog()
>>> entry = catalog.get("elmo-small")
>>> entry.language, entry.lstm_dim, entry.projection_dim, [f.role for f in entry.files]
('en', 1024, 128, ['options', 'weights'])
"""

import difflib
import os
import re

from keras_elmo.pretrained.catalog_entry import CatalogEntry, ModelFile, mirrored_url
from keras_elmo.pretrained.catalog_schema import (NAME_PATTERN, CatalogError, parse_entries,
                                                  read_catalog_file)
from keras_elmo.pretrained.settings import CATALOG_VARIABLE

#: What callers import from here (with `catalog_entry`'s and `catalog_schema`'s names).
__all__ = ["CATALOG_FILE", "NAME_PATTERN", "Catalog", "CatalogEntry", "CatalogError",
           "ModelFile", "UnknownModelError", "load_catalog", "mirrored_url"]

#: The package's catalog file.
CATALOG_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "catalog.json")
#: Words of a name that say nothing about which model it is.
_COMMON_WORDS = {"model", "models", "elmo", "efml"}


class UnknownModelError(ValueError):
    """A name that is no model of the catalog; the line lists the nearest names."""


class Catalog:
    """The models by name (`entries`), with `get(name)` naming the nearest names of a
    missing one.

    Args:
        entries: dict name -> `CatalogEntry`.
        references: dict key -> the public source it stands for.
        files: the catalog files read, in order (the package's, then the user's).
    """

    def __init__(self, entries, references, files):
        self.entries = dict(entries)
        self.references = dict(references)
        self.files = tuple(files)

    def __contains__(self, name):
        return name in self.entries

    def __iter__(self):
        return iter(self.entries.values())

    def __len__(self):
        return len(self.entries)

    def get(self, name):
        """The entry called `name`.

        Raises:
            UnknownModelError: no such name; the line lists the nearest names.
        """
        if name in self.entries:
            return self.entries[name]
        raise UnknownModelError(f"unknown model {name!r}: it is neither a directory nor a "
                                f"name of the catalog; {self.nearest_text(name)}")

    def nearest(self, name, count=5):
        """The names most like `name`: those sharing a word with it or with their
        language (`zhs.model` -> `efml-zhs`, `german` -> `efml-de`), then the closest
        spellings."""
        lowered = name.lower()
        words = {w for w in re.split(r"[^a-z0-9]+", lowered) if len(w) > 1} - _COMMON_WORDS
        sharing = [n for n, e in self.entries.items()
                   if words & set(re.split(r"[^a-z0-9]+", " ".join(
                       (n, e.language.lower(), (e.language_name or "").lower()))))]
        close = difflib.get_close_matches(lowered, list(self.entries), n=count, cutoff=0.5)
        return list(dict.fromkeys(close[:1] + sharing + close))[:count]

    def nearest_text(self, name):
        """`"nearest names: a, b; ..."`, the advice of an unknown name."""
        near = self.nearest(name)
        listed = f"nearest names: {', '.join(near)}" if near else "no name is close"
        return (f"{listed}; `keras-elmo models` lists all {len(self.entries)} (a model "
                "directory that exists is read as a directory).")


def load_catalog(user_file=None):
    """The package's catalog with the user's (`user_file`, else `$KERAS_ELMO_CATALOG`) over it.

    Raises:
        CatalogError: a catalog file that does not follow the schema (one line).
        FileNotFoundError: the user's catalog file does not exist.
    """
    files = [CATALOG_FILE]
    user_file = user_file if user_file is not None else os.environ.get(CATALOG_VARIABLE)
    data = read_catalog_file(CATALOG_FILE, "the package's catalog")
    references, families = dict(data.get("references", {})), dict(data.get("families", {}))
    entries = parse_entries(data, CATALOG_FILE, families)
    if user_file:
        where = f"{CATALOG_VARIABLE} {user_file}"
        if not os.path.isfile(user_file):
            raise FileNotFoundError(f"{where}: no such file; expected a JSON catalog of the "
                                    "schema of keras_elmo/pretrained/catalog.json (or unset "
                                    f"{CATALOG_VARIABLE}).")
        user = read_catalog_file(user_file, where)
        references.update(user.get("references", {}))
        families.update(user.get("families", {}))
        entries.update(parse_entries(user, where, families))
        files.append(user_file)
    return Catalog(entries, references, files)
