"""`npuwatch selftest`: options, JSON schema, text, exit codes, and the skip on a machine with no runtime."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import jsonschema
import pytest

from npuwatch.cli import main
from tests.conftest import REPO
from tests.selftest.helpers import fake_env
from tests.selftest.schema import SELFTEST_V1


@pytest.fixture
def fakes(tmp_path, monkeypatch):
    """The fake runtimes on the child's PYTHONPATH, through this process's environment."""
    for name in list(os.environ):
        if name.startswith(("NPUWATCH_FAKE_", "ASCEND_")):
            monkeypatch.delenv(name)
    for name, value in fake_env(tmp_path / "ledger").items():
        if name.startswith(("NPUWATCH_", "PYTHONPATH", "XDG_")):
            monkeypatch.setenv(name, value)
    return monkeypatch


def test_json_is_selftest_v1_and_exit_0(fakes, capsys):
    code = main(["selftest", "--json", "--device", "all", "--timeout-per-device", "30"])
    out = json.loads(capsys.readouterr().out)
    jsonschema.validate(out, SELFTEST_V1)
    assert code == out["exit_code"] == 0
    assert [d["device"] for d in out["devices"]] == [0, 1]
    h2d = out["devices"][0]["steps"][7]
    assert h2d["step"] == "copy-h2d" and h2d["metrics"]["best_gb_s"] > 0


def test_failure_json_explains_the_code(fakes, capsys):
    fakes.setenv("NPUWATCH_FAKE_FAULT", "set_device:507033")
    code = main(["selftest", "--json", "--device", "1", "--backend", "acl"])
    out = json.loads(capsys.readouterr().out)
    jsonschema.validate(out, SELFTEST_V1)
    assert code == 2 and out["status"] == "fail"
    (step,) = [s for s in out["devices"][0]["steps"] if s["status"] == "fail"]
    assert step["step"] == "set-device"
    assert step["error"]["code"] == 507033 and step["error"]["name"] == "ACL_ERROR_RT_DEV_SETUP_ERROR"
    assert "E39009" in step["error"]["runtime_message"]


def test_text_shows_steps_and_the_fix(fakes, capsys):
    fakes.setenv("NPUWATCH_FAKE_FAULT", "kernel:561003")
    code = main(["selftest", "--device", "0"])
    captured = capsys.readouterr()
    assert code == 2
    assert "device 0" in captured.out and "copy H2D" in captured.out and "GB/s" in captured.out
    assert "561003 ACLNN_ERR_INNER_FIND_KERNEL_ERROR" in captured.out
    assert "fix: install the operator kernels" in captured.out
    assert captured.out.rstrip().endswith("exit 2")
    assert "Traceback" not in captured.err


def test_hang_text_names_the_step(fakes, capsys):
    fakes.setenv("NPUWATCH_FAKE_FAULT", "synchronize:hang")
    code = main(["selftest", "--device", "0", "--timeout-per-device", "2", "--backend", "torch"])
    out = capsys.readouterr().out
    assert code == 2
    assert "hung in torch.npu.Event.synchronize: no answer within 2 s" in out


def test_torch_level_full_option_parses(fakes, capsys):
    code = main(["selftest", "--json", "--device", "0", "--backend", "torch", "--level", "quick"])
    assert code == 0
    assert json.loads(capsys.readouterr().out)["devices"][0]["backend"] == "torch"


@pytest.mark.parametrize(
    "argv",
    [
        ["selftest", "--device", "zero"],
        ["selftest", "--level", "huge"],
        ["selftest", "--backend", "cuda"],
        ["selftest", "--devices", "0"],
        ["selftest", "--timeout-per-device", "0"],
        ["selftest", "--replay", __file__],
    ],
)
def test_usage_errors_exit_64(argv, capsys):
    assert main(argv) == 64
    assert "Traceback" not in capsys.readouterr().err


def test_demo_machine_has_no_runtime_to_test(capsys):
    code = main(["selftest", "--demo", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == out["exit_code"] == 1
    jsonschema.validate(out, SELFTEST_V1)
    assert "simulates npu-smi and sysfs, not the Ascend runtime" in out["devices"][0]["steps"][0]["detail"]


def test_this_machine_without_acl_or_torch_npu_skips_with_the_precise_reason(tmp_path):
    env = fake_env(tmp_path, fakes=False)
    for name in ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME", "PYTHONPATH"):
        env.pop(name, None)
    probe = "import importlib.util as u; print(u.find_spec('acl'), u.find_spec('torch_npu'))"
    found = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    if found.stdout.strip() != "None None":
        pytest.skip("this machine has an Ascend runtime")
    out = subprocess.run(
        [sys.executable, "-m", "npuwatch", "selftest", "--json"],
        env=env,
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert out.returncode == 1, out.stderr
    report = json.loads(out.stdout)
    jsonschema.validate(report, SELFTEST_V1)
    (run,) = report["devices"]
    (step,) = run["steps"]
    assert run["device"] is None and step["step"] == "import" and step["status"] == "skip"
    assert "`import acl` failed: no module named 'acl'" in step["detail"]
    assert "ASCEND_HOME_PATH is unset" in step["detail"]
    assert "torch_npu is not installed" in step["detail"]
    assert "npuwatch doctor" in step["detail"]
    assert report["notes"] == []
