"""Provides import_runtime(): the import step, choosing pyACL or torch_npu and saying exactly why not."""

from __future__ import annotations

import glob
import importlib
import importlib.util
import os
from typing import Any, Dict, List, Mapping, Optional, Tuple

from npuwatch.probes.runtime.protocol import Backend, EventKind, Step
from npuwatch.probes.runtime.recorder import Recorder, StepSkippedError

_DOCTOR = "Run `npuwatch doctor` to see what is missing"


def import_runtime(
    requested: Optional[Backend], rec: Recorder, environ: Mapping[str, str]
) -> Optional[Tuple[Backend, Any]]:
    """The chosen backend and its module (``acl`` or ``torch``), or None after a ``skip`` import step."""
    chosen: Optional[Tuple[Backend, Any]] = None
    with rec.step(Step.IMPORT) as out:
        reasons: List[str] = []
        if requested in (None, Backend.ACL):
            acl, reason = _import_acl(environ)
            if acl is not None:
                chosen = (Backend.ACL, acl)
                facts = _acl_facts(acl)
                rec.emit(EventKind.FACTS, backend=Backend.ACL.value, **facts)
                out.metrics.update(facts)
                soc = facts.get("soc_name")
                out.detail = "pyACL (`import acl`)" + (f", SoC {soc}" if soc else "")
            else:
                reasons.append(reason)
        if chosen is None and requested in (None, Backend.TORCH):
            torch, reason = _import_torch_npu()
            if torch is not None:
                chosen = (Backend.TORCH, torch)
                facts = _torch_facts(torch)
                rec.emit(EventKind.FACTS, backend=Backend.TORCH.value, **facts)
                out.metrics.update(facts)
                out.detail = (
                    f"torch {facts.get('torch_version')} + torch_npu {facts.get('torch_npu_version')}"
                )
                if reasons:
                    out.detail += f"; pyACL not used: {reasons[0]}"
            else:
                reasons.append(reason)
        if chosen is None:
            raise StepSkippedError("no Ascend runtime: " + "; ".join(reasons) + f". {_DOCTOR}")
    return chosen


def _import_acl(environ: Mapping[str, str]) -> Tuple[Optional[Any], str]:
    try:
        return importlib.import_module("acl"), ""
    except ModuleNotFoundError as exc:
        if exc.name != "acl":
            return None, f"`import acl` failed: {exc}"
        return None, "`import acl` failed: no module named 'acl' " + _acl_location_hint(environ)
    except Exception as exc:  # ImportError for a missing libascendcl.so, OSError, …
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        hint = ""
        if ".so" in text:
            hint = " (a CANN library is not on LD_LIBRARY_PATH: source set_env.sh)"
        return None, f"`import acl` failed: {type(exc).__name__}: {text}{hint}"


def _acl_location_hint(environ: Mapping[str, str]) -> str:
    """Why Python cannot see pyACL: the environment is not sourced, or PYTHONPATH lost the folder."""
    home = environ.get("ASCEND_HOME_PATH") or environ.get("ASCEND_TOOLKIT_HOME")
    if not home:
        return "(ASCEND_HOME_PATH is unset: the CANN environment is not sourced, or CANN is not installed)"
    folder = os.path.join(home, "python", "site-packages")
    if not glob.glob(os.path.join(folder, "acl*.so")):
        return f"(ASCEND_HOME_PATH={home}, but {folder} holds no acl*.so: the toolkit is incomplete)"
    return f"({folder} holds pyACL but is not on PYTHONPATH: append it, do not overwrite PYTHONPATH)"


def _import_torch_npu() -> Tuple[Optional[Any], str]:
    if importlib.util.find_spec("torch_npu") is None:
        return None, "torch_npu is not installed"
    try:
        torch = importlib.import_module("torch")
    except Exception as exc:  # torch ≥ 2.5.1 autoloads torch_npu, so its failure can surface here
        return (
            None,
            f"`import torch` failed: {_first_line(exc)} (TORCH_DEVICE_BACKEND_AUTOLOAD=0 isolates torch_npu)",
        )
    try:
        importlib.import_module("torch_npu")
    except Exception as exc:
        return None, f"`import torch_npu` failed: {_first_line(exc)}"
    if getattr(torch, "npu", None) is None:
        return None, "torch_npu imported but torch.npu is missing"
    return torch, ""


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


def _acl_facts(acl: Any) -> Dict[str, Any]:
    facts: Dict[str, Any] = {"module": getattr(acl, "__file__", None)}
    get_soc = getattr(acl, "get_soc_name", None)
    get_version = getattr(acl, "get_version", None)
    try:
        facts["soc_name"] = get_soc() if get_soc is not None else None
        if get_version is not None:
            *parts, ret = get_version()
            facts["acl_version"] = ".".join(str(p) for p in parts) if ret == 0 else None
    except Exception:  # facts are a nicety; the steps report real failures
        pass
    return facts


def _torch_facts(torch: Any) -> Dict[str, Any]:
    torch_npu = importlib.import_module("torch_npu")
    return {
        "torch_version": str(getattr(torch, "__version__", "?")),
        "torch_npu_version": str(getattr(torch_npu, "__version__", "?")),
    }
