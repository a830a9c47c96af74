"""`keras_elmo.process.cpu_setup.usable_cores`: a container's CPU quota (cgroup v1 and v2),
read from a fake tree under `tmp_path` standing in for "/"; the affinity is faked at 64
cores, a `docker run --cpus=2` host's."""

import logging
import os
import signal
import subprocess
import sys

import pytest

from keras_elmo.process import cpu_quota, cpu_setup

HOST_CORES = 64
#: /proc/self/mountinfo lines of a cgroup v2 host and of a v1 container (docker, without a
#: cgroup namespace: the mount's root is the container's own cgroup).
V2_MOUNT = ("30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 "
            "cgroup2 rw,nsdelegate,memory_recursiveprot\n")
V1_MOUNT = ("41 35 0:36 /docker/abc /sys/fs/cgroup/cpu,cpuacct ro,nosuid,nodev,noexec,relatime "
            "master:17 - cgroup cgroup rw,cpu,cpuacct\n")


@pytest.fixture(autouse=True)
def host_of_64_cores(monkeypatch):
    monkeypatch.setattr(cpu_setup, "affinity_cores", lambda: HOST_CORES)
    monkeypatch.delenv(cpu_quota.CGROUP_ROOT_VARIABLE, raising=False)


def _tree(root, cgroup, mountinfo, files):
    """Writes /proc/self/cgroup, /proc/self/mountinfo and `files` (path -> text) under
    `root`; returns it as a str."""
    files = {"proc/self/cgroup": cgroup, "proc/self/mountinfo": mountinfo, **files}
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, encoding="utf-8")
    return str(root)


def _v2(root, cpu_max, cgroup="/"):
    """A cgroup v2 tree: the process in `cgroup`, `cpu_max` its cpu.max's text."""
    return _tree(root, f"0::{cgroup}\n", V2_MOUNT,
                 {f"sys/fs/cgroup{cgroup.rstrip('/')}/cpu.max": cpu_max + "\n"})


def _v1(root, quota, period="100000"):
    """A cgroup v1 docker container (hybrid: the unified hierarchy holds no controller)."""
    cgroup = "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/docker/abc\n"
    return _tree(root, cgroup, V1_MOUNT + V2_MOUNT.replace("/sys/fs/cgroup ", "/unified "),
                 {"sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": quota + "\n",
                  "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": period + "\n"})


def test_v2_quota_of_two_cores_on_a_64_core_host(tmp_path):
    root = _v2(tmp_path, "200000 100000", cgroup="/system.slice/docker-abc.scope")
    assert cpu_quota.cpu_quota(root) == 2.0
    assert cpu_setup.usable_cores(root) == 2
    assert cpu_setup.describe_cores(root) == "2 cores: CPU quota 2.0 of 64 on this host"


def test_v1_quota_of_two_cores(tmp_path):
    root = _v1(tmp_path, "200000")
    assert cpu_quota.cpu_quota(root) == 2.0
    assert cpu_setup.usable_cores(root) == 2


def test_v1_minus_one_is_no_quota(tmp_path):
    root = _v1(tmp_path, "-1")
    assert cpu_quota.cpu_quota(root) is None
    assert cpu_setup.usable_cores(root) == HOST_CORES
    assert cpu_setup.describe_cores(root) == "64 cores"


def test_v2_max_is_no_quota(tmp_path):
    assert cpu_quota.cpu_quota(_v2(tmp_path, "max 100000")) is None
    assert cpu_setup.usable_cores(str(tmp_path)) == HOST_CORES


def test_a_quota_above_the_affinity_leaves_the_affinity(tmp_path):
    root = _v2(tmp_path, "12800000 100000")  # 128 cores' worth
    assert cpu_setup.usable_cores(root) == HOST_CORES
    assert cpu_setup.describe_cores(root) == (
        "64 cores: the CPU affinity, under a CPU quota of 128.0")


@pytest.mark.parametrize("cpu_max, cores, described", [
    ("150000 100000", 2, "2 cores: CPU quota 1.5 of 64 on this host"),
    ("50000 100000", 1, "1 core: CPU quota 0.5 of 64 on this host"),
    ("1000 100000", 1, "1 core: CPU quota 0.01 of 64 on this host"),
])
def test_a_fractional_quota_is_rounded_up(tmp_path, cpu_max, cores, described):
    root = _v2(tmp_path, cpu_max)
    assert cpu_setup.usable_cores(root) == cores
    assert cpu_setup.describe_cores(root) == described


@pytest.mark.parametrize("parent, child, quota", [
    ("100000 100000", "300000 100000", 1.0),  # the parent's limit binds its children
    ("max 100000", "300000 100000", 3.0),
    ("400000 100000", "250000 50000", 4.0),   # periods differ: compared as cores
])
def test_nested_v2_limits_give_the_smallest(tmp_path, parent, child, quota):
    root = _v2(tmp_path, child, cgroup="/kubepods/pod1/ctr")
    (tmp_path / "sys/fs/cgroup/kubepods/cpu.max").write_text(parent, encoding="utf-8")
    assert cpu_quota.cpu_quota(root) == quota


def test_v2_without_mountinfo_reads_sys_fs_cgroup(tmp_path):
    root = _v2(tmp_path, "300000 100000", cgroup="/a")
    (tmp_path / "proc/self/mountinfo").unlink()
    assert cpu_quota.cpu_quota(root) == 3.0


