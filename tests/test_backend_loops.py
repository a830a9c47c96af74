"""The loops JAX and PyTorch run, tested directly on padded rows: the per-row reversal
(`backend.reverse_sequence`) and `ResidualBiLSTM` without boundary tokens, stateless and
stateful, against plain numpy (tests/numpy_reference.py), with every step's input gates in
one product and a chunk of steps at a time (`GATE_COLUMNS`), and PyTorch's own loop
(`keras_elmo.backend.torch_lstm`) against autodiff of the plain portable loop.

A row's ends in a biLM hold `<S>` and `</S>`, whose outputs are dropped, so an off-by-one in
a reversal passes every biLM output test; here every row is real tokens to its length and
garbage (50x larger) past it, so a reversal that reads one position too far or too short
changes a real output.

Keras fixes its backend at import: this file, run as a script with `KERAS_BACKEND` set
(`python tests/test_backend_loops.py WORKDIR`), computes under that backend and writes
`WORKDIR/<backend>.npz`; the tests start one process per backend, all at once, and hold
the results to numpy in this process (which imports no Keras).
"""

import os
import subprocess
import sys

import numpy as np
import pytest

import numpy_reference as ref
import weight_fixtures

HERE = os.path.dirname(os.path.abspath(__file__))
BACKENDS = ("jax", "torch")
ATOL = 1e-5
#: Rows of different lengths, the empty one and a full one among them (T = 5).
STEPS = 5
LENGTHS = [3, 0, 5, 1]
#: The two calls of the stateful encoder: each row starts where its last call ended.
STATEFUL_LENGTHS = ([3, 5, 1], [4, 2, 5])
#: `GATE_COLUMNS` of the chunked runs: chunks of 2 steps of 4 rows (2 of the stateful
#: calls' 3 rows), so T = 5 is two whole chunks and a rest of one step.
CHUNK_COLUMNS = 8
#: The loops' runs: every step's gates at once (the default at these sizes), and in chunks.
GATE_LAYOUTS = ("", "chunked/")


# --- inputs, made here ---------------------------------------------------------------------
def _padded(lengths, steps, width, rng):
    """`(x, mask)`: `x` `(batch, steps, width)` float32, garbage 50x larger past each length."""
    x = rng.standard_normal((len(lengths), steps, width)).astype(np.float32)
    mask = np.arange(steps)[None, :] < np.asarray(lengths)[:, None]
    x[~mask] = 50.0 * rng.standard_normal((int((~mask).sum()), width))
    return x, mask


def _make_inputs(root):
    """Weight files and inputs every backend reads; returns `(options, arrays, inputs)`."""
    options = weight_fixtures.make_options(cell_clip=0.5, proj_clip=0.3)
    arrays = weight_fixtures.random_weight_arrays(options, seed=63, lstm_scale=2.0)
    weight_fixtures.write_model_dir(os.path.join(root, "model"), options, arrays)
    rng = np.random.default_rng(63)
    width = options["lstm"]["projection_dim"]
    inputs = {"lengths": np.asarray(LENGTHS, np.int32),
              "feature_major": rng.standard_normal((3, STEPS, len(LENGTHS))).astype("float32"),
              "batch_major": rng.standard_normal((len(LENGTHS), STEPS, 2)).astype("float32")}
    inputs["x"], inputs["mask"] = _padded(LENGTHS, STEPS, width, rng)
    for k, lengths in enumerate(STATEFUL_LENGTHS):
        inputs[f"x{k}"], inputs[f"mask{k}"] = _padded(lengths, STEPS, width, rng)
    # sequences back to back in a row: starts at 0 and 2 in row 0, at 0 in row 2
    inputs["starts"] = np.zeros((len(LENGTHS), STEPS), bool)
    inputs["starts"][[0, 0, 2, 3], [0, 2, 0, 0]] = True
    inputs["probe"] = rng.standard_normal((len(LENGTHS), 2, STEPS, 2 * width)).astype(
        "float32")
    np.savez(os.path.join(root, "inputs.npz"), **inputs)
    return options, arrays, inputs


