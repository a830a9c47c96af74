"""Torch state dicts (`torch.save(model.state_dict())`) read into numpy, without torch and
without running code from the pickle.

A state dict is an (ordered) dict of name -> tensor. `torch.save` writes it in one of two
containers, and this module reads both:

zip format (torch >= 1.6 by default): a zip archive whose records sit under one folder
    ARCHIVE/data.pkl    the pickled dict; each tensor's storage is a persistent id
                        `("storage", storage_class, key, location, numel)`
    ARCHIVE/data/KEY    the storage's raw elements
    ARCHIVE/byteorder   "little" or "big" (absent from older files, which are little-endian)
legacy format (torch < 1.6, or `_use_new_zipfile_serialization=False`): back to back
    pickle  the magic number 0x1950a86a20f9469cfc6c
    pickle  the format's protocol version, 1001
    pickle  the writer's system info (a dict)
    pickle  the dict; persistent ids `("storage", storage_class, root_key, location, numel,
            view)`, `view` None or `(view_key, offset, numel)` for a slice of the root storage
    pickle  the root keys, in the order their data follows
    then for each root key: its element count (int64) and its elements, both little-endian

In the pickle a tensor is the call `torch._utils._rebuild_tensor_v2(storage, offset, size,
stride, requires_grad, hooks[, metadata])` (`_rebuild_tensor(storage, offset, size, stride)`
before torch 0.4), maybe inside `_rebuild_parameter(tensor, ...)`; `metadata` may set the
"neg" bit of a lazily negated view. The unpickler resolves only those names, the dict class
and the storage classes (`torch.FloatStorage`, or `torch.cuda.FloatStorage` for a model
saved on a GPU), each to a function of ours that records numbers; any other name (a module
class, `os.system`, ...) stops the reading before anything is called. Tensors are then cut
from their storages with their offset and strides, so views, shared storages and 0-d tensors
come out as torch shows them. bfloat16 comes back as float32 (numpy has no bfloat16; the
conversion is exact).

Example:
>>> weights = read_torch_state_dict("encoder.pkl")  # doctest: +SKIP
>>> weights["forward_layer_0.input_linearity.weight"].shape  # doctest: +SKIP
(16384, 512)
"""

import io
import os
import pickle
import struct
import zipfile

import numpy as np

from keras_elmo.formats.torch_pickle import (EXPECTED, TorchStateDictError, _Corrupt,
                                             _read_exact, _RestrictedUnpickler, _root_for,
                                             _Storage, _storage_pid, _TensorRef)

#: First pickle of a legacy file, and the protocol version after it.
LEGACY_MAGIC_NUMBER = 0x1950A86A20F9469CFC6C
LEGACY_PROTOCOL_VERSION = 1001
_ZIP_SIGNATURE = b"PK\x03\x04"
_INT64 = struct.Struct("<q")
#: A zip local file header: signature ... file name length, extra field length.
_ZIP_LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")


# --- the two containers ----------------------------------------------------------------------
def _read_zip(path):
    """`(state, roots)` of a zip-format file."""
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, EOFError) as error:
        raise _Corrupt(f"is a damaged or truncated zip archive ({error})") from None
    with archive:
        pickles = [n for n in archive.namelist()
                   if n.endswith("/data.pkl") and n.count("/") == 1]
        if len(pickles) != 1:
            raise _Corrupt(f"is a zip archive with {len(pickles)} ARCHIVE/data.pkl records "
                           "(expected 1: torch.save's zip format)")
        prefix = pickles[0][:-len("data.pkl")]
        names = set(archive.namelist())
        archive_bytes = os.path.getsize(path)
        byteorder = "little"
        if prefix + "byteorder" in names:
            byteorder = archive.read(prefix + "byteorder").decode("ascii", "replace")
            if byteorder not in ("little", "big"):
                raise _Corrupt(f"records byte order {byteorder!r} (expected little or big)")
        roots = {}

        def storage_for(pid):
            element, key, _location, numel = _storage_pid(pid, 5)
            root = _root_for(roots, key, element, numel)
            if root.data is None:
                name = f"{prefix}data/{key}"
                if name not in names:
                    raise _Corrupt(f"has no record {name} for storage {key!r}")
                nbytes = numel * element.stored.itemsize
                info = archive.getinfo(name)
                size = info.file_size
                if info.compress_type == zipfile.ZIP_STORED and size > archive_bytes:
                    raise _Corrupt(f"is truncated: {name} claims {size} bytes of a "
                                   f"{archive_bytes}-byte file")
                if size != nbytes:
                    raise _Corrupt(f"has {size} bytes in {name}; its {numel} "
                                   f"{element.name} elements need {nbytes}")
                stored = element.stored if byteorder == "little" else \
                    element.stored.newbyteorder(">")
                if info.compress_type == zipfile.ZIP_STORED and numel > 0:
                    root.data = _mapped(path, _record_offset(path, info, name), stored, numel)
                else:
                    with archive.open(name) as record:
                        root.data = np.frombuffer(_read_exact(record, nbytes, name), stored)
            return _Storage(root=root, start=0, numel=numel)

        pickled = io.BytesIO(archive.read(pickles[0]))
        state = _RestrictedUnpickler(pickled, path, storage_for).load()
    return state, roots


