"""keras_elmo.formats.torch_state: torch state dicts read without torch (no TensorFlow either).

The expected values were written by torch at fixture time (tests/fixtures/efml/README.md);
the crafted files come from `torch_file_writer`, which writes torch's layouts by hand.
"""

import hashlib
import json
import os
import pickle
import struct
import subprocess
import sys

import numpy as np
import pytest

import torch_file_writer as tw
from keras_elmo.formats.torch_state import (
    EXPECTED, TorchStateDictError, read_torch_state_dict)

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "efml")
MODELS = ("tiny_zip", "tiny_legacy", "tiny_no_words")
PICKLES = ("token_embedder.pkl", "encoder.pkl")


def refusal(path, found):
    """The one-line message of a refused file."""
    return f"{path}: {found}; {EXPECTED}"


def read_error(path):
    with pytest.raises(TorchStateDictError) as caught:
        read_torch_state_dict(path)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{path}: ")
    assert isinstance(caught.value, ValueError)
    return message


# --- what torch wrote ------------------------------------------------------------------------
@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("name", PICKLES)
def test_reads_exactly_the_tensors_torch_wrote(model, name):
    with open(os.path.join(FIXTURES, model, "state_dict_digest.json")) as f:
        expected = json.load(f)[name]
    weights = read_torch_state_dict(os.path.join(FIXTURES, model, name))
    found = [[key, str(a.dtype), list(a.shape), hashlib.sha256(a.tobytes()).hexdigest()]
             for key, a in weights.items()]
    assert found == expected  # names in stored order, dtypes, shapes, every bit
    assert all(a.flags.c_contiguous and not a.flags.writeable for a in weights.values())


@pytest.mark.parametrize("name", PICKLES)
def test_legacy_and_zip_formats_of_one_model_agree(name):
    zipped = read_torch_state_dict(os.path.join(FIXTURES, "tiny_zip", name))
    legacy = read_torch_state_dict(os.path.join(FIXTURES, "tiny_legacy", name))
    assert list(zipped) == list(legacy)
    for key in zipped:
        np.testing.assert_array_equal(zipped[key], legacy[key])


@pytest.mark.parametrize("name", ["views_zip.pt", "views_legacy.pt"])
def test_views_offsets_strides_shared_storage_and_dtypes(name):
    expected = np.load(os.path.join(FIXTURES, "torch_views", "views_expected.npz"))
    found = read_torch_state_dict(os.path.join(FIXTURES, "torch_views", name))
    assert list(found) == list(expected.files)
    for key in found:
        assert found[key].dtype == expected[key].dtype, key
        assert found[key].shape == expected[key].shape, key
        np.testing.assert_array_equal(found[key], expected[key], err_msg=key)
    assert found["scalar"].shape == () and found["bfloat16"].dtype == np.float32
    assert not any(a.flags.writeable for a in found.values())  # read-only, mapped or not
    # Arrays of one storage do not alias one another: views of a storage are copied out.
    assert not np.shares_memory(found["transposed"], found["base"])


def test_old_torch_legacy_layout_gpu_storages_and_storage_views(tmp_path):
    """torch 0.3 wrote `_rebuild_tensor`, GPU models `torch.cuda.*Storage`, and a storage
    view is a slice (view_key, offset, numel) of its root."""
    root = np.arange(10, dtype=np.float32)
    state = {
        "whole": tw.tensor(tw.legacy_storage("r", 10, module="torch.cuda"), 0, (2, 5), (5, 1),
                           rebuild="_rebuild_tensor"),
        "in_view": tw.tensor(tw.legacy_storage("r", 10, view=("v", 4, 4), module="torch.cuda"),
                             1, (3,), (1,)),
        "steps": tw.tensor(tw.legacy_storage("r", 10), 1, (2, 2), (4, 2)),
        "counts": tw.tensor(tw.legacy_storage("i", 2, storage_class="LongStorage"), 0, (2,),
                            (1,)),
    }
    path = str(tmp_path / "old.pkl")
    tw.save_legacy(path, state, [("r", 10, root.tobytes()),
                                 ("i", 2, np.array([7, -8], "<i8").tobytes())])
    found = read_torch_state_dict(path)
    np.testing.assert_array_equal(found["whole"], root.reshape(2, 5))
    np.testing.assert_array_equal(found["in_view"], [5.0, 6.0, 7.0])
    np.testing.assert_array_equal(found["steps"], [[1.0, 3.0], [5.0, 7.0]])
    np.testing.assert_array_equal(found["counts"], [7, -8])


