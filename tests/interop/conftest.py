"""Fixtures for driving `portcullis serve` with the official Python MCP SDK.

Each test gets its own folder: the default policies written by `portcullis
init`, an allowlist, a workspace root and a token store with one client.
Every test runs over stdio and over Streamable HTTP (`serve --http`, the
token as a bearer header).
"""

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
from mcp import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

BIN = os.environ["PORTCULLIS_BIN"]

ALLOW_BUILTIN = """
@id("allow.builtin")
@reason("test clients may use the built-in tools")
permit (
  principal,
  action in Portcullis::Action::"use_tool",
  resource in Portcullis::Server::"builtin"
);
"""


def portcullis(*args: str) -> str:
    return subprocess.run([BIN, *args], check=True, capture_output=True, text=True).stdout


ADDRESS_LINE = "portcullis: serving MCP over HTTP at "


class Setup:
    def __init__(self, base: Path, tier: str = "paired", transport: str = "stdio"):
        self.base = base
        self.transport = transport
        self.server: subprocess.Popen | None = None
        self.url: str | None = None
        self.serve_flags: list[str] = []
        portcullis("init", str(base))
        (base / "policies" / "20_allowlist.cedar").write_text(ALLOW_BUILTIN)
        tiers_file = base / "policies" / "tiers.json"
        tiers = json.loads(tiers_file.read_text())
        tiers.append({
            "uid": {"type": "Portcullis::Tier", "id": "trusted"},
            "attrs": {"capabilities": ["read", "write", "network", "destructive"]},
            "parents": [],
        })
        tiers_file.write_text(json.dumps(tiers))
        self.root = base / "workspace"
        self.root.mkdir()
        (self.root / "README.md").write_text("# interop workspace\n")
        self.store = base / "state" / "tokens.json"
        created = portcullis(
            "token", "create", "python-sdk", "--tier", tier, "--store", str(self.store),
            "--policies", str(base / "policies"), "--schema", str(base / "schemas"), "--format", "json",
        )
        self.token = json.loads(created)["token"]

    def serve_args(self) -> list[str]:
        return [
            "serve", "--root", str(self.root), "--store", str(self.store),
            "--audit", str(self.base / "audit" / "audit.jsonl"),
            "--policies", str(self.base / "policies"), "--schema", str(self.base / "schemas"),
            *self.serve_flags,
        ]

    def params(self, token: str | None = None):
        """What `Client` connects to: the stdio command, or the HTTP server
        (started on first use) with this token as its bearer."""
        token = self.token if token is None else token
        if self.transport == "stdio":
            return StdioServerParameters(command=BIN, args=self.serve_args(), env={"PORTCULLIS_TOKEN": token})
        if self.server is None:
            self.start_http()
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
        return streamable_http_client(self.url, http_client=http)

    def start_http(self) -> None:
        env = {k: v for k, v in os.environ.items() if k != "PORTCULLIS_TOKEN"}
        env["PORTCULLIS_LOG"] = "warn"
        log = self.base / "serve-http.log"
        self.server = subprocess.Popen(
            [BIN, *self.serve_args(), "--http", "127.0.0.1:0"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log.open("w"), env=env,
        )
        # Wait for the event (the address on stderr), not for a guessed time.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            # Whole lines only: the last one may still be being written.
            for line in log.read_text().split("\n")[:-1]:
                if line.startswith(ADDRESS_LINE):
                    self.url = line[len(ADDRESS_LINE):].strip()
                    self.wait_accepting(deadline, log)
                    return
            assert self.server.poll() is None, log.read_text()
            time.sleep(0.02)
        raise AssertionError(f"serve --http printed no address: {log.read_text()}")

    def wait_accepting(self, deadline: float, log: Path) -> None:
        """Waits for the event the client needs next, the server taking a
        connection, retrying a connect that fails while the server runs (a
        CI run once saw a client's first connect fail right after the
        address was printed, on a loaded machine)."""
        host, port = self.url.split("//", 1)[1].split("/", 1)[0].rsplit(":", 1)
        while time.monotonic() < deadline:
            try:
                socket.create_connection((host, int(port)), timeout=5).close()
                return
            except OSError:
                assert self.server.poll() is None, log.read_text()
                time.sleep(0.02)
        raise AssertionError(f"serve --http took no connection: {log.read_text()}")

    def stop(self) -> None:
        if self.server is not None:
            self.server.send_signal(signal.SIGTERM)
            assert self.server.wait(timeout=60) == 0, (self.base / "serve-http.log").read_text()


@pytest.fixture(params=["stdio", "http"])
def transport(request) -> str:
    return request.param


@pytest.fixture
def setup(tmp_path: Path, transport: str):
    made = Setup(tmp_path, transport=transport)
    yield made
    made.stop()


@pytest.fixture
def trusted_setup(tmp_path: Path, transport: str):
    """A client of a tier that has the destructive capability."""
    made = Setup(tmp_path, tier="trusted", transport=transport)
    yield made
    made.stop()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["auto", "legacy"])
def mode(request) -> str:
    """auto: server/discover, then 2026-07-28; legacy: initialize, 2025-11-25."""
    return request.param