def _read_legacy(path, file):
    """`(state, roots)` of a legacy-format file, read from its start."""
    def header():
        return _RestrictedUnpickler(file, path).load()

    magic = header()
    if magic != LEGACY_MAGIC_NUMBER:
        found = repr(magic) if isinstance(magic, int) else f"a {type(magic).__name__}"
        raise _Corrupt(f"starts with a pickle of {found}, not torch's magic number")
    protocol = header()
    if protocol != LEGACY_PROTOCOL_VERSION:
        raise _Corrupt(f"has protocol version {protocol!r} (expected "
                       f"{LEGACY_PROTOCOL_VERSION})")
    if not isinstance(header(), dict):
        raise _Corrupt("has no system info dict after the protocol version")
    roots = {}

    def storage_for(pid):
        element, key, _location, numel, view = _storage_pid(pid, 6)
        root = _root_for(roots, key, element, numel)
        if view is None:
            return _Storage(root=root, start=0, numel=numel)
        if not (isinstance(view, tuple) and len(view) == 3 and isinstance(view[1], int)
                and isinstance(view[2], int) and 0 <= view[1]
                and view[1] + view[2] <= numel and view[2] >= 0):
            raise _Corrupt(f"a view {view!r} of storage {key!r} of {numel} elements")
        return _Storage(root=root, start=view[1], numel=view[2])

    state = _RestrictedUnpickler(file, path, storage_for).load()
    keys = header()
    if not isinstance(keys, list):
        raise _Corrupt(f"lists storage keys as a {type(keys).__name__}")
    remaining = os.fstat(file.fileno()).st_size - file.tell()
    for key in keys:
        root = roots.get(key)
        if root is None or root.data is not None:
            raise _Corrupt(f"lists storage {key!r}, which no tensor uses or which is listed "
                           "twice")
        count = _INT64.unpack(_read_exact(file, _INT64.size, f"storage {key!r}"))[0]
        if count != root.numel:
            raise _Corrupt(f"stores {count} elements for storage {key!r} of {root.numel}")
        nbytes = count * root.element.stored.itemsize
        remaining -= _INT64.size
        if nbytes > remaining:
            raise _Corrupt(f"is truncated: storage {key!r} needs {nbytes} bytes, "
                           f"{max(remaining, 0)} are left")
        if count > 0:
            root.data = _mapped(path, file.tell(), root.element.stored, count)
            file.seek(nbytes, os.SEEK_CUR)
        else:
            root.data = np.zeros(0, root.element.stored)
        remaining -= nbytes
    return state, roots


def _record_offset(path, info, name):
    """Where the bytes of an uncompressed zip record start: after its local header, whose
    name and extra field may differ in length from the central directory's."""
    with open(path, "rb") as file:
        file.seek(info.header_offset)
        header = file.read(_ZIP_LOCAL_HEADER.size)
    if len(header) != _ZIP_LOCAL_HEADER.size or header[:4] != _ZIP_SIGNATURE:
        raise _Corrupt(f"has no local header for {name} at byte {info.header_offset}")
    name_length, extra_length = _ZIP_LOCAL_HEADER.unpack(header)[-2:]
    return info.header_offset + _ZIP_LOCAL_HEADER.size + name_length + extra_length


def _mapped(path, offset, dtype, numel):
    """`numel` elements of `dtype` at byte `offset` of the file, memory-mapped read-only:
    the pages are the file's, so the weights are not copied into the process's own memory
    until their consumer copies them (one tensor at a time, `load_efml_weights`)."""
    return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=(numel,))


