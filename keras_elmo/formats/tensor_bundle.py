"""TensorFlow checkpoints in the TensorBundle format, read with numpy (no TensorFlow).

A checkpoint `PREFIX` is `PREFIX.index` and `PREFIX.data-0000K-of-0000N` (N shards). The
index is a LevelDB table (TensorFlow's `core/lib/io` table format):
- a 48-byte footer: the metaindex and index block handles (two varints each), zero padding,
  the magic number `0xdb4775248b80fb57` (little-endian);
- blocks of entries `(shared, non_shared, value_length varints, key delta, value)` with
  prefix-compressed keys, then the restart offsets (uint32 each) and their count (uint32);
- after each block, a trailer of one compression-type byte and the masked CRC-32C of the
  block and that byte. TensorBundle writes its tables uncompressed (`kNoCompression`);
- the index block maps each data block's last key to its handle.
In the table, key `""` holds a `BundleHeaderProto` (shards, endianness, version) and every
tensor name a `BundleEntryProto` (dtype, shape, shard, offset, size, masked CRC-32C of the
bytes), as `tensorflow/core/util/tensor_bundle/tensor_bundle.cc` writes them.

Example:
>>> bundle = read_tensor_bundle("module/variables/variables")  # doctest: +SKIP
>>> bundle.shapes()["bilm/char_embed"]  # doctest: +SKIP
('float32', (262, 16))
>>> bundle.read("bilm/char_embed").shape  # doctest: +SKIP
(262, 16)
"""

import math
import os
from dataclasses import dataclass

import numpy as np

from keras_elmo.formats import crc32c as crc
from keras_elmo.formats import protobuf_wire as wire

_TABLE_MAGIC = 0xDB4775248B80FB57
_FOOTER_BYTES = 48
_BLOCK_TRAILER_BYTES = 5  # compression type (1) + masked CRC-32C (4)
_NO_COMPRESSION = 0
_HEADER_KEY = b""
#: The entry of a checkpoint written by TF2's object-based saving (`tf.train.Checkpoint`).
OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
#: The newest BundleHeaderProto version a reader of kTensorBundleVersion 1 accepts.
_BUNDLE_VERSION = 1
_BIG_ENDIAN = 1
#: Numeric dtypes this reader returns as arrays (stored little-endian, C order).
_NUMPY_DTYPES = {"float32": "<f4", "float64": "<f8", "int32": "<i4", "int64": "<i8",
                 "bool": "?", "float16": "<f2", "int8": "i1", "uint8": "u1", "int16": "<i2",
                 "uint16": "<u2", "uint32": "<u4", "uint64": "<u8"}


@dataclass(frozen=True)
class BundleEntry:
    """Where one tensor's bytes are.

    Attributes:
        name: the tensor's name in the checkpoint (`"bilm/CNN/W_cnn_0"`).
        dtype: its numpy dtype name (`"float32"`), or `"string"`, `"DT_<n>"`.
        shape: a tuple of ints.
        shard_id, offset, size: its bytes in data file `shard_id`.
        crc32c: the masked CRC-32C of those bytes.
        partitioned: the variable is stored as slices (not read here).
    """

    name: str
    dtype: str
    shape: tuple
    shard_id: int
    offset: int
    size: int
    crc32c: int
    partitioned: bool = False