# --- the independent numpy computation ------------------------------------------------------
def reversed_within_lengths(x, lengths, seq_axis, batch_axis):
    """numpy's `tf.reverse_sequence`: row by row, a slice reversed."""
    out = np.array(x)
    for b, n in enumerate(lengths):
        row = [slice(None)] * x.ndim
        row[batch_axis] = b
        moved = np.moveaxis(out[tuple(row)], seq_axis - (seq_axis > batch_axis), 0)
        moved[:n] = moved[:n][::-1].copy()
    return out


def stateful_encoder(arrays, options, calls):
    """`[(batch, L, T, 2P)]`: the encoder over `calls` `[(x, lengths)]`, each row starting
    each call from the state its row ended the previous call with (zero at first)."""
    lstm = options["lstm"]
    proj, dim, clips = lstm["projection_dim"], lstm["dim"], (lstm["cell_clip"],
                                                            lstm["proj_clip"])
    zero = (np.zeros(proj), np.zeros(dim))
    states = {}  # (row, direction, layer) -> (h, c)
    results = []
    for x, lengths in calls:
        out = np.zeros((len(lengths), lstm["n_layers"], x.shape[1], 2 * proj))
        for b, n in enumerate(lengths):
            for direction in (0, 1):
                inputs = np.asarray(x[b, :n], np.float64)
                inputs = inputs if direction == 0 else inputs[::-1]
                for layer in range(lstm["n_layers"]):
                    W, B, W_P = ref.lstm_cell_arrays(arrays, direction, layer)
                    h, c = states.get((b, direction, layer), zero)
                    outputs = np.zeros((n, proj))
                    for t in range(n):
                        h, c = ref.lstm_step(inputs[t], h, c, W, B, W_P, *clips)
                        outputs[t] = h
                    states[b, direction, layer] = (h, c)
                    if lstm["use_skip_connections"] and layer > 0:
                        outputs = outputs + inputs
                    half = outputs if direction == 0 else outputs[::-1]
                    out[b, layer, :n, direction * proj:(direction + 1) * proj] = half
                    inputs = outputs
        results.append(out)
    return results


# --- the tests ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("loops"))
    options, arrays, inputs = _make_inputs(root)
    processes = {}
    for backend in BACKENDS:
        env = dict(os.environ, KERAS_BACKEND=backend,
                   PYTHONPATH=HERE + os.pathsep + os.environ.get("PYTHONPATH", ""))
        with open(os.path.join(root, f"{backend}.log"), "w") as log:
            processes[backend] = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), root], env=env,
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    yield {"root": root, "options": options, "arrays": arrays, "inputs": inputs,
           "processes": processes}
    for process in processes.values():
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.fixture(params=BACKENDS)
def results(request, workdir):
    """What the loops computed under one backend (`name -> array`)."""
    backend = request.param
    pytest.importorskip(backend)
    process = workdir["processes"][backend]
    try:
        returncode = process.wait(timeout=300)
    except subprocess.TimeoutExpired:
        process.kill()
        returncode = process.wait()
    with open(os.path.join(workdir["root"], f"{backend}.log"), errors="replace") as log:
        assert returncode == 0, log.read()[-3000:]
    return dict(np.load(os.path.join(workdir["root"], f"{backend}.npz")))


def test_reverse_sequence_reverses_each_row_within_its_length(workdir, results):
    inputs = workdir["inputs"]
    np.testing.assert_array_equal(results["reversed_feature_major"], reversed_within_lengths(
        inputs["feature_major"], LENGTHS, seq_axis=1, batch_axis=2))
    np.testing.assert_array_equal(results["reversed_batch_major"], reversed_within_lengths(
        inputs["batch_major"], LENGTHS, seq_axis=1, batch_axis=0))


@pytest.mark.parametrize("gates", GATE_LAYOUTS, ids=["gates-at-once", "gates-in-chunks"])
def test_the_encoder_without_boundary_tokens_equals_numpy_on_padded_rows(workdir, results,
                                                                          gates):
    inputs, options, arrays = workdir["inputs"], workdir["options"], workdir["arrays"]
    expected = ref.contextual_encoder(arrays, options, inputs["x"], LENGTHS)
    np.testing.assert_allclose(results[f"{gates}stateless"], expected, atol=ATOL)