# --- tensors out of storages -----------------------------------------------------------------
def _materialize(ref):
    """The numpy array of `ref`: C order, native byte order, its own memory."""
    root = ref.storage.root
    element, data = root.element, root.data
    start = ref.storage.start + ref.offset
    root.uses -= 1
    if root.uses == 0:
        root.data = None  # the last tensor of this storage: let its buffer go with it
    if 0 in ref.shape:
        return _read_only(np.zeros(ref.shape, element.returned))
    itemsize = data.dtype.itemsize
    view = np.lib.stride_tricks.as_strided(
        data[start:], ref.shape, [s * itemsize for s in ref.strides], writeable=False)
    whole = (root.data is None and start == 0 and view.size == data.size
             and view.flags.c_contiguous and data.dtype == element.returned
             and not ref.negate)
    if whole:  # the storage is this tensor alone, in order: hand its (mapped) buffer over
        return _read_only(np.asarray(data).reshape(ref.shape))
    array = np.array(view, dtype=data.dtype.newbyteorder("="), order="C")
    if element.name == "BFloat16Storage":
        array = (array.astype(np.uint32) << 16).view(np.float32)
    if ref.negate:
        np.negative(array, out=array)
    return _read_only(array)


def _read_only(array):
    """Every array read is read-only, the mapped ones (views of the file) and the copied
    ones alike: one contract."""
    array.flags.writeable = False
    return array


def _state_dict(path, state):
    if not isinstance(state, dict):
        raise TorchStateDictError(f"{path}: holds an object of type {type(state).__name__}, "
                                  f"not a dict; {EXPECTED}")
    for key, value in state.items():
        if not isinstance(key, str):
            raise TorchStateDictError(f"{path}: holds the key {key!r}, not a string; "
                                      f"{EXPECTED}")
        if not isinstance(value, _TensorRef):
            raise TorchStateDictError(f"{path}: key {key!r} holds an object of type "
                                      f"{type(value).__name__}, not a tensor; {EXPECTED}")
    for key, value in state.items():
        if value.storage.root.data is None:
            raise _Corrupt(f"has no data for storage {value.storage.root.key!r} of "
                           f"{key!r}")
        value.storage.root.uses += 1
    return {key: _materialize(value) for key, value in state.items()}


def read_torch_state_dict(path):
    """The tensors of a `torch.save(model.state_dict())` file, as numpy arrays.

    Reads torch's zip format and its legacy (pre-1.6) format without torch, running nothing
    from the pickle (see the module docstring for what is read).

    Args:
        path: the file (`str` or path-like).

    Returns:
        dict: name -> read-only `numpy.ndarray`, in the order stored; each array has the
        tensor's shape (`()` for a 0-d tensor), C order and native byte order; dtypes as
        stored, bfloat16 as float32. A tensor that is its whole storage, in order, in an
        uncompressed record, is memory-mapped from the file (its pages are the file's, not
        the process's anonymous memory: a model is copied once, into its variables); views,
        tensors sharing a storage and converted ones are copied out.

    Raises:
        FileNotFoundError: no such file.
        TorchStateDictError: not a torch file, truncated or damaged, or holding more than
            tensors (a pickled module, a callable); one line naming the file.

    Example:
    >>> weights = read_torch_state_dict("token_embedder.pkl")  # doctest: +SKIP
    >>> weights["projection.weight"].shape  # doctest: +SKIP
    (512, 2148)
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"torch state dict file not found: {path} ({EXPECTED}).")
    try:
        with open(path, "rb") as file:
            head = file.read(len(_ZIP_SIGNATURE))
            file.seek(0)
            if not head:
                raise _Corrupt("is empty")
            if head == _ZIP_SIGNATURE:
                state, _roots = _read_zip(path)
            elif head[:1] == pickle.PROTO:
                state, _roots = _read_legacy(path, file)
            else:
                raise _Corrupt(f"starts with {head!r}, neither a zip archive nor a pickle")
        return _state_dict(path, state)
    except TorchStateDictError:
        raise
    except _Corrupt as error:
        raise TorchStateDictError(f"{path}: {error}; {EXPECTED}") from None
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError,
            IndexError, KeyError, OverflowError, struct.error, UnicodeDecodeError,
            RecursionError, zipfile.BadZipFile) as error:
        # A damaged pickle fails inside the unpickler in any of these ways.
        raise TorchStateDictError(f"{path}: has a damaged or truncated pickle "
                                  f"({type(error).__name__}: {error}); {EXPECTED}") from None
