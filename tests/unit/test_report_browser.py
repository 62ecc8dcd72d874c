"""The HTML matrix in a real headless browser: it loads with no console error, filtering by an
outcome leaves only the rows that have it, sorting by a column puts its worst cell first, and
a screenshot is written where CI keeps its artifacts (``$POLYLOOP_ARTIFACTS``, else
``.ci-artifacts/``).

Needs Debian's ``chromium`` and ``chromium-driver`` (and selenium, in ``[dev]``): skipped with
the reason where they are missing, except in CI (``CI`` set), where that is a failure.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from polyloop._base._extras import module_available
from polyloop.report import render_html
from tests.unit._reports import every_outcome_report

ROOT = Path(__file__).resolve().parents[2]


def _require_browser() -> tuple[str, str]:
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    missing = [
        name
        for name, found in (
            ("chromium", chromium),
            ("chromium-driver", driver),
            ("selenium (pip install -e '.[dev]')", module_available("selenium")),
        )
        if not found
    ]
    if missing:
        reason = (
            f"the browser test needs {', '.join(missing)} (apt-get install -y chromium "
            "chromium-driver)"
        )
        if os.environ.get("CI"):
            pytest.fail(f"{reason}: CI installs them (.ci/run), so this is a broken CI setup")
        pytest.skip(reason)
    assert chromium is not None
    assert driver is not None
    return chromium, driver


def artifacts_dir() -> Path:
    path = Path(os.environ.get("POLYLOOP_ARTIFACTS") or ROOT / ".ci-artifacts")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    chromium, driver_path = _require_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1300,1000"):  # fmt: skip
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # The driver is given by path: selenium never looks for (or downloads) one itself.
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def page(browser: Any, tmp_path: Path) -> Any:
    path = tmp_path / "conformance.html"
    path.write_text(render_html(every_outcome_report()), encoding="utf-8")
    browser.get(path.as_uri())
    return browser


def _visible_rows(driver: Any) -> list[Any]:
    from selenium.webdriver.common.by import By

    return [
        row
        for row in driver.find_elements(By.CSS_SELECTOR, "tr[data-outcomes]")
        if row.is_displayed()
    ]


def test_the_page_loads_without_console_errors_and_filters_by_outcome(page: Any) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    errors = [entry for entry in page.get_log("browser") if entry["level"] == "SEVERE"]
    assert errors == []
    assert page.find_element(By.ID, "filters").is_displayed()  # the script ran
    everything = _visible_rows(page)
    assert len(everything) == 12
    Select(page.find_element(By.ID, "f-outcome")).select_by_value("violated")
    shown = _visible_rows(page)
    assert shown
    assert len(shown) < len(everything)
    for row in shown:
        assert "violated" in row.get_attribute("data-outcomes").split()
        cells = row.find_elements(By.CSS_SELECTOR, 'td[data-outcome="violated"]')
        assert cells  # the row holds a violated cell that a reader can see
    violated_rows = [
        row
        for row in page.find_elements(By.CSS_SELECTOR, "tr[data-outcomes]")
        if "violated" in row.get_attribute("data-outcomes").split()
    ]
    assert len(violated_rows) == len(shown)  # and none is left out
    assert page.find_element(By.ID, "f-count").text == f"{len(shown)} promise rows shown"
    page.save_screenshot(str(artifacts_dir() / "conformance-matrix-violated.png"))
    Select(page.find_element(By.ID, "f-outcome")).select_by_value("")
    Select(page.find_element(By.ID, "f-seam")).select_by_value("decision_parser")
    assert {row.get_attribute("data-promise") for row in _visible_rows(page)} == {
        "decision_parser.a",
        "decision_parser.b",
    }
    assert [entry for entry in page.get_log("browser") if entry["level"] == "SEVERE"] == []


def test_sorting_by_a_column_puts_its_worst_cell_first(page: Any) -> None:
    from selenium.webdriver.common.by import By

    page.find_element(By.CSS_SELECTOR, 'button[data-sort="2"]').click()
    header = page.find_element(By.ID, "col-2")
    assert header.get_attribute("aria-sort") == "ascending"
    first = page.find_element(
        By.CSS_SELECTOR, 'tbody[data-seam="action_executor"] tr[data-outcomes]'
    )
    cell = first.find_element(By.CSS_SELECTOR, 'td[data-column="2"]')
    assert cell.get_attribute("data-outcome") == "violated"
    page.save_screenshot(str(artifacts_dir() / "conformance-matrix.png"))


def test_a_cell_link_lands_on_its_reason(page: Any) -> None:
    from selenium.webdriver.common.by import By

    link = page.find_element(By.CSS_SELECTOR, 'td[data-outcome="unverifiable"] a')
    target = link.get_attribute("href").rsplit("#", 1)[1]
    link.click()
    assert page.execute_script("return location.hash") == f"#{target}"
    assert "verify it yourself" in page.find_element(By.ID, target).text
