"""The protobuf wire format, decoded with the Python standard library and numpy (no TensorFlow,
no `protobuf` package): enough of TensorFlow's messages to read a TF1 Hub module.

A message is decoded into a plain dict by a schema, `{field number: Field}`; unknown fields
are skipped (as protobuf does), absent ones get proto3 defaults (0, "", b"", False, [], {},
and None for a message). Field numbers are those of TensorFlow's public .proto files:
`saved_model.proto`, `meta_graph.proto`, `graph.proto`, `node_def.proto`, `attr_value.proto`,
`tensor.proto`, `tensor_shape.proto`, `versions.proto` and `tensor_bundle.proto`.

Large byte fields (a `TensorProto`'s `tensor_content`, a whole weight as an initializer
constant) are memoryview slices of the input: no copy is made while decoding.

Example:
>>> decode(b"\\x08\\x96\\x01", {1: Field("size", "int64")})
{'size': 150}
"""

import struct
from dataclasses import dataclass

import numpy as np

# Wire types (protobuf encoding spec).
VARINT, FIXED64, LENGTH_DELIMITED, FIXED32 = 0, 1, 2, 5
_GROUP_START, _GROUP_END = 3, 4
_MAX_VARINT_BYTES = 10
_UINT64 = 1 << 64
_UINT32 = 1 << 32

#: Scalar kinds and the wire type each is written with.
_WIRE_TYPES = {"int32": VARINT, "int64": VARINT, "uint32": VARINT, "uint64": VARINT,
               "bool": VARINT, "enum": VARINT, "fixed64": FIXED64, "double": FIXED64,
               "fixed32": FIXED32, "float": FIXED32, "string": LENGTH_DELIMITED,
               "bytes": LENGTH_DELIMITED, "message": LENGTH_DELIMITED,
               "map": LENGTH_DELIMITED}
_DEFAULTS = {"int32": 0, "int64": 0, "uint32": 0, "uint64": 0, "bool": False, "enum": 0,
             "fixed64": 0, "double": 0.0, "fixed32": 0, "float": 0.0, "string": "",
             "bytes": b""}
#: numpy dtypes of the fixed-width kinds (little-endian on the wire).
_FIXED_DTYPES = {"fixed64": "<u8", "double": "<f8", "fixed32": "<u4", "float": "<f4"}


class ProtobufError(ValueError):
    """Bytes that are not a well-formed message: one line saying where."""


@dataclass(frozen=True)
class Field:
    """One field of a schema.

    Args:
        name: the key in the decoded dict.
        kind: a scalar kind (`"int64"`, `"float"`, `"string"`, ...), `"message"` or `"map"`.
        repeated: a list of values (packed or not, both are read).
        schema: the sub-message's schema (`"message"`), or the map value's (`"map"` with
            `value_kind="message"`).
        value_kind: a map's value kind; its keys are strings.
    """

    name: str
    kind: str
    repeated: bool = False
    schema: dict = None
    value_kind: str = "message"


def read_varint(data, pos):
    """`(value, next position)` of the unsigned varint at `data[pos]`."""
    result = shift = 0
    end = min(len(data), pos + _MAX_VARINT_BYTES)
    while pos < end:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
    if pos >= len(data):
        raise ProtobufError(f"truncated varint at byte {pos} of {len(data)}")
    raise ProtobufError(f"varint longer than {_MAX_VARINT_BYTES} bytes at byte {pos}")


def iter_fields(data):
    """Yields `(field number, wire type, value)` for each field of a message.

    `value` is an int for varint, 64-bit and 32-bit fields (raw bits for the fixed ones),
    a memoryview for length-delimited ones.
    """
    data = memoryview(data).cast("B") if not isinstance(data, memoryview) else data
    pos, size = 0, len(data)
    while pos < size:
        key, pos = read_varint(data, pos)
        number, wire_type = key >> 3, key & 7
        if number == 0:
            raise ProtobufError(f"field number 0 at byte {pos}")
        if wire_type == VARINT:
            value, pos = read_varint(data, pos)
        elif wire_type in (FIXED64, FIXED32):
            width = 8 if wire_type == FIXED64 else 4
            if pos + width > size:
                raise ProtobufError(f"truncated {width * 8}-bit field {number} at byte {pos} "
                                    f"of {size}")
            value = int.from_bytes(data[pos:pos + width], "little")
            pos += width
        elif wire_type == LENGTH_DELIMITED:
            length, pos = read_varint(data, pos)
            if pos + length > size:
                raise ProtobufError(f"field {number} at byte {pos} claims {length} bytes, "
                                    f"{size - pos} left")
            value = data[pos:pos + length]
            pos += length
        else:  # groups (wire types 3, 4) are not used by TensorFlow's messages
            raise ProtobufError(f"unsupported wire type {wire_type} (field {number}) "
                                f"at byte {pos}")
        yield number, wire_type, value


