"""The restricted unpickler of torch state dicts: the only names a pickle may reach.

`keras_elmo.formats.torch_state` reads torch's two containers; the pickle inside either is
loaded here by `_RestrictedUnpickler`, which resolves only the names of a state dict of
tensors (torch's tensor-rebuilding functions, the ordered dict, the storage classes), each to
a function of ours that records numbers (`_TensorRef`, `_Storage`). Any other name (a module
class, `os.system`, ...) stops the reading before anything is called: a downloaded file
cannot run code here.

Example:
>>> state = _RestrictedUnpickler(file, "encoder.pkl", storage_for).load()  # doctest: +SKIP
"""

import collections
import pickle

import numpy as np

#: The close of every refusal: what a readable file holds.
EXPECTED = "expected a state dict of tensors (a torch.save of model.state_dict())"


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
