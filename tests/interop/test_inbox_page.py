"""The approval inbox's page in a real browser (Debian's Chromium, driven
by Selenium through chromedriver): a Python SDK client that declares no
elicitation asks to write; an approver logs in and approves from the page,
and the call completes; a second question is denied with a reason the client
is told; an approver of another group sees a question and cannot approve it;
a form whose CSRF token was tampered with is refused.

Run by tests/inbox_page.rs (not by the SDK suite), which sets
PORTCULLIS_TEST_BROWSER; with PORTCULLIS_SCREENSHOT it saves the page as the
book shows it."""

import json
import os
import time
from pathlib import Path

import anyio
import pytest
from mcp import Client
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from conftest import BIN, Setup, portcullis

pytestmark = pytest.mark.anyio

INBOX_LINE = "portcullis: serving the approval inbox at "

SECURITY_APPROVES_WRITES = """
@id("approve.security.writes")
@reason("the security team approves writes of paired clients")
permit (
  principal in Portcullis::ApproverGroup::"security",
  action == Portcullis::Action::"approve",
  resource
)
when { resource.effects.contains("write") && context.client_tier == "paired" };
"""


def approver(setup: Setup, name: str, group: str) -> str:
    created = portcullis(
        "token", "create", name, "--approver", group, "--store", str(setup.store),
        "--policies", str(setup.base / "policies"), "--schema", str(setup.base / "schemas"),
        "--format", "json",
    )
    return json.loads(created)["token"]


@pytest.fixture
def inbox(tmp_path: Path):
    setup = Setup(tmp_path, transport="http")
    (setup.base / "policies" / "45_approvers.cedar").write_text(SECURITY_APPROVES_WRITES)
    tiers_file = setup.base / "policies" / "tiers.json"
    tiers = json.loads(tiers_file.read_text())
    tiers.append({"uid": {"type": "Portcullis::ApproverGroup", "id": "ops"}, "attrs": {}, "parents": []})
    tiers_file.write_text(json.dumps(tiers))
    tokens = {"alice": approver(setup, "alice", "security"), "bob": approver(setup, "bob", "ops")}
    setup.serve_flags = ["--approvals", "127.0.0.1:0"]
    setup.start_http()
    log = (setup.base / "serve-http.log").read_text()
    page = next(line[len(INBOX_LINE):].strip() for line in log.splitlines() if line.startswith(INBOX_LINE))
    yield setup, page, tokens
    setup.stop()


