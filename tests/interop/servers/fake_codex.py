"""An agent server shaped like Codex's `codex mcp-server`, on the official
Python SDK, for portcullis's agent-bridge tests.

- `codex` starts a conversation: `{prompt}` in, `{threadId, content}` out
  as structured content, with two progress steps on the way.
- `codex-reply` continues one by `threadId`; the reply names the turn and
  the conversation's first prompt, so a test sees the context was kept.
- A prompt that holds "slow" runs until it is cancelled, writing
  "started <thread>" and then "cancelled <thread>" to EVENTS.
- A prompt that holds "fail" ends with an error result that holds
  internal details.
- A prompt that holds "no-credentials" writes an error on stderr, as Codex
  without credentials does, and never answers; one that holds "die" writes
  a last line on stderr and exits.
Its pid is written to PIDFILE at start. With THREADS, its conversations are
kept in that JSON file, as Codex keeps its own under CODEX_HOME: another
agent process given the same file (a second portcullis replica's) continues
them.
"""

import json
import os
import sys
import uuid

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

server = MCPServer("fake-codex")
threads: dict[str, list[str]] = {}


def load_threads() -> None:
    path = os.environ.get("THREADS")
    if path and os.path.exists(path):
        with open(path, encoding="utf-8") as kept:
            threads.update(json.load(kept))


def keep_threads() -> None:
    path = os.environ.get("THREADS")
    if path:
        with open(path + ".tmp", "w", encoding="utf-8") as out:
            json.dump(threads, out)
        os.replace(path + ".tmp", path)


class Reply(BaseModel):
    threadId: str
    content: str


def note(event: str) -> None:
    path = os.environ.get("EVENTS")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(event + "\n")


async def turn(thread: str, prompt: str, ctx: Context) -> Reply:
    load_threads()
    threads.setdefault(thread, []).append(prompt)
    keep_threads()
    await ctx.report_progress(1, 2, "thinking")
    if "no-credentials" in prompt:
        print("\x1b[31mERROR\x1b[0m codex_core::client: 401 Unauthorized: no credentials", file=sys.stderr, flush=True)
        await anyio.sleep_forever()
    if "die" in prompt:
        print("the agent gives up: no model configured", file=sys.stderr, flush=True)
        os._exit(2)
    if "fail" in prompt:
        raise ToolError("Traceback (most recent call last): /srv/agent/secret.py")
    if "slow" in prompt:
        note(f"started {thread}")
        try:
            while True:
                await anyio.sleep(0.05)
        except anyio.get_cancelled_exc_class():
            note(f"cancelled {thread}")
            raise
    await ctx.report_progress(2, 2, "answering")
    said = threads[thread]
    return Reply(
        threadId=thread,
        content=f"turn {len(said)} of {thread}; first you said: {said[0]}; now: {prompt}",
    )


@server.tool(name="codex", description="Run a Codex session.")
async def codex(prompt: str, ctx: Context) -> Reply:
    return await turn(str(uuid.uuid4()), prompt, ctx)


@server.tool(name="codex-reply", description="Continue a Codex conversation by providing the thread id and prompt.")
async def codex_reply(prompt: str, threadId: str, ctx: Context) -> Reply:
    load_threads()
    if threadId not in threads:
        raise ToolError(f"unknown thread {threadId}")
    return await turn(threadId, prompt, ctx)


if __name__ == "__main__":
    pidfile = os.environ.get("PIDFILE")
    if pidfile:
        with open(pidfile, "w", encoding="utf-8") as out:
            out.write(str(os.getpid()))
    server.run("stdio")
