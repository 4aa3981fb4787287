"""``lmh ui`` driven in real headless Chromium (Debian's chromium + chromium-driver, through selenium).

The server is the real command (``python -m llama_index_memory_hierarchy ui --operator``) in its own process over
a folder holding two users, opened through the secret links it prints (the user's, and the operator's in a
second browser). Checked: without the link nothing
is shown, search shows the expected memory (with its explanation), the
timeline and the live graph render, another user's id in the URL gets nothing, a forget with edits
allowed removes the memory from search, instructions are added, edited and deleted, only the operator's
browser can choose to view another user, forget everything asks for the user id, and no page logs a
console error. Screenshots go to the test's folder, or to ``$LMH_UI_SCREENSHOTS`` (e.g. docs/img) to
refresh the ones in the docs. Skipped when Chromium, its driver or selenium are missing.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from inspector_data import ALICE_ASKED, BOB_SECRET

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
from selenium.common.exceptions import WebDriverException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
#: Seconds to wait for the server (it loads the embedding model first) and for a page element.
SERVER_START, WAIT = 180, 60


def _browser() -> tuple[str, str] | None:
    chromium = next((shutil.which(n) for n in ("chromium", "chromium-browser") if shutil.which(n)), None)
    driver = shutil.which("chromedriver") or next(
        (p for p in ("/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver") if Path(p).exists()), None
    )
    return (chromium, driver) if chromium and driver else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def served(
    two_users: tuple[Path, dict[str, Any]], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str, str]]:
    """``lmh ui --operator`` in its own process: its address, the user's link and the operator's link it printed."""
    if _browser() is None:
        pytest.skip("no Chromium with chromedriver (Debian: apt-get install chromium chromium-driver)")
    folder, _ = two_users
    port = _free_port()
    log = tmp_path_factory.mktemp("server") / "lmh-ui.log"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, "-m", "llama_index_memory_hierarchy", "ui", "--user", "alice", "--dir", str(folder)]
    with log.open("w") as output:
        process = subprocess.Popen(
            [*command, "--port", str(port), "--allow-edits", "--operator"],
            stdout=output,
            stderr=subprocess.STDOUT,
            env=env,
        )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + SERVER_START
    while True:
        try:
            with urllib.request.urlopen(f"{base}/healthz", timeout=5) as response:
                if response.read() == b"ok":
                    break
        except OSError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"lmh ui did not start:\n{log.read_text()[-3000:]}")
        time.sleep(0.5)
    printed = re.findall(r"http://\S+/\?token=\S+", log.read_text())
    assert len(printed) == 2, log.read_text()
    yield base, printed[0], printed[1]
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()


@pytest.fixture(scope="module")
def server(served: tuple[str, str, str]) -> str:
    return served[0]


@pytest.fixture(scope="module")
def browser(served: tuple[str, str, str]) -> Iterator[Any]:
    """Headless Chromium that opened the user's printed link once (the inspector's cookie is set)."""
    driver = _chromium()
    driver.get(served[1])
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def operator(served: tuple[str, str, str]) -> Iterator[Any]:
    """Another headless Chromium, that opened the operator's printed link."""
    driver = _chromium()
    driver.get(served[2])
    yield driver
    driver.quit()