class TensorBundle:
    """A checkpoint's index, read at construction; tensors read on demand.

    Args:
        prefix: the checkpoint prefix (`"dir/variables/variables"`; a path ending in
            `.index` is accepted too).

    Raises:
        FileNotFoundError: no index file, or a data file the index names is missing.
        ValueError: a corrupt or truncated index (one line naming the file and what is
            wrong), a big-endian or newer-version bundle.
    """

    def __init__(self, prefix):
        prefix = os.fspath(prefix)
        self.prefix = prefix[:-len(".index")] if prefix.endswith(".index") else prefix
        self.index_path = self.prefix + ".index"
        if not os.path.isfile(self.index_path):
            raise FileNotFoundError(f"checkpoint index not found: {self.index_path} (expected "
                                    "a TensorFlow checkpoint's .index file).")
        entries, header = {}, None
        for key, value in read_table(self.index_path):
            try:
                if key == _HEADER_KEY:
                    header = wire.decode(value, wire.BUNDLE_HEADER)
                elif not key.startswith(b"\0"):  # "\0..." keys: slices of a partitioned one
                    entry = _bundle_entry(key.decode("utf-8"), value)
                    entries[entry.name] = entry
            except (wire.ProtobufError, UnicodeDecodeError) as error:
                raise ValueError(f"checkpoint index {self.index_path}: entry {key[:80]!r} is "
                                 f"not a bundle entry ({error}).") from None
        if header is None:
            raise ValueError(f"checkpoint index {self.index_path} has no header entry "
                             "(key \"\"); expected a TensorBundle index.")
        self.num_shards = header["num_shards"]
        version = header["version"] or {"min_consumer": 0}
        if header["endianness"] == _BIG_ENDIAN:
            raise ValueError(f"checkpoint index {self.index_path} is of a big-endian bundle; "
                             "expected little-endian.")
        if version["min_consumer"] > _BUNDLE_VERSION:
            raise ValueError(f"checkpoint index {self.index_path} needs a reader of bundle "
                             f"version {version['min_consumer']}; this one reads version "
                             f"{_BUNDLE_VERSION}.")
        for entry in entries.values():
            if not 0 <= entry.shard_id < max(1, self.num_shards):
                raise ValueError(f"checkpoint index {self.index_path}: tensor {entry.name!r} "
                                 f"is in shard {entry.shard_id}, the header says "
                                 f"{self.num_shards} shards.")
        self.entries = entries
        for shard in sorted({e.shard_id for e in entries.values() if e.size}):
            if not os.path.isfile(self.data_path(shard)):
                raise FileNotFoundError(f"checkpoint data file not found: "
                                        f"{self.data_path(shard)} (named by "
                                        f"{self.index_path}).")

    def data_path(self, shard_id):
        """The data file of shard `shard_id`."""
        return f"{self.prefix}.data-{shard_id:05d}-of-{self.num_shards:05d}"

    def shapes(self):
        """`{name: (dtype name, shape)}` of every tensor."""
        return {name: (e.dtype, e.shape) for name, e in self.entries.items()}

    def read(self, name, verify_checksum=True):
        """The tensor `name` as a (writable) numpy array.

        Args:
            name: a tensor name of the checkpoint.
            verify_checksum: compare the bytes' CRC-32C with the index's
                (`keras_elmo.formats.crc32c`, in numpy on one core; its cost at the
                published size is in docs/performance.md).

        Raises:
            KeyError: no tensor `name`.
            ValueError: a dtype this reader does not return, a partitioned variable, a size
                that does not fit the shape, a data file cut short, or a checksum mismatch
                (one line naming the file and the tensor).
        """
        entry = self.entries[name]
        path = self.data_path(entry.shard_id)
        if entry.partitioned:
            raise ValueError(f"checkpoint {self.prefix}: tensor {name!r} is a partitioned "
                             "variable (stored as slices); expected a whole tensor.")
        if entry.dtype not in _NUMPY_DTYPES:
            raise ValueError(f"checkpoint {self.prefix}: tensor {name!r} has dtype "
                             f"{entry.dtype}; expected one of {sorted(_NUMPY_DTYPES)}.")
        dtype = np.dtype(_NUMPY_DTYPES[entry.dtype])
        expected = math.prod(entry.shape) * dtype.itemsize
        if entry.size != expected:
            raise ValueError(f"checkpoint index {self.index_path}: tensor {name!r} has "
                             f"{entry.size} bytes, expected {expected} for {entry.dtype} "
                             f"{entry.shape}.")
        buffer = bytearray(entry.size)
        try:
            with open(path, "rb") as handle:
                handle.seek(entry.offset)
                got = handle.readinto(buffer)
        except OSError as error:
            raise ValueError(f"checkpoint data file {path} cannot be read "
                             f"({error.strerror or error}).") from None
        if got != entry.size:
            raise ValueError(f"checkpoint data file {path} is truncated: tensor {name!r} "
                             f"needs bytes {entry.offset}-{entry.offset + entry.size}, the "
                             f"file has {os.path.getsize(path)}.")
        if verify_checksum and crc.mask(crc.crc32c(buffer)) != entry.crc32c:
            raise ValueError(f"checkpoint data file {path}: tensor {name!r} fails its "
                             "CRC-32C check (the file is corrupt).")
        return np.frombuffer(buffer, dtype).reshape(entry.shape)


