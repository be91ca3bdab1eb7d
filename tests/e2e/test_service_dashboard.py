"""The dashboard in a real browser: Debian's Chromium driven by Playwright (never a downloaded
browser: ``executable_path`` is the system one). Pages load without console errors (favicon
included), tables and their health show, sorting works, the tabs show history and optimizing
processes, and an optimize started from the page with the token appears in the Optimizing tab.
A screenshot of each page is kept under the test's tmp folder (paths printed)."""

from __future__ import annotations

import os
import shutil
import time

import pytest
from service_harness import TABLES, TOKEN, service_thread, warehouse_with_every_state

pytestmark = pytest.mark.spark

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
if not os.path.exists(CHROMIUM):
    pytest.skip(
        "no system Chromium (scripts/setup.sh test installs it with apt-get where it can)",
        allow_module_level=True,
    )
sync_api = pytest.importorskip("playwright.sync_api")
expect = sync_api.expect


@pytest.fixture(scope="module")
def site(spark, tmp_path_factory):
    warehouse = warehouse_with_every_state(spark, str(tmp_path_factory.getbasetemp() / "service-warehouse"))
    with service_thread(warehouse, spark) as running:
        yield running.url


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True)
        yield browser
        browser.close()


@pytest.fixture
def page(browser, tmp_path):
    """A page that records console errors and failed requests; every test asserts there were none."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.problems = []
    page.on("console", lambda m: page.problems.append(m.text) if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: page.problems.append(str(e)))
    page.on("requestfailed", lambda r: page.problems.append(f"{r.url}: {r.failure}"))
    page.on("response", lambda r: page.problems.append(f"{r.url}: {r.status}") if r.status >= 400 else None)
    page.shots = tmp_path
    yield page
    context.close()


def _shot(page, name: str) -> None:
    path = page.shots / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    print(f"screenshot: {path}")


def test_overview_tables_and_groups_pages(site, page):
    page.goto(f"{site}/")
    assert page.title() == "Overview · arctic-sql"
    assert page.locator(".card .label", has_text="tables").first.is_visible()
    assert page.locator("svg.chart").count() >= 2
    assert (
        page.locator('#data-size svg.chart[aria-label="Data size of all tables over time"] circle').count()
        >= 2
    )
    page.wait_for_load_state("networkidle")  # the favicon and the script came (or failed) by now
    _shot(page, "overview")

    page.click("header nav >> text=Tables")
    rows = page.locator("table.tables tbody tr")
    expect(rows).to_have_count(len(TABLES))
    names = page.locator("table.tables tbody tr td:first-child").all_inner_texts()
    assert names == sorted(TABLES)
    assert page.locator("table.tables .health").count() == len(TABLES)
    raw = page.locator("table.tables tbody tr", has_text="db.raw")
    assert int(raw.locator(".score").inner_text()) < 60 and raw.locator(".health.poor").count() == 1
    failed = page.locator("table.tables tbody tr", has_text="db.failed").locator(".status.failed")
    assert failed.inner_text() == "failed" and "FileNotFoundError" in failed.get_attribute("title")
    _shot(page, "tables")

    page.click("a.sort[data-sort=health_score]")  # worst health first
    expect(page.locator("a.sort[data-sort=health_score]")).to_contain_text("▲")
    scores = [int(s) for s in page.locator("table.tables .score").all_inner_texts()]
    assert scores == sorted(scores)

    page.click("header nav >> text=Optimizer groups")
    expect(page.locator("h2", has_text="default")).to_be_visible()
    assert page.locator("table.grid tbody tr").count() == len(TABLES)
    _shot(page, "groups")
    assert page.problems == []


def test_table_tabs_show_details_history_optimizing_and_maintenance(site, page):
    page.goto(f"{site}/tables/db/raw")
    assert page.locator("h2", has_text="Health").is_visible()
    assert page.locator("td", has_text="unmerged_changes").is_visible()
    assert page.locator("svg.chart").count() == 2
    _shot(page, "table-details")
    page.click("a.tab[data-tab=history]")
    expect(page.locator("table.history tbody tr")).to_have_count(3)
    assert page.locator("table.history tbody tr").first.locator("td").nth(2).inner_text() == "delete"
    _shot(page, "table-history")
    page.click("a.tab[data-tab=files]")
    expect(page.locator("#tab-files table.grid tbody tr", has_text="delete")).to_have_count(1)
    page.goto(f"{site}/tables/db/failed?tab=optimizing")
    failed = page.locator("table.optimizing tbody tr")
    assert failed.count() == 1 and failed.locator(".status.FAILED").is_visible()
    assert "FileNotFoundError" in page.locator("#last-failure").inner_text()
    failed.locator("a", has_text="full message").click()
    expect(page.locator("#process pre.failure")).to_contain_text("Traceback")
    _shot(page, "table-optimizing-failed")
    page.click("a.tab[data-tab=details]")
    expect(page.locator("#tab-details td", has_text="optimize_failed")).to_be_visible()
    page.click("a.tab[data-tab=maintenance]")
    expect(page.locator("#tab-maintenance")).to_be_visible()
    assert page.problems == []


def test_optimize_from_the_page_shows_in_the_optimizing_tab(site, page):
    page.goto(f"{site}/tables/db/clicked?tab=optimizing")
    assert page.locator(".empty", has_text="No optimizing process").is_visible()
    page.click("#optimize")  # no token yet: refused, and the page says so
    expect(page.locator("#message")).to_contain_text("Optimize refused")  # the answer comes asynchronously
    page.fill("#token", TOKEN)
    page.click("#save-token")
    page.select_option("#optimize-mode", "full")
    # The page is on its Optimizing tab already, so waiting for that URL returns at once; wait for the
    # navigation the page makes once the service accepted the optimize, or a reload below races it.
    with page.expect_navigation(url="**tab=optimizing"):
        page.click("#optimize")
    deadline = time.monotonic() + 180  # the optimize runs on the shared Spark of a busy 2-core machine
    while time.monotonic() < deadline:
        done = page.locator("table.optimizing .status.SUCCESS")
        if done.count():
            break
        page.wait_for_timeout(1000)
        page.reload()
    row = page.locator("table.optimizing tbody tr")
    assert row.count() == 1 and row.locator(".status.SUCCESS").is_visible(), row.all_inner_texts()
    assert "service-api" in row.inner_text() and "full" in row.inner_text()
    _shot(page, "table-optimized-from-the-page")
    page.click("a.tab[data-tab=details]")
    expect(page.locator("#tab-details")).to_be_visible()
    assert int(page.locator(".card .score").inner_text()) == 100
    # The refusal asked for above: the response and Chromium's console line about it.
    page.problems = [p for p in page.problems if "/optimize: 401" not in p and "status of 401" not in p]
    assert page.problems == []
