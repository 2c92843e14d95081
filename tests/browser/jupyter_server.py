"""A private Jupyter server (JupyterLab or Notebook 7) for the browser tests, and the notebooks
they open in it.

The server runs as ``sys.executable -m jupyter lab`` (or ``jupyter notebook``) in its own process
group, with every Jupyter/IPython directory (config, data, runtime, IPython profile, settings,
workspaces) under the test's temporary directory, so nothing from the user's home leaks in and
nothing is left behind.  Announcements, news and update checks are off: the test network is
closed, and a "Would you like to receive official Jupyter news?" toast would cover the notebook.
Both front ends are built from JupyterLab's components and read the same settings files.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Dict, List, Optional, Sequence, Tuple

import psutil

START_DEADLINE_S = 120.0
STOP_GRACE_S = 10.0

# Lab settings that keep the UI quiet and predictable in a headless, offline browser.
LAB_SETTINGS: Dict[str, Dict[str, object]] = {
    "@jupyterlab/apputils-extension/notification": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
    # No autosave racing the test's own edits of the notebook on disk.
    "@jupyterlab/docmanager-extension/plugin": {"autosave": False},
    # Start the notebook's kernel without a "Select Kernel" dialog.
    "@jupyterlab/notebook-extension/tracker": {"autoStartDefaultKernel": True},
}


@dataclass(frozen=True)
class JupyterApp:
    """What differs between the front ends: the ``jupyter`` subcommand, its options and its pages."""

    name: str  # the test id
    command: str  # ``jupyter <command>``
    config: str  # the app's configurable class, for expose_app_in_browser and the settings folders
    notebook_page: str  # the page that opens one notebook, ``{}`` for its path
    menu_bar: str  # the CSS selector of the main menu bar
    options: Tuple[str, ...] = ()  # options only this app has


LAB = JupyterApp(
    name="jupyterlab",
    command="lab",
    config="LabApp",
    notebook_page="lab/tree/{}",
    menu_bar="#jp-menu-panel",
    options=(
        "--LabApp.news_url=None",
        "--LabApp.extension_manager=readonly",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ),
)
NOTEBOOK = JupyterApp(
    name="notebook7",
    command="notebook",
    config="JupyterNotebookApp",
    notebook_page="notebooks/{}",
    menu_bar="#menu-panel",
)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_notebook(path: Path, cells: Sequence[str]) -> Path:
    """An nbformat v4 notebook with one code cell per source, bound to the python3 kernel."""
    import nbformat  # imported here: it takes a second, and collecting the tests needs none of it

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3 (ipykernel)",
        "language": "python",
    }
    nb.metadata["language_info"] = {"name": "python"}
    nbformat.write(nb, str(path))
    return path


class JupyterServer:
    """One ``jupyter lab`` (or ``jupyter notebook``) subprocess serving ``root`` on a free localhost port."""

    def __init__(
        self,
        home: Path,
        root: Path,
        log_path: Path,
        app: JupyterApp = LAB,
        extra_env: Optional[Dict[str, str]] = None,
    ) -> None:
        self.app = app
        self.home = home
        self.root = root
        self.log_path = log_path
        self.extra_env = dict(extra_env or {})
        self.port = free_port()
        self.token = secrets.token_hex(24)
        self.proc: Optional[subprocess.Popen] = None
        self._log: Optional[IO[bytes]] = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        """``base_url/path?token=…`` (``path`` without a leading slash, may carry no query)."""
        return f"{self.base_url}/{path}?token={self.token}"

    def notebook_url(self, name: str) -> str:
        """The page that opens the notebook ``name`` (relative to the root) in this front end."""
        return self.url(self.app.notebook_page.format(name))

    def environ(self) -> Dict[str, str]:
        dirs = {
            "JUPYTER_CONFIG_DIR": self.home / "config",
            "JUPYTER_DATA_DIR": self.home / "data",
            "JUPYTER_RUNTIME_DIR": self.home / "runtime",
            "IPYTHONDIR": self.home / "ipython",
            "JUPYTERLAB_SETTINGS_DIR": self.home / "lab-settings",
            "JUPYTERLAB_WORKSPACES_DIR": self.home / "lab-workspaces",
        }
        for d in dirs.values():
            d.mkdir(parents=True, exist_ok=True)
        # No NPUWATCH_* from the caller (a frozen NPUWATCH_SIM_NOW would stop the demo clock).
        env = {k: v for k, v in os.environ.items() if not k.startswith("NPUWATCH_")}
        env.update({k: str(v) for k, v in dirs.items()})
        env.pop("JUPYTER_TOKEN", None)
        env["JUPYTER_PLATFORM_DIRS"] = "1"
        env["PYTHONUNBUFFERED"] = "1"
        env.update(self.extra_env)
        return env

    def _write_settings(self) -> None:
        settings = self.home / "lab-settings"
        for plugin, values in LAB_SETTINGS.items():
            path = settings / f"{plugin}.jupyterlab-settings"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(values), encoding="utf-8")

    def argv(self) -> List[str]:
        config = self.app.config
        return [
            sys.executable,
            "-m",
            "jupyter",
            self.app.command,
            "--no-browser",
            f"--IdentityProvider.token={self.token}",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0",
            f"--ServerApp.root_dir={self.root}",
            "--ServerApp.open_browser=False",
            "--ServerApp.terminals_enabled=False",
            # window.jupyterapp: lets the test ask the app itself whether the kernel is ready.
            f"--{config}.expose_app_in_browser=True",
            f"--{config}.user_settings_dir={self.home / 'lab-settings'}",
            f"--{config}.workspaces_dir={self.home / 'lab-workspaces'}",
            *self.app.options,
        ] + (["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else [])

    def start(self) -> None:
        env = self.environ()
        self._write_settings()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            self.argv(),
            cwd=str(self.root),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: kernels die with it
        )
        self.wait_ready()

    def wait_ready(self, deadline_s: float = START_DEADLINE_S) -> None:
        """Poll ``/api/status`` until the server answers; fail with its log if it never does."""
        assert self.proc is not None
        deadline = time.monotonic() + deadline_s
        last_error = ""
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"jupyter {self.app.command} exited with {self.proc.returncode}:\n{self.log_text()}"
                )
            try:
                with urllib.request.urlopen(self.url("api/status"), timeout=5) as response:
                    if response.status == 200:
                        json.loads(response.read().decode("utf-8"))
                        return
            except (OSError, ValueError, urllib.error.URLError) as exc:
                last_error = repr(exc)
            time.sleep(0.25)
        raise RuntimeError(
            f"jupyter {self.app.command} never answered /api/status ({last_error}):\n{self.log_text()}"
        )

    def api(self, path: str) -> object:
        """GET ``/api/<path>`` and decode the JSON answer."""
        with urllib.request.urlopen(self.url(f"api/{path}"), timeout=10) as response:
            return json.loads(response.read().decode("utf-8"))

    def log_text(self) -> str:
        if self._log is not None:
            self._log.flush()
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def stop(self) -> None:
        """Stop the server and everything it started, kernels included.

        SIGTERM to the server's process group lets it shut its kernels down; whatever is still
        alive after that gets SIGKILL.  Kernels run in sessions of their own (jupyter_client
        starts them with ``start_new_session``), so they are found as the server's descendants.
        """
        proc, self.proc = self.proc, None
        if proc is not None:
            try:
                descendants = psutil.Process(proc.pid).children(recursive=True)
            except psutil.Error:
                descendants = []
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=STOP_GRACE_S)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=STOP_GRACE_S)
            for child in descendants:
                with contextlib.suppress(psutil.Error):
                    child.kill()
            psutil.wait_procs(descendants, timeout=STOP_GRACE_S)
        if self._log is not None:
            self._log.close()
            self._log = None
