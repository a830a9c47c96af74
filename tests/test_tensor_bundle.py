"""TensorBundle checkpoints read without TensorFlow (`keras_elmo.formats.tensor_bundle`),
checked against checkpoints TensorFlow writes and against its own reader."""

import os
import shutil
import time

import numpy as np
import pytest
import tensorflow as tf

from keras_elmo.formats import crc32c
from keras_elmo.formats.tensor_bundle import TensorBundle, read_table, read_tensor_bundle

tf1 = tf.compat.v1


@pytest.fixture(scope="module")
def sharded(tmp_path_factory):
    """A two-shard checkpoint written by `tf.compat.v1.train.Saver(sharded=True)` over two
    CPU devices; returns `(prefix, {name: value})`."""
    rng = np.random.default_rng(0)
    values = {"a/w": rng.normal(size=(3, 4)).astype(np.float32),
              "a/counts": np.arange(5, dtype=np.int64) - 2,
              "big": rng.normal(size=(700, 300)),  # float64, 1.7 MB: the numpy CRC path
              "flags": np.array([True, False, True]),
              "scalar": np.int32(-7),
              "empty": np.zeros((0, 4), np.float32)}
    devices = {"a/w": 0, "a/counts": 0, "big": 1, "flags": 1, "scalar": 1, "empty": 0}
    prefix = str(tmp_path_factory.mktemp("ckpt") / "model")
    graph = tf.Graph()
    with graph.as_default():
        for name, value in values.items():
            with tf.device(f"/device:CPU:{devices[name]}"):
                tf1.Variable(value, name=name)
        saver = tf1.train.Saver(sharded=True)
        with tf1.Session(config=tf1.ConfigProto(device_count={"CPU": 2})) as session:
            session.run(tf1.global_variables_initializer())
            saver.save(session, prefix)
    return prefix, values


def test_two_shard_checkpoint_reads_as_tensorflow_reads_it(sharded):
    prefix, values = sharded
    assert sorted(f for f in os.listdir(os.path.dirname(prefix)) if ".data-" in f) == [
        "model.data-00000-of-00002", "model.data-00001-of-00002"]
    bundle = read_tensor_bundle(prefix)
    reader = tf.train.load_checkpoint(prefix)
    dtypes = reader.get_variable_to_dtype_map()
    assert bundle.num_shards == 2
    assert {e.shard_id for e in bundle.entries.values() if e.size} == {0, 1}
    assert bundle.shapes() == {name: (dtypes[name].name, tuple(shape)) for name, shape
                               in reader.get_variable_to_shape_map().items()}
    for name, value in values.items():
        array = bundle.read(name)
        assert array.dtype == np.asarray(value).dtype and array.shape == np.shape(value)
        np.testing.assert_array_equal(array, reader.get_tensor(name))
        np.testing.assert_array_equal(array, value)
    assert bundle.read("big").flags.writeable
    assert TensorBundle(prefix + ".index").entries == bundle.entries


def test_raw_save_v2_checkpoint(tmp_path):
    """tf.raw_ops.SaveV2 (one shard) of every dtype read here."""
    prefix = str(tmp_path / "raw")
    tensors = {"x/float64": np.linspace(-1, 1, 12).reshape(3, 4),
               "x/int32": np.array([[1, -2], [3, 2 ** 31 - 1]], np.int32),
               "y": np.float32(2.5)}
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=list(tensors),
                      shape_and_slices=[""] * len(tensors),
                      tensors=[tf.constant(v) for v in tensors.values()])
    bundle = read_tensor_bundle(prefix)
    for name, value in tensors.items():
        np.testing.assert_array_equal(bundle.read(name), value)
    assert bundle.shapes()["x/int32"] == ("int32", (2, 2))


def test_crc32c_known_values_and_speed(capsys):
    assert crc32c.crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value
    assert crc32c.crc32c(b"") == 0
    assert crc32c.unmask(crc32c.mask(0x12345678)) == 0x12345678
    rng = np.random.default_rng(1)
    for size in (1, 255, 256, 4095, 65537, 300_001):
        data = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
        assert crc32c.crc32c(data) == crc32c._advance_bytes(0xFFFFFFFF, data) ^ 0xFFFFFFFF
        assert crc32c.crc32c_update(crc32c.crc32c(data[:100]), data[100:]) == crc32c.crc32c(data)
    data = rng.integers(0, 256, 64 << 20, dtype=np.uint8).tobytes()
    start = time.perf_counter()
    crc32c.crc32c(data)
    seconds = time.perf_counter() - start
    with capsys.disabled():
        print(f"\ncrc32c: {64 / seconds:.0f} MB/s (64 MB, load {os.getloadavg()[0]:.1f})")


