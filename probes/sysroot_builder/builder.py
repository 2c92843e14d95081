"""Provides SysrootBuilder: writes a fake machine (sysfs, /dev, install files) for tests, demos."""

from __future__ import annotations

from npuwatch.probes.sysroot_builder.host import HostTree
from npuwatch.probes.sysroot_builder.installs import InstallTree
from npuwatch.probes.sysroot_builder.pci import PciTree


class SysrootBuilder(PciTree, HostTree, InstallTree):
    """Writes one simulated machine under ``root``: every link relative, so a tree can be copied.

    ``environ`` collects the machine's environment (``KUBERNETES_SERVICE_HOST``, a sourced CANN);
    ``sysroot()`` hands out a ``Sysroot`` with both.
    """
