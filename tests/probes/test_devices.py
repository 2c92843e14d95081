"""Tests for npuwatch.probes.devices: the /dev inventory, its ID parsing and access checks."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npuwatch.probes.devices import DEV_DIR, MANAGER_NODES, scan_dev
from npuwatch.probes.pci import scan_pci
from npuwatch.probes.sysroot import Sysroot
from npuwatch.probes.sysroot_builder import SysrootBuilder

STATIC_TREE = Path(__file__).resolve().parents[1] / "data" / "sysroot" / "910b-x2"


@pytest.fixture
def builder(tmp_path: Path) -> SysrootBuilder:
    return SysrootBuilder(tmp_path / "root")


class LiveLikeSysroot(Sysroot):
    """A tree that claims to be the live machine, to test the live-root char-device rule."""

    @property
    def is_live(self) -> bool:
        return True

    def path(self, absolute):
        return self.root / str(absolute).lstrip("/")


def test_eight_chips_and_managers(builder):
    builder.add_dev_nodes(range(8))
    nodes = scan_dev(builder.sysroot())
    assert nodes.davinci_ids == tuple(range(8))
    assert nodes.has_davinci_manager and nodes.has_devmm_svm and nodes.has_hisi_hdc
    assert not nodes.has_davinci_manager_docker
    assert nodes.missing_managers == ()
    assert nodes.reason is None


def test_davinci_manager_is_not_a_chip_and_ten_to_fifteen_are(builder):
    # Ray's glob "davinci?" misses davinci10-15 on A3; "davinci*" catches davinci_manager.
    builder.add_dev_nodes(range(16), extra=["davinci_manager_docker"])
    nodes = scan_dev(builder.sysroot())
    assert nodes.davinci_ids == tuple(range(16))
    assert nodes.has_davinci_manager_docker
    assert "davinci_manager" in nodes.nodes


def test_names_that_only_look_like_chips(builder):
    builder.add_dev_nodes([2], managers=False)
    for name in ("davinci", "davinci_x", "davinci1a", "davinci\u0663", "xdavinci4", "davinci-5"):
        builder.write_file(f"/dev/{name}", "")
    assert scan_dev(builder.sysroot()).davinci_ids == (2,)


def test_vnpu_nodes(builder):
    builder.add_dev_nodes([0], vdavinci_ids=[101, 100])
    nodes = scan_dev(builder.sysroot())
    assert nodes.davinci_ids == (0,)
    assert nodes.vdavinci_ids == (100, 101)


def test_missing_managers_are_listed(builder):
    builder.add_dev_nodes([0, 1], managers=False)
    nodes = scan_dev(builder.sysroot())
    assert nodes.missing_managers == MANAGER_NODES
    assert not nodes.has_davinci_manager
    assert nodes.node("davinci_manager") is None


def test_container_view_sees_all_functions_but_one_node(builder):
    for bus in ("c1", "c2", "81", "82", "01", "02", "41", "42"):
        builder.add_pci_function(f"0000:{bus}:00.0", 0xD802)
    builder.add_dev_nodes([3])
    builder.mark_container("docker")
    sysroot = builder.sysroot()
    assert scan_pci(sysroot).chip_count == 8  # sysfs is the host's, not filtered
    assert scan_dev(sysroot).davinci_ids == (3,)  # /dev/davinci3 keeps its physical ID


def test_owner_group_and_mode(builder):
    builder.add_dev_nodes([0], mode=0o640)
    uid, gid = os.getuid(), os.getgid()
    builder.write_file("/etc/passwd", f"HwHiAiUser:x:{uid}:{gid}::/home/HwHiAiUser:/bin/bash\n")
    builder.write_file("/etc/group", f"HwHiAiUser:x:{gid}:\n")
    node = scan_dev(builder.sysroot()).node("davinci0")
    assert node is not None
    assert (node.owner, node.group) == ("HwHiAiUser", "HwHiAiUser")
    assert (node.uid, node.gid) == (uid, gid)
    assert node.mode == 0o640 and node.mode_text == "640"
    assert node.path == "/dev/davinci0"
    assert node.usable and not node.is_char_device  # a regular file stands in for a tree
    assert node.can_read_write  # the owner has rw


def test_a_tree_names_owners_from_its_own_files_only(builder):
    # A tree is another machine: a UID its /etc/passwd does not name has no name there, whatever
    # this host calls it (issue 29 item 5).
    builder.add_dev_nodes([0])
    node = scan_dev(builder.sysroot()).node("davinci0")
    assert node is not None and node.owner is None and node.group is None
    st = os.stat(builder.path("/dev/davinci0"))
    builder.write_file("/etc/passwd", f"HwHiAiUser:x:{st.st_uid}:{st.st_gid}::/home/HwHiAiUser:/bin/sh\n")
    builder.write_file("/etc/group", f"HwHiAiUser:x:{st.st_gid}:\n")
    node = scan_dev(builder.sysroot()).node("davinci0")
    assert node is not None and (node.owner, node.group) == ("HwHiAiUser", "HwHiAiUser")


@pytest.mark.skipif(os.geteuid() == 0, reason="root can open any file")
def test_unreadable_node_is_reported(builder):
    builder.add_dev_nodes([0, 1], mode=0o600)
    os.chmod(builder.path("/dev/davinci1"), 0o000)
    nodes = scan_dev(builder.sysroot())
    assert [n.name for n in nodes.inaccessible] == ["davinci1"]


def test_directory_in_place_of_a_node_is_not_usable(builder):
    # docker creates a directory when asked to bind-mount a device path the host lacks.
    builder.add_dev_nodes([0])
    builder.path("/dev/davinci1").mkdir()
    nodes = scan_dev(builder.sysroot())
    assert nodes.davinci_ids == (0,)
    assert nodes.node("davinci1").problem == "is a directory, not a character device"


def test_live_root_requires_char_devices(builder):
    builder.add_dev_nodes([0])  # regular files
    os.symlink("/dev/null", builder.path("/dev/davinci1"))  # a real char device
    nodes = scan_dev(LiveLikeSysroot(builder.root))
    assert nodes.davinci_ids == (1,)
    assert nodes.node("davinci1").is_char_device
    assert "regular file" in (nodes.node("davinci0").problem or "")
    assert nodes.missing_managers == MANAGER_NODES


def test_dangling_link_is_reported(builder):
    builder.path("/dev").mkdir(parents=True)
    os.symlink("nowhere", builder.path("/dev/davinci0"))
    node = scan_dev(builder.sysroot()).node("davinci0")
    assert node is not None and not node.usable
    assert "cannot stat" in (node.problem or "")


def test_no_dev_gives_reason(tmp_path):
    nodes = scan_dev(Sysroot(tmp_path))
    assert nodes.davinci_ids == ()
    assert f"{DEV_DIR} is missing" == nodes.reason


def test_static_910b_x2_tree():
    nodes = scan_dev(Sysroot(STATIC_TREE))
    assert nodes.davinci_ids == (0, 1)
    assert nodes.missing_managers == ()


_names = st.text(
    alphabet=st.characters(blacklist_characters="/\x00", blacklist_categories=("Cs",)),
    min_size=1,
    max_size=40,
).filter(lambda n: n not in (".", "..") and len(n.encode("utf-8")) < 200)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.one_of(_names, st.from_regex(r"\Adavinci[0-9]{1,12}\Z")), max_size=8))
def test_any_names_in_dev_never_raise(names):
    with tempfile.TemporaryDirectory() as folder:
        builder = SysrootBuilder(Path(folder))
        builder.add_dev_nodes([], managers=False)
        for name in names:
            builder.write_file(f"/dev/{name}", "")
        nodes = scan_dev(builder.sysroot())
        assert all(isinstance(n, int) and n >= 0 for n in nodes.davinci_ids)
