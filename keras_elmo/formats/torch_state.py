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

import collections
import io
import os
import pickle
import struct
import zipfile

import numpy as np

#: The close of every refusal: what a readable file holds.
EXPECTED = "expected a state dict of tensors (a torch.save of model.state_dict())"
#: First pickle of a legacy file, and the protocol version after it.
LEGACY_MAGIC_NUMBER = 0x1950A86A20F9469CFC6C
LEGACY_PROTOCOL_VERSION = 1001
_ZIP_SIGNATURE = b"PK\x03\x04"
_INT64 = struct.Struct("<q")


class TorchStateDictError(ValueError):
    """A file that is not a readable torch state dict; the message is one line naming it."""


class _Corrupt(Exception):
    """Raised below the reader, which adds the file name: what was found, in a few words."""


class _Sealed:
    """Base of the objects the pickle gets from us (by name, persistent id or call).

    The pickle's BUILD opcode sets attributes on whatever it holds, through `__setstate__`,
    `__dict__` or `setattr`; these objects have no `__dict__` and refuse the other two, for
    some outlive one reading and the others carry checked bounds. (A frozen dataclass would
    not do: its generated `__setstate__` writes the fields.)
    """

    __slots__ = ()

    def __init__(self, **fields):
        for name, value in fields.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name, value):
        raise AttributeError(f"{type(self).__name__} is read-only")

    def __delattr__(self, name):
        raise AttributeError(f"{type(self).__name__} is read-only")

    def __setstate__(self, state):
        raise TypeError(f"{type(self).__name__} is read-only")


class _ElementType(_Sealed):
    """A torch storage class: how its elements are stored (`stored`, little-endian) and
    returned (`returned`, native byte order)."""

    __slots__ = ("name", "stored", "returned")


def _element_types():
    types = {}
    for name, code in [("Float", "f4"), ("Double", "f8"), ("Half", "f2"), ("Long", "i8"),
                       ("Int", "i4"), ("Short", "i2"), ("Char", "i1"), ("Byte", "u1"),
                       ("Bool", "b1")]:
        types[name + "Storage"] = _ElementType(name=name + "Storage",
                                               stored=np.dtype("<" + code),
                                               returned=np.dtype(code))
    # bfloat16 is the top half of a float32: read as uint16, returned as float32.
    types["BFloat16Storage"] = _ElementType(name="BFloat16Storage", stored=np.dtype("<u2"),
                                            returned=np.dtype("f4"))
    return types


_ELEMENT_TYPES = _element_types()


class _Root:
    """One stored storage: its element type, count and (once read) its elements."""

    __slots__ = ("key", "element", "numel", "data", "uses")

    def __init__(self, key, element, numel):
        self.key, self.element, self.numel = key, element, numel
        self.data = None  # 1-D array of `element.stored`, `numel` long
        self.uses = 0


class _Storage(_Sealed):
    """What a persistent id gives the pickle: elements [start, start + numel) of a root."""

    __slots__ = ("root", "start", "numel")


class _TensorRef(_Sealed):
    """A tensor as the pickle describes it, cut from its storage once all data is read.
    Sealed: its bounds are checked here, and `as_strided` would trust them."""

    __slots__ = ("storage", "offset", "shape", "strides", "negate")

    def __init__(self, storage, offset, shape, strides, negate=False):
        if not isinstance(storage, _Storage):
            raise _Corrupt(f"a tensor whose storage is a {type(storage).__name__}")
        shape, strides = _int_tuple(shape, "size"), _int_tuple(strides, "stride")
        if (not isinstance(offset, int) or isinstance(offset, bool) or offset < 0
                or len(shape) != len(strides)):
            raise _Corrupt(f"a tensor with offset {offset!r}, size {shape} and stride "
                           f"{strides}")
        if 0 not in shape:
            last = offset + sum((n - 1) * s for n, s in zip(shape, strides))
            if last >= storage.numel:
                raise _Corrupt(f"a tensor of size {shape}, stride {strides} and offset "
                               f"{offset} that reaches past its storage of {storage.numel} "
                               f"elements")
        super().__init__(storage=storage, offset=offset, shape=shape, strides=strides,
                         negate=negate)


def _int_tuple(values, what):
    if not isinstance(values, (tuple, list)) or not all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values):
        raise _Corrupt(f"a tensor {what} {values!r} (expected non-negative ints)")
    return tuple(values)


# --- the only callables a pickle can reach ---------------------------------------------------
def _rebuild_tensor(storage, storage_offset, size, stride):
    """`torch._utils._rebuild_tensor` (torch < 0.4)."""
    return _TensorRef(storage, storage_offset, size, stride)


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks,
                       metadata=None):
    """`torch._utils._rebuild_tensor_v2`; `metadata` may carry the conj and neg bits."""
    negate = False
    if metadata:
        if not isinstance(metadata, dict) or set(metadata) - {"neg", "conj"}:
            raise _Corrupt(f"tensor metadata {metadata!r} (expected the 'neg' or 'conj' bit)")
        if metadata.get("conj"):
            raise _Corrupt("a conjugated complex tensor")
        negate = bool(metadata.get("neg"))
    return _TensorRef(storage, storage_offset, size, stride, negate)


