"""Provides our own ctypes declarations of the DCMI C library (``libdcmi.so``): structures,
constants and the prototypes npuwatch calls.

Written from the facts in docs/reference/driver-interfaces.md §6.4–6.6 (the official header
``dcmi_interface_api.h`` of ``gitcode.com/cann/driver`` and its Apache-2.0 subsets in
``Ascend/mind-cluster`` and ``Ascend/ascend-npu-exporter``); no header is vendored.  Sizes and
offsets are LP64 (x86-64 and aarch64 Linux alike).  ``REFERENCE_LAYOUT`` restates the reference's
table so a test can compare it with ctypes and with the C compiler (the fake library exports its
``sizeof``/``offsetof``).

Output structures are never passed as themselves: ``output_buffer`` hands the library a zeroed
buffer of ``OUTPUT_BYTES`` and the fields are read from its start, so a newer library whose
structure grew (``dcmi_ecc_info`` went from 28 to 36 bytes) writes into spare room, not past
the end.  Standard library only.
"""

from __future__ import annotations

import ctypes
from typing import Any, Dict, Mapping, Tuple, Type, TypeVar

from npuwatch.probes.dcmi import records

#: Bytes given to the library for any output structure (the largest we read is 112).
OUTPUT_BYTES = 256
#: ``dcmi_get_card_list``: at most 64 cards (header).
MAX_CARDS = 64
#: ``dcmi_get_device_resource_info``: at most 32 processes per chip (910B doc).
MAX_PROCESSES = 32
#: ``dcmi_get_device_errorcode_v2``: 0..128 codes.
MAX_ERROR_CODES = 128
#: ``dcmi_get_device_errorcode_string``: >= 48 bytes, >= 256 for the full text.
ERROR_TEXT_BYTES = 256
#: ``dcmi_get_dcmi_version`` wants >= 16 bytes, ``dcmi_get_driver_version`` 64.
VERSION_BYTES = 64
#: ``dcmi_get_product_type``.
PRODUCT_TYPE_BYTES = 64

# Return codes (DCMI_ERROR_CODE_BASE -8000), §6.6.
DCMI_OK = 0
INVALID_PARAMETER = -8001
OPER_NOT_PERMITTED = -8002
INNER_ERR = -8005
TIME_OUT = -8006
DEVICE_NOT_EXIST = -8008
SEND_MSG_FAIL = -8010
RECV_MSG_FAIL = -8011
NOT_READY = -8012
NOT_SUPPORT_IN_CONTAINER = -8013
IS_UPGRADING = -8017
NOT_SUPPORT = -8255

#: ``dcmi_get_device_health``: 0 normal, 1 minor, 2 major, 3 critical; this: no such device.
HEALTH_ABSENT = records.HEALTH_ABSENT

# ``dcmi_get_device_utilization_rate`` input_type (DCMI_UTILIZATION_RATE_*).
UTIL_DDR = 1
UTIL_AICORE = 2
UTIL_AICPU = 3
UTIL_CTRLCPU = 4
UTIL_DDR_BANDWIDTH = 5
UTIL_HBM = 6
UTIL_HBM_BANDWIDTH = 10
UTIL_VECTORCORE = 12
UTIL_NPU = 13
UTIL_AICUBE = 14

# ``enum dcmi_freq_type``.
FREQ_DDR = 1
FREQ_CTRLCPU = 2
FREQ_HBM = 6
FREQ_AICORE_CURRENT = 7
FREQ_AICORE_MAX = 9
FREQ_VECTORCORE_CURRENT = 12

# ``enum dcmi_unit_type``.
UNIT_NPU = 0
UNIT_MCU = 1
UNIT_CPU = 2

# ``enum dcmi_die_type``.
DIE_NDIE = 0
DIE_VDIE = 1

# ``enum dcmi_device_type`` (ECC): 910B supports only HBM.
ECC_DDR = 0
ECC_HBM = 2


