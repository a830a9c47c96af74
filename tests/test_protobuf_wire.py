"""The protobuf wire decoder and GraphDef view (`keras_elmo.formats.protobuf_wire`,
`graph_constants`), checked against the messages TensorFlow writes and its own parser."""

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.framework import tensor_pb2
from tensorflow.core.protobuf import saved_model_pb2, tensor_bundle_pb2

from keras_elmo.formats import protobuf_wire as wire
from keras_elmo.formats.graph_constants import GraphView, node_name, tensor_array
from keras_elmo.formats.tfhub_module import read_saved_model

tf1 = tf.compat.v1


def test_varints_and_scalars():
    assert wire.read_varint(b"\x96\x01", 0) == (150, 2)
    schema = {1: wire.Field("a", "int64"), 2: wire.Field("b", "int32"),
              3: wire.Field("c", "float"), 4: wire.Field("d", "double"),
              5: wire.Field("e", "string"), 6: wire.Field("f", "bool")}
    proto = tensor_bundle_pb2.BundleEntryProto(offset=-5, size=2 ** 40, crc32c=0xFFFFFFFF,
                                               shard_id=3, dtype=1)
    decoded = wire.decode(proto.SerializeToString(), wire.BUNDLE_ENTRY)
    assert (decoded["offset"], decoded["size"], decoded["crc32c"], decoded["shard_id"],
            decoded["dtype"]) == (-5, 2 ** 40, 0xFFFFFFFF, 3, 1)
    assert wire.decode(b"", schema) == {"a": 0, "b": 0, "c": 0.0, "d": 0.0, "e": "",
                                        "f": False}
    assert wire.dtype_name(101) == "float32" and wire.dtype_name(7) == "string"


@pytest.mark.parametrize("data, fragment", [
    (b"\x08", "truncated varint"),
    (b"\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", "longer than 10 bytes"),
    (b"\x12\x05ab", "claims 5 bytes, 2 left"),
    (b"\x1d\x00\x00", "truncated 32-bit field 3"),
    (b"\x0b", "unsupported wire type 3"),
    (b"\x0d\x00\x00\x00\x00", "has wire type 5, expected 0"),
])
def test_malformed_bytes_one_line(data, fragment):
    with pytest.raises(wire.ProtobufError) as caught:
        wire.decode(data, {1: wire.Field("a", "int64"), 2: wire.Field("b", "string"),
                           3: wire.Field("c", "float")})
    assert fragment in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize("value", [
    np.float32(1.5),
    np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5,
    np.array([1e300, -2.0]),
    np.array([[1, -2, 3]], np.int32),
    np.array([2 ** 40, -1], np.int64),
    np.array([True, False, True]),
    np.array([1.0, 2.0], np.float16),
    np.array([3, 4], np.uint8),
    np.array([b"ab", b"", b"\xff"], object),
])
def test_tensor_protos_as_tensorflow_reads_them(value):
    for proto in (tf.make_tensor_proto(value),  # tensor_content for the large numeric ones
                  tf.make_tensor_proto(value, shape=np.shape(value))):
        decoded = wire.decode(proto.SerializeToString(), wire.TENSOR)
        array = tensor_array(decoded)
        expected = tf.make_ndarray(proto)
        assert array.shape == expected.shape and array.dtype == expected.dtype
        np.testing.assert_array_equal(array, expected)


def test_a_repeated_value_fills_the_shape():
    """TensorProto's rule: fewer values than elements repeat the last one."""
    proto = tensor_pb2.TensorProto(dtype=1, float_val=[1.0, 7.5])
    proto.tensor_shape.dim.add(size=2)
    proto.tensor_shape.dim.add(size=2)
    array = tensor_array(wire.decode(proto.SerializeToString(), wire.TENSOR))
    np.testing.assert_array_equal(array, tf.make_ndarray(proto))
    np.testing.assert_array_equal(array, [[1.0, 7.5], [7.5, 7.5]])


@pytest.fixture(scope="module")
def v1_saved_model(tmp_path_factory):
    """A TF1 SavedModel (`tf.compat.v1.saved_model.Builder`) with Const nodes, a variable,
    a clip and a max-pool."""
    directory = str(tmp_path_factory.mktemp("sm") / "model")
    graph = tf.Graph()
    with graph.as_default():
        x = tf1.placeholder(tf.float32, (None, 1, 6, 2), name="x")
        weight = tf1.get_variable("scope/w", initializer=np.ones((2, 2), np.float32))
        with tf1.name_scope("body"):
            pooled = tf1.nn.max_pool(x, [1, 1, 4, 1], [1, 1, 1, 1], "VALID")
            act = tf.nn.relu(pooled)
            flat = tf.reshape(act, [-1, 2])
            clipped = tf.clip_by_value(tf.matmul(flat, weight), -2.5, 2.5)
            table = tf.constant(np.arange(12, dtype=np.float32).reshape(3, 4), name="table")
            ids = tf.constant([1, 2], tf.int64, name="ids")
            out = tf.identity(clipped + tf.reduce_sum(tf.gather(table, ids)), name="out")
        with tf1.Session() as session:
            session.run(tf1.global_variables_initializer())
            builder = tf1.saved_model.Builder(directory)
            builder.add_meta_graph_and_variables(
                session, ["serve"], signature_def_map={
                    "tokens": tf1.saved_model.predict_signature_def({"x": x}, {"out": out})})
            builder.save()
    return directory


