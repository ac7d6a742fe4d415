"""Fixtures for driving `portcullis serve` with the official Python MCP SDK.

Each test gets its own folder: the default policies written by `portcullis
init`, an allowlist, a workspace root and a token store with one client.
Every test runs over stdio and over Streamable HTTP (`serve --http`, the
token as a bearer header). Where `PORTCULLIS_TEST_STATE` names a PostgreSQL
server (tests/fleet_interop.rs starts one), every test runs a third time as
`fleet`: three `serve --http --state` replicas, each test with a database of
its own, behind HAProxy: round-robin, except that a legacy session sticks to
the replica whose answer named it (a stick table learns `Mcp-Session-Id`).
"""

import json
import os
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from mcp import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

BIN = os.environ["PORTCULLIS_BIN"]
# A fleet's PostgreSQL server (an administrator's URL, ending in /postgres) and its psql.
STATE = os.environ.get("PORTCULLIS_TEST_STATE")
PSQL = os.environ.get("PORTCULLIS_TEST_PSQL", "psql")
REPLICAS = 3

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
        self.state: str | None = None
        self.replicas: list[subprocess.Popen] = []
        self.balancer: subprocess.Popen | None = None
        if transport == "fleet":
            database = "t" + uuid.uuid4().hex
            subprocess.run([PSQL, "-X", "-q", STATE, "-c", f"CREATE DATABASE {database}"], check=True, capture_output=True)
            self.state = STATE.rsplit("/", 1)[0] + "/" + database
            self.key = base / "approval.key"
            self.key.write_bytes(os.urandom(64))
            self.key.chmod(0o600)
        self.token = self.create_client("python-sdk", tier)

    def store_flags(self) -> list[str]:
        """Where clients are: the token store, or the fleet's state."""
        if self.state is not None:
            return ["--state", self.state]
        return ["--store", str(self.store)]

    def create_client(self, name: str, tier: str = "paired") -> str:
        created = portcullis(
            "token", "create", name, "--tier", tier, *self.store_flags(),
            "--policies", str(self.base / "policies"), "--schema", str(self.base / "schemas"), "--format", "json",
        )
        return json.loads(created)["token"]

    def audit_lines(self) -> list[str]:
        """The log's lines; a fleet's chains exported, merged by time (a
        question asked through one replica may be answered through another)."""
        if self.state is None:
            return (self.base / "audit" / "audit.jsonl").read_text().splitlines()
        out = self.base / "export"
        portcullis("audit", "export", self.state, "--out", str(out))
        lines = []
        for chain in sorted(out.glob("*.jsonl")):
            lines += chain.read_text().splitlines()
        return sorted(lines, key=lambda line: json.loads(line)["time"])

    def serve_args(self) -> list[str]:
        return [
            "serve", "--root", str(self.root), "--store", str(self.store),
            "--audit", str(self.base / "audit" / "audit.jsonl"),
            "--policies", str(self.base / "policies"), "--schema", str(self.base / "schemas"),
            *self.serve_flags,
        ]

    def params(self, token: str | None = None):
        """What `Client` connects to: the stdio command, or the HTTP server
        (or the fleet's balancer; started on first use) with this token as
        its bearer."""
        token = self.token if token is None else token
        if self.transport == "stdio":
            return StdioServerParameters(command=BIN, args=self.serve_args(), env={"PORTCULLIS_TOKEN": token})
        if self.transport == "fleet" and self.balancer is None:
            self.start_fleet()
        if self.transport == "http" and self.server is None:
            self.start_http()
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
        return streamable_http_client(self.url, http_client=http)

    def start_http(self) -> None:
        self.server, self.url = self.spawn_serve(self.serve_args(), self.base / "serve-http.log")

    def spawn_serve(self, args: list[str], log: Path) -> tuple[subprocess.Popen, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("PORTCULLIS_TOKEN", "PORTCULLIS_STATE")}
        env["PORTCULLIS_LOG"] = os.environ.get("PORTCULLIS_TEST_LOG", "warn")
        server = subprocess.Popen(
            [BIN, *args, "--http", "127.0.0.1:0"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log.open("w"), env=env,
        )
        # Wait for the event (the address on stderr), not for a guessed time.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            # Whole lines only: the last one may still be being written.
            for line in log.read_text().split("\n")[:-1]:
                if line.startswith(ADDRESS_LINE):
                    url = line[len(ADDRESS_LINE):].strip()
                    wait_accepting(url, server, deadline, log)
                    return server, url
            assert server.poll() is None, log.read_text()
            time.sleep(0.02)
        raise AssertionError(f"serve --http printed no address: {log.read_text()}")

    def start_fleet(self) -> None:
        """Three replicas sharing the test's database, and HAProxy in front."""
        backends = []
        for n in range(1, REPLICAS + 1):
            own = self.base / f"replica-{n}"
            args = [
                "serve", "--root", str(self.root), "--store", str(own / "tokens.json"),
                "--audit", str(own / "audit" / "audit.jsonl"),
                "--policies", str(self.base / "policies"), "--schema", str(self.base / "schemas"),
                "--state", self.state, "--replica-id", f"replica-{n}", "--approval-key", str(self.key),
                *self.serve_flags,
            ]
            replica, url = self.spawn_serve(args, self.base / f"replica-{n}.log")
            self.replicas.append(replica)
            backends.append(url.split("//", 1)[1].split("/", 1)[0])
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        config = self.base / "haproxy.cfg"
        servers = "\n".join(f"  server r{n} {address}" for n, address in enumerate(backends, 1))
        config.write_text(f"""global
  maxconn 1024
defaults
  mode http
  timeout connect 5s
  timeout client 300s
  timeout server 300s
frontend mcp
  bind 127.0.0.1:{port}
  default_backend replicas
backend replicas
  balance roundrobin
  stick-table type string len 128 size 100k expire 1h
  stick match req.hdr(mcp-session-id)
  stick store-response res.hdr(mcp-session-id)
{servers}
""")
        log = self.base / "haproxy.log"
        self.balancer = subprocess.Popen(
            ["haproxy", "-f", str(config), "-db"],
            stdin=subprocess.DEVNULL, stdout=log.open("w"), stderr=subprocess.STDOUT,
        )
        self.url = f"http://127.0.0.1:{port}/mcp"
        wait_accepting(self.url, self.balancer, time.monotonic() + 120, log)

    def stop(self) -> None:
        if self.server is not None:
            self.server.send_signal(signal.SIGTERM)
            assert self.server.wait(timeout=60) == 0, (self.base / "serve-http.log").read_text()
        if self.balancer is not None:
            self.balancer.kill()
            self.balancer.wait(timeout=60)
        for n, replica in enumerate(self.replicas, 1):
            replica.send_signal(signal.SIGTERM)
            assert replica.wait(timeout=60) == 0, (self.base / f"replica-{n}.log").read_text()


def wait_accepting(url: str, process: subprocess.Popen, deadline: float, log: Path) -> None:
    """Waits for the event the client needs next, the server taking a
    connection, retrying a connect that fails while the server runs (a CI
    run once saw a client's first connect fail right after the address was
    printed, on a loaded machine)."""
    host, port = url.split("//", 1)[1].split("/", 1)[0].rsplit(":", 1)
    while time.monotonic() < deadline:
        try:
            socket.create_connection((host, int(port)), timeout=5).close()
            return
        except OSError:
            assert process.poll() is None, log.read_text()
            time.sleep(0.02)
    raise AssertionError(f"{url} took no connection: {log.read_text()}")


@pytest.fixture(params=["stdio", "http", *(["fleet"] if STATE else [])])
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