@pytest.mark.parametrize("gates", GATE_LAYOUTS, ids=["gates-at-once", "gates-in-chunks"])
def test_a_stateful_encoder_carries_each_rows_state_as_numpy_does(workdir, results, gates):
    inputs, options, arrays = workdir["inputs"], workdir["options"], workdir["arrays"]
    expected = stateful_encoder(arrays, options, [(inputs[f"x{k}"], lengths) for k, lengths
                                                  in enumerate(STATEFUL_LENGTHS)])
    for k, want in enumerate(expected):
        np.testing.assert_allclose(results[f"{gates}stateful{k}"], want, atol=ATOL,
                                   err_msg=f"call {k + 1}")


@pytest.mark.parametrize("case", ["stateless", "stateful", "packed"])
@pytest.mark.parametrize("layout", ["direction_threads", "one_thread", "chunked_threads"])
def test_the_torch_loop_gives_the_portable_loops_outputs_and_gradients(workdir, case, layout):
    """PyTorch's own loop, its directions in threads or one after the other, against
    autodiff of `portable.run_cells` (`keras.ops.scan`) and `portable.reverse_sequence`:
    outputs, and gradients of the inputs and of every weight."""
    pytest.importorskip("torch")
    process = workdir["processes"]["torch"]
    assert process.wait(timeout=300) == 0, open(os.path.join(workdir["root"], "torch.log"),
                                                errors="replace").read()[-3000:]
    got = dict(np.load(os.path.join(workdir["root"], "torch.npz")))
    want = [got[name] for name in sorted(got) if name.startswith(f"portable/{case}/")]
    mine = [got[name] for name in sorted(got) if name.startswith(f"{layout}/{case}/")]
    assert len(want) == len(mine) > 2  # the outputs, the inputs' gradient, the weights'
    for k, (a, b) in enumerate(zip(mine, want)):
        np.testing.assert_allclose(a, b, atol=1e-5 * max(1.0, np.abs(b).max()),
                                   err_msg=f"{layout}/{case} array {k}")


def test_the_torch_step_is_the_cells_step_values_bit_for_bit(workdir):
    """`torch_lstm.step`, the step PyTorch's loop runs, against the cell's `step_values`
    (the one definition), with and without clips, one row and several."""
    pytest.importorskip("torch")
    process = workdir["processes"]["torch"]
    assert process.wait(timeout=300) == 0
    got = dict(np.load(os.path.join(workdir["root"], "torch.npz")))
    names = [name for name in got if name.startswith("step/")]
    assert len(names) == 16  # (h, c) x (step_values, step) x 2 clips x 2 batches
    for name in names:
        if "/step_values/" in name:
            np.testing.assert_array_equal(got[name.replace("/step_values/", "/torch/")],
                                          got[name], err_msg=name)


# --- the computation, under the backend KERAS_BACKEND names -----------------------------------
def _compute(root):
    """Runs the loops under this process's backend; writes `root/<backend>.npz`."""
    import keras
    from keras import ops

    from keras_elmo import backend
    from keras_elmo.models.bilm import BiLM

    inputs = dict(np.load(os.path.join(root, "inputs.npz")))
    files = (os.path.join(root, "model", "options.json"),
             os.path.join(root, "model", "weights.hdf5"))
    out = {}

    def numpy(x):
        return np.asarray(ops.convert_to_numpy(x))

    lengths = ops.convert_to_tensor(inputs["lengths"])
    out["reversed_feature_major"] = numpy(backend.reverse_sequence(
        ops.convert_to_tensor(inputs["feature_major"]), lengths, seq_axis=1, batch_axis=2))
    out["reversed_batch_major"] = numpy(backend.reverse_sequence(
        ops.convert_to_tensor(inputs["batch_major"]), lengths, seq_axis=1, batch_axis=0))
    loop = sys.modules[backend.run_cells.__module__]  # the loop this backend runs
    columns = loop.GATE_COLUMNS
    for gates, loop.GATE_COLUMNS in zip(GATE_LAYOUTS, (columns, CHUNK_COLUMNS)):
        encoder = BiLM.from_weights(*files).contextual_encoder
        out[f"{gates}stateless"] = numpy(encoder(inputs["x"], mask=inputs["mask"]))
        stateful = BiLM.from_weights(*files, stateful=True).contextual_encoder
        for k in range(len(STATEFUL_LENGTHS)):
            out[f"{gates}stateful{k}"] = numpy(stateful(inputs[f"x{k}"],
                                                        mask=inputs[f"mask{k}"]))
    loop.GATE_COLUMNS = columns
    if keras.backend.backend() == "torch":
        out.update(_torch_gradients(files, inputs))
    np.savez(os.path.join(root, f"{keras.backend.backend()}.npz"), **out)


