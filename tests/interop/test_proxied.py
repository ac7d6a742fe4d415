"""Calls portcullis relays to a downstream server (servers/downstream.py),
driven by the official Python SDK over stdio and Streamable HTTP, in both
eras: every answer is read through the SDK's own types, so a result the
SDK cannot parse (no `resultType` for a 2026-07-28 client, structured
content that does not fit the advertised schema) fails here."""

import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.types import ElicitRequestParams, ElicitResult

pytestmark = pytest.mark.anyio

BIN = __import__("os").environ["PORTCULLIS_BIN"]
DOWNSTREAM = Path(__file__).parent / "servers" / "downstream.py"
SECRET_CONTENT = "the-content-of-a-note-4f1c9e"

POLICIES = """
@id("allow.down")
@reason("test clients may use the downstream server's tools")
permit (
  principal,
  action in Portcullis::Action::"use_tool",
  resource in Portcullis::Server::"down"
);
"""


def with_downstream(setup, pass_errors: bool = False) -> None:
    """Declares and pins the downstream server, and allows its tools."""
    (setup.base / "policies" / "servers.toml").write_text(f"""
[servers.down]
command = "{sys.executable}"
args = ["{DOWNSTREAM}"]
timeout = "60s"
pass_errors = {str(pass_errors).lower()}

[servers.down.tools.note]
effects = ["write"]
paths = {{ path = "write" }}

[servers.down.tools."*"]
effects = ["none"]
""")
    (setup.base / "policies" / "20_allowlist.cedar").write_text(POLICIES)
    subprocess.run(
        [BIN, "servers", "pin", "--root", str(setup.root),
         "--policies", str(setup.base / "policies"), "--schema", str(setup.base / "schemas")],
        check=True, capture_output=True,
    )


def records(setup, kind: str) -> list[dict]:
    return [json.loads(line)["body"] for line in setup.audit_lines() if f'"kind":"{kind}"' in line]


def approving(asked: list):
    async def on_elicit(ctx: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"approve": True})

    return on_elicit


async def test_an_allowed_result_reads_as_text_and_as_structured_content(setup, mode):
    with_downstream(setup)
    async with Client(setup.params(), mode=mode) as client:
        text = await client.call_tool("down__describe", {})
        assert not text.is_error, text
        assert text.content[0].text == "described"
        # The server's words are marked as its own; portcullis's refusals are not.
        assert text.meta["portcullis/origin"] == {"source": "downstream", "server": "down", "tool": "describe"}
        refused = await client.call_tool("down__note", {"path": "../outside.txt", "content": "x"})
        assert refused.is_error and "portcullis/origin" not in (refused.meta or {})
        shaped = await client.call_tool("down__shaped", {})
        assert not shaped.is_error, shaped
        assert shaped.structured_content == {"decision": "allow", "reason": "harmless"}
        wrapped = await client.call_tool("tool_call", {"name": "down__shaped", "arguments": {}})
        assert wrapped.structured_content == shaped.structured_content


@pytest.mark.parametrize("pass_errors", [False, True])
async def test_a_result_that_does_not_fit_its_schema_is_a_readable_failure(setup, mode, pass_errors):
    with_downstream(setup, pass_errors)
    async with Client(setup.params(), mode=mode) as client:
        result = await client.call_tool("down__unshaped", {})
    assert result.is_error, result
    body = result.structured_content
    assert body["reason_code"] == "tool_failed"
    assert body["failure"] == "downstream_invalid_result"
    assert "no structuredContent" in body["reason"]
    texts = [block.text for block in result.content]
    assert ("allow: harmless" in texts) == pass_errors, texts
    setup.stop()
    ended = records(setup, "outcome")[-1]
    assert ended["status"] == "failed"
    assert ended["failure"] == "downstream_invalid_result"


async def test_a_denied_call_reaches_no_server_and_says_why(setup, mode):
    with_downstream(setup)
    async with Client(setup.params(), mode=mode) as client:
        result = await client.call_tool("down__note", {"path": "../outside.txt", "content": "x"})
        assert result.is_error
        assert result.structured_content["reason_code"] == "forbidden"
        assert result.structured_content["policies"][0]["id"] == "hard.no_write_outside_root"
        after = await client.call_tool("down__describe", {})
        assert not after.is_error


