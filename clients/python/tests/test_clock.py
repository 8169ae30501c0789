"""SPEC 8: signed timestamps must be within 30 s of the server's time, and clients reject
locally beyond that: the client compares its clock with ``GET /time`` before its first
signed request and sends nothing signed when it is off. No service needed (a mock
transport answers)."""

from __future__ import annotations

import time

import httpx
import pytest
from eth_account import Account

from ladder_client import Credentials, LadderClient

CREDENTIALS = Credentials(
    api_key="00000000-0000-4000-8000-000000000000",
    secret="AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
    passphrase="0" * 64,
)


def client_with_server_clock(offset_s: int, **kwargs: object) -> tuple[LadderClient, list[httpx.Request]]:
    """A client whose server's clock is ``offset_s`` from the local one, and the requests it sent."""
    sent: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        if request.url.path == "/time":
            return httpx.Response(200, text=str(int(time.time()) + offset_s))
        return httpx.Response(200, json=[])

    client = LadderClient(
        "http://ladder.test",
        Account.create().key,
        credentials=CREDENTIALS,
        transport=httpx.MockTransport(answer),
        **kwargs,  # type: ignore[arg-type]
    )
    return client, sent


@pytest.mark.parametrize("offset_s", [100, -100, 32])
def test_a_clock_off_by_more_than_30_s_sends_nothing_signed(offset_s: int) -> None:
    client, sent = client_with_server_clock(offset_s)
    with pytest.raises(RuntimeError, match="within 30 s"):
        client.request("GET", "/orders", auth="l2")
    with pytest.raises(RuntimeError, match="within 30 s"):
        client.request("POST", "/auth/api-key", auth="l1")
    assert [r.url.path for r in sent] == ["/time", "/time"], "a signed request left"


def test_a_clock_within_30_s_is_checked_once_then_trusted() -> None:
    client, sent = client_with_server_clock(5)
    client.request("GET", "/orders", auth="l2")
    client.request("GET", "/orders", auth="l2")
    client.request("GET", "/markets")
    assert [r.url.path for r in sent] == ["/time", "/orders", "/orders", "/markets"]
    assert "SVC_SIGNATURE" in sent[1].headers


def test_the_check_can_be_turned_off() -> None:
    client, sent = client_with_server_clock(1_000, check_clock=False)
    client.request("GET", "/orders", auth="l2")
    assert [r.url.path for r in sent] == ["/orders"]


def test_a_clone_keeps_the_transport_and_the_clock_check() -> None:
    client, sent = client_with_server_clock(5)
    client.request("GET", "/orders", auth="l2")
    other = client.clone()
    other.request("GET", "/orders", auth="l2")
    assert [r.url.path for r in sent] == ["/time", "/orders", "/orders"], "the clone's request went elsewhere"


class RecordsClose(httpx.MockTransport):
    """A mock transport that says whether it was closed."""

    closed = False

    def close(self) -> None:
        self.closed = True


def test_closing_a_clone_leaves_the_clients_transport_open() -> None:
    transport = RecordsClose(lambda request: httpx.Response(200, json=[]))
    client = LadderClient("http://ladder.test", transport=transport, check_clock=False)
    client.clone().close()
    assert not transport.closed, "closing the clone closed the client's transport"
    client.close()
    assert transport.closed