def _copy(prefix, tmp_path):
    directory = tmp_path / "copy"
    shutil.copytree(os.path.dirname(prefix), directory)
    return str(directory / os.path.basename(prefix))


def _one_line_error(error_type, call, *fragments):
    with pytest.raises(error_type) as caught:
        call()
    message = str(caught.value)
    assert "\n" not in message, message
    for fragment in fragments:
        assert fragment in message, message
    return message


def _varint(value):
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    return bytes(out + bytes([value]))


def _patch(path, offset, data):
    with open(path, "r+b") as handle:
        handle.seek(offset)
        handle.write(data)


def test_corrupt_data_fails_its_checksum(sharded, tmp_path):
    prefix = _copy(sharded[0], tmp_path)
    entry = read_tensor_bundle(prefix).entries["big"]
    path = f"{prefix}.data-{entry.shard_id:05d}-of-00002"
    _patch(path, entry.offset + 1000, b"\x55\xAA")
    bundle = read_tensor_bundle(prefix)
    _one_line_error(ValueError, lambda: bundle.read("big"), path, "'big'", "CRC-32C")
    assert bundle.read("big", verify_checksum=False).shape == (700, 300)


def test_truncated_data_file(sharded, tmp_path):
    prefix = _copy(sharded[0], tmp_path)
    entry = read_tensor_bundle(prefix).entries["big"]
    path = f"{prefix}.data-{entry.shard_id:05d}-of-00002"
    os.truncate(path, entry.offset + 10)
    _one_line_error(ValueError, lambda: read_tensor_bundle(prefix).read("big"), path,
                    "truncated", "'big'")


def test_missing_data_file(sharded, tmp_path):
    prefix = _copy(sharded[0], tmp_path)
    os.remove(prefix + ".data-00001-of-00002")
    _one_line_error(FileNotFoundError, lambda: read_tensor_bundle(prefix),
                    "model.data-00001-of-00002", "model.index")


def test_missing_index(tmp_path):
    _one_line_error(FileNotFoundError, lambda: read_tensor_bundle(tmp_path / "none"),
                    "none.index")


@pytest.mark.parametrize("damage, fragment", [
    ("truncate_40", "shorter than a table footer"),
    ("truncate_half", "not the table magic number"),
    ("magic", "not the table magic number"),
    ("block_byte", "fails its CRC-32C check"),
    ("compressed", "compression type 1"),
    ("handle", "runs past the end"),
])
def test_corrupt_index(sharded, tmp_path, damage, fragment):
    prefix = _copy(sharded[0], tmp_path)
    index = prefix + ".index"
    size = os.path.getsize(index)
    with open(index, "rb") as handle:
        data = handle.read()
    if damage == "truncate_40":
        os.truncate(index, 40)
    elif damage == "truncate_half":
        os.truncate(index, size // 2)
    elif damage == "magic":
        _patch(index, size - 1, bytes([data[-1] ^ 0xFF]))
    elif damage == "block_byte":
        _patch(index, 3, bytes([data[3] ^ 0x01]))
    else:
        # The footer's index handle (second varint pair) points at the index block.
        from keras_elmo.formats.protobuf_wire import read_varint
        footer = size - 48
        _, pos = read_varint(data, footer)
        _, pos = read_varint(data, pos)
        offset, end = read_varint(data, pos)
        block_size, _ = read_varint(data, end)
        if damage == "compressed":
            _patch(index, offset + block_size, b"\x01")
        else:  # the footer's index handle claims a block running past the file
            _patch(index, pos, _varint(offset) + _varint(10 ** 7))
    _one_line_error(ValueError, lambda: read_table(index), index, fragment)
    _one_line_error(ValueError, lambda: read_tensor_bundle(prefix), index, fragment)


def test_unreadable_dtype_is_refused(tmp_path):
    prefix = str(tmp_path / "strings")
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=["s"], shape_and_slices=[""],
                      tensors=[tf.constant(["a", "bc"])])
    bundle = read_tensor_bundle(prefix)
    assert bundle.shapes() == {"s": ("string", (2,))}
    _one_line_error(ValueError, lambda: bundle.read("s"), "'s'", "dtype string")
