"""Provides SysrootBuilder: writes a fake machine (sysfs, /dev, install files) for tests, demos.

One job a module: ``tree`` (``TreeWriter``: files and relative links), ``pci`` (PCI functions in
sysfs), ``host`` (``/dev``, PID namespace, container markers), ``installs`` (driver, CANN, Python
packages, loadable libraries); ``builder`` joins them into ``SysrootBuilder``.
"""

from npuwatch.probes.sysroot_builder.builder import SysrootBuilder
from npuwatch.probes.sysroot_builder.host import CONTAINER_PID_NAMESPACE_INODE
from npuwatch.probes.sysroot_builder.installs import (
    CANN_LIBRARIES,
    DRIVER_LIBRARIES,
    KERNEL_DIR,
    PYTHON_SITE,
    loadable_library,
)
from npuwatch.probes.sysroot_builder.tree import Content, MachinePath

__all__ = [
    "CANN_LIBRARIES",
    "CONTAINER_PID_NAMESPACE_INODE",
    "DRIVER_LIBRARIES",
    "KERNEL_DIR",
    "PYTHON_SITE",
    "Content",
    "MachinePath",
    "SysrootBuilder",
    "loadable_library",
]