def test_saved_model_as_tensorflow_parses_it(v1_saved_model):
    path = v1_saved_model + "/saved_model.pb"
    reference = saved_model_pb2.SavedModel()
    with open(path, "rb") as handle:
        reference.ParseFromString(handle.read())
    decoded = read_saved_model(path)
    assert decoded["saved_model_schema_version"] == reference.saved_model_schema_version
    (meta,), (ref_meta,) = decoded["meta_graphs"], reference.meta_graphs
    assert meta["meta_info_def"]["tags"] == ["serve"]
    assert meta["object_graph_def"] == b""
    assert [(n["name"], n["op"], n["input"], n["device"]) for n in meta["graph_def"]["node"]] \
        == [(n.name, n.op, list(n.input), n.device) for n in ref_meta.graph_def.node]
    for node, ref in zip(meta["graph_def"]["node"], ref_meta.graph_def.node):
        assert sorted(node["attr"]) == sorted(ref.attr)
        for key, value in ref.attr.items():
            which = value.WhichOneof("value")
            got = node["attr"][key]
            if which == "tensor":
                np.testing.assert_array_equal(tensor_array(got["tensor"]),
                                              tf.make_ndarray(value.tensor))
            elif which == "shape":
                assert wire.shape_of(got["shape"]) == (
                    None if value.shape.unknown_rank
                    else tuple(None if d.size < 0 else d.size for d in value.shape.dim))
            elif which == "list":
                assert got["list"]["i"] == list(value.list.i)
                assert [bytes(s) for s in got["list"]["s"]] == list(value.list.s)
            elif which in ("s",):
                assert bytes(got["s"]) == value.s
            elif which in ("i", "f", "b", "type"):
                assert got[which] == pytest.approx(getattr(value, which))
    signature = meta["signature_def"]["tokens"]
    ref_signature = ref_meta.signature_def["tokens"]
    assert signature["method_name"] == ref_signature.method_name
    assert {k: v["name"] for k, v in signature["outputs"].items()} == {
        k: v.name for k, v in ref_signature.outputs.items()}
    assert wire.shape_of(signature["inputs"]["x"]["tensor_shape"]) == (None, 1, 6, 2)


def test_graph_view_constants_and_neighbours(v1_saved_model):
    meta = read_saved_model(v1_saved_model + "/saved_model.pb")["meta_graphs"][0]
    graph = GraphView(meta["graph_def"], "test graph")
    np.testing.assert_array_equal(graph.const_value("body/table"),
                                  np.arange(12, dtype=np.float32).reshape(3, 4))
    assert graph.const_value("body/ids").tolist() == [1, 2]
    (pool,) = graph.under("body/", op="MaxPool")
    assert graph.attr_ints(pool, "ksize") == (1, 1, 4, 1)
    assert [c["op"] for c in graph.consumers(pool)] == ["Relu"]
    (minimum,) = graph.under("body/clip_by_value", op="Minimum")
    assert graph.constant_inputs(minimum) == [2.5]
    assert [s["op"] for s in graph.inputs(minimum)] == ["MatMul", "Const"]
    matmul = graph.inputs(minimum)[0]
    # Through the variable's read (Identity / ReadVariableOp is not a pass-through).
    assert {s["name"] for s in graph.inputs(matmul, through=("Identity", "ReadVariableOp"))} \
        >= {"scope/w"}
    assert graph.op_counts("body/")["MaxPool"] == 1
    assert node_name("^a/b") == "a/b" and node_name("a/b:1") == "a/b"
    with pytest.raises(ValueError) as caught:
        graph.const_value("body/Relu")
    assert str(caught.value) == "test graph: expected a Const node, found op Relu."


def test_truncated_saved_model_one_line(v1_saved_model, tmp_path):
    with open(v1_saved_model + "/saved_model.pb", "rb") as handle:
        data = handle.read()
    path = tmp_path / "saved_model.pb"
    path.write_bytes(data[:len(data) // 2])
    with pytest.raises(ValueError) as caught:
        read_saved_model(path)
    message = str(caught.value)
    assert message.startswith(f"{path} is not a SavedModel protobuf (") and "\n" not in message
