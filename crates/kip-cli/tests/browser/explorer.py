"""End-to-end test of the memory explorer in a real browser (headless Chromium driven
by Selenium through chromedriver, both from Debian's packages).

Run by crates/kip-cli/tests/explorer_browser.rs, which seeds a memory, starts two
servers on it (one with an API key, one without) and passes their addresses. Every
step asserts what a person would see; screenshots go to --shots.

    explorer.py --url http://127.0.0.1:PORT --key KEY --open-url http://127.0.0.1:PORT2 --shots DIR
"""

import argparse
import datetime
import json
import os
import sys
import time
import urllib.error
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

XSS_NAME = '<img src=x onerror="window.__xss=1">'


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True, help="server with an API key")
    p.add_argument("--key", required=True)
    p.add_argument("--open-url", required=True, help="server without an API key (same data)")
    p.add_argument("--shots", required=True)
    p.add_argument("--chromium", default=os.environ.get("KIP_TEST_CHROMIUM", "/usr/bin/chromium"))
    p.add_argument("--chromedriver", default=os.environ.get("KIP_TEST_CHROMEDRIVER", "/usr/bin/chromedriver"))
    return p.parse_args()


def browser(args):
    opts = Options()
    opts.binary_location = args.chromium
    for flag in [
        "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-dev-shm-usage", "--window-size=1400,1000",
    ]:
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(executable_path=args.chromedriver), options=opts)


