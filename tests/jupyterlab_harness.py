"""JupyterLab in headless Chromium for tests: an isolated, token-less server on 127.0.0.1 and a Playwright page."""
import json, os, socket, subprocess, sys, time, urllib.request
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0)); return s.getsockname()[1]


def write_notebook(path: Path, cells: list[str]) -> Path:
    "A notebook of code `cells` with the python3 kernelspec (so JupyterLab asks no question)."
    import nbformat
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nbformat.write(nb, str(path)); return path


def _settings(settings_dir: Path):
    "User settings: no news or update toasts, every notebook cell rendered (no windowing)."
    for rel, val in {"@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false", "checkForUpdates": False},
                     "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"}}.items():
        p = settings_dir / rel; p.parent.mkdir(parents=True, exist_ok=True); p.write_text(json.dumps(val))


class JupyterLab:
    "A JupyterLab server in `root` (notebooks live there), with config, data, runtime and settings in `home`."
    def __init__(self, root: Path, home: Path, env: dict | None = None):
        self.root, self.home, self.port = Path(root), Path(home), free_port()
        d = {k: self.home / k for k in ("config", "data", "runtime", "settings", "workspaces")}
        for p in d.values(): p.mkdir(parents=True, exist_ok=True)
        _settings(d["settings"])
        self.env = {**os.environ, "JUPYTER_CONFIG_DIR": str(d["config"]), "JUPYTER_DATA_DIR": str(d["data"]),
                    "JUPYTER_RUNTIME_DIR": str(d["runtime"]), "JUPYTERLAB_SETTINGS_DIR": str(d["settings"]),
                    "JUPYTERLAB_WORKSPACES_DIR": str(d["workspaces"]), **(env or {})}
        argv = [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", "--ServerApp.ip=127.0.0.1",
                f"--ServerApp.port={self.port}", "--ServerApp.port_retries=0", "--IdentityProvider.token=",
                "--ServerApp.password=", f"--ServerApp.root_dir={self.root}", "--LabApp.expose_app_in_browser=True",
                "--ServerApp.disable_check_xsrf=True"]
        self.log = open(self.home / "jupyterlab.log", "wb")
        self.proc = subprocess.Popen(argv, env=self.env, cwd=self.root, stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self.url = f"http://127.0.0.1:{self.port}"

    def wait_ready(self, timeout_s: float = 90):
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if self.proc.poll() is not None: raise RuntimeError(f"jupyter lab exited: {self.log_text()[-3000:]}")
            try:
                with urllib.request.urlopen(self.url + "/api/status", timeout=2) as r:
                    if r.status == 200: return self
            except OSError: pass
            time.sleep(0.2)
        raise TimeoutError(f"jupyter lab did not answer in {timeout_s}s: {self.log_text()[-3000:]}")

    def log_text(self) -> str:
        self.log.flush(); return (self.home / "jupyterlab.log").read_text(errors="replace")

    def close(self):
        "Shut the server down (its kernels with it)."
        if self.proc.poll() is None:
            self.proc.terminate()
            try: self.proc.wait(15)
            except subprocess.TimeoutExpired: self.proc.kill(); self.proc.wait()
        self.log.close()


def open_browser(playwright):
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)


def open_notebook(browser, lab: JupyterLab, name: str, timeout_s: float = 90):
    "A page with notebook `name` open and its kernel idle, ready to run."
    page = browser.new_page(viewport={"width": 1400, "height": 1100})
    page.goto(f"{lab.url}/lab/tree/{name}?reset", timeout=timeout_s * 1000)  # reset: no tabs restored from earlier pages
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=timeout_s * 1000)
    page.wait_for_function(f"() => window.jupyterapp && window.jupyterapp.shell.currentWidget"
                           f" && window.jupyterapp.shell.currentWidget.context && window.jupyterapp.shell.currentWidget.context.path === {json.dumps(name)}"
                           " && window.jupyterapp.shell.currentWidget.sessionContext"
                           " && window.jupyterapp.shell.currentWidget.sessionContext.session"
                           " && window.jupyterapp.shell.currentWidget.sessionContext.session.kernel"
                           " && window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.status === 'idle'",
                           timeout=timeout_s * 1000)
    return page


def run_all_cells(page, timeout_s: float = 30):
    "Run every cell of the open notebook; returns once the first cell has started (its prompt is no longer empty)."
    # not awaited: the command's promise settles only when the last cell has run, and a cell may block on a run
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
    page.wait_for_function("() => { const p = document.querySelector('.jp-Notebook .jp-InputPrompt');"
                           " return p && p.textContent.trim() !== '[ ]:' && p.textContent.trim() !== ''; }", timeout=timeout_s * 1000)
