"""Holds the code tables as data: ACL ``aclError``, aclnn status, CANN log codes, torch_npu ERR kinds.

Source: docs/reference/runtime-and-doctor.md §9.1 (Ascend/pytorch
``torch_npu/csrc/core/npu/NPUErrorCodes.h``; hiascend aclError pages ``aclcppdevg_03_6666``,
``aclcppdevg_03_1345``), §9.2 (hiascend aclnn status codes), §9.3 and §4 (Ascend/pytorch
``torch_npu/utils/_error_code.py``), and the fixes users found in §10.  Each row is
``code: (macro name, meaning, fix)``; a name is spelt as the header spells it (``DEVIDE`` sic).
"""

from __future__ import annotations

from typing import Dict, Tuple

_DOCTOR = "run `npuwatch doctor` to see which part of the environment is wrong"
_BUG = "a bad argument reached the runtime: please report it to npuwatch with this output"
_ENV = (
    "source the CANN environment (`source /usr/local/Ascend/ascend-toolkit/set_env.sh`, or "
    "`/usr/local/Ascend/cann/set_env.sh` from CANN 8.5) in this shell or service, then "
    "`npuwatch doctor`"
)
_DEVICE_START = (
    "look at the chip: `npu-smi info` (health, processes holding it); stop stale processes; inside a "
    "container use logical IDs 0..n-1 in ASCEND_RT_VISIBLE_DEVICES; check driver and CANN versions "
    "match (`npuwatch doctor`); a hung chip needs a reset as root "
    "(`npu-smi set -t reset -i <NPU ID> -c <chip>`, which kills every process on the card) or a reboot"
)
_OOM = (
    "device memory is held by other processes: see them with `npu-smi info`, stop them, or run the "
    "self-test on an idle chip"
)
_LEAK = "a process is leaking runtime resources: stop stale processes on this chip (`npu-smi info`)"
_DRIVER = (
    "a driver or firmware fault: check `dmesg` and the plog (~/ascend/log), install a matching "
    "driver/firmware pair, then reset the chip (`npu-smi set -t reset …` as root) or reboot"
)
_HW = (
    "a hardware memory error: drain the node, check `npu-smi info -t health -i <NPU ID>` and contact "
    "the vendor"
)
_HUNG = (
    "the device or a peer stopped answering: check `npu-smi info` health and other jobs on the chip; "
    "reset the chip if it stays stuck"
)
_OLD_DRIVER = "the driver (HDK) is too old for this CANN: upgrade the driver to the version CANN's notes name"
_KERNELS = (
    "install the operator kernels for this SoC at the toolkit's version: `Ascend-cann-kernels-<soc>` up "
    "to CANN 8.3, the ops packages from CANN 8.5; they land in "
    "<toolkit>/opp/built-in/op_impl/ai_core/tbe/kernel/<soc>/"
)
_OP_BUG = "a kernel faulted on valid input: report it upstream; `ASCEND_LAUNCH_BLOCKING=1` localises it"

