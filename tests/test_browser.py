"""The lab in a real JupyterLab, in headless Chromium: run broken, see the diagnosis, run fixed, see it pass;
the Stop button leaves no rank alive."""
import shutil
from pathlib import Path
import pytest
from helpers import wait_for, survivors, gone_within
from jupyterlab_harness import JupyterLab, open_browser, open_notebook, run_all_cells, write_notebook

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = Path(__file__).parent / "artifacts"
SLEEPY = Path(__file__).parent / "scripts" / "sleepy_ranks.py"

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # scripts/test.sh installs Debian's chromium; without it these fail, loudly


@pytest.fixture(scope="module")
def jlab(tmp_path_factory):
    root, home = tmp_path_factory.mktemp("nbs"), tmp_path_factory.mktemp("jhome")
    (root / "runs").mkdir()
    lab = JupyterLab(root, home, env={"DISTLAB_RUNS_ROOT": str(root / "runs")}).wait_ready()
    yield lab
    lab.close()


@pytest.fixture(scope="module")
def browser(jlab):
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        b = open_browser(p)
        yield b
        b.close()


def _shot(page, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    p = ARTIFACTS / name
    page.screenshot(path=str(p), full_page=True)
    return p


def test_scenario_lab_broken_then_fixed(jlab, browser):
    runs = jlab.root / "runs"
    write_notebook(jlab.root / "lab.ipynb", [
        "from distlab.ui.lab import ScenarioLab\n"
        f"lab = ScenarioLab(scenario='uneven-batches', family='hangs', nproc=2, backend='gloo', runs_root={str(runs)!r})\n"
        "lab"])
    page = open_notebook(browser, jlab, "lab.ipynb")
    try:
        run_all_cells(page)
        page.locator("button.widget-button", has_text="Run broken").click(timeout=60_000)
        # the watcher's diagnosis reaches the page: the mismatch, the culprit rank
        page.locator(".widget-html", has_text="Diagnosis: mismatch").first.wait_for(timeout=150_000)
        page.locator(".distlab-verdict", has_text="reproduced").first.wait_for(timeout=60_000)
        _shot(page, "lab-broken.png")
        page.locator("button.widget-button", has_text="Run fixed").click()
        page.locator(".distlab-verdict", has_text="fix verified").first.wait_for(timeout=150_000)
        page.locator(".distlab-state", has_text="ok").first.wait_for(timeout=30_000)
        # the live dashboard: one row per rank, with the health sampler's memory figure (it is in the screenshot)
        dash = page.locator(".distlab-dashboard").first
        dash.locator(".distlab-rank-row").nth(1).wait_for(timeout=30_000)
        assert dash.locator(".distlab-rank-row").count() == 2, dash.inner_text()
        wait_for(lambda: "MiB" in dash.inner_text(), 30, 0.2, "the ranks' memory in the dashboard")
        dash.scroll_into_view_if_needed()
        assert _shot(page, "lab-dashboard.png").stat().st_size > 10_000
        page.locator(".distlab-outcomes").scroll_into_view_if_needed()
        shot = _shot(page, "lab-broken-then-fixed.png")
        assert shot.stat().st_size > 10_000
        assert "unexpected" not in page.locator(".distlab-outcomes").inner_text()
    except Exception:
        _shot(page, "lab-failure.png"); raise
    finally:
        page.close()


def test_stop_button_leaves_no_rank_alive(jlab, browser):
    runs = jlab.root / "runs-stop"; runs.mkdir(exist_ok=True)
    write_notebook(jlab.root / "stop.ipynb", [
        "from distlab.run.launch import launch\nfrom distlab.ui.lab import RunMonitor\n"
        f"run = launch({str(SLEEPY)!r}, [600], nproc=2, runs_root={str(runs)!r}, watch=False)\n"
        "RunMonitor(run)"])
    page = open_notebook(browser, jlab, "stop.ipynb")
    try:
        run_all_cells(page)
        run_dir = wait_for(lambda: next(runs.glob("*"), None), 90, what="the run directory")
        run_id = run_dir.name
        wait_for(lambda: all("ready" in (p.read_text() if p.exists() else "")
                             for p in [run_dir / "logs" / f"rank{r}.stdout" for r in range(2)]), 120, what="ranks ready")
        assert survivors(run_id)
        page.locator(".widget-output", has_text="rank 0 ready").first.wait_for(timeout=30_000)  # logs stream to the tabs
        page.locator("button.widget-button", has_text="Stop").click()
        gone_within(run_id, 5)
        page.locator(".distlab-state", has_text="stopped").first.wait_for(timeout=30_000)
        _shot(page, "monitor-stopped.png")
    except Exception:
        _shot(page, "stop-failure.png"); raise
    finally:
        page.close()