def _rebuild_parameter(data, requires_grad, backward_hooks, state=None):
    """`torch._utils._rebuild_parameter(_with_state)`: a Parameter is its tensor here."""
    if not isinstance(data, _TensorRef):
        raise _Corrupt(f"a Parameter around a {type(data).__name__}")
    return data


class _Callable(_Sealed):
    """A function the pickle may call, in a wrapper its BUILD opcode cannot change."""

    __slots__ = ("function",)

    def __call__(self, *args):
        return self.function(*args)


_GLOBALS = {
    ("collections", "OrderedDict"): collections.OrderedDict,  # a C type: immutable
    ("torch._utils", "_rebuild_tensor"): _Callable(function=_rebuild_tensor),
    ("torch._utils", "_rebuild_tensor_v2"): _Callable(function=_rebuild_tensor_v2),
    ("torch._utils", "_rebuild_parameter"): _Callable(function=_rebuild_parameter),
    ("torch._utils", "_rebuild_parameter_with_state"): _Callable(function=_rebuild_parameter),
}
_GLOBALS.update({(module, name): element for name, element in _ELEMENT_TYPES.items()
                 for module in ("torch", "torch.cuda")})


class _RestrictedUnpickler(pickle.Unpickler):
    """Resolves only `_GLOBALS`; hands persistent ids to `storage_for`."""

    def __init__(self, file, path, storage_for=None):
        super().__init__(file, encoding="utf-8")
        self._path, self._storage_for = path, storage_for

    def find_class(self, module, name):
        found = _GLOBALS.get((module, name))
        if found is None:
            raise TorchStateDictError(f"{self._path}: holds {module}.{name}; {EXPECTED}")
        return found

    def persistent_load(self, pid):
        if self._storage_for is None:
            raise _Corrupt(f"a storage reference {pid!r} in a header pickle")
        return self._storage_for(pid)


def _storage_pid(pid, length):
    """The fields after "storage" of a persistent id of `length` fields, checked."""
    if not isinstance(pid, tuple) or len(pid) != length or pid[0] not in ("storage",
                                                                           b"storage"):
        raise _Corrupt(f"a persistent id {pid!r} (expected a storage of {length} fields)")
    element, key, numel = pid[1], pid[2], pid[4]
    if not isinstance(element, _ElementType):
        raise _Corrupt(f"a storage of type {element!r}")
    if not isinstance(key, str) or type(numel) is not int or numel < 0:
        raise _Corrupt(f"a storage with key {key!r} and {numel!r} elements")
    return pid[1:]


def _root_for(roots, key, element, numel):
    root = roots.get(key)
    if root is None:
        root = roots[key] = _Root(key, element, numel)
    elif root.element is not element or root.numel != numel:
        raise _Corrupt(f"storage {key!r} as {root.numel} {root.element.name} elements and "
                       f"as {numel} {element.name}")
    return root


def _read_exact(file, nbytes, what):
    buffer = bytearray(nbytes)
    view, done = memoryview(buffer), 0
    while done < nbytes:
        got = file.readinto(view[done:])
        if not got:
            raise _Corrupt(f"is truncated: {what} needs {nbytes} bytes, the file holds "
                           f"{done}")
        done += got
    return buffer


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
                with archive.open(name) as record:
                    buffer = _read_exact(record, nbytes, name)
                stored = element.stored if byteorder == "little" else \
                    element.stored.newbyteorder(">")
                root.data = np.frombuffer(buffer, stored)
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
        root.data = np.frombuffer(_read_exact(file, nbytes, f"storage {key!r}"),
                                  root.element.stored)
        remaining -= nbytes
    return state, roots


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
        return np.zeros(ref.shape, element.returned)
    itemsize = data.dtype.itemsize
    view = np.lib.stride_tricks.as_strided(
        data[start:], ref.shape, [s * itemsize for s in ref.strides], writeable=False)
    whole = (root.data is None and start == 0 and view.size == data.size
             and view.flags.c_contiguous and data.dtype == element.returned
             and not ref.negate and data.flags.writeable)
    if whole:  # the storage is this tensor alone, in order: hand its buffer over
        return data.reshape(ref.shape)
    array = np.array(view, dtype=data.dtype.newbyteorder("="), order="C")
    if element.name == "BFloat16Storage":
        array = (array.astype(np.uint32) << 16).view(np.float32)
    if ref.negate:
        np.negative(array, out=array)
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
        dict: name -> `numpy.ndarray`, in the order stored; each array has the tensor's shape
        (`()` for a 0-d tensor), C order, native byte order and its own memory (views and
        tensors sharing a storage are copied out); dtypes as stored, bfloat16 as float32.

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
