"""The built docs site in a real browser: a walkthrough's page, as executed by the tests, shows its figures.

scripts/test.sh runs this after the main pytest session and `bash scripts/docs.sh` (the site is built from the
walkthroughs that session executed, kept in build/executed/), so it is not part of that session. Run alone, it
builds the site itself from whatever build/executed/ holds, and fails if a walkthrough there was never executed."""
import subprocess, sys, urllib.request
from pathlib import Path
import pytest
from helpers import wait_for
from jupyterlab_harness import free_port, open_browser

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "build" / "site"
ARTIFACTS = Path(__file__).parent / "artifacts"
LESSON = "01_hangs_and_mismatches"

pytestmark = [pytest.mark.browser]


@pytest.fixture(scope="module")
def site_url():
    if not (SITE / f"{LESSON}.html").exists():
        subprocess.run([sys.executable, str(ROOT / "scripts" / "docs_site.py"), "--site", str(SITE)], check=True, cwd=ROOT)
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(SITE)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    def up():
        try: return urllib.request.urlopen(url + "/index.html", timeout=2).status == 200
        except OSError: return False
    try:
        wait_for(up, 30, 0.1, "the docs site's http server")
        yield url
    finally:
        server.terminate(); server.wait(10)


def test_walkthrough_page_shows_its_figures(site_url):
    from playwright.sync_api import sync_playwright
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = open_browser(p)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        # the page is self-contained: any request off this server (a CDN script) is refused, not waited for
        page.route("**/*", lambda r: r.continue_() if r.request.url.startswith(site_url) else r.abort())
        try:
            page.goto(f"{site_url}/index.html", wait_until="domcontentloaded")
            # the index is the syllabus, and its lesson table links the lesson's page
            page.locator("h1", has_text="Start here").first.wait_for(timeout=30_000)
            page.locator(f"a[href='{LESSON}.html']").first.click()
            page.wait_for_url(f"**/{LESSON}.html", wait_until="domcontentloaded")
            banner = page.locator(".dl-banner").inner_text()
            assert "as run by the tests" in banner, f"the lesson page was not built from an executed run: {banner}"
            # a plot the run drew: a PNG in a cell's output, loaded (natural width > 0), on screen in the screenshot
            fig = page.locator(".jp-OutputArea-output img[src^='data:image/png']").first
            fig.scroll_into_view_if_needed(timeout=30_000)
            wait_for(lambda: fig.evaluate("i => i.complete && i.naturalWidth > 0"), 30, 0.2, "the figure to load")
            width = fig.evaluate("i => i.naturalWidth")
            assert width >= 300, f"the first figure is {width} px wide: not a plot"
            n = page.locator(".jp-OutputArea-output img[src^='data:image/png']").count()
            assert n >= 10, f"walkthrough 01 draws a timeline and a progress plot per run; the page has {n} figures"
            shot = ARTIFACTS / "docs-walkthrough.png"
            page.screenshot(path=str(shot))
            assert shot.stat().st_size > 20_000
        except Exception:
            page.screenshot(path=str(ARTIFACTS / "docs-failure.png")); raise
        finally:
            browser.close()