#: ACL ``aclError`` codes (§9.1).
ACL_CODES: Dict[int, Tuple[str, str, str]] = {
    100000: ("ACL_ERROR_INVALID_PARAM", "an argument to the runtime was invalid", _BUG),
    100001: ("ACL_ERROR_UNINITIALIZE", "the runtime was used before acl.init", _BUG),
    100002: (
        "ACL_ERROR_REPEAT_INITIALIZE",
        "the runtime was already initialised (harmless)",
        "nothing to do",
    ),
    100003: ("ACL_ERROR_INVALID_FILE", "a config or model file is invalid", _DOCTOR),
    100024: ("ACL_ERROR_OP_NOT_FOUND", "no compiled single-op model for this operator", _KERNELS),
    100025: ("ACL_ERROR_OP_LOAD_FAILED", "an operator could not be loaded", _KERNELS),
    100026: ("ACL_ERROR_UNSUPPORTED_DATA_TYPE", "the data type is not supported here", _BUG),
    100037: ("ACL_ERROR_REPEAT_FINALIZE", "the runtime was already finalised", _BUG),
    100039: (
        "ACL_ERROR_COMPILING_STUB_MODE",
        "the stub libraries were loaded instead of the real runtime",
        "remove the toolkit's `stub` folders from LD_LIBRARY_PATH and source set_env.sh again",
    ),
    148049: (
        "ACL_ERROR_INVALID_OPP_PATH",
        "ASCEND_OPP_PATH is unset or wrong",
        _ENV,
    ),
    107000: ("ACL_ERROR_RT_PARAM_INVALID", "the runtime rejected a parameter", _BUG),
    107001: (
        "ACL_ERROR_RT_INVALID_DEVICEID",
        "no such device: the ID is not below the visible device count",
        "use a logical ID below the device count; inside a container ASCEND_RT_VISIBLE_DEVICES counts from 0",
    ),
    107002: ("ACL_ERROR_RT_CONTEXT_NULL", "this thread has no context (set_device not called in it)", _BUG),
    107003: ("ACL_ERROR_RT_STREAM_CONTEXT", "the stream belongs to another context", _BUG),
    107006: ("ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID", "an event has no valid timestamp", _BUG),
    107007: ("ACL_ERROR_RT_EVENT_TIMESTAMP_REVERSAL", "event timestamps run backwards", _DRIVER),
    107008: ("ACL_ERROR_RT_ADDR_UNALIGNED", "a memory address is not aligned", _BUG),
    107017: ("ACL_ERROR_RT_INVALID_HANDLE", "an invalid runtime handle was used", _BUG),
    107019: ("ACL_ERROR_RT_WAIT_TIMEOUT", "a wait timed out", _HUNG),
    107020: ("ACL_ERROR_RT_TASK_TIMEOUT", "a task timed out on the device", _HUNG),
    107022: ("ACL_ERROR_RT_DEVICE_TASK_ABORT", "the device's tasks were aborted", _HUNG),
    107023: ("ACL_ERROR_RT_STREAM_ABORT", "the stream was aborted", _HUNG),
    200000: ("ACL_ERROR_BAD_ALLOC", "a host or device allocation failed", _OOM),
    200001: ("ACL_ERROR_API_NOT_SUPPORT", "this API is not supported on this SoC or version", _OLD_DRIVER),
    200002: ("ACL_ERROR_INVALID_DEVICE", "the device is invalid", _DEVICE_START),
    200003: ("ACL_ERROR_MEMORY_ADDRESS_UNALIGNED", "a memory address is not aligned", _BUG),
    200004: ("ACL_ERROR_RESOURCE_NOT_MATCH", "resources do not match", _BUG),
    200005: ("ACL_ERROR_INVALID_RESOURCE_HANDLE", "an invalid resource handle was used", _BUG),
    200006: ("ACL_ERROR_FEATURE_UNSUPPORTED", "the feature is not supported", _OLD_DRIVER),
    207000: (
        "ACL_ERROR_RT_FEATURE_NOT_SUPPORT",
        "the driver or firmware is too old for this feature",
        _OLD_DRIVER,
    ),
    207001: ("ACL_ERROR_RT_MEMORY_ALLOCATION", "out of device memory", _OOM),
    207002: ("ACL_ERROR_RT_MEMORY_FREE", "freeing device memory failed", _DRIVER),
    207003: ("ACL_ERROR_RT_AICORE_OVER_FLOW", "an AI Core overflow", _OP_BUG),
    207004: (
        "ACL_ERROR_RT_NO_DEVICE",
        "no device is visible: driver absent, device nodes missing, or visibility variables hide them",
        "check /dev/davinci* and ASCEND_RT_VISIBLE_DEVICES (an empty value hides every chip); "
        "run `npuwatch doctor`",
    ),
    207005: ("ACL_ERROR_RT_RESOURCE_ALLOC_FAIL", "a runtime resource could not be allocated", _LEAK),
    207006: (
        "ACL_ERROR_RT_NO_PERMISSION",
        "no permission to open the device",
        "add the user to the HwHiAiUser group (`sudo usermod -aG HwHiAiUser $USER`, then log in again), "
        "or run the container with a matching UID; check /dev/davinci* are mode 0660",
    ),
    207007: ("ACL_ERROR_RT_NO_EVENT_RESOURCE", "no event resources left", _LEAK),
    207008: ("ACL_ERROR_RT_NO_STREAM_RESOURCE", "no stream resources left", _LEAK),
    207009: ("ACL_ERROR_RT_NO_NOTIFY_RESOURCE", "no notify resources left", _LEAK),
    207010: ("ACL_ERROR_RT_NO_MODEL_RESOURCE", "no model resources left", _LEAK),
    207018: ("ACL_ERROR_RT_DEVIDE_OOM", "out of device memory", _OOM),
    207019: (
        "ACL_ERROR_RT_FEATURE_NOT_SUPPORT_UPDATE_OP",
        "the driver is too old (needs HDK ≥ 25.0.RC1)",
        _OLD_DRIVER,
    ),
    300000: ("ACL_ERROR_STORAGE_OVER_LIMIT", "a storage limit was exceeded", "reduce the request"),
    500000: ("ACL_ERROR_INTERNAL_ERROR", "an internal runtime error", _DRIVER),
    500001: (
        "ACL_ERROR_FAILURE",
        "a generic failure, often the environment (missing Python packages CANN's compiler needs)",
        "pip install the CANN compiler's Python dependencies (decorator sympy cffi protobuf attrs pyyaml "
        "pathlib2 scipy requests psutil absl-py numpy); " + _DOCTOR,
    ),
    500002: ("ACL_ERROR_GE_FAILURE", "the graph engine failed", _DOCTOR),
    500003: ("ACL_ERROR_RT_FAILURE", "the runtime failed", _DRIVER),
    500004: ("ACL_ERROR_DRV_FAILURE", "the driver failed", _DRIVER),
    500005: ("ACL_ERROR_PROFILING_FAILURE", "profiling failed", "turn profiling off and retry"),
    507000: ("ACL_ERROR_RT_INTERNAL_ERROR", "an internal runtime error", _DRIVER),
    507001: ("ACL_ERROR_RT_TS_ERROR", "a task-scheduler error (e.g. an SDMA copy error)", _DRIVER),
    507002: ("ACL_ERROR_RT_STREAM_TASK_FULL", "the stream's task queue is full", _LEAK),
    507004: ("ACL_ERROR_RT_STREAM_NOT_COMPLETE", "the stream has not completed", _HUNG),
    507006: ("ACL_ERROR_RT_EVENT_NOT_COMPLETE", "the event has not completed", _HUNG),
    507007: ("ACL_ERROR_RT_CONTEXT_RELEASE_ERROR", "releasing the context failed", _DRIVER),
    507008: (
        "ACL_ERROR_RT_SOC_VERSION",
        "SoC version mismatch: kernels or models built for another chip",
        _KERNELS,
    ),
    507010: ("ACL_ERROR_RT_LOST_HEARTBEAT", "the device lost its heartbeat: it hung", _DEVICE_START),
    507011: ("ACL_ERROR_RT_MODEL_EXECUTE", "model execution failed", _DOCTOR),
    507012: ("ACL_ERROR_RT_REPORT_TIMEOUT", "the device's report timed out", _HUNG),
    507013: ("ACL_ERROR_RT_SYS_DMA", "a DMA error", _DRIVER),
    507014: ("ACL_ERROR_RT_AICORE_TIMEOUT", "an AI Core task timed out", _HUNG),
    507015: (
        "ACL_ERROR_RT_AICORE_EXCEPTION",
        "a kernel faulted on the AI Core (op bug or bad address)",
        _OP_BUG,
    ),
    507016: ("ACL_ERROR_RT_AICORE_TRAP_EXCEPTION", "an AI Core trap", _OP_BUG),
    507017: ("ACL_ERROR_RT_AICPU_TIMEOUT", "an AI CPU task timed out", _HUNG),
    507018: ("ACL_ERROR_RT_AICPU_EXCEPTION", "an AI CPU task faulted", _OP_BUG),
    507021: ("ACL_ERROR_RT_PROFILING_ERROR", "a profiling error", "turn profiling off and retry"),
    507022: ("ACL_ERROR_RT_IPC_ERROR", "an IPC error", _DRIVER),
    507027: ("ACL_ERROR_RT_KERNEL_LOOKUP", "the kernel is not registered", _KERNELS),
    507033: (
        "ACL_ERROR_RT_DEV_SETUP_ERROR",
        "the device failed to start: busy, hung or misconfigured",
        _DEVICE_START,
    ),
    507034: ("ACL_ERROR_RT_VECTOR_CORE_TIMEOUT", "a vector core task timed out", _HUNG),
    507035: ("ACL_ERROR_RT_VECTOR_CORE_EXCEPTION", "a vector core task faulted", _OP_BUG),
    507036: ("ACL_ERROR_RT_VECTOR_CORE_TRAP_EXCEPTION", "a vector core trap", _OP_BUG),
    # The reference names these four only as a range ("trap read/write overflow"), not one by one.
    507042: ("(trap overflow, 507042-507045)", "a read/write overflow trap on the device", _OP_BUG),
    507043: ("(trap overflow, 507042-507045)", "a read/write overflow trap on the device", _OP_BUG),
    507044: ("(trap overflow, 507042-507045)", "a read/write overflow trap on the device", _OP_BUG),
    507045: ("(trap overflow, 507042-507045)", "a read/write overflow trap on the device", _OP_BUG),
    507046: ("ACL_ERROR_RT_STREAM_SYNC_TIMEOUT", "synchronizing a stream timed out", _HUNG),
    507047: ("ACL_ERROR_RT_EVENT_SYNC_TIMEOUT", "synchronizing an event timed out", _HUNG),
    507048: ("ACL_ERROR_RT_FFTS_PLUS_TIMEOUT", "an FFTS+ task timed out", _HUNG),
    507049: ("ACL_ERROR_RT_FFTS_PLUS_EXCEPTION", "an FFTS+ task faulted", _OP_BUG),
    507051: ("ACL_ERROR_RT_SEND_MSG", "sending a message to the device failed", _DRIVER),
    507052: ("ACL_ERROR_RT_COPY_DATA", "copying data failed", _DRIVER),
    507053: ("ACL_ERROR_RT_DEVICE_MEM_ERROR", "an uncorrectable device memory error (UCE)", _HW),
    507054: ("ACL_ERROR_RT_HBM_MULTI_BIT_ECC_ERROR", "an HBM multi-bit ECC error", _HW),
    507055: ("ACL_ERROR_RT_SUSPECT_DEVICE_MEM_ERROR", "a suspected device memory error", _HW),
    507056: ("ACL_ERROR_RT_LINK_ERROR", "an HCCS/RoCE link error", _DRIVER),
    507057: ("ACL_ERROR_RT_SUSPECT_REMOTE_ERROR", "a suspected error on a remote device", _HUNG),
    507899: ("ACL_ERROR_RT_DRV_INTERNAL_ERROR", "a driver internal error", _DRIVER),
    507900: ("ACL_ERROR_RT_AICPU_INTERNAL_ERROR", "an AI CPU internal error", _DRIVER),
    507901: (
        "ACL_ERROR_RT_SOCKET_CLOSE",
        "the host↔device channel (HDC) closed: device reset or hung",
        _DEVICE_START,
    ),
    507902: ("ACL_ERROR_RT_AICPU_INFO_LOAD_RSP_ERR", "the AI CPU failed to load its info", _DRIVER),
}

