"""portcullis serve driven by the official Python MCP SDK (mcp==2.3.0), in both eras."""

import anyio
import pytest
from mcp import Client

pytestmark = pytest.mark.anyio

EXPECTED_VERSION = {"auto": "2026-07-28", "legacy": "2025-11-25"}


async def test_lists_the_allowed_tools_and_the_wrappers(setup, mode):
    async with Client(setup.params(), mode=mode) as client:
        assert client.protocol_version == EXPECTED_VERSION[mode]
        names = [t.name for t in (await client.list_tools()).tools]
        assert names == ["delete_file", "edit_file", "list_dir", "read_file", "search", "write_file", "tools_list", "tool_call", "gate"]


async def test_an_allowed_call_returns_structured_content(setup, mode):
    async with Client(setup.params(), mode=mode) as client:
        result = await client.call_tool("read_file", {"path": "README.md"})
        assert not result.is_error
        assert result.structured_content["content"] == "# interop workspace\n"


async def test_a_denied_call_is_an_error_result_with_a_reason_code(setup, mode):
    (setup.root / "out").symlink_to(setup.base)
    async with Client(setup.params(), mode=mode) as client:
        result = await client.call_tool("write_file", {"path": "out/escape.txt", "content": "x"})
        assert result.is_error
        assert result.structured_content["reason_code"] == "forbidden"
        assert result.structured_content["policies"][0]["id"] == "hard.no_write_outside_root"
        asked = await client.call_tool("write_file", {"path": "new.txt", "content": "x"})
        assert asked.is_error
        assert asked.structured_content["reason_code"] == "approval_unavailable"
    assert not (setup.base / "escape.txt").exists()
    assert not (setup.root / "new.txt").exists()


async def test_an_unknown_tool_is_an_error(setup, mode):
    async with Client(setup.params(), mode=mode) as client:
        with pytest.raises(Exception, match="Unknown tool: nope"):
            await client.call_tool("nope", {})


async def test_progress_reaches_the_callback_in_order(setup, mode):
    for i in range(200):
        (setup.root / f"f{i:03}.txt").write_text("hay\n")
    seen = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    async with Client(setup.params(), mode=mode) as client:
        result = await client.call_tool("search", {"pattern": "needle"}, progress_callback=on_progress)
        assert result.structured_content["files_searched"] == 201
        assert seen == [64, 128, 192]


async def test_cancelling_a_call_stops_it_and_the_session_goes_on(setup, mode):
    for d in range(40):
        folder = setup.root / f"d{d}"
        folder.mkdir()
        for f in range(500):
            (folder / f"f{f}.txt").write_text("hay hay hay\n")
    async with Client(setup.params(), mode=mode) as client:
        with anyio.move_on_after(0.2) as scope:
            await client.call_tool("search", {"pattern": "needle"})
        assert scope.cancelled_caught
        result = await client.call_tool("read_file", {"path": "README.md"})
        assert not result.is_error


async def test_a_wrong_token_gets_no_session(setup, mode):
    with pytest.raises(Exception):
        with anyio.fail_after(20):
            async with Client(setup.params(token="pcl_wrong"), mode=mode) as client:
                await client.list_tools()