def read_tensor_bundle(prefix):
    """`TensorBundle(prefix)`: a checkpoint's index (see the class)."""
    return TensorBundle(prefix)


def _bundle_entry(name, value):
    proto = wire.decode(value, wire.BUNDLE_ENTRY)
    shape = wire.shape_of(proto["shape"])
    if shape is None or None in shape:
        raise wire.ProtobufError(f"shape {shape} is not fully known")
    return BundleEntry(name=name, dtype=wire.dtype_name(proto["dtype"]), shape=shape,
                       shard_id=proto["shard_id"], offset=proto["offset"],
                       size=proto["size"], crc32c=proto["crc32c"],
                       partitioned=bool(proto["slices"]))


# --- the LevelDB table of the index ----------------------------------------------------------
def read_table(path):
    """`[(key, value)]` (bytes) of a LevelDB-format table file, in key order.

    Raises:
        ValueError: not such a table, a block out of the file, a compressed block, a block
            checksum mismatch, or a malformed block (one line naming the file).
    """
    with open(path, "rb") as handle:
        data = handle.read()
    view = memoryview(data)
    try:
        if len(data) < _FOOTER_BYTES:
            raise ValueError(f"is {len(data)} bytes, shorter than a table footer "
                             f"({_FOOTER_BYTES})")
        footer = view[len(data) - _FOOTER_BYTES:]
        magic = int.from_bytes(footer[-8:], "little")
        if magic != _TABLE_MAGIC:
            raise ValueError(f"ends in {magic:#018x}, not the table magic number "
                             f"{_TABLE_MAGIC:#018x}")
        _, pos = _block_handle(footer, 0)  # the metaindex block: TensorBundle leaves it empty
        index_handle, _ = _block_handle(footer, pos)
        items = []
        for _, handle_bytes in _block_entries(_read_block(view, index_handle)):
            block_handle, _ = _block_handle(handle_bytes, 0)
            items.extend(_block_entries(_read_block(view, block_handle)))
    except (ValueError, IndexError) as error:  # ProtobufError is a ValueError
        raise ValueError(f"checkpoint index {path} is not a valid table: {error}.") from None
    return [(bytes(k), v) for k, v in items]


def _block_handle(data, pos):
    """`((offset, size), next position)` of a BlockHandle (two varints)."""
    offset, pos = wire.read_varint(data, pos)
    size, pos = wire.read_varint(data, pos)
    return (offset, size), pos


def _read_block(view, handle):
    """A block's contents, its trailer checked."""
    offset, size = handle
    end = offset + size + _BLOCK_TRAILER_BYTES
    if end > len(view):
        raise ValueError(f"block at {offset} ({size} bytes) runs past the end "
                         f"({len(view)} bytes): truncated")
    kind = view[offset + size]
    if kind != _NO_COMPRESSION:
        raise ValueError(f"block at {offset} has compression type {kind}; TensorBundle "
                         f"writes uncompressed blocks (type {_NO_COMPRESSION})")
    stored = int.from_bytes(view[offset + size + 1:end], "little")
    if crc.unmask(stored) != crc.crc32c(view[offset:offset + size + 1]):
        raise ValueError(f"block at {offset} fails its CRC-32C check")
    return view[offset:offset + size]


def _block_entries(block):
    """`[(key, value)]` of one block, keys rebuilt from their shared prefixes."""
    if len(block) < 4:
        raise ValueError(f"block of {len(block)} bytes has no restart count")
    num_restarts = int.from_bytes(block[-4:], "little")
    limit = len(block) - 4 * (num_restarts + 1)
    if limit < 0:
        raise ValueError(f"block of {len(block)} bytes claims {num_restarts} restarts")
    entries, key, pos = [], b"", 0
    while pos < limit:
        shared, pos = wire.read_varint(block, pos)
        non_shared, pos = wire.read_varint(block, pos)
        value_length, pos = wire.read_varint(block, pos)
        if shared > len(key) or pos + non_shared + value_length > limit:
            raise ValueError(f"block entry at {pos} overruns its block")
        key = key[:shared] + bytes(block[pos:pos + non_shared])
        pos += non_shared
        entries.append((key, block[pos:pos + value_length]))
        pos += value_length
    return entries