def _chromium() -> Any:
    found = _browser()
    if found is None:
        pytest.skip("no Chromium with chromedriver")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = found[0]
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--lang=en-US"):
        options.add_argument(argument)
    options.add_argument("--window-size=1280,900")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(executable_path=found[1]), options=options)


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = os.environ.get("LMH_UI_SCREENSHOTS")
    folder = Path(target) if target else tmp_path_factory.mktemp("screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def console_errors(driver: Any) -> list[str]:
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


@pytest.fixture(autouse=True)
def _fresh_console(browser: Any) -> None:
    """Drain the browser log first, so a test reads only its own console errors, not those a failed one left."""
    browser.get_log("browser")


def wait_until_replaced(driver: Any, element: Any) -> None:
    """Wait for the page holding ``element`` to be replaced by the next one.

    Chromium can answer a probe of an element of a page being unloaded with an \"unhandled inspector
    error\" instead of a stale reference; that is the navigation still under way, so it is polled again.
    """
    WebDriverWait(driver, WAIT, ignored_exceptions=(WebDriverException,)).until(
        expected_conditions.staleness_of(element)
    )


def wait_for(driver: Any, css: str) -> Any:
    return WebDriverWait(driver, WAIT).until(expected_conditions.presence_of_element_located((By.CSS_SELECTOR, css)))


def search_for(driver: Any, base: str, query: str) -> list[Any]:
    driver.get(f"{base}/search")
    box = wait_for(driver, "input[name=q]")
    box.clear()
    box.send_keys(query)
    driver.find_element(By.CSS_SELECTOR, "form[role=search] button").click()
    # the empty search page has a #results list too: wait for the answer page, not the old one
    wait_until_replaced(driver, box)
    wait_for(driver, "#results")
    return driver.find_elements(By.CSS_SELECTOR, "#results .result")


def test_nothing_is_shown_without_the_printed_link(served: tuple[str, str, str], browser: Any) -> None:
    base, link, _ = served
    browser.delete_all_cookies()
    browser.get(f"{base}/search?q=which+tea+do+I+like")
    assert "secret link" in browser.find_element(By.TAG_NAME, "body").text
    assert "genmaicha" not in browser.page_source and "alice" not in browser.page_source
    browser.get(link)
    wait_for(browser, "#served-user")
    assert browser.current_url == f"{base}/" and "token=" not in browser.current_url
    browser.get_log("browser")  # the refused page answers 401, logged by the browser


def test_search_timeline_graph_profile_and_context(server: str, browser: Any, shots: Path) -> None:
    results = search_for(browser, server, "which tea do I like")
    assert results, "no result"
    first = results[0]
    assert "genmaicha" in first.find_element(By.CSS_SELECTOR, ".content").text
    rows = first.find_elements(By.CSS_SELECTOR, ".explanation tr")  # the cross-tier search explains its ranking
    assert rows and all(r.find_element(By.CSS_SELECTOR, "meter") for r in rows)
    signals = [r.find_element(By.TAG_NAME, "th").text for r in rows]
    assert any(s in signals for s in ("dense", "keyword")), signals
    browser.save_screenshot(str(shots / "ui-search.png"))

    browser.get(f"{server}/timeline")
    sessions = [s.get_attribute("data-session") for s in browser.find_elements(By.CSS_SELECTOR, "#timeline .session")]
    assert sessions == ["monday", "friday"]
    assert "half marathon" in browser.find_element(By.CSS_SELECTOR, "#timeline").text
    browser.save_screenshot(str(shots / "ui-timeline.png"))

    browser.get(f"{server}/graph")
    frame = wait_for(browser, "#graph-frame")
    browser.switch_to.frame(frame)
    WebDriverWait(browser, WAIT).until(
        lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "true"
    )
    body = browser.find_element(By.TAG_NAME, "body")
    assert (body.get_attribute("data-errors") or "") in ("", "[]")
    assert "Lyon" in browser.find_element(By.ID, "node-list").text
    browser.switch_to.default_content()
    browser.save_screenshot(str(shots / "ui-graph.png"))

    browser.get(f"{server}/context?input=which+tea+do+I+like")
    message = wait_for(browser, ".message[data-role=system]")
    assert "genmaicha" in message.text and "tokens" in message.text
    assert int(browser.find_element(By.ID, "total-tokens").text.split()[1]) > 0
    browser.save_screenshot(str(shots / "ui-context.png"))

    browser.get(f"{server}/profile")
    wait_for(browser, "main h1")
    assert console_errors(browser) == []


def test_another_users_id_in_the_url_gets_nothing(
    server: str, browser: Any, two_users: tuple[Path, dict[str, Any]]
) -> None:
    for path in ("/search?q=vault+code&user=bob", "/timeline?user_id=bob", f"/memory/{two_users[1]['bob']}"):
        browser.get(server + path)
        text = wait_for(browser, "main").text
        assert "oolong" not in text and BOB_SECRET not in browser.page_source, path
        assert browser.find_elements(By.ID, "error-detail"), path
    assert not any("oolong" in r.text for r in search_for(browser, server, "vault code"))
    browser.get_log("browser")  # the refusals above log their 403/404 as console errors by design


def test_the_access_log_shows_what_get_showed(server: str, browser: Any) -> None:
    # before any forget: forgetting a memory also drops the log rows that name it
    browser.get(f"{server}/access-log")
    wait_for(browser, "main h1")
    assert "Access log" in browser.find_element(By.TAG_NAME, "h1").text
    row = next(r for r in browser.find_elements(By.CSS_SELECTOR, "#access-log .access") if ALICE_ASKED in r.text)
    assert "monday" in row.text and row.find_elements(By.CSS_SELECTOR, "li[data-memory-id] a")
    erase = browser.find_element(By.ID, "erase-log")
    erase.click()
    wait_until_replaced(browser, erase)
    assert wait_for(browser, "#no-accesses")
    assert console_errors(browser) == []


def test_forget_asks_first_then_removes_the_memory_from_search(server: str, browser: Any) -> None:
    results = search_for(browser, server, "half marathon training")
    target = next(r for r in results if "half marathon" in r.find_element(By.CSS_SELECTOR, ".content").text)
    memory_id = target.get_attribute("data-memory-id")
    target.find_element(By.CSS_SELECTOR, "button.forget").click()
    keep = wait_for(browser, "#cancel-forget")  # the confirmation page: keeping it changes nothing
    assert "half marathon" in browser.find_element(By.ID, "memory-content").text
    keep.click()
    wait_until_replaced(browser, keep)
    wait_for(browser, "#results")
    results = [
        r for r in browser.find_elements(By.CSS_SELECTOR, ".result") if r.get_attribute("data-memory-id") == memory_id
    ]
    assert results, "kept, and back on the search page"
    results[0].find_element(By.CSS_SELECTOR, "button.forget").click()
    confirm = wait_for(browser, "#confirm-forget")
    confirm.click()
    wait_until_replaced(browser, confirm)  # the page after the POST
    wait_for(browser, "#results")
    assert memory_id not in [
        r.get_attribute("data-memory-id") for r in browser.find_elements(By.CSS_SELECTOR, ".result")
    ]
    again = search_for(browser, server, "half marathon training")
    assert memory_id not in [r.get_attribute("data-memory-id") for r in again]
    assert console_errors(browser) == []


def fill(driver: Any, css: str, value: str) -> None:
    field = driver.find_element(By.CSS_SELECTOR, css)
    field.clear()
    field.send_keys(value)


def tags_shown(driver: Any) -> list[str]:
    return [tag.text for tag in driver.find_elements(By.CSS_SELECTOR, "#memory-tags .tag")]


def test_create_then_edit_a_memory(server: str, browser: Any, shots: Path) -> None:
    browser.get(server)
    browser.find_element(By.ID, "new-memory").click()
    wait_for(browser, "#new-form")
    fill(browser, "#new-form textarea[name=content]", "Alice keeps her passport in the blue drawer.")
    fill(browser, "#new-form input[name=tags]", "travel, documents")
    fill(browser, "#new-form input[name=importance]", "0.8")
    create = browser.find_element(By.ID, "create")
    create.click()
    wait_until_replaced(browser, create)
    assert "blue drawer" in wait_for(browser, "#memory-content").text
    assert tags_shown(browser) == ["travel", "documents"]
    assert browser.find_element(By.ID, "memory-importance").text == "0.80"

    fill(browser, "#edit-form textarea[name=content]", "Alice keeps her passport in the red drawer.")
    fill(browser, "#edit-form input[name=importance]", "0.95")
    fill(browser, "#edit-form input[name=tags]", "travel")
    browser.find_element(By.CSS_SELECTOR, "#edit-form input[name=pinned]").click()
    save = browser.find_element(By.ID, "save")
    save.click()
    wait_until_replaced(browser, save)
    assert "red drawer" in wait_for(browser, "#memory-content").text
    assert tags_shown(browser) == ["travel"]
    assert browser.find_element(By.ID, "memory-importance").text == "0.95"
    assert browser.find_element(By.ID, "memory-pinned").text == "yes"
    browser.save_screenshot(str(shots / "ui-memory.png"))
    assert any("red drawer" in r.text for r in search_for(browser, server, "where is the passport"))
    assert console_errors(browser) == []


def test_memories_list_timeline_range_and_a_facts_sources(
    server: str, browser: Any, two_users: tuple[Path, dict[str, Any]]
) -> None:
    browser.get(f"{server}/memories")
    wait_for(browser, "#filters")
    fill(browser, "#filters input[name=kind]", "fact")
    browser.find_element(By.CSS_SELECTOR, "#filters select[name=tier] option[value=semantic]").click()
    button = browser.find_element(By.CSS_SELECTOR, "#filters button")
    button.click()
    wait_until_replaced(browser, button)
    rows = wait_for(browser, "#memories").find_elements(By.CSS_SELECTOR, ".memory")
    assert rows and all("tier" in r.get_attribute("innerHTML") for r in rows)
    assert any("Lyon" in r.text for r in rows) and not any("half marathon" in r.text for r in rows)
    assert "oolong" not in browser.page_source

    tea_fact = two_users[1]["tea_fact"]
    next(r for r in rows if r.get_attribute("data-memory-id") == tea_fact).find_element(By.TAG_NAME, "a").click()
    source = wait_for(browser, "#sources li")
    assert source.get_attribute("data-memory-id") == two_users[1]["alice_tea"]
    source.find_element(By.TAG_NAME, "a").click()
    derived = wait_for(browser, "#derived li")
    assert derived.get_attribute("data-memory-id") == tea_fact

    browser.get(f"{server}/timeline")
    fill(browser, "#range input[name=since]", "2999-01-01")
    show = browser.find_element(By.CSS_SELECTOR, "#range button")
    show.click()
    wait_until_replaced(browser, show)
    assert wait_for(browser, "#no-events") and "since=2999-01-01" in browser.current_url
    fill(browser, "#range input[name=since]", "7d")
    show = browser.find_element(By.CSS_SELECTOR, "#range button")
    show.click()
    wait_until_replaced(browser, show)
    assert "genmaicha" in wait_for(browser, "#timeline").text
    assert console_errors(browser) == []


def test_instructions_and_procedures_added_edited_and_deleted(server: str, browser: Any, shots: Path) -> None:
    browser.get(f"{server}/")
    browser.find_element(By.LINK_TEXT, "Instructions").click()
    wait_for(browser, "#instruction-form")
    for rule in ("Always answer in metric units.", "Actually, imperial units are fine again."):
        fill(browser, "#instruction-form input[name=text]", rule)
        add = browser.find_element(By.ID, "add-instruction")
        add.click()
        wait_until_replaced(browser, add)
        wait_for(browser, "#instruction-form")
    assert "imperial units are fine" in browser.find_element(By.ID, "instructions").text
    assert "metric units" in browser.find_element(By.ID, "replaced").text  # kept as history
    browser.save_screenshot(str(shots / "ui-instructions.png"))

    browser.find_element(By.LINK_TEXT, "Actually, imperial units are fine again.").click()
    wait_for(browser, "#edit-form")
    fill(browser, "#edit-form textarea[name=content]", "Use imperial units.")
    save = browser.find_element(By.ID, "save")
    save.click()
    wait_until_replaced(browser, save)
    assert wait_for(browser, "#memory-content").text == "Use imperial units."
    browser.get(f"{server}/procedural")
    row = wait_for(browser, "#instructions .instruction")
    assert "Use imperial units." in row.text
    row.find_element(By.CSS_SELECTOR, "a.forget").click()
    confirm = wait_for(browser, "#confirm-forget")
    assert "Use imperial units." in browser.find_element(By.ID, "memory-content").text
    confirm.click()
    wait_until_replaced(browser, confirm)
    assert wait_for(browser, "#no-instructions") and browser.current_url == f"{server}/procedural"
    assert "Use imperial units" not in browser.find_element(By.TAG_NAME, "main").text
    assert console_errors(browser) == []


def test_an_operator_chooses_the_user_an_ordinary_link_cannot(server: str, browser: Any, operator: Any) -> None:
    browser.get(f"{server}/users")
    assert browser.find_elements(By.ID, "error-detail") and BOB_SECRET not in browser.page_source
    assert not browser.find_elements(By.ID, "switch-user")
    browser.get_log("browser")  # the refusal answers 403, logged by the browser

    operator.get(server)
    assert wait_for(operator, "#operator-mode") and operator.find_element(By.ID, "served-user").text == "alice"
    operator.find_element(By.ID, "switch-user").click()
    bob = wait_for(operator, "#users tr[data-user=bob]")
    view = bob.find_element(By.CSS_SELECTOR, "button.view-user")
    view.click()
    wait_until_replaced(operator, view)
    assert wait_for(operator, "#served-user").text == "bob"
    assert any(BOB_SECRET in r.text for r in search_for(operator, server, "vault code"))
    assert not any("genmaicha" in r.text for r in search_for(operator, server, "which tea do I like"))
    assert not any("oolong" in r.text for r in search_for(browser, server, "vault code"))  # the user link: still alice
    assert wait_for(browser, "#served-user").text == "alice"

    operator.get(f"{server}/users")
    alice = wait_for(operator, "#users tr[data-user=alice]")
    view = alice.find_element(By.CSS_SELECTOR, "button.view-user")
    view.click()
    wait_until_replaced(operator, view)
    assert wait_for(operator, "#served-user").text == "alice"
    assert console_errors(operator) == [] and console_errors(browser) == []


def test_forget_everything_asks_for_the_user_id(server: str, browser: Any) -> None:
    browser.get(f"{server}/forget-everything")
    wait_for(browser, "input[name=confirm]").send_keys("not-alice")
    browser.find_element(By.CSS_SELECTOR, "main form button").click()
    assert "nothing was erased" in wait_for(browser, ".error").text
    browser.get_log("browser")  # the refused confirmation answers 400, logged by the browser
    assert search_for(browser, server, "which tea do I like")
    browser.get(f"{server}/forget-everything")
    wait_for(browser, "input[name=confirm]").send_keys("alice")
    browser.find_element(By.CSS_SELECTOR, "main form button").click()
    assert "Erased user alice" in wait_for(browser, "#erased").text
    assert search_for(browser, server, "which tea do I like") == []
    assert console_errors(browser) == []
