"""Approvals through the Python SDK's elicitation callback, in both eras:
legacy sessions get `elicitation/create`, 2026-07-28 requests get an
input-required result that the SDK answers and retries."""

import json

import anyio
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.types import ElicitRequestParams, ElicitResult

pytestmark = pytest.mark.anyio

WRITE = {"path": "approved.txt", "content": "hello"}


def answering(action: str, content=None, asked=None, delay: float = 0.0):
    async def on_elicit(ctx: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        if asked is not None:
            asked.append(params.message)
        if delay:
            await anyio.sleep(delay)
        return ElicitResult(action=action, content=content)

    return on_elicit


def audit_events(setup) -> list[dict]:
    return [json.loads(line)["body"] for line in setup.audit_lines() if '"kind":"approval"' in line]


async def test_an_approved_write_runs(setup, mode):
    asked = []
    callback = answering("accept", {"approve": True}, asked)
    async with Client(setup.params(), mode=mode, elicitation_callback=callback) as client:
        result = await client.call_tool("write_file", WRITE)
        assert not result.is_error, result
    assert (setup.root / "approved.txt").read_text() == "hello"
    assert len(asked) == 1
    assert "write_file" in asked[0] and "approval.writes" in asked[0]
    events = [e["event"] for e in audit_events(setup)]
    assert events == ["asked", "answered"]


@pytest.mark.parametrize(
    "action,content,why",
    [("decline", None, "decline"), ("cancel", None, "cancel"), ("accept", {"approve": False}, "not_approved")],
)
async def test_a_refused_question_runs_nothing(setup, mode, action, content, why):
    async with Client(setup.params(), mode=mode, elicitation_callback=answering(action, content)) as client:
        result = await client.call_tool("write_file", WRITE)
        assert result.is_error
        assert result.structured_content["reason_code"] == "approval_declined"
        assert why in result.structured_content["reason"]
    assert not (setup.root / "approved.txt").exists()


async def test_an_unanswered_legacy_question_times_out(setup):
    setup.serve_flags = ["--approval-timeout", "1"]
    callback = answering("accept", {"approve": True}, delay=3)
    async with Client(setup.params(), mode="legacy", elicitation_callback=callback) as client:
        result = await client.call_tool("write_file", WRITE)
        assert result.is_error
        assert result.structured_content["reason_code"] == "approval_declined"
        assert "timeout" in result.structured_content["reason"]
    assert not (setup.root / "approved.txt").exists()


async def test_an_expired_2026_question_is_asked_again(setup):
    setup.serve_flags = ["--approval-ttl", "2"]
    asked = []
    slow_then_fast = iter([3.5, 0.0])

    async def on_elicit(ctx: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        asked.append(params.message)
        await anyio.sleep(next(slow_then_fast, 0.0))
        return ElicitResult(action="accept", content={"approve": True})

    async with Client(setup.params(), mode="2026-07-28", elicitation_callback=on_elicit) as client:
        result = await client.call_tool("write_file", WRITE)
        assert not result.is_error, result
    assert len(asked) >= 2, "the expired approval was not used; a fresh one was asked for"
    refused = [e["detail"]["why"] for e in audit_events(setup) if e["event"] == "state_refused"]
    assert refused and set(refused) == {"expired"}


async def test_without_the_capability_nobody_is_asked(setup, mode):
    async with Client(setup.params(), mode=mode) as client:
        result = await client.call_tool("write_file", WRITE)
        assert result.is_error
        assert result.structured_content["reason_code"] == "approval_unavailable"
    assert not (setup.root / "approved.txt").exists()


async def test_a_destructive_tool_cannot_be_approved_from_the_client(trusted_setup, mode):
    (trusted_setup.root / "victim.txt").write_text("keep me")
    asked = []
    callback = answering("accept", {"approve": True}, asked)
    async with Client(trusted_setup.params(), mode=mode, elicitation_callback=callback) as client:
        result = await client.call_tool("delete_file", {"path": "victim.txt"})
        assert result.is_error
        assert result.structured_content["reason_code"] == "forbidden"
        ids = [p["id"] for p in result.structured_content["policies"]]
        assert "approval.destructive_not_from_client" in ids
    assert asked == []
    assert (trusted_setup.root / "victim.txt").exists()