def test_a_v1_mount_at_the_hierarchy_root_is_walked_from_the_process_cgroup(tmp_path):
    base = "sys/fs/cgroup/cpu,cpuacct"
    root = _tree(tmp_path, "4:cpu,cpuacct:/docker/abc\n", V1_MOUNT.replace("/docker/abc", "/"),
                 {f"{base}/docker/abc/cpu.cfs_quota_us": "-1\n",
                  f"{base}/docker/abc/cpu.cfs_period_us": "100000\n",
                  f"{base}/docker/cpu.cfs_quota_us": "150000\n",
                  f"{base}/docker/cpu.cfs_period_us": "100000\n"})
    assert cpu_quota.cpu_quota(root) == 1.5


def test_mountinfo_escapes_are_undone(tmp_path):
    root = _tree(tmp_path, "0::/\n", V2_MOUNT.replace("/sys/fs/cgroup", r"/cg\040root"),
                 {"cg root/cpu.max": "200000 100000\n"})
    assert cpu_quota.cpu_quota(root) == 2.0


def test_no_cgroup_files_is_no_quota(tmp_path):
    assert cpu_quota.cpu_quota(str(tmp_path)) is None
    assert cpu_setup.usable_cores(str(tmp_path)) == HOST_CORES


def test_an_unreadable_file_is_no_quota_without_a_warning(tmp_path, caplog):
    root = _tree(tmp_path, "0::/\n", V2_MOUNT, {})
    (tmp_path / "sys/fs/cgroup/cpu.max").mkdir(parents=True)  # open() fails: IsADirectory
    with caplog.at_level(logging.WARNING, logger="keras_elmo"):
        assert cpu_setup.usable_cores(root) == HOST_CORES
    assert not caplog.records


@pytest.mark.parametrize("version, text, expected", [
    (2, "two 100000", '"QUOTA PERIOD" or "max PERIOD"'),
    (2, "200000 0", '"QUOTA PERIOD" or "max PERIOD"'),
    (2, "200000", '"QUOTA PERIOD" or "max PERIOD"'),
    (2, "max 100000 extra", '"QUOTA PERIOD" or "max PERIOD"'),
    (1, "0", "microseconds > 0, or -1 for no quota"),
    (1, "-2", "microseconds > 0, or -1 for no quota"),
    (1, "2.5e5", "microseconds > 0, or -1 for no quota"),
])
def test_a_malformed_file_is_no_quota_with_one_warning_that_quotes_it(tmp_path, caplog, version,
                                                                      text, expected):
    root = _v2(tmp_path, text) if version == 2 else _v1(tmp_path, text)
    with caplog.at_level(logging.WARNING, logger="keras_elmo"):
        assert cpu_setup.usable_cores(root) == HOST_CORES
        assert cpu_setup.usable_cores(root) == HOST_CORES  # warned once, not twice
    name = "cpu.max" if version == 2 else "cpu.cfs_quota_us"
    assert [record.getMessage() for record in caplog.records] == [
        f"CPU quota: {tmp_path}/sys/fs/cgroup{'/cpu,cpuacct' if version == 1 else ''}/{name} "
        f"holds {text!r}; expected {expected}{' (microseconds)' if version == 2 else ''}: "
        "read as no quota"]


def test_a_malformed_v1_period_is_no_quota(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="keras_elmo"):
        assert cpu_quota.cpu_quota(_v1(tmp_path, "200000", period="0")) is None
    assert "cpu.cfs_period_us holds '0'; expected microseconds > 0" in caplog.text


def test_the_variable_points_the_default_at_a_fake_tree(tmp_path, monkeypatch):
    monkeypatch.setenv(cpu_quota.CGROUP_ROOT_VARIABLE, _v2(tmp_path, "200000 100000"))
    assert cpu_setup.usable_cores() == 2
    assert cpu_setup.default_thread_layout() == (1, 2)
    assert cpu_setup.describe_thread_layout({"TF_NUM_INTRAOP_THREADS": "1",
                                             "TF_NUM_INTEROP_THREADS": "2"}) == (
        "threads: 1 per op, 2 ops at once (of 2 cores: CPU quota 2.0 of 64 on this host)")


@pytest.mark.slow
def test_the_train_start_up_line_under_docker_cpus_2(tmp_path):
    """`keras-elmo train` in a subprocess, its cgroup tree faked (`--cpus=2`) and its
    affinity 64 cores: the start-up line says 2 cores and why; the run is stopped there."""
    (tmp_path / "ok.txt").write_text("a b\nb a\n", encoding="utf-8")
    (tmp_path / "vocab.txt").write_text("<S>\n</S>\n<UNK>\na\nb\n", encoding="utf-8")
    env = {name: value for name, value in os.environ.items() if not name.startswith("TF_NUM_")}
    env[cpu_quota.CGROUP_ROOT_VARIABLE] = _v2(tmp_path / "fake", "200000 100000",
                                               cgroup="/system.slice/docker-abc.scope")
    code = ("import os, sys; os.sched_getaffinity = lambda pid: set(range(64)); "
            "from keras_elmo.cli.main import console_main; sys.exit(console_main(sys.argv[1:]))")
    command = [sys.executable, "-c", code, "train", str(tmp_path / "run"), "--train",
               str(tmp_path / "ok.txt"), "--vocab", str(tmp_path / "vocab.txt"), "--size",
               "tiny", "--max-steps", "1"]
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    try:
        lines = []
        for line in process.stdout:
            lines.append(line)
            if line.startswith("training "):
                break
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=60)
    assert lines and lines[-1].startswith("training "), "".join(lines)
    assert "; threads: 1 per op, 2 ops at once (of 2 cores: CPU quota 2.0 of 64 on this host);" \
        in lines[-1]