async def test_an_asked_call_runs_once_approved_and_its_content_stays_out_of_the_log(setup, mode):
    with_downstream(setup)
    asked = []
    async with Client(setup.params(), mode=mode, elicitation_callback=approving(asked)) as client:
        result = await client.call_tool("down__note", {"path": "notes/a.txt", "content": SECRET_CONTENT})
    assert not result.is_error, result
    assert result.content[0].text == f"{len(SECRET_CONTENT)} characters for {setup.root.resolve() / 'notes/a.txt'}"
    assert len(asked) == 1 and "down__note" in asked[0]
    setup.stop()
    log = "\n".join(setup.audit_lines())
    assert SECRET_CONTENT not in log
    decided = [r for r in records(setup, "decision") if r["tool"] == "down__note" and "input" in r["facts"]]
    assert decided, "the call was not recorded"
    facts = decided[-1]["facts"]["input"]
    assert facts["values"] == {"path": "notes/a.txt"}
    assert set(facts["redacted"]) == {"content"}


@pytest.mark.parametrize("pass_errors", [False, True])
async def test_a_downstream_error_reads_as_an_error_result(setup, mode, pass_errors):
    with_downstream(setup, pass_errors)
    async with Client(setup.params(), mode=mode) as client:
        result = await client.call_tool("down__fail", {})
    assert result.is_error
    texts = " ".join(getattr(block, "text", "") for block in result.content)
    assert ("Traceback" in texts) == pass_errors, texts
    if not pass_errors:
        assert result.structured_content["failure"] == "downstream_error"


async def test_progress_is_relayed_in_order_and_the_result_reads(setup, mode):
    with_downstream(setup)
    seen = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, message))

    async with Client(setup.params(), mode=mode) as client:
        result = await client.call_tool("down__slow", {"steps": 3, "delay": 0.01}, progress_callback=on_progress)
    assert not result.is_error, result
    assert result.content[0].text == "counted to 3"
    assert seen == [(1, "step 1"), (2, "step 2"), (3, "step 3")]


async def test_a_cancelled_call_ends_and_the_next_one_reads(setup, mode):
    with_downstream(setup)
    started = anyio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        started.set()

    async with Client(setup.params(), mode=mode) as client:
        async with anyio.create_task_group() as group:
            async def call() -> None:
                await client.call_tool("down__slow", {"steps": 1000, "delay": 0.05}, progress_callback=on_progress)

            group.start_soon(call)
            with anyio.fail_after(60):
                await started.wait()
            group.cancel_scope.cancel()
        after = await client.call_tool("down__describe", {})
        assert not after.is_error
        assert after.content[0].text == "described"


TASKED = Path(__file__).parent / "servers" / "tasked.py"


async def test_a_2026_downstream_that_runs_its_call_as_a_task_answers_as_one_result(setup, mode):
    """The downstream speaks 2026-07-28 and runs `job` as a task of its own:
    a client that asks for no task reads the result as any call's, through
    the SDK's types, in both eras."""
    (setup.base / "policies" / "servers.toml").write_text(f"""
[servers.long]
command = "{sys.executable}"
args = ["{TASKED}"]
protocol = "auto"
timeout = "60s"

[servers.long.tools."*"]
effects = ["none"]
""")
    (setup.base / "policies" / "20_allowlist.cedar").write_text(
        POLICIES.replace('Portcullis::Server::"down"', 'Portcullis::Server::"long"')
    )
    subprocess.run(
        [BIN, "servers", "pin", "--root", str(setup.root),
         "--policies", str(setup.base / "policies"), "--schema", str(setup.base / "schemas")],
        check=True, capture_output=True,
    )
    async with Client(setup.params(), mode=mode) as client:
        result = await client.call_tool("long__job", {"text": "the report"})
        wrapped = await client.call_tool("tool_call", {"name": "long__job", "arguments": {"text": "again"}})
    assert not result.is_error, result
    assert result.content[0].text == "done: the report"
    assert result.structured_content == {"result": "done: the report"}
    assert wrapped.content[0].text == "done: again"
    setup.stop()
    ended = [r for r in records(setup, "outcome") if r["status"] == "executed"]
    assert len(ended) == 2, ended