@pytest.mark.parametrize("byteorder, stored", [("big", ">f4"), ("little", "<f4"),
                                               (None, "<f4")])
def test_zip_byte_order_record_and_its_absence(tmp_path, byteorder, stored):
    values = np.array([1.5, -2.25, 3e30], np.float32)
    path = str(tmp_path / "ordered.pkl")
    tw.save_zip(path, {"w": tw.tensor(tw.zip_storage("0", 3), 0, (3,), (1,))},
                {"0": values.astype(stored).tobytes()}, byteorder=byteorder)
    found = read_torch_state_dict(path)["w"]
    assert found.dtype == np.float32 and found.dtype.isnative
    np.testing.assert_array_equal(found, values)


def test_does_not_import_torch_or_tensorflow():
    code = ("import sys, keras_elmo.formats.torch_state, keras_elmo.formats.efml_model; "
            "print(sorted(m for m in ('torch', 'tensorflow', 'keras') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == "[]"


# --- refusals --------------------------------------------------------------------------------
class _Shell:
    def __init__(self, command):
        self.command = command

    def __reduce__(self):
        return os.system, (self.command,)


@pytest.mark.parametrize("container", ["zip", "legacy"])
def test_refuses_a_pickle_that_calls_os_system_without_calling_it(tmp_path, container):
    marker = tmp_path / "ran"
    payload = pickle.dumps({"w": _Shell(f"touch {marker}")}, protocol=2)
    path = str(tmp_path / "evil.pkl")
    if container == "zip":
        tw.save_zip(path, payload, {})
    else:
        tw.save_legacy(path, payload, [])
    assert read_error(path) == refusal(path, f"holds {os.system.__module__}.system")
    assert not marker.exists()


@pytest.mark.parametrize("module, name", [("torch.nn.modules.linear", "Linear"),
                                          ("__main__", "X"), ("builtins", "eval"),
                                          ("torch", "Tensor"), ("torch._utils", "os")])
def test_refuses_any_other_name(tmp_path, module, name):
    path = str(tmp_path / "module.pkl")
    tw.save_zip(path, {"layer": tw.Call(tw.Global(module, name), ())}, {})
    assert read_error(path) == refusal(path, f"holds {module}.{name}")


@pytest.mark.parametrize("module, name, state", [
    ("torch._utils", "_rebuild_tensor_v2", (None,)),
    ("torch._utils", "_rebuild_tensor_v2", (None, {"function": None})),
    ("torch._utils", "_rebuild_tensor_v2", {"function": None}),
    ("torch", "FloatStorage", ("x", None, None)),
    ("torch", "FloatStorage", (None, {"stored": None})),
    ("collections", "OrderedDict", {"x": 1}),
])
def test_a_pickle_cannot_rewrite_the_readers_objects(tmp_path, module, name, state):
    """BUILD sets attributes on what it is given; the reader's objects outlive a reading."""
    path = str(tmp_path / "build.pkl")
    tw.save_zip(path, {"w": tw.Build(tw.Global(module, name), state)}, {})
    assert "damaged or truncated pickle" in read_error(path)
    found = read_torch_state_dict(os.path.join(FIXTURES, "tiny_zip", "encoder.pkl"))
    assert len(found) == 16  # the reader still works


@pytest.mark.parametrize("state", [(None, {"offset": 10 ** 9}), {"offset": 10 ** 9},
                                   (10 ** 9,)])
def test_a_pickle_cannot_move_a_checked_tensor_out_of_its_storage(tmp_path, state):
    path = str(tmp_path / "moved.pkl")
    moved = tw.Build(tw.tensor(tw.zip_storage("0", 1), 0, (), ()), state)
    tw.save_zip(path, {"w": moved}, {"0": bytes(4)})
    assert "damaged or truncated pickle" in read_error(path)


def test_refuses_what_is_not_a_dict_of_tensors(tmp_path):
    path = str(tmp_path / "list.pkl")
    tw.save_zip(path, [tw.tensor(tw.zip_storage("0", 1), 0, (), ())], {"0": bytes(4)})
    assert read_error(path) == refusal(path, "holds an object of type list, not a dict")
    tw.save_zip(path, {"epoch": 3}, {})
    assert read_error(path) == refusal(path, "key 'epoch' holds an object of type int, not "
                                             "a tensor")


@pytest.mark.parametrize("content, found", [
    (b"", "is empty"),
    (b"hello world", "starts with b'hell', neither a zip archive nor a pickle"),
    (pickle.dumps({"a": 1}, protocol=2),
     "starts with a pickle of a dict, not torch's magic number"),
])
def test_refuses_files_that_are_not_torch_files(tmp_path, content, found):
    path = tmp_path / "other.pkl"
    path.write_bytes(content)
    assert read_error(str(path)) == refusal(str(path), found)


def test_refuses_wrong_magic_number_and_protocol(tmp_path):
    path = str(tmp_path / "magic.pkl")
    tw.save_legacy(path, {}, [], magic=12345)
    assert read_error(path) == refusal(path, "starts with a pickle of 12345, not torch's "
                                             "magic number")
    tw.save_legacy(path, {}, [], protocol=1000)
    assert read_error(path) == refusal(path, "has protocol version 1000 (expected 1001)")


def _cut(tmp_path, name, keep):
    data = open(os.path.join(FIXTURES, name), "rb").read()
    path = tmp_path / "cut.pkl"
    path.write_bytes(data[:keep(len(data))])
    return str(path)


def test_refuses_truncated_files(tmp_path):
    path = _cut(tmp_path, "tiny_legacy/encoder.pkl", lambda n: n - 100)
    assert "is truncated: storage" in read_error(path)
    path = _cut(tmp_path, "tiny_legacy/encoder.pkl", lambda n: 200)
    assert "has a damaged or truncated pickle" in read_error(path)
    path = _cut(tmp_path, "tiny_zip/encoder.pkl", lambda n: n - 100)
    assert "is a damaged or truncated zip archive" in read_error(path)


def test_refuses_damaged_storage_data(tmp_path):
    path = str(tmp_path / "bad.pkl")
    state = {"w": tw.tensor(tw.zip_storage("0", 4), 0, (2, 2), (2, 1))}
    tw.save_zip(path, state, {"0": bytes(12)})
    assert read_error(path) == refusal(path, "has 12 bytes in archive/data/0; its 4 "
                                             "FloatStorage elements need 16")
    tw.save_zip(path, state, {})
    assert read_error(path) == refusal(path, "has no record archive/data/0 for storage '0'")
    tw.save_zip(path, {"w": tw.tensor(tw.zip_storage("0", 4), 1, (2, 2), (2, 1))},
                {"0": bytes(16)})
    assert "that reaches past its storage of 4 elements" in read_error(path)
    tw.save_legacy(path, {"w": tw.tensor(tw.legacy_storage("0", 4), 0, (4,), (1,))},
                   [("0", 3, bytes(12))])
    assert read_error(path) == refusal(path, "stores 3 elements for storage '0' of 4")


def test_a_missing_file_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError, match="torch state dict file not found"):
        read_torch_state_dict(tmp_path / "absent.pkl")


def test_legacy_storage_count_is_little_endian_int64(tmp_path):
    path = str(tmp_path / "count.pkl")
    tw.save_legacy(path, {"w": tw.tensor(tw.legacy_storage("0", 1), 0, (), ())},
                   [("0", 1, struct.pack("<f", 0.5))])
    assert read_torch_state_dict(path)["w"] == np.float32(0.5)