class ChipInfo(ctypes.Structure):
    """``struct dcmi_chip_info`` (100 bytes)."""

    _fields_ = [
        ("chip_type", ctypes.c_ubyte * 32),
        ("chip_name", ctypes.c_ubyte * 32),
        ("chip_ver", ctypes.c_ubyte * 32),
        ("aicore_cnt", ctypes.c_uint),
    ]


class ChipInfoV2(ctypes.Structure):
    """``struct dcmi_chip_info_v2`` (132 bytes): ``dcmi_chip_info`` plus ``npu_name``."""

    _fields_ = [*ChipInfo._fields_, ("npu_name", ctypes.c_ubyte * 32)]


class PcieInfoAll(ctypes.Structure):
    """``struct dcmi_pcie_info_all`` (64 bytes)."""

    _fields_ = [
        ("venderid", ctypes.c_uint),
        ("subvenderid", ctypes.c_uint),
        ("deviceid", ctypes.c_uint),
        ("subdeviceid", ctypes.c_uint),
        ("domain", ctypes.c_int),
        ("bdf_busid", ctypes.c_uint),
        ("bdf_deviceid", ctypes.c_uint),
        ("bdf_funcid", ctypes.c_uint),
        ("reserve", ctypes.c_ubyte * 32),
    ]


class BoardInfo(ctypes.Structure):
    """``struct dcmi_board_info`` (16 bytes)."""

    _fields_ = [
        ("board_id", ctypes.c_uint),
        ("pcb_id", ctypes.c_uint),
        ("bom_id", ctypes.c_uint),
        ("slot_id", ctypes.c_uint),
    ]


class DieId(ctypes.Structure):
    """``struct dcmi_die_id`` (20 bytes): five words, printed ``%08X`` joined by ``-``."""

    _fields_ = [("soc_die", ctypes.c_uint * 5)]


class HbmInfo(ctypes.Structure):
    """``struct dcmi_hbm_info`` (32 bytes): sizes in MB, temperature °C, bandwidth %."""

    _fields_ = [
        ("memory_size", ctypes.c_ulonglong),
        ("freq", ctypes.c_uint),
        ("memory_usage", ctypes.c_ulonglong),
        ("temp", ctypes.c_int),
        ("bandwith_util_rate", ctypes.c_uint),  # sic: the header's spelling
    ]


class MemoryInfoV3(ctypes.Structure):
    """``struct dcmi_get_memory_info_stru`` (112 bytes on LP64; the header's "96" is wrong)."""

    _fields_ = [
        ("memory_size", ctypes.c_ulonglong),  # MB
        ("memory_available", ctypes.c_ulonglong),  # MB: free + free huge pages
        ("freq", ctypes.c_uint),
        ("hugepagesize", ctypes.c_ulong),  # KB
        ("hugepages_total", ctypes.c_ulong),
        ("hugepages_free", ctypes.c_ulong),
        ("utiliza", ctypes.c_uint),  # %
        ("reserve", ctypes.c_ubyte * 60),
    ]


class MemoryInfoV2(ctypes.Structure):
    """``struct dcmi_memory_info`` (16 bytes): used = size × utiliza / 100."""

    _fields_ = [
        ("memory_size", ctypes.c_ulonglong),
        ("freq", ctypes.c_uint),
        ("utiliza", ctypes.c_uint),
    ]


class ProcMemInfo(ctypes.Structure):
    """``struct dcmi_proc_mem_info`` (16 bytes): a PID and its device memory in bytes."""

    _fields_ = [("proc_id", ctypes.c_int), ("proc_mem_usage", ctypes.c_ulong)]


class EccInfo(ctypes.Structure):
    """``struct dcmi_ecc_info`` (28 bytes in the official header; newer ones append two counters)."""

    _fields_ = [
        ("enable_flag", ctypes.c_int),
        ("single_bit_error_cnt", ctypes.c_uint),
        ("double_bit_error_cnt", ctypes.c_uint),
        ("total_single_bit_error_cnt", ctypes.c_uint),
        ("total_double_bit_error_cnt", ctypes.c_uint),
        ("single_bit_isolated_pages_cnt", ctypes.c_uint),
        ("double_bit_isolated_pages_cnt", ctypes.c_uint),
    ]


