"""A real headless Chromium for page tests (Debian's chromium + chromium-driver, selenium)."""

from __future__ import annotations

import shutil

import pytest

BROWSER_FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
                 "--window-size=1400,1000")


def chromium_driver(user_data_dir: str):
    """A selenium driver on the system Chromium, or a skip naming what is missing."""
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed "
                                    "(pip install -e '.[dev]')")
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_bin = shutil.which("chromedriver")
    if not browser or not driver_bin:
        pytest.skip("no Chromium here: make test installs Debian's chromium and "
                    "chromium-driver where it can (apt-get, as root)")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in BROWSER_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={user_data_dir}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(driver_bin), options=options)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """One headless Chromium per test module (modules import this fixture by name)."""
    driver = chromium_driver(str(tmp_path_factory.mktemp("chromium-profile")))
    yield driver
    driver.quit()
