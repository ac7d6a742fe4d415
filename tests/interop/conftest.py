"""Fixtures for driving `portcullis serve` with the official Python MCP SDK.

Each test gets its own folder: the default policies written by `portcullis
init`, an allowlist, a workspace root and a token store with one client.
"""

import json
import os
import subprocess
from pathlib import Path

import pytest
from mcp import StdioServerParameters

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


class Setup:
    def __init__(self, base: Path, tier: str = "paired"):
        self.base = base
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

    def params(self, token: str | None = None) -> StdioServerParameters:
        return StdioServerParameters(
            command=BIN,
            args=[
                "serve", "--root", str(self.root), "--store", str(self.store),
                "--audit", str(self.base / "audit" / "audit.jsonl"),
                "--policies", str(self.base / "policies"), "--schema", str(self.base / "schemas"),
                *self.serve_flags,
            ],
            env={"PORTCULLIS_TOKEN": self.token if token is None else token},
        )


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    return Setup(tmp_path)


@pytest.fixture
def trusted_setup(tmp_path: Path) -> Setup:
    """A client of a tier that has the destructive capability."""
    return Setup(tmp_path, tier="trusted")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["auto", "legacy"])
def mode(request) -> str:
    """auto: server/discover, then 2026-07-28; legacy: initialize, 2025-11-25."""
    return request.param
