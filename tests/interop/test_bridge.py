"""The agent bridge driven by the official Python SDK, over stdio and
Streamable HTTP (and through a fleet, when the tests are given one), in both
eras: a conversation with an agent shaped like
`codex mcp-server` (servers/fake_codex.py), progress, both kinds of cancel,
and two clients that cannot see each other's sessions."""

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client

pytestmark = pytest.mark.anyio

BIN = os.environ["PORTCULLIS_BIN"]
FAKE_CODEX = Path(__file__).parent / "servers" / "fake_codex.py"
BRIDGE_TOOLS = {"sessions_list", "session_get", "prompt_send", "prompt_cancel"}

ALLOW_BRIDGE = """
@id("allow.bridge")
@reason("test clients may talk to the agent through the bridge")
permit (
  principal,
  action in Portcullis::Action::"use_tool",
  resource in Portcullis::Server::"bridge"
);
"""


def policy_flags(setup) -> list[str]:
    return ["--policies", str(setup.base / "policies"), "--schema", str(setup.base / "schemas")]


def with_agent(setup) -> Path:
    """Declares the fake agent, pins its tools and allows the bridge; the
    file the agent writes its events to."""
    events = setup.base / "events.txt"
    events.write_text("")
    (setup.base / "policies" / "servers.toml").write_text(f"""
[servers.agent]
command = "{sys.executable}"
args = ["{FAKE_CODEX}"]
env = {{ EVENTS = "{events}", THREADS = "{setup.base / 'threads.json'}" }}
kind = "agent"
preset = "codex"
timeout = "60s"
writable = ["{setup.base}"]
""")
    (setup.base / "policies" / "20_allowlist.cedar").write_text(ALLOW_BRIDGE)
    subprocess.run([BIN, "servers", "pin", "--root", str(setup.root), *policy_flags(setup)], check=True, capture_output=True)
    setup.serve_flags += ["--sessions", str(setup.base / "state" / "sessions.sqlite3")]
    return events


def second_client(setup, name: str) -> str:
    return setup.create_client(name)


async def wait_for_line(events: Path, prefix: str, count: int) -> None:
    """Waits for the agent to have written `count` lines starting with
    `prefix` (the event itself, not a guessed time)."""
    with anyio.fail_after(60):
        while sum(line.startswith(prefix) for line in events.read_text().splitlines()) < count:
            await anyio.sleep(0.02)


async def test_a_conversation_belongs_to_the_client_that_started_it(setup, mode):
    with_agent(setup)
    other = second_client(setup, "other")
    steps = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        steps.append((progress, message))

    async with Client(setup.params(), mode=mode) as alice:
        names = {t.name for t in (await alice.list_tools()).tools}
        assert BRIDGE_TOOLS <= names
        assert not any(name.startswith("agent__") for name in names), "the agent's own tools are the bridge's"
        first = await alice.call_tool("prompt_send", {"prompt": "hello agent"}, progress_callback=on_progress)
        assert not first.is_error, first
        session_id = first.structured_content["session_id"]
        assert first.structured_content["reply"].startswith("turn 1 of ")
        # Every step, in order, before the reply.
        assert steps == [(1, "thinking"), (2, "answering")], steps
        second = await alice.call_tool("prompt_send", {"prompt": "go on", "session_id": session_id})
        reply = second.structured_content["reply"]
        assert "turn 2 of" in reply and "first you said: hello agent" in reply, reply
        assert second.structured_content["session_id"] == session_id
        listed = (await alice.call_tool("sessions_list", {})).structured_content["sessions"]
        assert [(s["id"], s["turns"], s["state"], s["title"]) for s in listed] == [(session_id, 2, "completed", "hello agent")]
        got = (await alice.call_tool("session_get", {"session_id": session_id})).structured_content
        assert [t["prompt"] for t in got["turns"]] == ["hello agent", "go on"]
        assert got["turns"][1]["reply"] == reply

    async with Client(setup.params(token=other), mode=mode) as other_client:
        assert (await other_client.call_tool("sessions_list", {})).structured_content == {"sessions": []}
        foreign = await other_client.call_tool("session_get", {"session_id": session_id})
        unknown = await other_client.call_tool("session_get", {"session_id": "0" * 32})
        assert foreign.is_error and unknown.is_error
        assert foreign.structured_content == unknown.structured_content, "existence is not leaked"
        assert foreign.structured_content["failure"] == "session_not_found"
        taken = await other_client.call_tool("prompt_send", {"prompt": "mine now", "session_id": session_id})
        assert taken.is_error and taken.structured_content["failure"] == "session_not_found"
        refused = await other_client.call_tool("prompt_cancel", {"session_id": session_id})
        assert refused.structured_content == {"cancelled": False}