class MultiUtilizationInfo(ctypes.Structure):
    """``struct dcmi_multi_utilization_info`` (48 bytes)."""

    _fields_ = [
        ("aic_util", ctypes.c_uint),
        ("aiv_util", ctypes.c_uint),
        ("aicore_util", ctypes.c_uint),
        ("npu_util", ctypes.c_uint),
        ("reserved", ctypes.c_uint * 8),
    ]


#: Every structure we marshal, by its C name.
STRUCTS: Dict[str, Type[ctypes.Structure]] = {
    "dcmi_chip_info": ChipInfo,
    "dcmi_chip_info_v2": ChipInfoV2,
    "dcmi_pcie_info_all": PcieInfoAll,
    "dcmi_board_info": BoardInfo,
    "dcmi_die_id": DieId,
    "dcmi_hbm_info": HbmInfo,
    "dcmi_get_memory_info_stru": MemoryInfoV3,
    "dcmi_memory_info": MemoryInfoV2,
    "dcmi_proc_mem_info": ProcMemInfo,
    "dcmi_ecc_info": EccInfo,
    "dcmi_multi_utilization_info": MultiUtilizationInfo,
}

#: The reference's LP64 table (driver-interfaces.md §6.5): size, then each field's offset.
REFERENCE_LAYOUT: Mapping[str, Tuple[int, Mapping[str, int]]] = {
    "dcmi_chip_info": (100, {"chip_type": 0, "chip_name": 32, "chip_ver": 64, "aicore_cnt": 96}),
    "dcmi_chip_info_v2": (
        132,
        {"chip_type": 0, "chip_name": 32, "chip_ver": 64, "aicore_cnt": 96, "npu_name": 100},
    ),
    "dcmi_pcie_info_all": (
        64,
        {
            "venderid": 0,
            "subvenderid": 4,
            "deviceid": 8,
            "subdeviceid": 12,
            "domain": 16,
            "bdf_busid": 20,
            "bdf_deviceid": 24,
            "bdf_funcid": 28,
            "reserve": 32,
        },
    ),
    "dcmi_board_info": (16, {"board_id": 0, "pcb_id": 4, "bom_id": 8, "slot_id": 12}),
    "dcmi_die_id": (20, {"soc_die": 0}),
    "dcmi_hbm_info": (
        32,
        {"memory_size": 0, "freq": 8, "memory_usage": 16, "temp": 24, "bandwith_util_rate": 28},
    ),
    "dcmi_get_memory_info_stru": (
        112,
        {
            "memory_size": 0,
            "memory_available": 8,
            "freq": 16,
            "hugepagesize": 24,
            "hugepages_total": 32,
            "hugepages_free": 40,
            "utiliza": 48,
            "reserve": 52,
        },
    ),
    "dcmi_memory_info": (16, {"memory_size": 0, "freq": 8, "utiliza": 12}),
    "dcmi_proc_mem_info": (16, {"proc_id": 0, "proc_mem_usage": 8}),
    "dcmi_ecc_info": (
        28,
        {
            "enable_flag": 0,
            "single_bit_error_cnt": 4,
            "double_bit_error_cnt": 8,
            "total_single_bit_error_cnt": 12,
            "total_double_bit_error_cnt": 16,
            "single_bit_isolated_pages_cnt": 20,
            "double_bit_isolated_pages_cnt": 24,
        },
    ),
    "dcmi_multi_utilization_info": (
        48,
        {"aic_util": 0, "aiv_util": 4, "aicore_util": 8, "npu_util": 12, "reserved": 16},
    ),
}

_INT = ctypes.c_int
_UINT = ctypes.c_uint
_P_INT = ctypes.POINTER(ctypes.c_int)
_P_UINT = ctypes.POINTER(ctypes.c_uint)
_P_CHAR = ctypes.c_char_p
_P_VOID = ctypes.c_void_p