def browser() -> webdriver.Chrome:
    options = Options()
    options.binary_location = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1100,900"):
        options.add_argument(flag)
    service = Service(os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver"))
    return webdriver.Chrome(service=service, options=options)


def gone(element) -> bool:
    """Whether `element`'s document has been left. Chromedriver says so in
    two ways: a stale element, or (asked while the new document replaces
    the old) an inspector error that the node "does not belong to the
    document", which Selenium's own `staleness_of` does not take for one."""
    try:
        element.is_enabled()
        return False
    except StaleElementReferenceException:
        return True
    except WebDriverException as error:
        if "does not belong to the document" in (error.msg or ""):
            return True
        raise


def submitted(driver: webdriver.Chrome, button) -> None:
    """Clicks a form's button and waits for the page the form leads to: the
    old document gone and the new one loaded (read earlier, an element of
    the old one goes stale under the reader)."""
    old = driver.find_element(By.TAG_NAME, "html")
    button.click()
    WebDriverWait(driver, 60).until(lambda _: gone(old))
    WebDriverWait(driver, 60).until(
        lambda d: d.execute_script("return document.readyState") == "complete"
    )


def log_in(driver: webdriver.Chrome, page: str, token: str) -> None:
    driver.get(page)
    driver.find_element(By.ID, "token").send_keys(token)
    submitted(driver, driver.find_element(By.ID, "login"))
    assert driver.find_element(By.ID, "approver").text in ("alice", "bob"), driver.page_source


def pending_question(driver: webdriver.Chrome, page: str, deadline: float = 120):
    """Waits for the event the approver waits for: a pending question on
    the page (reloaded until one is there)."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        driver.get(page)
        found = driver.find_elements(By.CSS_SELECTOR, "section.question.pending")
        if found:
            return found[0]
        time.sleep(0.05)
    raise AssertionError(f"no question came: {driver.page_source}")


def answer(driver: webdriver.Chrome, section, verdict: str, reason: str) -> None:
    section.find_element(By.NAME, "reason").send_keys(reason)
    submitted(driver, section.find_element(By.CSS_SELECTOR, f"button[name=verdict][value={verdict}]"))


def approve_from_the_browser(page: str, tokens: dict, screenshot: str | None) -> None:
    driver = browser()
    try:
        # bob (ops) sees the question and cannot approve it: Cedar says no.
        log_in(driver, page, tokens["bob"])
        question = pending_question(driver, page)
        question_id = question.get_attribute("id")
        answer(driver, question, "approve", "looks fine to me")
        message = driver.find_element(By.ID, "message").text
        assert "do not let `bob` answer" in message, driver.page_source
        submitted(driver, driver.find_element(By.CSS_SELECTOR, "form[action='/logout'] button"))

        # alice (security) approves it.
        log_in(driver, page, tokens["alice"])
        question = pending_question(driver, page)
        assert question.get_attribute("id") == question_id
        text = question.text
        assert "python-sdk" in text and "write_file" in text and "browser.txt" in text, text
        assert "approval.writes" in text, text
        if screenshot:
            driver.save_screenshot(screenshot)
        answer(driver, question, "approve", "ticket 42")
        done = driver.find_element(By.ID, question_id)
        assert "approved by alice" in done.text, done.text
    finally:
        driver.quit()


def deny_and_forge_from_the_browser(page: str, tokens: dict) -> None:
    driver = browser()
    try:
        log_in(driver, page, tokens["alice"])
        question = pending_question(driver, page)
        # A form whose CSRF token is not the session's is refused.
        driver.execute_script("arguments[0].querySelector('input[name=csrf]').value = 'forged'", question)
        answer(driver, question, "deny", "forged")
        assert "CSRF" in driver.find_element(By.ID, "message").text, driver.page_source
        question = pending_question(driver, page)
        answer(driver, question, "deny", "not during the freeze")
        page_text = driver.find_element(By.TAG_NAME, "body").text
        assert "denied by alice" in page_text, page_text
    finally:
        driver.quit()


async def test_an_approver_answers_an_unattended_client_from_the_browser(inbox):
    setup, page, tokens = inbox
    screenshot = os.environ.get("PORTCULLIS_SCREENSHOT")
    progress = []

    async def on_progress(done, total, message):
        progress.append(message)

    async with Client(setup.params(), mode="legacy") as client:
        results = {}

        async def call(name: str, path: str) -> None:
            results[name] = await client.call_tool(
                "write_file", {"path": path, "content": "x"}, progress_callback=on_progress
            )

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(call, "approved", "browser.txt")
            await anyio.to_thread.run_sync(approve_from_the_browser, page, tokens, screenshot)
        assert not results["approved"].is_error, results["approved"]
        assert (setup.root / "browser.txt").read_text() == "x"
        assert any(m and "in the inbox" in m for m in progress), progress

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(call, "denied", "denied.txt")
            await anyio.to_thread.run_sync(deny_and_forge_from_the_browser, page, tokens)
        denied = results["denied"]
        assert denied.is_error
        assert denied.structured_content["reason_code"] == "approval_declined"
        assert "denied by alice: not during the freeze" in denied.structured_content["reason"]
        assert not (setup.root / "denied.txt").exists()

    approves = [
        json.loads(line)["body"] for line in (setup.base / "audit" / "audit.jsonl").read_text().splitlines()
        if '"action":"approve"' in line
    ]
    assert [(a["approver"]["name"], a["decision"]) for a in approves] == [
        ("bob", "deny"), ("alice", "allow"), ("alice", "allow"),
    ]