def http(url, body=None, key=None, method=None):
    """A request from outside the browser; returns (status, json)."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method or ("POST" if data else "GET"))
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if key:
        req.add_header("Authorization", "Bearer " + key)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


class Page:
    def __init__(self, driver, shots):
        self.d = driver
        self.shots = shots
        self.wait = WebDriverWait(driver, 20)

    def css(self, sel):
        return self.wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, sel)))

    def visible(self, sel):
        return self.wait.until(EC.visibility_of_element_located((By.CSS_SELECTOR, sel)))

    def text_in(self, sel, text):
        self.wait.until(EC.text_to_be_present_in_element((By.CSS_SELECTOR, sel), text))
        return self.d.find_element(By.CSS_SELECTOR, sel)

    def shot(self, name):
        path = os.path.join(self.shots, name + ".png")
        self.d.save_screenshot(path)
        print("screenshot", path)

    def go(self, url):
        self.d.get(url)

    def js(self, script, *args):
        return self.d.execute_script(script, *args)

    def console_errors(self):
        return [e for e in self.d.get_log("browser") if e.get("level") == "SEVERE"]


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    print("ok:", what)


def main():
    args = parse_args()
    os.makedirs(args.shots, exist_ok=True)
    stale = os.path.join(args.shots, "failure.png")
    if os.path.exists(stale):
        os.remove(stale)
    driver = browser(args)
    p = Page(driver, args.shots)
    try:
        run(p, args)
    except Exception:
        p.shot("failure")
        for e in driver.get_log("browser"):
            print("browser log:", e, file=sys.stderr)
        raise
    finally:
        driver.quit()


def enter_key(p, key, accepted=True):
    dialog = p.visible("#key-dialog")
    box = dialog.find_element(By.ID, "key-input")
    box.clear()
    box.send_keys(key)
    dialog.find_element(By.ID, "key-save").click()
    if accepted:
        p.wait.until(lambda d: not d.find_element(By.ID, "key-dialog").is_displayed())


def run(p, args):
    url = args.url.rstrip("/")

    # -- The page itself: strict CSP, served without the key; data needs the key. --
    with urllib.request.urlopen(url + "/", timeout=10) as r:
        csp = r.headers.get("Content-Security-Policy", "")
    check("script-src 'self'" in csp and "unsafe-inline" not in csp, "the page has a strict Content-Security-Policy")
    status, _ = http(url + "/explorer/api/overview")
    check(status == 401, "the data routes need the API key")

    # -- Open /: the page asks for the key; a wrong key is refused. --
    p.go(url + "/")
    enter_key(p, "not-the-key", accepted=False)
    p.text_in("#key-dialog p", "refused")
    check(p.css("#key-dialog").is_displayed(), "a wrong key is refused and asked again")
    enter_key(p, args.key)
    p.console_errors()  # the wrong key's 401 is expected: drain the log

    # -- Overview: identity, domains with sizes, types and predicates with counts, health. --
    p.text_in("#identity", "concepts")
    p.text_in("#domains", "Projects")
    types = p.css("#concept-types").text
    check("Person" in types, "the overview lists the concept types")
    check("works_on" in p.css("#proposition-types").text, "the overview lists the predicates")
    p.text_in("#health", "orphan")
    p.shot("overview")

    # -- A type's concepts, from the overview. --
    p.d.find_element(By.XPATH, "//table[@id='concept-types']//a[@class='type-list' and text()='Project']").click()
    p.text_in("#list", "Apollo")
    p.text_in("#list-status", "1 of 1 shown")

    # -- Search from the header box; results with scores; open a concept. --
    q = p.css("#quick-q")
    q.send_keys("Alice")
    q.submit()
    first = p.visible("#search-results .hit a.concept-link")
    check(first.text == "Alice", "searching 'Alice' finds Alice first")
    score = p.css("#search-results .hit .score").text
    check(score and 0 < float(score) <= 1, "search results carry scores")
    p.shot("search")
    first.click()

    # -- The concept page: attributes, metadata, propositions both ways, higher-order, domains. --
    p.text_in("#concept-title", "Alice")
    check("engineer" in p.css("table.attributes").text, "the concept page shows the attributes")
    meta = p.css("table.metadata").text
    check("chat 2026-11-20" in meta and "_version" in meta, "the concept page shows provenance and version")
    out = p.css("table.links.outgoing").text
    check("works_on" in out and "Apollo" in out, "outgoing propositions with their objects")
    check("reports_to" in p.css("table.links.incoming").text and "Carol" in p.css("table.links.incoming").text, "incoming propositions with their subjects")
    check("stated_by" in p.css("#about").text and "Bob" in p.css("#about").text, "statements about its propositions")
    check("Projects" in p.css("#domains-of").text, "domain membership")
    check("strength 0.665" in out, "a decayed strength is shown rounded: %s" % out)
    check("0.6649999" not in p.css("main").text, "no float noise on the concept page")
    p.shot("concept")

    # -- The graph: starts from the concept, a real click on a node expands it. --
    p.css("#open-graph").click()
    p.wait.until(lambda d: p.js("return window.kipExplorerGraph ? window.kipExplorerGraph.nodes().length : 0") >= 2)
    before = p.js("return window.kipExplorerGraph.nodes().length")
    apollo = p.js("""
        const cy = window.kipExplorerGraph;
        const n = cy.nodes().filter(n => n.data('name') === 'Apollo')[0];
        const pos = n.renderedPosition();
        return {x: pos.x, y: pos.y, id: n.id()};""")
    container = p.css("#graph")
    w, h = container.size["width"], container.size["height"]
    ActionChains(p.d).move_to_element_with_offset(container, int(apollo["x"] - w / 2), int(apollo["y"] - h / 2)).click().perform()
    p.wait.until(lambda d: p.js("return window.kipExplorerGraph.nodes().length") > before)
    names = p.js("return window.kipExplorerGraph.nodes().map(n => n.data('name'))")
    check("Dave" in names, "clicking Apollo expands it (Dave likes Apollo)")
    colors = p.js("return [...new Set(window.kipExplorerGraph.nodes().map(n => n.data('color')))].length")
    check(colors >= 2, "nodes are coloured by type")
    labels = p.js("return window.kipExplorerGraph.edges().map(e => e.data('label'))")
    check("works_on" in labels, "edges are labelled by predicate")
    p.shot("graph")

    # -- The console: a query as a table; an error shown at its line and column. --
    p.go(url + "/#/console")
    box = p.css("#console-command")
    box.clear()
    box.send_keys('FIND(?p.name) WHERE { ?p {type: "Person"} } ORDER BY ?p.name')
    p.css("#console-run").click()
    p.text_in("#console-result", "Carol")
    check(p.d.find_elements(By.CSS_SELECTOR, "#console-result table"), "results are shown as a table")
    box.clear()
    box.send_keys('FIND(?p)\nWHERE {\n  ?p {type: "Person"\n}')
    p.css("#console-run").click()
    err = p.visible("#console-result .error-box")
    check("KIP_1001" in err.text, "a syntax error shows its code")
    where = p.css("#console-result pre.where").text
    check("line 4" in err.text and "^" in where, "the error is placed at its line with a caret")
    p.shot("console-error")

    # -- Read-only by default: a KML statement with Run is refused. --
    box.clear()
    box.send_keys('UPSERT { CONCEPT ?x { {type: "Person", name: "Mallory"} } }')
    p.css("#console-run").click()
    p.text_in("#console-result", "KIP_3004")
    status, found = http(url + "/kip", {"command": 'FIND(?p) WHERE { ?p {type: "Person", name: "Mallory"} }'}, args.key)
    check(found.get("result") == [], "a read-only console run wrote nothing")

    # -- Correct a fact from the concept page, with an explicit confirmation. --
    p.go(url + "/#/concept?type=Person&name=Alice")
    p.text_in("#concept-title", "Alice")
    p.css("#fix-key").send_keys("role" + Keys.TAB)
    value = p.css("#fix-value")
    p.wait.until(lambda d: value.get_attribute("value") == "engineer")
    print("ok: choosing an attribute fills in its current value")
    value.clear()
    value.send_keys("architect")
    p.css("#fix-set").click()
    dialog = p.visible("#confirm-dialog")
    check("UPDATE" in p.css("#confirm-command").text, "the confirmation shows the KIP command")
    p.shot("confirm")
    # Cancelling changes nothing.
    dialog.find_element(By.ID, "confirm-no").click()
    time.sleep(0.3)
    _, still = http(url + "/kip", {"command": 'FIND(?p.attributes.role) WHERE { ?p {type: "Person", name: "Alice"} }'}, args.key)
    check(still.get("result") == ["engineer"], "cancelling the confirmation changes nothing")
    p.css("#fix-set").click()
    p.visible("#confirm-dialog").find_element(By.ID, "confirm-yes").click()
    p.text_in("#concept-status", "Set role")
    p.text_in("table.attributes", "architect")
    _, fixed = http(url + "/kip", {"command": 'FIND(?p.attributes.role) WHERE { ?p {type: "Person", name: "Alice"} }'}, args.key)
    check(fixed.get("result") == ["architect"], "the correction is seen by a FIND: %s" % fixed)
    # ... and in the browser's own console.
    p.go(url + "/#/console")
    box = p.css("#console-command")
    box.clear()
    box.send_keys('FIND(?p.attributes.role) WHERE { ?p {type: "Person", name: "Alice"} }')
    p.css("#console-run").click()
    p.text_in("#console-result", "architect")

    # -- Delete a wrong proposition from the concept page. --
    p.go(url + "/#/concept?type=Person&name=Dave")
    p.text_in("#concept-title", "Dave")
    row = p.css("table.links.outgoing tr[data-link] button")
    row.click()
    p.visible("#confirm-dialog").find_element(By.ID, "confirm-yes").click()
    p.text_in("#concept-status", "Deleted the proposition")
    _, gone = http(url + "/kip", {"command": 'FIND(COUNT(?l)) WHERE { ?l ({type: "Person", name: "Dave"}, "likes", ?o) }'}, args.key)
    check(gone.get("result") == 0, "the deleted proposition is gone")

    # -- XSS: a concept named like HTML is shown as text and never runs. --
    p.go(url + "/#/search?q=onerror&kind=concept")
    hit = p.visible("#search-results .hit a.concept-link")
    check(hit.text == XSS_NAME, "an HTML-looking name is shown as its text")
    hit.click()
    p.text_in("#concept-title", "<img")
    check(p.js("return window.__xss === undefined"), "the stored markup did not run")
    check(not p.d.find_elements(By.CSS_SELECTOR, "main img"), "no element was made from a stored string")
    p.shot("xss")

    # -- The audit log: filter by interface, outcome, text; the writes made above. --
    p.go(url + "/#/logs?interface=explorer&writes=1")
    table = p.text_in("#logs", "UPDATE")
    check("architect" in table.text and "DELETE PROPOSITIONS" in table.text, "the log shows the explorer's writes")
    check("FIND" not in table.text, "the writes filter leaves reads out")
    p.shot("logs")
    today = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    p.go(url + "/#/logs?writes=1&day=" + today)
    p.text_in("#logs", "architect")
    check(p.css("#logs-day").get_attribute("value") == today, "the day filter is shown")
    p.go(url + "/#/logs?writes=1&day=2000-01-01")
    p.text_in("#logs-status", "No call matches")
    p.go(url + "/#/logs?outcome=error")
    p.text_in("#logs", "KIP_1001")
    p.go(url + "/#/logs?text=Mallory")
    p.text_in("#logs", "Mallory")
    rows = p.d.find_elements(By.CSS_SELECTOR, "#logs tbody tr")
    check(all("Mallory" in r.text for r in rows), "the text filter keeps matching calls only")
    # The sleep cycle's statements (memory_strength decay, by $system) are hidden
    # unless asked for.
    p.go(url + "/#/logs?text=memory_strength")
    p.text_in("#logs-status", "matches")
    check(not p.d.find_elements(By.CSS_SELECTOR, "#logs tbody tr"), "the sleep cycle's statements are hidden by default")
    check(not p.css("#logs-sleep").is_selected(), "the sleep-cycle box is off by default")
    p.go(url + "/#/logs?sleep=1&text=memory_strength")
    table = p.text_in("#logs", "sleep")
    check("memory_strength" in table.text, "asked for, the sleep cycle's statements are shown")
    check(p.css("#logs-sleep").is_selected(), "the sleep-cycle box says so")

    severe = [e for e in p.console_errors() if "favicon" not in e.get("message", "")]
    check(not severe, "no errors in the browser console (CSP violations included): %s" % severe)

    # -- The API key is needed: without it the page shows nothing and cannot write. --
    p.js("sessionStorage.clear()")
    p.go(url + "/#/concept?type=Person&name=Alice")
    p.d.refresh()  # a new page load: the key is gone with the tab's storage
    p.visible("#key-dialog")
    check("protected" in p.css("main").text, "without the key the page shows no data")
    status, body = http(url + "/explorer/api/kip", {"command": 'UPSERT { CONCEPT ?x { {type: "Person", name: "Mallory"} } }', "write": True})
    check(status == 401, "an explorer write without the key is refused")

    # -- A server without an API key: reads work, writes are off in the page and refused. --
    open_url = args.open_url.rstrip("/")
    p.go(open_url + "/#/console")
    p.css("#console-command")
    check(not p.css("#console-write").is_enabled(), "the write button is off without an API key")
    check("--api-key" in p.css("#console-write-note").text, "the page says why")
    check(not p.d.find_elements(By.CSS_SELECTOR, "#fix-form"), "no correction form on the console")
    status, body = http(open_url + "/explorer/api/kip", {"command": 'UPSERT { CONCEPT ?x { {type: "Person", name: "Mallory"} } }', "write": True})
    check(status == 403 and body["error"]["code"] == "KIP_3004", "the server refuses explorer writes without an API key")
    p.go(open_url + "/#/concept?type=Person&name=Alice")
    p.text_in("#concept-title", "Alice")
    check(not p.d.find_elements(By.CSS_SELECTOR, "#fix-form"), "no correction form without an API key")
    print("all explorer checks passed")


if __name__ == "__main__":
    main()