def decode(data, schema):
    """A message as a dict by `schema` (`{field number: Field}`); see the module docstring.

    Raises:
        ProtobufError: malformed bytes, or a field of the schema written with another wire
            type (one line saying which).
    """
    message = {}
    for number, wire_type, value in iter_fields(data):
        field = schema.get(number)
        if field is None:
            continue
        expected = _WIRE_TYPES[field.kind]
        if field.kind == "map":
            key, item = _map_entry(value, field)
            message.setdefault(field.name, {})[key] = item
        elif field.repeated and wire_type == LENGTH_DELIMITED and expected != LENGTH_DELIMITED:
            message.setdefault(field.name, []).extend(_packed(value, field.kind))
        elif wire_type != expected:
            raise ProtobufError(f"field {field.name!r} ({number}) has wire type {wire_type}, "
                                f"expected {expected}")
        else:
            value = _scalar(value, field)
            if field.repeated:
                message.setdefault(field.name, []).append(value)
            else:
                message[field.name] = value
    for field in schema.values():
        if field.name not in message:
            message[field.name] = ({} if field.kind == "map" else [] if field.repeated
                                   else None if field.kind == "message"
                                   else _DEFAULTS[field.kind])
    return message


def _scalar(value, field):
    """One decoded value of a non-packed field."""
    kind = field.kind
    if kind == "message":
        return decode(value, field.schema)
    if kind == "string":
        try:
            return str(value, "utf-8")
        except UnicodeDecodeError:
            raise ProtobufError(f"field {field.name!r} is not valid UTF-8") from None
    if kind == "bytes":
        return value
    if kind in ("int64", "int32", "enum"):
        return value - _UINT64 if value >= 1 << 63 else value
    if kind == "uint32":
        return value % _UINT32
    if kind == "bool":
        return value != 0
    if kind == "float":
        return struct.unpack("<f", value.to_bytes(4, "little"))[0]
    if kind == "double":
        return struct.unpack("<d", value.to_bytes(8, "little"))[0]
    return value  # uint64, fixed64, fixed32: the raw bits


def _packed(data, kind):
    """The values of a packed repeated scalar field."""
    if kind in _FIXED_DTYPES:
        width = np.dtype(_FIXED_DTYPES[kind]).itemsize
        if len(data) % width:
            raise ProtobufError(f"packed {kind} field of {len(data)} bytes, not a multiple "
                                f"of {width}")
        return np.frombuffer(data, _FIXED_DTYPES[kind]).tolist()
    values, pos = [], 0
    field = Field("packed", kind)
    while pos < len(data):
        value, pos = read_varint(data, pos)
        values.append(_scalar(value, field))
    return values


def _map_entry(data, field):
    """`(key, value)` of one map entry (a message with key = 1, value = 2)."""
    entry = decode(data, {1: Field("key", "string"),
                          2: Field("value", field.value_kind, schema=field.schema)})
    return entry["key"], entry["value"]


# --- TensorFlow's messages -------------------------------------------------------------------
#: tensor_shape.proto
TENSOR_SHAPE = {2: Field("dim", "message", True, {1: Field("size", "int64"),
                                                    2: Field("name", "string")}),
                3: Field("unknown_rank", "bool")}
#: tensor.proto (numbers as written by TensorFlow; `half_val` holds float16 bits)
TENSOR = {1: Field("dtype", "enum"), 2: Field("tensor_shape", "message", schema=TENSOR_SHAPE),
          3: Field("version_number", "int32"), 4: Field("tensor_content", "bytes"),
          5: Field("float_val", "float", True), 6: Field("double_val", "double", True),
          7: Field("int_val", "int32", True), 8: Field("string_val", "bytes", True),
          10: Field("int64_val", "int64", True), 11: Field("bool_val", "bool", True),
          13: Field("half_val", "int32", True), 16: Field("uint32_val", "uint32", True),
          17: Field("uint64_val", "uint64", True)}
_LIST_VALUE = {2: Field("s", "bytes", True), 3: Field("i", "int64", True),
               4: Field("f", "float", True), 5: Field("b", "bool", True),
               6: Field("type", "enum", True), 7: Field("shape", "message", True, TENSOR_SHAPE),
               8: Field("tensor", "message", True, TENSOR)}
