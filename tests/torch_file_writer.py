"""Torch-format files written without torch, for the tests of the torch state-dict reader.

`save_zip` and `save_legacy` lay out torch's two containers around a pickle that may name
anything: `Global("torch._utils", "_rebuild_tensor_v2")` is written as that name and never
imported, so the tests can write what old torch versions wrote (`torch.cuda.FloatStorage`,
storage views) and what an attacker would (`os.system`, a module class). `save_arrays_zip`
writes numpy arrays as a state dict the way `torch.save` lays one out.

Example:
>>> save_arrays_zip("w.pkl", {"projection.bias": np.zeros(4, np.float32)})  # doctest: +SKIP
"""

import io
import pickle
import struct
import zipfile

import numpy as np

LEGACY_MAGIC_NUMBER = 0x1950A86A20F9469CFC6C
LEGACY_PROTOCOL_VERSION = 1001
STORAGE_CLASSES = {np.dtype("float32"): "FloatStorage", np.dtype("float64"): "DoubleStorage",
                   np.dtype("int64"): "LongStorage", np.dtype("int32"): "IntStorage"}


class Global:
    """The pickle's GLOBAL opcode for `module.name`, which is never imported here."""

    def __init__(self, module, name):
        self.module, self.name = module, name

    def __call__(self):  # the pure-Python pickler asks that a reduce function be callable
        raise TypeError("a stand-in for a name in a pickle")


class Call:
    """`function(*args)` in the pickle (REDUCE), then `BUILD(state)` if a state is given."""

    def __init__(self, function, args, state=None):
        self.function, self.args, self.state = function, tuple(args), state


class Build:
    """`target` then the BUILD opcode with `state`: sets attributes on whatever target is."""

    def __init__(self, target, state):
        self.target, self.state = target, state


class Storage:
    """A persistent id: `torch.save`'s reference to a storage."""

    def __init__(self, *fields):
        self.pid = tuple(fields)


class _Writer(pickle._Pickler):
    dispatch = dict(pickle._Pickler.dispatch)

    def persistent_id(self, obj):
        return obj.pid if isinstance(obj, Storage) else None

    def _save_global_ref(self, obj):
        self.write(pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode("utf-8"))

    def _save_call(self, obj):
        self.save_reduce(obj.function, obj.args, obj.state)

    def _save_build(self, obj):
        self.save(obj.target)
        self.save(obj.state)
        self.write(pickle.BUILD)

    dispatch[Global] = _save_global_ref
    dispatch[Call] = _save_call
    dispatch[Build] = _save_build


def dumps(obj):
    """Protocol-2 pickle bytes of `obj`, `Global`, `Call`, `Build` and `Storage` included."""
    buffer = io.BytesIO()
    _Writer(buffer, protocol=2).dump(obj)
    return buffer.getvalue()


def tensor(storage, offset, shape, strides, rebuild="_rebuild_tensor_v2", metadata=None):
    """The pickled form of a tensor on `storage` (a `Storage`)."""
    if rebuild == "_rebuild_tensor":
        args = (storage, offset, tuple(shape), tuple(strides))
    else:
        hooks = Call(Global("collections", "OrderedDict"), ())
        args = (storage, offset, tuple(shape), tuple(strides), False, hooks)
        args += (metadata,) if metadata is not None else ()
    return Call(Global("torch._utils", rebuild), args)


def zip_storage(key, numel, storage_class="FloatStorage", module="torch"):
    return Storage("storage", Global(module, storage_class), key, "cpu", numel)


def legacy_storage(key, numel, view=None, storage_class="FloatStorage", module="torch"):
    return Storage("storage", Global(module, storage_class), key, "cuda:0", numel, view)


def save_zip(path, state, records, byteorder="little", archive="archive"):
    """A zip-format file: `state` pickled (or `bytes`, written as they are) as data.pkl,
    `records` (key -> bytes) as data/KEY, and a byteorder record unless it is None."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr(f"{archive}/data.pkl", state if isinstance(state, bytes) else dumps(state))
        if byteorder is not None:
            z.writestr(f"{archive}/byteorder", byteorder)
        for key, data in records.items():
            z.writestr(f"{archive}/data/{key}", data)


def save_legacy(path, state, storages, magic=LEGACY_MAGIC_NUMBER,
                protocol=LEGACY_PROTOCOL_VERSION):
    """A legacy-format file: `storages` is `[(key, element_count, bytes)]` in file order."""
    sys_info = {"protocol_version": LEGACY_PROTOCOL_VERSION, "little_endian": True,
                "type_sizes": {"short": 2, "int": 4, "long": 8}}
    with open(path, "wb") as f:
        for header in (magic, protocol, sys_info):
            f.write(pickle.dumps(header, protocol=2))
        f.write(state if isinstance(state, bytes) else dumps(state))
        f.write(pickle.dumps([key for key, _, _ in storages], protocol=2))
        for _, count, data in storages:
            f.write(struct.pack("<q", count) + data)


def save_arrays_zip(path, arrays):
    """`arrays` (name -> numpy array) as torch.save writes a state dict: one storage each."""
    state, records = {}, {}
    for i, (name, array) in enumerate(arrays.items()):
        array = np.ascontiguousarray(array)
        strides = tuple(s // array.itemsize for s in array.strides)
        storage = zip_storage(str(i), array.size, STORAGE_CLASSES[array.dtype])
        state[name] = tensor(storage, 0, array.shape, strides)
        records[str(i)] = array.astype(array.dtype.newbyteorder("<")).tobytes()
    save_zip(path, state, records)
