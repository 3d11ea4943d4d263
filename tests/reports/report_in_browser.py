#!/usr/bin/env python3
"""The tolerance report and the comparison page, opened in headless Chromium.

Makes a host run (RMSNorm fwd/bwd and softmax, with a planted-bug impl that fails so the
failure section and JUnit <failure> are exercised), a drift analysis with a 108-SM forecast,
the report of both, a second run under the forecast profile and the comparison of the two.
Then each page is loaded in Chromium: every chart must be drawn and hold pixels, no script
error may occur and the console must stay clean; a screenshot of each page is saved.

Usage: report_in_browser.py KVERIFY_TESTBIN OUT_DIR. Exit 77 (a skip, with the reason) when
Chromium is missing outside CI; under CI=true a missing Chromium fails.
"""
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def run(*cmd, ok=(0,)):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode not in ok:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return p


def check_page(browser, page, shot, charts=True):
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
             "--virtual-time-budget=10000", "--enable-logging=stderr", "--v=0"]
    url = "file://" + os.path.abspath(page)
    dom = run(browser, *flags, "--window-size=1400,900", "--dump-dom", url)
    m = re.search(r"<body([^>]*)>", dom.stdout)
    if not m:
        sys.exit(f"FAIL: {page}: no <body> in the DOM Chromium dumped\n{dom.stderr[-2000:]}")
    attrs = dict(re.findall(r'data-([a-z]+)="([^"]*)"', m.group(1)))
    canvases = len(re.findall(r"<canvas", dom.stdout))
    console = [l for l in dom.stderr.splitlines() if "CONSOLE" in l or "Uncaught" in l]
    print(f"{page}: {canvases} canvases, body data {attrs}, {len(console)} console lines")
    problems = []
    if attrs.get("errors") != "0":
        problems.append(f"script errors: {attrs.get('errors')}")
    # Nothing wider than the 1400 px window (no sideways scrolling), the first screen included.
    view = int(attrs.get("vieww", "0"))
    if view != 1400:
        problems.append(f"layout probe did not run (window width {attrs.get('vieww')})")
    if int(attrs.get("pagew", "99999")) > view:
        problems.append(f"page {attrs.get('pagew')} px wide in a {view} px window")
    if "firstw" in attrs and int(attrs["firstw"]) > view:
        problems.append(f"first screen {attrs['firstw']} px wide in a {view} px window")
    if console:
        problems.append("console output: " + " | ".join(console[:5]))
    if not charts:
        if problems:
            sys.exit(f"FAIL: {page}: " + "; ".join(problems))
        return screenshot(browser, flags, page, url, shot)
    if canvases == 0:
        problems.append("no chart canvas")
    if attrs.get("charts") != str(canvases):
        problems.append(f"charts drawn {attrs.get('charts')} != canvases {canvases} (script did not finish?)")
    if attrs.get("painted") != str(canvases):
        problems.append(f"canvases holding pixels {attrs.get('painted')} != {canvases}")
    if int(attrs.get("ticks", "0")) < canvases:
        problems.append(f"only {attrs.get('ticks')} tick labels on {canvases} charts")
    if attrs.get("tickdupes") != "0":
        problems.append(f"{attrs.get('tickdupes')} repeated tick labels on one axis (unreadable scale)")
    if problems:
        sys.exit(f"FAIL: {page}: " + "; ".join(problems))
    screenshot(browser, flags, page, url, shot)
    return attrs


def screenshot(browser, flags, page, url, shot):
    run(browser, *flags, "--window-size=1400,2400", f"--screenshot={shot}", url)
    if not os.path.exists(shot) or os.path.getsize(shot) < 10000:
        sys.exit(f"FAIL: no screenshot of {page} (or a blank one) at {shot}")
    print(f"screenshot: {shot} ({os.path.getsize(shot)} bytes)")


def main():
    kv, out = sys.argv[1], sys.argv[2]
    browser = next((b for b in BROWSERS if shutil.which(b)), None)
    if browser is None:
        msg = "Chromium not found (Debian package chromium; ci/setup.sh installs it for the tests)"
        if os.environ.get("CI"):
            sys.exit("FAIL: " + msg)
        print("SKIP: " + msg)
        sys.exit(77)
    shutil.rmtree(out, ignore_errors=True)
    sel = ["--device", "host", "--op", "rms_norm.fwd", "--op", "rms_norm.bwd", "--op", "softmax.fwd",
           "--shape", "3x77", "--shape", "4x300", "--dtype", "bf16", "--dtype", "fp32", "--quiet"]
    run(kv, "run", *sel, "--out", f"{out}/a")
    # A planted bug (the tail of each row dropped) fails at N=300 (not a multiple of the 128-lane block): the report lists it with its replay.
    run(kv, "run", "--device", "host", "--op", "rms_norm.fwd", "--impl", "host.bug.drop_tail", "--shape", "3x300",
        "--quiet", "--out", f"{out}/a", ok=(1,))
    run(kv, "drift", "--device", "host", "--op", "rms_norm.bwd", "--impl", "host", "--shape", "16x256", "--repeat", "2",
        "--forecast", "sm_count=108", "--out", f"{out}/drift")
    run(kv, "report", "--results", f"{out}/a/results.jsonl", "--drift", f"{out}/drift/drift.json", "--out", f"{out}/report")
    run(kv, "run", *sel, "--device-profile", "sm_count=108", "--out", f"{out}/b")
    run(kv, "compare", f"{out}/report/report.json", f"{out}/b/results.jsonl", "--out", f"{out}/compare")

    suites = ET.parse(f"{out}/report/junit.xml").getroot()
    failures = int(suites.get("failures"))
    if failures < 1 or not suites.findall(".//failure"):
        sys.exit(f"FAIL: junit.xml records {failures} failures; the planted bug should be one")
    html = open(f"{out}/report/report.html", encoding="utf-8").read()
    for needed in ("kverify replay ", "--device host", "host.bug.drop_tail", "Recommended tolerances", "sm_count=108"):
        if needed not in html:
            sys.exit(f"FAIL: report.html lacks {needed!r}")
    # The first screen: the failure with its replay line, the op table with a tolerance per
    # dtype beside PyTorch's default, the drift column; all of it inside a 1400 x 900 window.
    first = html[html.index("<section id='first-screen'>"):html.index("</section>")]
    for needed in ("host.bug.drop_tail", "kverify replay ", "PyTorch default", "claims held", "✓"):
        if needed not in first:
            sys.exit(f"FAIL: report.html's first screen lacks {needed!r}")
    attrs = check_page(browser, f"{out}/report/report.html", f"{out}/report.png")
    if int(attrs.get("firsth", "99999")) > 900:
        sys.exit(f"FAIL: the first screen ends at {attrs.get('firsth')} px, below a 900 px window")
    check_page(browser, f"{out}/compare/compare.html", f"{out}/compare.png")
    summary = open(f"{out}/a/summary.html", encoding="utf-8").read()
    first_row = summary[summary.index("<tbody>"):][:200]
    if "<tr class='fail'>" not in first_row:
        sys.exit(f"FAIL: summary.html does not list the failing case first: {first_row!r}")
    check_page(browser, f"{out}/a/summary.html", f"{out}/summary.png", charts=False)
    print("PASS")


if __name__ == "__main__":
    main()
