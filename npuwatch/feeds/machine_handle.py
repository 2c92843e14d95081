"""Provides ``MachineHandle``: the machine a feed reads (its sysroot, npu-smi, environment, DCMI
library), in a module of its own so that opening a machine (``machine``) and wiring its chip
source (``chips``) both import it without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping, Optional

if TYPE_CHECKING:
    from npuwatch.probes.host import ProcessLookup
    from npuwatch.probes.npu_smi import NpuSmi, Withheld
    from npuwatch.probes.sysroot import Sysroot


@dataclass(frozen=True)
class MachineHandle:
    """The machine to read: its sysroot, its npu-smi and environment; ``close()`` ends a demo.

    Use it as a context manager.  ``scenario`` is the demo's name (``None`` for a real machine or
    a ``--root`` tree); ``process_lookup`` answers for a demo's simulated processes.
    """

    sysroot: Sysroot
    npu_smi_path: Optional[Path]
    environ: Mapping[str, str]
    scenario: Optional[str] = None
    process_lookup: Optional[ProcessLookup] = None
    #: The DCMI library to load: a path, ``python:<module>`` (the demo's stand-in), or ``None`` to
    #: search (the loader path, then the driver's folders under the sysroot).
    dcmi_library: Optional[str] = None
    #: What that library is when it is not the driver's own (``fake libdcmi.so (C, built with cc)``).
    dcmi_kind: Optional[str] = None
    #: The tree's npu-smi npuwatch does not run (an untrusted ``--root`` tree: ``probes.tree_trust``),
    #: and its saved ``npu-smi info`` output read instead; ``None`` when npu-smi runs as found.
    npu_smi_withheld: Optional[Withheld] = None
    _close: Callable[[], None] = field(default=lambda: None, repr=False, compare=False)

    @property
    def label(self) -> str:
        """Where chip data comes from: ``npu-smi`` or ``demo:<scenario>``."""
        return "npu-smi" if self.scenario is None else f"demo:{self.scenario}"

    def npu_smi(self, timeout_s: float, deadline: Optional[float] = None) -> NpuSmi:
        """The machine's npu-smi runner (one that explains "not found" when there is none);
        ``deadline`` (``time.monotonic()``): a one-shot's end, no call runs past it."""
        from npuwatch.probes.npu_smi import NpuSmi

        return NpuSmi(
            self.npu_smi_path, timeout_s=timeout_s, deadline=deadline, withheld=self.npu_smi_withheld
        )

    @property
    def trusted(self) -> bool:
        """Whether the machine's own programs and libraries may run (``probes.tree_trust``)."""
        from npuwatch.probes.tree_trust import runs_tree_code

        return runs_tree_code(self.sysroot.root, self.environ)

    def close(self) -> None:
        """Remove a demo's simulated machine; nothing for a real one."""
        self._close()

    def __enter__(self) -> MachineHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
