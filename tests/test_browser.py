"""The lab in a real JupyterLab, in headless Chromium: run broken, see the diagnosis, run fixed (picked in the variant
dropdown), see it pass, compare them side by side; the Stop button leaves no rank alive while a cell blocks on the
run; a lesson's predict, run, refused non-fix and accepted fix."""
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
        # every variant is in the lab's dropdown: pick fixed there and run it
        page.locator("select").filter(has=page.locator("option", has_text="fixed")).first.select_option(label="fixed")
        page.locator("button.widget-button", has_text="Run this variant").click()
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
        # broken beside fixed: the code diff, both runs' figures and plots, from the two runs just made
        page.locator("button.widget-button", has_text="Compare broken / fixed").click()
        view = page.locator(".distlab-compare").first
        view.wait_for(timeout=60_000)
        assert view.locator(".distlab-diff").count() == 1 and view.locator(".distlab-compare-side").count() == 2, view.inner_text()
        text = view.inner_text()
        assert view.locator("img").count() == 4 and "hung" in text and "mismatch, culprit ranks [1]" in text, text
        view.scroll_into_view_if_needed()
        assert _shot(page, "lab-compare-broken-fixed.png").stat().st_size > 10_000
    except Exception:
        _shot(page, "lab-failure.png"); raise
    finally:
        page.close()


def test_stop_button_leaves_no_rank_alive(jlab, browser):
    "Stop during a blocking run: the cell waits in `mon.wait()`, a click on Stop ends every rank, then the cell queued below runs."
    runs = jlab.root / "runs-stop"; runs.mkdir(exist_ok=True)
    write_notebook(jlab.root / "stop.ipynb", [
        "from distlab.run.launch import launch\nfrom distlab.ui.lab import RunMonitor\n"
        f"run = launch({str(SLEEPY)!r}, [600], nproc=2, runs_root={str(runs)!r}, watch=False)\n"
        "mon = RunMonitor(run)\ndisplay(mon)\nres = mon.wait()  # blocks: the kernel is busy until the run ends\n"
        "print('the wait ended:', res.status)",
        "print('the next cell ran after it:', mon.result.status)"])
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
        page.locator(".jp-OutputArea-output", has_text="the wait ended: stopped").first.wait_for(timeout=30_000)
        page.locator(".jp-OutputArea-output", has_text="the next cell ran after it: stopped").first.wait_for(timeout=30_000)
        _shot(page, "monitor-stopped.png")
    except Exception:
        _shot(page, "stop-failure.png"); raise
    finally:
        page.close()


FIXES = Path(__file__).parent / "fixes" / "uneven-batches"


def test_lesson_predict_run_then_fix_it_yourself(jlab, browser):
    "A learner's path through a lesson: read the code, predict, run the broken script (predictions graded), try a non-fix (refused, with the reason), then a fix of their own (accepted)."
    runs = jlab.root / "runs-lesson"; runs.mkdir(exist_ok=True)
    write_notebook(jlab.root / "lesson.ipynb", [
        "from distlab.ui.lesson import FixIt, Predict, show_code\nshow_code('uneven-batches')",
        f"guess = Predict('uneven-batches', 2, backend='gloo', runs_root={str(runs)!r})\nguess",
        f"FixIt('uneven-batches', nproc=2, backend='gloo', runs_root={str(runs)!r})"])
    page = open_notebook(browser, jlab, "lesson.ipynb")
    try:
        run_all_cells(page)
        page.locator(".distlab-code .distlab-bug").first.wait_for(timeout=60_000)  # the script, its faulty line marked
        predict = page.locator(".distlab-predict").first
        predict.wait_for(timeout=60_000)
        selects = predict.locator("select")
        selects.nth(0).select_option(label="rank 1")
        line = next(o for o in selects.nth(1).locator("option").all_inner_texts() if "dist.barrier()" in o)
        selects.nth(1).select_option(label=line)
        selects.nth(2).select_option(label="the ranks call different collectives (a mismatch)")
        _shot(page, "lesson-predict.png")
        predict.locator("button.widget-button", has_text="Run the broken script").click()
        grade = predict.locator(".distlab-predict-grade")
        grade.wait_for(timeout=150_000)
        assert grade.inner_text().count("right") == 3, grade.inner_text()  # rank 1, the barrier's line, a mismatch
        _shot(page, "lesson-predicted-and-ran.png")
        fixit = page.locator(".distlab-fixit").first
        fixit.scroll_into_view_if_needed()
        editor, try_button = fixit.locator("textarea"), fixit.locator("button.widget-button", has_text="Try my fix")
        editor.fill((FIXES / "longer_timeout.py").read_text())  # a longer timeout is not a fix
        try_button.click()
        verdict = fixit.locator(".distlab-try-verdict")
        verdict.filter(has_text="Not fixed yet").wait_for(timeout=150_000)
        assert "still hangs" in verdict.inner_text(), verdict.inner_text()
        _shot(page, "lesson-non-fix-refused.png")
        editor.fill((FIXES / "join.py").read_text())  # Join: a correct fix that is not the shipped one
        wait_for(lambda: not fixit.locator("button.widget-button", has_text="Try my fix").is_disabled(), 10, what="the button")
        try_button.click()
        verdict.filter(has_text="Fixed").wait_for(timeout=150_000)
        assert _shot(page, "lesson-own-fix-accepted.png").stat().st_size > 10_000
    except Exception:
        _shot(page, "lesson-failure.png"); raise
    finally:
        page.close()