#: aclnn status codes (§9.2).
ACLNN_CODES: Dict[int, Tuple[str, str, str]] = {
    161001: ("ACLNN_ERR_PARAM_NULLPTR", "a null tensor or parameter reached the operator", _BUG),
    161002: ("ACLNN_ERR_PARAM_INVALID", "the operator does not support this dtype, shape or format", _BUG),
    361001: ("ACLNN_ERR_RUNTIME_ERROR", "a runtime call inside the operator failed", _DRIVER),
    561000: (
        "ACLNN_ERR_INNER",
        "an operator-library internal error (often 'Op X does not has any binary': kernels missing)",
        _KERNELS,
    ),
    561001: ("ACLNN_ERR_INNER_INFERSHAPE_ERROR", "the operator's shape inference failed", _BUG),
    561002: (
        "ACLNN_ERR_INNER_TILING_ERROR",
        "the operator's tiling library is missing or does not match",
        "install an ops/kernels package matching the toolkit version; " + _DOCTOR,
    ),
    561003: (
        "ACLNN_ERR_INNER_FIND_KERNEL_ERROR",
        "the runtime works but the operator kernels for this SoC are not installed",
        _KERNELS,
    ),
    561101: ("ACLNN_ERR_INNER_CREATE_EXECUTOR", "the operator executor could not be created", _DOCTOR),
    561103: ("ACLNN_ERR_INNER_NULLPTR", "an internal null pointer in the operator library", _DOCTOR),
}