#: attr_value.proto (the oneof `value`: an absent member decodes to its default)
ATTR_VALUE = {1: Field("list", "message", schema=_LIST_VALUE), 2: Field("s", "bytes"),
              3: Field("i", "int64"), 4: Field("f", "float"), 5: Field("b", "bool"),
              6: Field("type", "enum"), 7: Field("shape", "message", schema=TENSOR_SHAPE),
              8: Field("tensor", "message", schema=TENSOR), 9: Field("placeholder", "string")}
#: node_def.proto
NODE_DEF = {1: Field("name", "string"), 2: Field("op", "string"),
            3: Field("input", "string", True), 4: Field("device", "string"),
            5: Field("attr", "map", schema=ATTR_VALUE)}
#: versions.proto
VERSION_DEF = {1: Field("producer", "int32"), 2: Field("min_consumer", "int32"),
               3: Field("bad_consumers", "int32", True)}
#: graph.proto (the function library, field 2, is kept as bytes: a TF1 graph has none)
GRAPH_DEF = {1: Field("node", "message", True, NODE_DEF), 2: Field("library", "bytes"),
             3: Field("version", "int32"), 4: Field("versions", "message", schema=VERSION_DEF)}
#: meta_graph.proto
TENSOR_INFO = {1: Field("name", "string"), 2: Field("dtype", "enum"),
               3: Field("tensor_shape", "message", schema=TENSOR_SHAPE)}
SIGNATURE_DEF = {1: Field("inputs", "map", schema=TENSOR_INFO),
                 2: Field("outputs", "map", schema=TENSOR_INFO),
                 3: Field("method_name", "string")}
META_INFO_DEF = {1: Field("meta_graph_version", "string"), 4: Field("tags", "string", True),
                 5: Field("tensorflow_version", "string"),
                 6: Field("tensorflow_git_version", "string")}
_COLLECTION_DEF = {1: Field("node_list", "message",
                            schema={1: Field("value", "string", True)}),
                   2: Field("bytes_list", "message", schema={1: Field("value", "bytes", True)})}
META_GRAPH_DEF = {1: Field("meta_info_def", "message", schema=META_INFO_DEF),
                  2: Field("graph_def", "message", schema=GRAPH_DEF),
                  3: Field("saver_def", "bytes"),
                  4: Field("collection_def", "map", schema=_COLLECTION_DEF),
                  5: Field("signature_def", "map", schema=SIGNATURE_DEF),
                  7: Field("object_graph_def", "bytes")}
#: saved_model.proto
SAVED_MODEL = {1: Field("saved_model_schema_version", "int64"),
               2: Field("meta_graphs", "message", True, META_GRAPH_DEF)}
#: tensor_bundle.proto
BUNDLE_HEADER = {1: Field("num_shards", "int32"), 2: Field("endianness", "enum"),
                 3: Field("version", "message", schema=VERSION_DEF)}
BUNDLE_ENTRY = {1: Field("dtype", "enum"), 2: Field("shape", "message", schema=TENSOR_SHAPE),
                3: Field("shard_id", "int32"), 4: Field("offset", "int64"),
                5: Field("size", "int64"), 6: Field("crc32c", "fixed32"),
                7: Field("slices", "bytes", True)}

#: types.proto's DataType numbers -> numpy dtype names (the `_REF` types are these + 100).
DTYPE_NAMES = {1: "float32", 2: "float64", 3: "int32", 4: "uint8", 5: "int16", 6: "int8",
               7: "string", 8: "complex64", 9: "int64", 10: "bool", 14: "bfloat16",
               17: "uint16", 18: "complex128", 19: "float16", 20: "resource",
               21: "variant", 22: "uint32", 23: "uint64"}
#: DataType values at and above this are reference types (`DT_FLOAT_REF` = 101).
DTYPE_REF_OFFSET = 100


def dtype_name(enum):
    """A DataType number's numpy name (`1` -> `"float32"`; `"DT_<n>"` if unknown)."""
    return DTYPE_NAMES.get(enum % DTYPE_REF_OFFSET if enum > DTYPE_REF_OFFSET else enum,
                           f"DT_{enum}")


def shape_of(shape_proto):
    """A decoded TensorShapeProto as a tuple (`None` for unknown dimensions, or for an
    unknown rank)."""
    if shape_proto is None:
        return ()
    if shape_proto["unknown_rank"]:
        return None
    return tuple(None if d["size"] < 0 else d["size"] for d in shape_proto["dim"])
