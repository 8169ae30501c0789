"""Fixtures: a real ``ladder serve --demo`` for the session, and the two demo traders.

The binary is ``$LADDER_BIN``, else ``target/release/ladder`` or ``target/debug/ladder`` of the
repository (whichever exists, release first).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Optional

import httpx
import pytest

from ladder_client import LadderClient

REPO_ROOT = Path(__file__).resolve().parents[3]
DATA_DIR = REPO_ROOT / "protocol" / "tests" / "data"
OPENAPI_PATH = REPO_ROOT / "docs" / "openapi.yaml"

ADMIN_TOKEN = "T"
#: The service's heartbeat timeout in the tests (short, so an expiry is quick to see).
HEARTBEAT_TIMEOUT_MS = 1500
#: Built-in settlement step (MATCHED → MINED → CONFIRMED).
SETTLEMENT_DELAY_MS = 200

MARKET = "0x" + "3b" * 32
YES = "52114319501245915516055106046884209969926127482827954674443846427813813222426"
NO = "71321045679252212594626385532706912750332728571942532289631379312455583992563"
#: (private key of the owner EOA, smart account) of the two demo traders.
TRADERS = [
    ("0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80", "0x5a11c0C0a000000000000000000000000000A001"),
    ("0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d", "0x5A11C0C0a000000000000000000000000000a002"),
]


def ladder_bin() -> Path:
    """The service binary."""
    env = os.environ.get("LADDER_BIN")
    if env:
        return Path(env)
    for profile in ("release", "debug"):
        candidate = REPO_ROOT / "target" / profile / "ladder"
        if candidate.exists():
            return candidate
    return REPO_ROOT / "target" / "debug" / "ladder"


@dataclass
class Service:
    """A running ``ladder serve``."""

    url: str
    data_dir: Path
    process: subprocess.Popen[str]
    log_path: Path
    admin_token: str = ADMIN_TOKEN

    def admin(self, method: str, path: str, body: Optional[Any] = None) -> httpx.Response:
        """An admin request."""
        return httpx.request(
            method,
            self.url + path,
            headers={"Authorization": f"Bearer {self.admin_token}"},
            content=b"" if body is None else json.dumps(body).encode(),
            timeout=10,
        )

    def log_tail(self, lines: int = 30) -> str:
        """The end of the service's log (for failure messages)."""
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def start_service(extra_args: tuple[str, ...] = ()) -> tuple[Service, tempfile.TemporaryDirectory[str]]:
    """Starts ``ladder serve --demo`` on a fresh data directory and an ephemeral port, and waits
    until it answers ``GET /time``."""
    binary = ladder_bin()
    if not binary.exists():
        pytest.fail(f"the ladder binary {binary} does not exist: build it or set LADDER_BIN", pytrace=False)
    tmp = tempfile.TemporaryDirectory(prefix="ladder-py-")
    data_dir = Path(tmp.name) / "data"
    log_path = Path(tmp.name) / "ladder.log"
    log = open(log_path, "w")
    args = [
        str(binary), "serve", "--demo",
        "--data-dir", str(data_dir),
        "--listen", "127.0.0.1:0",
        "--admin-token", ADMIN_TOKEN,
        "--heartbeat-timeout-ms", str(HEARTBEAT_TIMEOUT_MS),
        "--settlement-delay-ms", str(SETTLEMENT_DELAY_MS),
        "--durability", "async",
        "--rate-limit-ip", "0",
        "--rate-limit-key", "0",
        "--gateway-threads", "1",
        "--sequencer-core", "none",
        "--segment-size-mb", "8",
        *extra_args,
    ]
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log, text=True, env={**os.environ, "LADDER_LOG": "warn"})
    assert process.stdout is not None
    url = None
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        match = re.match(r"ladder: listening on (http://\S+)", line.strip())
        if match:
            url = match.group(1)
            break
    if url is None:
        process.kill()
        log.close()
        raise RuntimeError(f"ladder serve did not print its address: {log_path.read_text()[-2000:]}")
    stdout = process.stdout
    threading.Thread(target=lambda: [None for _ in stdout], daemon=True).start()
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/time", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        time.sleep(0.02)
    else:
        process.kill()
        raise RuntimeError("ladder serve did not become ready")
    return Service(url=url, data_dir=data_dir, process=process, log_path=log_path), tmp


def stop_service(service: Service, tmp: tempfile.TemporaryDirectory[str]) -> None:
    """Kills the service and removes its directory."""
    service.process.kill()
    service.process.wait(timeout=10)
    shutil.rmtree(tmp.name, ignore_errors=True)


@pytest.fixture(scope="session")
def service() -> Iterator[Service]:
    """One ``ladder serve --demo`` for the whole session."""
    svc, tmp = start_service()
    try:
        yield svc
    finally:
        stop_service(svc, tmp)


def make_trader(service: Service, index: int, nonce: int = 0) -> LadderClient:
    """Demo trader ``index`` with the API key of ``nonce`` (created or derived)."""
    key, account = TRADERS[index]
    client = LadderClient(service.url, key, account=account)
    client.create_or_derive_api_key(nonce)
    return client


@pytest.fixture(scope="session")
def trader0(service: Service) -> Iterator[LadderClient]:
    """Demo trader 0 (account …A001), with credentials."""
    client = make_trader(service, 0)
    yield client
    client.close()


@pytest.fixture(scope="session")
def trader1(service: Service) -> Iterator[LadderClient]:
    """Demo trader 1 (account …a002), with credentials."""
    client = make_trader(service, 1)
    yield client
    client.close()


@pytest.fixture()
def clean_book(trader0: LadderClient, trader1: LadderClient) -> Iterator[None]:
    """No open order of either trader before and after the test."""
    trader0.cancel_all()
    trader1.cancel_all()
    yield
    trader0.cancel_all()
    trader1.cancel_all()


def wait_until(predicate: Any, timeout: float = 5.0, interval: float = 0.02) -> Any:
    """Polls ``predicate()`` until it returns something true; fails after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(interval)