#: Log codes printed next to the numeric code (plog / stderr / acl.get_recent_err_msg; §9.1, §10).
LOG_CODES: Dict[str, str] = {
    "EE1001": "invalid argument (e.g. ASCEND_RT_VISIBLE_DEVICES out of range)",
    "EL0003": "invalid argument",
    "EL0004": "device memory allocation failed",
    "E30006": "OPP verification failed: the operator package does not match this toolkit",
    "E39005": "the device's TSDaemon is abnormal",
    "E39009": "device status abnormal (heartbeat lost)",
    "EZ9999": "inner error: read the lines below it",
    "EH9999": "inner error: read the lines below it",
    "EI9999": "inner error: read the lines below it",
    "EE9999": "inner error: read the lines below it",
}

#: torch_npu ``ERRssccc`` error kinds (the ``ccc`` part; Ascend/pytorch _error_code.py).
TORCH_NPU_KINDS: Dict[str, str] = {
    "001": "invalid parameter",
    "002": "invalid type",
    "003": "invalid value",
    "004": "invalid pointer",
    "005": "internal error",
    "006": "memory error",
    "007": "feature not supported",
    "008": "resource not found (CANN environment not sourced?)",
    "009": "resource unavailable",
    "010": "system call failed",
    "011": "timeout",
    "012": "permission denied",
    "100": "an ACL call failed (the ACL code is in the message)",
    "200": "an HCCL call failed",
    "300": "a GE call failed",
    "999": "application exception (read the EZ9999/EE9999 lines that follow)",
}
