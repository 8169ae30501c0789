"""API keys against the real service: create, derive, list (L1 and L2), delete (L2 and L1 +
SVC_API_KEY), and the key errors (CONTRACT §5, API.md §7)."""

from __future__ import annotations

import pytest
from eth_account import Account

from conftest import TRADERS, Service
from ladder_client import LadderClient, LadderError


def fresh_client(service: Service) -> LadderClient:
    return LadderClient(service.url, Account.create().key)


def test_create_derive_list_delete(service: Service) -> None:
    client = fresh_client(service)
    created = client.create_api_key(nonce=0)
    assert len(created.secret) == 44 and created.secret.endswith("=")
    assert len(created.passphrase) == 64
    # Derive answers the same credentials.
    other = LadderClient(service.url, client.signer._account)  # type: ignore[union-attr]
    assert other.derive_api_key(nonce=0) == created
    # A second key needs another nonce.
    with pytest.raises(LadderError) as e:
        client.create_api_key(nonce=0)
    assert e.value.status == 400 and "already has an api key created with this nonce" in e.value.error
    second = client.create_api_key(nonce=7)
    assert client.list_api_keys(use_l1=True) == [created.api_key, second.api_key]
    # L2 listing with the second key.
    assert client.list_api_keys() == [created.api_key, second.api_key]
    # Delete the second with L2 (the key that signs), the first with L1 + SVC_API_KEY.
    assert client.delete_api_key() == second.api_key
    assert client.credentials is None
    assert client.list_api_keys(use_l1=True) == [created.api_key]
    assert client.delete_api_key(created.api_key) == created.api_key
    assert client.list_api_keys(use_l1=True) == []
    # A deleted key fails L2 at once, and derive has nothing.
    other.credentials = created
    with pytest.raises(LadderError) as e:
        other.get_orders()
    assert e.value.status == 401 and e.value.error == "invalid L2 credentials: unknown or deleted API key"
    with pytest.raises(LadderError) as e:
        other.derive_api_key(nonce=0)
    assert e.value.status == 404
    # A new key of the same nonce is new.
    again = client.create_api_key(nonce=0)
    assert again.api_key != created.api_key and again.secret != created.secret


def test_key_limit(service: Service) -> None:
    client = fresh_client(service)
    for nonce in range(5):
        client.create_api_key(nonce)
    with pytest.raises(LadderError) as e:
        client.create_api_key(5)
    assert (e.value.status, e.value.error) == (400, "api key limit reached")


def test_smart_account_keys_belong_to_the_account(service: Service) -> None:
    key, account = TRADERS[1]
    client = LadderClient(service.url, key, account=account)
    credentials = client.create_or_derive_api_key(nonce=3)
    assert credentials.api_key in client.list_api_keys(use_l1=True)
    client.delete_api_key(credentials.api_key)


def test_l1_errors(service: Service) -> None:
    client = fresh_client(service)
    response = client.request("POST", "/auth/api-key")
    assert response.status_code == 401 and response.json() == {"error": "L1 ClobAuth headers required"}
    # Signed by a key that does not control the address.
    stranger = LadderClient(service.url, Account.create().key, account=TRADERS[0][1])
    with pytest.raises(LadderError) as e:
        stranger.create_api_key(0)
    assert (e.value.status, e.value.error) == (401, "L1 auth address does not match request address")
    with pytest.raises(LadderError) as e:
        client.delete_api_key("not-a-uuid")
    assert e.value.status == 401 and e.value.error == "SVC_API_KEY: expected a UUID"
    response = client.request("GET", "/orders")
    assert response.status_code == 401 and response.json() == {"error": "HMAC L2 credentials required"}