def _torch_gradients(files, inputs):
    """`layout/case/k -> array`: outputs, then gradients of the inputs and every weight, of
    the encoder run by each loop ("portable": `keras.ops.scan` and its reversal)."""
    import torch

    import keras_elmo.backend
    from keras_elmo.backend import portable, torch_lstm
    from keras_elmo.models.bilm import BiLM

    def portable_loop(cells, inputs, lengths, initial_states, *args, **kwargs):
        # The stateful layer assigns its state variables in place after the call; autograd
        # needs the initial states it saved as they were (PyTorch's loop copies them too).
        initial_states = [(h.clone(), c.clone()) for h, c in initial_states]
        return portable.run_cells(cells, inputs, lengths, initial_states, *args, **kwargs)

    loops = {"portable": (portable_loop, portable.reverse_sequence, None),
             "direction_threads": (torch_lstm.run_cells, keras_elmo.backend.reverse_sequence,
                                   1),
             "one_thread": (torch_lstm.run_cells, keras_elmo.backend.reverse_sequence,
                            sys.maxsize),
             "chunked_threads": (torch_lstm.run_cells, keras_elmo.backend.reverse_sequence, 1)}
    encoders = {"stateless": BiLM.from_weights(*files).contextual_encoder,
                "stateful": BiLM.from_weights(*files, stateful=True).contextual_encoder}
    encoders["packed"] = encoders["stateless"]
    out = {}
    threads, columns = torch_lstm.DIRECTION_THREADS, torch_lstm.GATE_COLUMNS
    for layout, (run_cells, reverse, direction_threads) in loops.items():
        keras_elmo.backend.run_cells, keras_elmo.backend.reverse_sequence = run_cells, reverse
        torch_lstm.DIRECTION_THREADS = direction_threads or threads
        torch_lstm.GATE_COLUMNS = CHUNK_COLUMNS if layout.startswith("chunked") else columns
        for case, encoder in encoders.items():
            if case == "stateful":
                encoder.reset_states()
            weights = [v.value for v in encoder.weights if "state" not in v.path]
            for weight in weights:
                weight.requires_grad_(True)
                weight.grad = None
            x = torch.tensor(inputs["x"], requires_grad=True)
            extra = {"sequence_starts": torch.tensor(inputs["starts"])} if case == "packed" \
                else {}
            y = encoder(x, mask=torch.tensor(inputs["mask"]), **extra)
            (y * torch.tensor(inputs["probe"])).sum().backward()
            arrays = [y] + [t.grad if t.grad is not None else torch.zeros_like(t)
                            for t in [x] + weights]
            for k, array in enumerate(arrays):
                out[f"{layout}/{case}/{k:02d}"] = array.detach().numpy()
    keras_elmo.backend.run_cells = torch_lstm.run_cells
    torch_lstm.DIRECTION_THREADS, torch_lstm.GATE_COLUMNS = threads, columns
    return {**out, **_torch_steps()}


def _torch_steps():
    """`step/clips/batch/which/h|c`: one step of `torch_lstm.step` and of `step_values`."""
    import torch

    from keras_elmo.backend import torch_lstm
    from keras_elmo.layers.lstm_projection_cell import LSTMProjectionCell

    out = {}
    generator = torch.Generator().manual_seed(63)
    for clips in ((0.5, 0.3), (None, None)):
        cell = LSTMProjectionCell(12, 8, cell_clip=clips[0], proj_clip=clips[1])
        cell.build((None, 8))
        kernels = cell.step_kernels()
        for batch in (1, 3):
            gates = 2 * torch.randn((48, batch), generator=generator)
            state = (torch.randn((8, batch), generator=generator),
                     2 * torch.randn((12, batch), generator=generator))
            with torch.no_grad():
                pairs = {"step_values": cell.step_values(gates, state, kernels)[:2],
                         "torch": torch_lstm.step(cell, gates, *state, kernels)}
            for which, (h, c) in pairs.items():
                key = f"step/{clips[0]}/{batch}/{which}"
                out[f"{key}/h"], out[f"{key}/c"] = h.numpy(), c.numpy()
    return out


if __name__ == "__main__":
    _compute(sys.argv[1])