#: Every function npuwatch calls: name → (argtypes).  All return ``int`` (0 or a -8xxx code).
#: Output structures are ``void *`` (an ``output_buffer``), never the structure type itself.
PROTOTYPES: Mapping[str, Tuple[Any, ...]] = {
    "dcmi_init": (),
    "dcmi_get_dcmi_version": (_P_CHAR, _UINT),
    "dcmi_get_driver_version": (_P_CHAR, _UINT),
    "dcmi_get_card_list": (_P_INT, _P_INT, _INT),
    "dcmi_get_card_num_list": (_P_INT, _P_INT, _INT),
    "dcmi_get_device_num_in_card": (_INT, _P_INT),
    "dcmi_get_device_id_in_card": (_INT, _P_INT, _P_INT, _P_INT),
    "dcmi_get_device_type": (_INT, _INT, _P_INT),
    "dcmi_get_device_logic_id": (_P_INT, _INT, _INT),
    "dcmi_get_device_phyid_from_logicid": (_UINT, _P_UINT),
    "dcmi_get_device_chip_info": (_INT, _INT, _P_VOID),
    "dcmi_get_device_chip_info_v2": (_INT, _INT, _P_VOID),
    "dcmi_get_device_pcie_info_v2": (_INT, _INT, _P_VOID),
    "dcmi_get_device_board_info": (_INT, _INT, _P_VOID),
    "dcmi_get_device_die_v2": (_INT, _INT, _INT, _P_VOID),
    "dcmi_get_product_type": (_INT, _INT, _P_CHAR, _INT),
    "dcmi_get_device_health": (_INT, _INT, _P_UINT),
    "dcmi_get_device_errorcode_v2": (_INT, _INT, _P_INT, _P_UINT, _UINT),
    "dcmi_get_device_errorcode_string": (_INT, _INT, _UINT, _P_CHAR, _INT),
    "dcmi_get_device_temperature": (_INT, _INT, _P_INT),
    "dcmi_get_device_power_info": (_INT, _INT, _P_INT),
    "dcmi_mcu_get_power_info": (_INT, _P_INT),
    "dcmi_get_device_voltage": (_INT, _INT, _P_UINT),
    "dcmi_get_device_frequency": (_INT, _INT, _INT, _P_UINT),
    "dcmi_get_device_utilization_rate": (_INT, _INT, _INT, _P_UINT),
    "dcmi_get_device_hbm_info": (_INT, _INT, _P_VOID),
    "dcmi_get_device_memory_info_v3": (_INT, _INT, _P_VOID),
    "dcmi_get_device_memory_info_v2": (_INT, _INT, _P_VOID),
    "dcmi_get_device_ecc_info": (_INT, _INT, _INT, _P_VOID),
    "dcmi_get_device_resource_info": (_INT, _INT, _P_VOID, _P_INT),
}

S = TypeVar("S", bound=ctypes.Structure)


def output_buffer() -> ctypes.Array[ctypes.c_char]:
    """A zeroed buffer of ``OUTPUT_BYTES`` for one output structure (room for a grown struct)."""
    return ctypes.create_string_buffer(OUTPUT_BYTES)


def read_struct(buffer: ctypes.Array[ctypes.c_char], kind: Type[S]) -> S:
    """The structure ``kind`` at the start of ``buffer`` (a copy: the buffer may be reused)."""
    return kind.from_buffer_copy(buffer, 0) if ctypes.sizeof(kind) <= len(buffer) else kind()


def text_field(raw: object) -> str:
    """A fixed ``unsigned char[N]`` field as text: up to the first NUL, undecodable bytes replaced."""
    data = bytes(raw)  # type: ignore[call-overload]
    return data.split(b"\0", 1)[0].decode("utf-8", errors="replace").strip()


def layout_of(kind: Type[ctypes.Structure]) -> Tuple[int, Dict[str, int]]:
    """``(sizeof, {field: offset})`` of a structure as ctypes lays it out."""
    offsets = {name: getattr(kind, name).offset for name, *_ in kind._fields_}
    return ctypes.sizeof(kind), offsets
