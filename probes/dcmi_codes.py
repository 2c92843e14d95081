"""Provides the DCMI return codes npu-smi prints (``ret is -8005``) with meanings and fixes.

Source: DCMI header ``dcmi_interface_api.h`` (base -8000) and the hiascend DCMI API
"return codes" page, as collected in docs/reference/driver-interfaces.md §6.6 and
runtime-and-doctor.md §9.4; container causes from vllm-ascend #2698, HAMi #1696,
cann-container-image #46.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class DcmiCode:
    """One DCMI return code: its macro name, what it means, and what to do."""

    code: int
    name: str
    meaning: str
    hint: str


_CONTAINER_NODES = (
    "in a container, pass --device /dev/davinci_manager --device /dev/devmm_svm "
    "--device /dev/hisi_hdc (and /dev/davinciN per chip) and mount /usr/local/dcmi and "
    "/usr/local/Ascend/driver/lib64 from the host; run `npuwatch doctor`"
)

DCMI_CODES = {
    c.code: c
    for c in (
        DcmiCode(
            -8001,
            "INVALID_PARAMETER",
            "invalid parameter",
            "check the -i/-c IDs against `npu-smi info -l`",
        ),
        DcmiCode(
            -8002,
            "OPER_NOT_PERMITTED",
            "operation not permitted (not root, or not in the HwHiAiUser group)",
            "run as root or add the user to the HwHiAiUser group: `sudo usermod -aG HwHiAiUser $USER`",
        ),
        DcmiCode(
            -8003,
            "MEM_OPERATE_FAIL",
            "memory operation failed in DCMI",
            "retry; if it persists run `npuwatch doctor`",
        ),
        DcmiCode(
            -8004,
            "SECURE_FUN_FAIL",
            "secure function failed inside DCMI",
            "retry; if it persists run `npuwatch doctor`",
        ),
        DcmiCode(
            -8005,
            "INNER_ERR",
            "DCMI internal error: usually missing device nodes or driver libraries in a container, "
            "a driver userland that does not match the kernel driver, or a device held by another container",
            _CONTAINER_NODES,
        ),
        DcmiCode(
            -8006,
            "TIME_OUT",
            "the device did not answer in time",
            "retry later; if it persists check `dmesg`",
        ),
        DcmiCode(
            -8007,
            "INVALID_DEVICE_ID",
            "no device with this ID",
            "list valid IDs with `npu-smi info -l`",
        ),
        DcmiCode(
            -8008,
            "DEVICE_NOT_EXIST",
            "the device does not exist",
            "check `lspci -d 19e5:` and `npuwatch doctor`",
        ),
        DcmiCode(
            -8009,
            "IOCTL_FAIL",
            "an ioctl to the kernel driver failed",
            "check the driver is loaded (`lsmod | grep drv_pcie_host`) and matches its userland",
        ),
        DcmiCode(
            -8010,
            "SEND_MSG_FAIL",
            "could not send a message to the device",
            "the device is unreachable; check health and `dmesg`",
        ),
        DcmiCode(
            -8011,
            "RECV_MSG_FAIL",
            "no reply from the device",
            "the device is unreachable; check health and `dmesg`",
        ),
        DcmiCode(
            -8012,
            "NOT_READY",
            "the device is not ready (booting or resetting)",
            "wait a few seconds and retry",
        ),
        DcmiCode(
            -8013,
            "NOT_SUPPORT_IN_CONTAINER",
            "this operation is not allowed inside a container",
            "run it on the host",
        ),
        DcmiCode(
            -8014,
            "FILE_OPERATE_FAIL",
            "a file operation inside DCMI failed",
            "check disk space and permissions",
        ),
        DcmiCode(-8015, "RESET_FAIL", "a device reset failed", "check health; a reboot may be needed"),
        DcmiCode(-8016, "ABORT_OPERATE", "the operation was aborted", "retry"),
        DcmiCode(
            -8017,
            "IS_UPGRADING",
            "a firmware upgrade is in progress",
            "wait for the upgrade to finish",
        ),
        DcmiCode(
            -8020,
            "RESOURCE_OCCUPIED",
            "the device is in use by another process or container",
            "find the owner (`npu-smi info` on the host) and stop it, or pick another device",
        ),
        DcmiCode(
            -8022,
            "PARTITION_NOT_RIGHT",
            "the device partition is not right",
            "check the vNPU / partition configuration",
        ),
        DcmiCode(
            -8023,
            "CONFIG_INFO_NOT_EXIST",
            "the configuration does not exist",
            "check the device configuration",
        ),
        DcmiCode(
            -8255,
            "NOT_SUPPORT",
            "not supported on this chip or product",
            "nothing to fix: the metric is not available here",
        ),
    )
}


def describe(code: int) -> Optional[DcmiCode]:
    """The entry for ``code`` (negative, as npu-smi prints it), if it is known."""
    return DCMI_CODES.get(code)
