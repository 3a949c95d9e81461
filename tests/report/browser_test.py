#!/usr/bin/python3
"""The HTML run report in headless Chromium (issue 24 item 3), driven through chromedriver by Selenium
(Debian's chromium, chromium-driver and python3-selenium): `pact train` writes report.html; the page loads
with no console error, its audit table holds one row per planned node, sorting and filtering work in the
browser, the page fetches nothing, `pact report RUN_DIR` rebuilds the same page, and a screenshot is saved.

Usage: browser_test.py PACT SCRATCH
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By


def fail(message):
    print(f"report.browser: {message}", file=sys.stderr)
    sys.exit(1)


def main():
    pact, scratch = sys.argv[1], sys.argv[2]
    shutil.rmtree(scratch, ignore_errors=True)
    os.makedirs(scratch)
    out = os.path.join(scratch, "runs")
    subprocess.run([pact, "train", "--epochs", "2", "--threads", "1", "--out", out], check=True,
                   stdout=subprocess.DEVNULL)
    (run,) = os.listdir(out)
    run_dir = os.path.join(out, run)
    page = os.path.join(run_dir, "report.html")
    with open(os.path.join(run_dir, "report.json")) as f:
        report = json.load(f)
    planned = len(report["plan_audit"]["kernels"])
    first_html = open(page).read()
    os.remove(page)
    subprocess.run([pact, "report", run_dir], check=True, stdout=subprocess.DEVNULL)
    if open(page).read() != first_html:
        fail("pact report did not rebuild the page pact train wrote")

    options = Options()
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", "--window-size=1280,2000"):
        options.add_argument(flag)
    profile = tempfile.mkdtemp(prefix="pact-chromium-")
    options.add_argument(f"--user-data-dir={profile}")
    options.binary_location = "/usr/bin/chromium"
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    try:
        driver.set_page_load_timeout(60)
        driver.get("file://" + os.path.abspath(page))
        errors = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
        if errors:
            fail(f"console errors: {errors}")
        # Nothing went to the network (the browser's own chrome:// pages aside).
        for entry in driver.get_log("performance"):
            message = json.loads(entry["message"])["message"]
            if message["method"] == "Network.requestWillBeSent":
                url = message["params"]["request"]["url"]
                if url.split(":", 1)[0] in ("http", "https", "ws", "wss", "ftp"):
                    fail(f"the page requested {url}")
        rows = driver.find_elements(By.CSS_SELECTOR, "#audit tbody tr")
        if len(rows) != planned:
            fail(f"the audit table has {len(rows)} rows; the plan has {planned} nodes")
        count = driver.find_element(By.ID, "audit-count").text
        if count != f"{planned} of {planned} planned nodes":
            fail(f"the count says {count!r}")
        # Filtering: the rows naming an op, and only those.
        needle = "cross_entropy"
        want = sum(1 for k in report["plan_audit"]["kernels"] if needle in json.dumps(k).lower())
        if not 0 < want < planned:
            fail(f"the filter check needs an op some rows have: {want} of {planned}")
        box = driver.find_element(By.ID, "audit-filter")
        box.send_keys(needle)
        visible = [r for r in driver.find_elements(By.CSS_SELECTOR, "#audit tbody tr") if r.is_displayed()]
        if len(visible) < 1 or any(needle not in r.text.lower() for r in visible):
            fail(f"filtering by {needle!r} shows {[r.text for r in visible]}")
        box.clear()
        box.send_keys("no-such-thing-anywhere")
        if any(r.is_displayed() for r in driver.find_elements(By.CSS_SELECTOR, "#audit tbody tr")):
            fail("a filter matching nothing still shows rows")
        box.clear()
        box.send_keys(" ")  # an empty filter shows everything again
        box.clear()
        driver.execute_script("document.getElementById('audit-filter').dispatchEvent(new Event('input'))")
        shown = [r for r in driver.find_elements(By.CSS_SELECTOR, "#audit tbody tr") if r.is_displayed()]
        if len(shown) != planned:
            fail(f"clearing the filter shows {len(shown)} of {planned} rows")
        # Sorting: a click on "op" orders the rows by op, a second click reverses them.
        header = driver.find_elements(By.CSS_SELECTOR, "#audit th")[1]
        header.click()
        ops = [r.find_elements(By.TAG_NAME, "td")[1].text for r in driver.find_elements(By.CSS_SELECTOR, "#audit tbody tr")]
        if ops != sorted(ops):
            fail(f"sorting by op gave {ops}")
        header.click()
        ops = [r.find_elements(By.TAG_NAME, "td")[1].text for r in driver.find_elements(By.CSS_SELECTOR, "#audit tbody tr")]
        if ops != sorted(ops, reverse=True):
            fail(f"sorting by op again gave {ops}")
        if not driver.find_elements(By.CSS_SELECTOR, ".graph svg"):
            fail("the page has no graph picture")
        if len(driver.find_elements(By.CSS_SELECTOR, ".charts svg")) != 2:
            fail("the page lacks its loss and accuracy curves")
        shot = os.path.join(scratch, "report.png")
        driver.save_screenshot(shot)
        if os.path.getsize(shot) < 10000:
            fail("the screenshot is empty")
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
    print(f"report.browser: {planned} rows, filter and sort work, no console error, no request; screenshot {shot}")


if __name__ == "__main__":
    main()