async def test_a_turn_is_cancelled_by_prompt_cancel_or_by_the_protocol_and_the_session_goes_on(setup, mode):
    events = with_agent(setup)
    async with Client(setup.params(), mode=mode) as client:
        first = await client.call_tool("prompt_send", {"prompt": "hello"})
        session_id = first.structured_content["session_id"]

        answered = {}

        async def slow(prompt: str) -> None:
            answered[prompt] = await client.call_tool("prompt_send", {"prompt": prompt, "session_id": session_id})

        async with anyio.create_task_group() as group:
            group.start_soon(slow, "slow one")
            await wait_for_line(events, "started", 1)
            busy = await client.call_tool("prompt_send", {"prompt": "meanwhile", "session_id": session_id})
            assert busy.is_error and busy.structured_content["failure"] == "session_busy"
            cancelled = await client.call_tool("prompt_cancel", {"session_id": session_id})
            assert cancelled.structured_content == {"cancelled": True}
        ended = answered["slow one"]
        assert ended.is_error and ended.structured_content["failure"] == "cancelled", ended
        await wait_for_line(events, "cancelled", 1)
        again = await client.call_tool("prompt_cancel", {"session_id": session_id})
        assert again.structured_content == {"cancelled": False}, "a finished turn is not cancelled twice"

        # The protocol's own cancel: the request gets no answer, and the
        # agent's turn is stopped all the same. Through a fleet, only in a
        # legacy session (stuck to its replica): a stateless request's cancel
        # that the balancer sends to another replica is not relayed to the one
        # running it yet (prompt_cancel is).
        states = ["completed", "cancelled"]
        if setup.transport != "fleet" or mode == "legacy":
            async with anyio.create_task_group() as group:
                group.start_soon(slow, "slow two")
                await wait_for_line(events, "started", 2)
                group.cancel_scope.cancel()
            assert "slow two" not in answered
            await wait_for_line(events, "cancelled", 2)
            with anyio.fail_after(60):
                while True:
                    got = (await client.call_tool("session_get", {"session_id": session_id})).structured_content
                    if got["turns"][2]["state"] != "running":
                        break
                    await anyio.sleep(0.02)
            states.append("cancelled")

        fine = await client.call_tool("prompt_send", {"prompt": "are you there", "session_id": session_id})
        assert not fine.is_error, fine
        assert fine.structured_content["reply"].startswith(f"turn {len(states) + 1} of "), fine.structured_content
        got = (await client.call_tool("session_get", {"session_id": session_id})).structured_content
        assert [t["state"] for t in got["turns"]] == [*states, "completed"]


async def test_an_agent_that_cannot_answer_says_why_at_once(setup, mode):
    """Well inside the 60 s timeout with_agent sets: the agent's error on
    stderr, or its exit, ends the turn with its last words."""
    with_agent(setup)
    async with Client(setup.params(), mode=mode) as client:
        with anyio.fail_after(30):
            stuck = await client.call_tool("prompt_send", {"prompt": "no-credentials please"})
        assert stuck.is_error, stuck
        body = stuck.structured_content
        assert body["failure"] == "agent_unavailable", body
        assert "ERROR codex_core::client: 401 Unauthorized: no credentials" in body["reason"], body
        assert "\x1b" not in body["reason"], "terminal escapes are taken out"
        with anyio.fail_after(30):
            gone = await client.call_tool("prompt_send", {"prompt": "die now"})
        assert gone.is_error, gone
        assert gone.structured_content["failure"] == "agent_unavailable"
        # The agent is started again, and the next turn is answered.
        with anyio.fail_after(60):
            while True:
                fine = await client.call_tool("prompt_send", {"prompt": "hello again"})
                if not fine.is_error:
                    break
                assert fine.structured_content["reason_code"] == "server_unavailable", fine
                await anyio.sleep(0.1)
    setup.stop()
    log = "\n".join(setup.audit_lines())
    assert "agent_unavailable" in log


async def test_a_slow_turn_says_it_is_waiting(setup, mode):
    events = with_agent(setup)
    waiting = anyio.Event()
    seen = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(message)
        if message and message.startswith("waiting for the agent's reply"):
            waiting.set()

    async with Client(setup.params(), mode=mode) as client:
        async with anyio.create_task_group() as group:
            async def slow() -> None:
                await client.call_tool("prompt_send", {"prompt": "slow please"}, progress_callback=on_progress)

            group.start_soon(slow)
            with anyio.fail_after(60):
                await waiting.wait()
            group.cancel_scope.cancel()
        await wait_for_line(events, "cancelled", 1)
    assert "thinking" in seen, seen
