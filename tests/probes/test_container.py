"""Tests for npuwatch.probes.container: container markers and the PID-namespace view."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npuwatch.probes.container import (
    HOST_PID_NAMESPACE_INODE,
    detect_container,
    pid_namespace_is_host,
)
from npuwatch.probes.sysroot import Sysroot
from npuwatch.probes.sysroot_builder import SysrootBuilder


@pytest.fixture
def builder(tmp_path: Path) -> SysrootBuilder:
    return SysrootBuilder(tmp_path / "root")


def test_bare_host_tree(builder):
    builder.set_host_pid_namespace(True)
    info = detect_container(builder.sysroot())
    assert not info.in_container
    assert info.evidence == ()
    assert info.runtime is None
    assert info.host_pid_namespace is True
    assert info.pid_namespace == f"pid:[{HOST_PID_NAMESPACE_INODE}]"


def test_empty_tree_knows_nothing(tmp_path):
    info = detect_container(Sysroot(tmp_path, environ={}))
    assert not info.in_container
    assert info.host_pid_namespace is None
    assert info.pid_namespace is None


@pytest.mark.parametrize(
    ("kind", "marker"),
    [
        ("docker", "/.dockerenv exists"),
        ("podman", "/run/.containerenv exists"),
        ("kubernetes", "KUBERNETES_SERVICE_HOST is set"),
        ("containerd", "/proc/1/cgroup mentions containerd"),
        ("cri-o", "/proc/1/cgroup mentions crio"),
    ],
)
def test_each_runtime_leaves_evidence(builder, kind, marker):
    builder.mark_container(kind)
    info = detect_container(builder.sysroot())
    assert info.in_container
    assert marker in info.evidence
    assert info.runtime == kind
    assert info.host_pid_namespace is False


def test_kubernetes_from_environment_alone(tmp_path):
    info = detect_container(Sysroot(tmp_path, environ={"KUBERNETES_SERVICE_HOST": "10.0.0.1"}))
    assert info.in_container
    assert info.evidence == ("KUBERNETES_SERVICE_HOST is set",)
    assert info.runtime == "kubernetes"


def test_cgroup_v1_docker_path(builder):
    builder.write_file("/proc/1/cgroup", "12:pids:/docker/abc\n11:memory:/docker/abc\n")
    info = detect_container(builder.sysroot())
    assert info.evidence == ("/proc/1/cgroup mentions docker",)
    assert info.runtime == "docker"


def test_private_cgroup_namespace_is_no_evidence(builder):
    builder.write_file("/proc/1/cgroup", "0::/\n")
    builder.set_host_pid_namespace(True)
    assert not detect_container(builder.sysroot()).in_container


def test_host_pid_container_still_in_container(builder):
    # docker run --pid=host / Kubernetes hostPID: true: npu-smi's PIDs are visible here.
    builder.mark_container("docker", host_pid=True)
    info = detect_container(builder.sysroot())
    assert info.in_container
    assert info.host_pid_namespace is True


def test_private_pid_namespace_alone_is_evidence(builder):
    builder.set_host_pid_namespace(False)
    info = detect_container(builder.sysroot())
    assert info.in_container
    assert info.host_pid_namespace is False
    assert info.evidence == ("PID namespace pid:[4026532513] is not the host's",)


def test_container_variable(tmp_path):
    info = detect_container(Sysroot(tmp_path, environ={"container": "podman"}))
    assert info.evidence == ("container=podman is set",)
    assert info.runtime == "podman"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("pid:[4026531836]", True),
        ("pid:[4026532513]", False),
        ("pid:[1]", False),
        ("net:[4026531836]", None),
        ("pid:[]", None),
        ("garbage", None),
        ("", None),
        (None, None),
    ],
)
def test_pid_namespace_is_host(text, expected):
    assert pid_namespace_is_host(text) is expected


def test_live_machine_does_not_raise():
    info = detect_container(Sysroot("/"))
    assert isinstance(info.in_container, bool)
    expected = pid_namespace_is_host(os.readlink("/proc/self/ns/pid"))
    assert info.host_pid_namespace is expected


def test_unknown_kind_is_a_programming_error(builder):
    with pytest.raises(ValueError, match="unknown container kind"):
        builder.mark_container("lxd")


_link_text = st.text(
    alphabet=st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)),
    min_size=1,
    max_size=60,
)


@settings(max_examples=50, deadline=None)
@given(st.binary(max_size=300), _link_text, st.dictionaries(st.text(max_size=5), st.text()))
def test_garbage_never_raises(cgroup, link_text, environ):
    with tempfile.TemporaryDirectory() as folder:
        builder = SysrootBuilder(Path(folder))
        builder.write_file("/proc/1/cgroup", cgroup)
        builder.path("/proc/self/ns").mkdir(parents=True)
        os.symlink(link_text, builder.path("/proc/self/ns/pid"))
        info = detect_container(Sysroot(folder, environ=environ))
        assert info.in_container == bool(info.evidence)
        assert info.host_pid_namespace in (True, False, None)
