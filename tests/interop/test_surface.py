"""The seed's surface (`serve --surface wrappers`, or `surface =
"wrappers"` in servers.toml), read through the official Python SDK over
stdio and HTTP in both eras: exactly six tools listed, every other tool
through `tool_call`, and the error split of the direct surface kept."""

import pytest
from mcp import Client

pytestmark = pytest.mark.anyio

SIX = ["sessions_list", "session_get", "prompt_send", "prompt_cancel", "tools_list", "tool_call"]


@pytest.fixture(params=["flag", "file"])
def wrapped(request, setup):
    if request.param == "flag":
        setup.serve_flags += ["--surface", "wrappers"]
    else:
        (setup.base / "policies" / "servers.toml").write_text('surface = "wrappers"\n')
    return setup


async def test_exactly_the_six_are_listed(wrapped, mode):
    async with Client(wrapped.params(), mode=mode) as client:
        names = [t.name for t in (await client.list_tools()).tools]
    assert names == SIX


async def test_every_other_tool_runs_through_tool_call(wrapped, mode):
    async with Client(wrapped.params(), mode=mode) as client:
        listed = await client.call_tool("tools_list", {})
        assert "read_file" in [t["name"] for t in listed.structured_content["tools"]]
        read = await client.call_tool("tool_call", {"name": "read_file", "arguments": {"path": "README.md"}})
        assert not read.is_error, read
        assert read.structured_content["content"] == "# interop workspace\n"
        gated = await client.call_tool("tool_call", {"name": "gate", "arguments": {"command": "ls"}})
        assert gated.structured_content["decision"] == "allow"


async def test_a_tool_not_listed_is_an_unknown_tool(wrapped, mode):
    async with Client(wrapped.params(), mode=mode) as client:
        for hidden in ["read_file", "gate", "nope"]:
            with pytest.raises(Exception, match=f"Unknown tool: {hidden}"):
                await client.call_tool(hidden, {"path": "README.md"})
        with pytest.raises(Exception, match="Unknown tool: nope"):
            await client.call_tool("tool_call", {"name": "nope", "arguments": {}})
        with pytest.raises(Exception, match="additional|required|name"):
            await client.call_tool("tool_call", {"arguments": {}})


async def test_without_an_agent_the_bridge_tools_say_so(wrapped, mode):
    async with Client(wrapped.params(), mode=mode) as client:
        for name, arguments in [("prompt_send", {"prompt": "hello"}), ("sessions_list", {})]:
            result = await client.call_tool(name, arguments)
            assert result.is_error, result
            assert result.structured_content["failure"] == "agent_unavailable"
            assert "kind = \"agent\"" in result.structured_content["reason"]
        wrapped_call = await client.call_tool("tool_call", {"name": "prompt_cancel", "arguments": {"session_id": "x"}})
        assert wrapped_call.structured_content["failure"] == "agent_unavailable"
