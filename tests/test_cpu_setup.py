"""`keras_elmo.process.cpu_setup`: the CPU's flags, the oneDNN choice made for it (a variable
the user set always wins), the line that says what is in effect, and the bfloat16 note."""

import logging

import numpy as np
import pytest

from cpu_class import bfloat16_refusal
from keras_elmo.process import cpu_setup

AVX2 = frozenset({"avx2"})
AVX512_BF16 = frozenset({"avx2", "avx512f", "avx512_vnni", "avx512_bf16"})


def test_flags_are_read_from_cpuinfo(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx2 fma avx512f avx512_bf16 "
                       "amx_tile\nprocessor\t: 1\nflags\t\t: fpu\n")
    assert cpu_setup.cpu_flags(str(cpuinfo)) == {"avx2", "avx512f", "avx512_bf16"}
    assert cpu_setup.cpu_flags(str(tmp_path / "missing")) == frozenset()


def test_the_model_name_is_read_from_cpuinfo(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Platinum 8481C\n")
    assert cpu_setup.cpu_model(str(cpuinfo)) == "Intel(R) Xeon(R) Platinum 8481C"
    assert cpu_setup.cpu_model(str(tmp_path / "missing")) == "unknown"
    assert cpu_setup.describe_cpu({}, flags=AVX2).endswith("; model: " + cpu_setup.cpu_model())


def test_onednn_is_turned_on_for_avx2_cpus_unless_the_user_set_it():
    environ = {}
    settings = cpu_setup.set_cpu_defaults(environ, flags=AVX2, cores=2)
    assert environ["TF_ENABLE_ONEDNN_OPTS"] == "1" == settings["TF_ENABLE_ONEDNN_OPTS"]
    assert settings["TF_NUM_INTRAOP_THREADS"] == "1"
    line = cpu_setup.describe_cpu(environ, flags=AVX2)
    assert "cpu: avx2; oneDNN on (TF_ENABLE_ONEDNN_OPTS=1 set by keras-elmo" in line, line
    assert "threads: 1 per op, 2 ops at once" in line
    users = {"TF_ENABLE_ONEDNN_OPTS": "0"}
    assert cpu_setup.set_cpu_defaults(users, flags=AVX2)["TF_ENABLE_ONEDNN_OPTS"] == "0"
    assert users["TF_ENABLE_ONEDNN_OPTS"] == "0"
    assert "oneDNN off (TF_ENABLE_ONEDNN_OPTS=0 set by the user)" in cpu_setup.describe_cpu(
        users, flags=AVX2)


def test_without_avx2_tensorflow_keeps_its_own_default():
    environ = {}
    cpu_setup.set_cpu_defaults(environ, flags=frozenset(), cores=2)
    assert "TF_ENABLE_ONEDNN_OPTS" not in environ
    assert "oneDNN off (TensorFlow's default here)" in cpu_setup.describe_cpu(
        environ, flags=frozenset())
    # TensorFlow's own rule: on by itself with AVX512_VNNI / AVX512_BF16 / AMX
    assert cpu_setup.onednn_enabled({}, flags=AVX512_BF16)
    assert not cpu_setup.onednn_enabled({}, flags=AVX2)
    capped = {"TF_ENABLE_ONEDNN_OPTS": "1", "ONEDNN_MAX_CPU_ISA": "AVX2"}
    assert "ONEDNN_MAX_CPU_ISA=AVX2" in cpu_setup.describe_cpu(capped, flags=AVX512_BF16)


def test_bfloat16_note_only_where_the_cpu_has_no_native_bfloat16(caplog):
    assert cpu_setup.native_bfloat16(AVX512_BF16, {}) and cpu_setup.bfloat16_cost_note(
        AVX512_BF16, {}) is None
    assert cpu_setup.native_bfloat16(frozenset({"amx_bf16"}), {})
    with caplog.at_level(logging.WARNING, logger="keras_elmo"):
        note = cpu_setup.warn_if_bfloat16_is_emulated(AVX2, {})
        assert cpu_setup.warn_if_bfloat16_is_emulated(AVX512_BF16, {}) is None
    assert "no native bfloat16" in note and "float32 is the faster choice" in note
    assert "several times slower than float32, most at batch 1" in note
    assert [r.getMessage() for r in caplog.records] == [f"bfloat16: {note}"]
    assert "\n" not in note
    training = cpu_setup.bfloat16_cost_note(AVX2, {}, training=True)
    assert "several times slower than float32 in training" in training
    assert "\n" not in training


@pytest.mark.parametrize("environ, why", [
    ({"TF_ENABLE_ONEDNN_OPTS": "0"}, "with oneDNN off (TF_ENABLE_ONEDNN_OPTS=0)"),
    ({"ONEDNN_MAX_CPU_ISA": "AVX2"}, "with ONEDNN_MAX_CPU_ISA=AVX2"),
    ({"ONEDNN_MAX_CPU_ISA": "avx512_core"}, "with ONEDNN_MAX_CPU_ISA=avx512_core")])
def test_an_avx512_bf16_cpu_has_no_native_bfloat16_without_onednn_or_capped_below_it(
        environ, why):
    """TensorFlow's non-oneDNN bfloat16 kernels emulate it (measured 10x slower at batch 1
    on an AVX512_BF16 EPYC with oneDNN off), and a cap below oneDNN's bfloat16 kernels
    makes TensorFlow abort on the first product: refused in one line before that."""
    assert not cpu_setup.native_bfloat16(AVX512_BF16, environ)
    assert why in cpu_setup.bfloat16_cost_note(AVX512_BF16, environ)
    if "ONEDNN_MAX_CPU_ISA" in environ:
        with pytest.raises(ValueError, match=f"bfloat16 cannot run with ONEDNN_MAX_CPU_ISA="
                                             f"{environ['ONEDNN_MAX_CPU_ISA']} on this CPU"):
            cpu_setup.check_bfloat16_runs(AVX512_BF16, environ)
    else:
        cpu_setup.check_bfloat16_runs(AVX512_BF16, environ)
    for native in ({"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16"}, {"ONEDNN_MAX_CPU_ISA": "ALL"},
                   {"ONEDNN_MAX_CPU_ISA": "AVX10_1_512_AMX"}):
        assert cpu_setup.native_bfloat16(AVX512_BF16, native)
        cpu_setup.check_bfloat16_runs(AVX512_BF16, native)
    cpu_setup.check_bfloat16_runs(AVX2, {"ONEDNN_MAX_CPU_ISA": "AVX2"})  # nothing to abort


def test_elmo_embedder_says_what_bfloat16_costs_on_such_a_cpu(tiny_model_dir, monkeypatch,
                                                              caplog):
    from keras_elmo import ElmoEmbedder

    # this process's own CPU and settings: can bfloat16 products run here at all? (not with
    # ONEDNN_MAX_CPU_ISA=AVX2 on an AVX512_BF16 CPU: TensorFlow would abort)
    runs_here = bfloat16_refusal() is None
    monkeypatch.setattr(cpu_setup, "cpu_flags", lambda cpuinfo=None: AVX2)
    with caplog.at_level(logging.WARNING, logger="keras_elmo"):
        embedder = ElmoEmbedder(options_file=tiny_model_dir.options_file,
                                weight_file=tiny_model_dir.weight_file, dtype="bfloat16")
        float32 = ElmoEmbedder(options_file=tiny_model_dir.options_file,
                               weight_file=tiny_model_dir.weight_file)
    notes = [r.getMessage() for r in caplog.records if "bfloat16" in r.getMessage()]
    assert len(notes) == 1 and "no native bfloat16" in notes[0], notes
    if not runs_here:  # the note is what this test is about; the run needs a CPU that can
        return
    # it still runs bfloat16, as asked, and close to float32
    reduced, full = (e.embed_sentence(["a", "b"]) for e in (embedder, float32))
    np.testing.assert_allclose(reduced, full, atol=0.1)


def test_training_in_mixed_bfloat16_says_what_it_costs_or_refuses_a_capped_onednn(
        tiny_corpus, monkeypatch, caplog):
    import io

    from keras_elmo.training.trainer import Trainer

    config, vocab, model_dir, _ = tiny_corpus
    config = config.replace(precision="mixed_bfloat16")
    monkeypatch.setattr(cpu_setup, "cpu_flags", lambda cpuinfo=None: AVX2)
    with caplog.at_level(logging.WARNING, logger="keras_elmo"):
        Trainer(config, vocab, model_dir, stream=io.StringIO())
        Trainer(config.replace(precision="float32"), vocab, model_dir, stream=io.StringIO())
    notes = [r.getMessage() for r in caplog.records if "bfloat16" in r.getMessage()]
    assert len(notes) == 1 and "slower than float32 in training" in notes[0], notes
    monkeypatch.setattr(cpu_setup, "cpu_flags", lambda cpuinfo=None: AVX512_BF16)
    monkeypatch.setenv("TF_ENABLE_ONEDNN_OPTS", "1")
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    with pytest.raises(ValueError, match="bfloat16 cannot run with ONEDNN_MAX_CPU_ISA=AVX2"):
        Trainer(config, vocab, model_dir, stream=io.StringIO())


@pytest.mark.parametrize("flags", [AVX2, AVX512_BF16])
def test_describe_cpu_names_the_flags_that_matter(flags):
    line = cpu_setup.describe_cpu({}, flags=flags)
    assert line.startswith("cpu: " + " ".join(f for f in cpu_setup.CPU_FLAGS if f in flags))


def test_the_readme_one_call_setup_runs_as_written(tmp_path):
    """The README's line for Python programs, taken from the README itself, run in a fresh
    process with no oneDNN variable set: it sets the documented default for this CPU."""
    import os
    import re
    import subprocess
    import sys

    readme = open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                               "README.md"), encoding="utf-8").read()
    snippet = re.search(r"`(from keras_elmo\.process\.cpu_setup import set_cpu_defaults; "
                        r"set_cpu_defaults\(\))`", readme.replace("\n  ", " ")).group(1)
    env = {k: v for k, v in os.environ.items()
           if k not in ("TF_ENABLE_ONEDNN_OPTS", "TF_NUM_INTRAOP_THREADS",
                        "TF_NUM_INTEROP_THREADS")}
    script = (snippet + "\nimport os, sys\nfrom keras_elmo.process.cpu_setup import describe_cpu\n"
              "print(os.environ.get('TF_ENABLE_ONEDNN_OPTS'))\nprint(describe_cpu())\n"
              "print('tensorflow' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    value, line, tensorflow_loaded = done.stdout.strip().splitlines()
    expected = "1" if "avx2" in cpu_setup.cpu_flags() else "None"
    assert value == expected and line.startswith("cpu: ") and "threads: " in line, done.stdout
    assert tensorflow_loaded == "False"  # it runs before TensorFlow, as documented


def test_one_row_transposes_pay_where_measured():
    """oneDNN's kernels on an AVX2-only CPU; not TensorFlow's own, not on AVX512."""
    on, off = {"TF_ENABLE_ONEDNN_OPTS": "1"}, {"TF_ENABLE_ONEDNN_OPTS": "0"}
    assert cpu_setup.one_row_transposes_pay(on, flags=AVX2)
    assert not cpu_setup.one_row_transposes_pay(off, flags=AVX2)
    assert not cpu_setup.one_row_transposes_pay({}, flags=AVX2)  # TensorFlow's AVX2 default
    assert not cpu_setup.one_row_transposes_pay(on, flags=AVX2 | {"avx512f"})
