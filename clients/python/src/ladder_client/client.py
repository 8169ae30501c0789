"""``LadderClient``: the REST surface of the service over ``httpx`` (API.md §7 to §14).

One client is one trader: the EOA key that signs, the trading account it signs for (a smart
account the key controls, or the key's own address), and, once created or derived, API
credentials. Public reads need none of these.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Optional, Sequence, Union
from urllib.parse import urlencode

import httpx
from eth_account.signers.local import LocalAccount
from eth_utils.address import to_checksum_address

from .auth import (
    HEADER_API_KEY,
    Credentials,
    check_clock_skew,
    l1_headers,
    l2_headers,
    unix_now_s,
)
from .cancels import cancel_market_orders_body, cancel_order_body
from .eip712 import AuthDomain, ExchangeDomain
from .errors import LadderError
from .orders import OrderBuilder, OrderType, PostOrder, SignedOrder, post_orders_body
from .signing import Signer
from .units import PriceLike, Side
from .user_ops import BytesLike, UserOperation

if TYPE_CHECKING:
    from .bundler import Bundler
    from .heartbeat import Heartbeater
    from .market_stream import MarketStream
    from .user_stream import UserStream

#: The end-of-stream cursor of every page.
END_CURSOR = "LTE="
#: The cursor of the first page.
START_CURSOR = "MA=="

Json = Any
Params = Mapping[str, Union[str, int, None]]


def _compact(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


class _Borrowed(httpx.BaseTransport):
    """A transport given to a client, lent to its clones: closing a clone leaves it open."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self._inner = inner

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        return self._inner.handle_request(request)

    def close(self) -> None:
        pass


class LadderClient:
    """A client of one Ladder service for one trader.

    ``key`` is the EOA private key (``0x`` + 64 hex, or an ``eth_account`` ``LocalAccount``);
    ``account`` the trading account it controls (default: the key's own address);
    ``credentials`` API credentials if already known. Every method raises
    :class:`~ladder_client.errors.LadderError` on an HTTP status other than 2xx.
    """

    def __init__(
        self,
        base_url: str,
        key: Union[str, bytes, LocalAccount, None] = None,
        *,
        account: Optional[str] = None,
        credentials: Optional[Credentials] = None,
        exchange: ExchangeDomain = ExchangeDomain(),
        auth_domain: AuthDomain = AuthDomain(),
        timeout: float = 10.0,
        transport: Optional[httpx.BaseTransport] = None,
        check_clock: bool = True,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.signer: Optional[Signer] = Signer(key) if key is not None else None
        if account is not None:
            self.account: Optional[str] = to_checksum_address(account)
        else:
            self.account = self.signer.address if self.signer else None
        self.credentials = credentials
        self.exchange = exchange
        self.auth_domain = auth_domain
        self._timeout = timeout
        self._transport = transport
        self._http = httpx.Client(timeout=timeout, transport=transport)
        self._bundler: Optional["Bundler"] = None
        # Before the first signed request, the local clock is compared with the server's
        # (SPEC 8: clients reject locally a timestamp more than 30 s off).
        self._clock_checked = not check_clock

    # ------------------------------------------------------------------ plumbing

    def clone(self) -> "LadderClient":
        """A client of the same trader with its own HTTP connection pool (for another thread).

        A transport given to this client is lent to the clone: closing the clone leaves it open.
        """
        other = LadderClient(
            self.base_url,
            account=self.account,
            credentials=self.credentials,
            exchange=self.exchange,
            auth_domain=self.auth_domain,
            timeout=self._timeout,
            transport=_Borrowed(self._transport) if self._transport is not None else None,
        )
        other.signer = self.signer
        other._clock_checked = self._clock_checked
        return other

    def close(self) -> None:
        """Closes the HTTP connections."""
        self._http.close()

    def __enter__(self) -> "LadderClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def ws_url(self) -> str:
        """The WebSocket base URL (``ws://`` or ``wss://``)."""
        if self.base_url.startswith("https://"):
            return "wss://" + self.base_url[len("https://"):]
        return "ws://" + self.base_url[len("http://"):]

    def _need_signer(self) -> Signer:
        if self.signer is None:
            raise RuntimeError("this client has no private key: pass key= to sign")
        return self.signer

    def _need_credentials(self) -> Credentials:
        if self.credentials is None:
            raise RuntimeError("no API credentials: create_api_key() or derive_api_key() first")
        return self.credentials

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Optional[Params] = None,
        body: Any = None,
        raw_body: Optional[bytes] = None,
        auth: Optional[str] = None,
        nonce: int = 0,
        headers: Optional[Mapping[str, str]] = None,
    ) -> httpx.Response:
        """Sends one request and returns the raw response, whatever its status.

        ``auth`` is ``None`` (public), ``"l1"`` (ClobAuth headers with ``nonce``) or ``"l2"``
        (HMAC over the exact target and body bytes). ``body`` is serialised as compact JSON
        (``raw_body`` is sent as is).
        """
        target = path
        if params:
            query = urlencode([(k, str(v)) for k, v in params.items() if v is not None])
            if query:
                target = f"{path}?{query}"
        content = raw_body if raw_body is not None else (b"" if body is None else _compact(body))
        send_headers: dict[str, str] = {}
        if content or method.upper() in ("POST", "PUT", "DELETE", "PATCH"):
            send_headers["Content-Type"] = "application/json"
        request = self._http.build_request(
            method.upper(), self.base_url + target, content=content, headers=send_headers
        )
        if auth in ("l1", "l2"):
            self._ensure_clock()
        if auth == "l1":
            request.headers.update(
                l1_headers(self._need_signer(), self.account, nonce=nonce, domain=self.auth_domain)
            )
        elif auth == "l2":
            signed_target = request.url.raw_path.decode("ascii")
            request.headers.update(
                l2_headers(
                    self._need_credentials(), method, signed_target, content, address=self.account
                )
            )
        if headers:
            request.headers.update(headers)
        return self._http.send(request)

    def call(self, method: str, path: str, **kwargs: Any) -> Json:
        """:meth:`request`, then the JSON of a 2xx answer; raises :class:`LadderError` otherwise."""
        response = self.request(method, path, **kwargs)
        return self._json_or_raise(method, path, response)

    @staticmethod
    def _json_or_raise(method: str, path: str, response: httpx.Response) -> Json:
        try:
            parsed: Any = response.json()
        except ValueError:
            parsed = None
        if 200 <= response.status_code < 300:
            return parsed if parsed is not None else response.text
        error = parsed.get("error") if isinstance(parsed, dict) else None
        raise LadderError(
            response.status_code,
            str(error) if error is not None else response.text,
            method=method.upper(),
            path=path,
            body=parsed,
            headers={k.lower(): v for k, v in response.headers.items()},
        )

    # ------------------------------------------------------------------ public reads

    def server_time(self) -> int:
        """``GET /time``: the server's Unix seconds."""
        return int(self.call("GET", "/time"))

    def check_clock(self) -> None:
        """Raises ``RuntimeError`` when the local clock is more than 30 s from the server's."""
        check_clock_skew(unix_now_s(), self.server_time())
        self._clock_checked = True

    def _ensure_clock(self) -> None:
        """Checks the clock once, before the first signed request or subscription (turned off
        with ``check_clock=False``)."""
        if not self._clock_checked:
            self.check_clock()

    def get_book(self, token_id: Union[int, str]) -> Json:
        """``GET /book``: the market's book from this token's side (best price last)."""
        return self.call("GET", "/book", params={"token_id": str(token_id)})

    def get_books(self, token_ids: Sequence[Union[int, str]]) -> Json:
        """``POST /books``: several books; unknown tokens are left out."""
        return self.call("POST", "/books", body=[{"token_id": str(t)} for t in token_ids])

    def get_price(self, token_id: Union[int, str], side: Union[Side, str]) -> str:
        """``GET /price``: the best bid (``BUY``) or ask (``SELL``)."""
        return str(self.call("GET", "/price", params={"token_id": str(token_id), "side": Side.of(side).value})["price"])

    def get_midpoint(self, token_id: Union[int, str]) -> str:
        """``GET /midpoint``: (best bid + best ask) / 2; 404 ``no orders`` unless both sides exist."""
        return str(self.call("GET", "/midpoint", params={"token_id": str(token_id)})["mid"])

    def get_spread(self, token_id: Union[int, str]) -> str:
        """``GET /spread``: best ask − best bid."""
        return str(self.call("GET", "/spread", params={"token_id": str(token_id)})["spread"])

    def get_tick_size(self, token_id: Union[int, str]) -> float:
        """``GET /tick-size``: the market's tick (a JSON number)."""
        return float(self.call("GET", "/tick-size", params={"token_id": str(token_id)})["minimum_tick_size"])

    def get_neg_risk(self, token_id: Union[int, str]) -> bool:
        """``GET /neg-risk``."""
        return bool(self.call("GET", "/neg-risk", params={"token_id": str(token_id)})["neg_risk"])

    def get_fee_rate(self, token_id: Union[int, str]) -> int:
        """``GET /fee-rate``: the market's taker fee in basis points."""
        return int(self.call("GET", "/fee-rate", params={"token_id": str(token_id)})["fee_rate_bps"])

    def get_last_trades_prices(self, token_ids: Sequence[Union[int, str]]) -> Json:
        """``POST /last-trades-prices`` (the same as the body-carrying GET)."""
        return self.call("POST", "/last-trades-prices", body=[{"token_id": str(t)} for t in token_ids])

    def get_prices_history(
        self,
        token_id: Union[int, str],
        *,
        start_ts: Optional[int] = None,
        end_ts: Optional[int] = None,
        fidelity: Optional[int] = None,
        interval: Optional[str] = None,
    ) -> Json:
        """``GET /prices-history``: ``{"history": [{"t", "p"}, ...]}``."""
        return self.call(
            "GET",
            "/prices-history",
            params={"market": str(token_id), "startTs": start_ts, "endTs": end_ts, "fidelity": fidelity, "interval": interval},
        )

    def get_markets(self, *, limit: Optional[int] = None, next_cursor: str = "", sampling: bool = False) -> Json:
        """``GET /markets`` (or ``/sampling-markets``): one page of markets."""
        path = "/sampling-markets" if sampling else "/markets"
        return self.call("GET", path, params={"limit": limit, "next_cursor": next_cursor or None})

    def iter_markets(self, *, limit: Optional[int] = None, sampling: bool = False) -> Iterator[Json]:
        """Every market, following ``next_cursor``."""
        return paginate(lambda cursor: self.get_markets(limit=limit, next_cursor=cursor, sampling=sampling))

    def get_market(self, condition_id: str) -> Json:
        """``GET /markets/{condition_id}``."""
        return self.call("GET", f"/markets/{condition_id}")

    def get_claimable(self, address: Optional[str] = None) -> Json:
        """``GET /claimable``: positions waiting to be redeemed (default: this trader's account)."""
        return self.call("GET", "/claimable", params={"address": address or self.account})

    # ------------------------------------------------------------------ the bundler (public)

    def bundler(self) -> "Bundler":
        """JSON-RPC calls to ``POST /bundler`` (:class:`~ladder_client.bundler.Bundler`)."""
        from .bundler import Bundler

        if self._bundler is None:
            self._bundler = Bundler(self)
        return self._bundler

    def redeem(
        self,
        condition_id: BytesLike,
        smart_account: Optional[str] = None,
        owner_key: Union[str, bytes, LocalAccount, Signer, None] = None,
        *,
        entry_point: Optional[str] = None,
        chain_id: Optional[int] = None,
        nonce: Optional[int] = None,
        exchange: Optional[str] = None,
        wait_timeout_s: float = 30.0,
        **gas: int,
    ) -> Json:
        """Redeems a smart account's claimable positions in a resolved market through the
        service's bundler (API.md §13.1) and returns the operation's receipt.

        ``smart_account`` defaults to this client's account and ``owner_key`` (one of its
        owners) to this client's key; ``exchange`` to the exchange domain's contract. The entry
        point and chain id are read from the service unless given; ``nonce`` (the sequence
        number) is found from the service's ``AA25`` answer unless given. A refusal raises
        :class:`~ladder_client.errors.BundlerError`. See :meth:`Bundler.redeem`.
        """
        if owner_key is None:
            owner = self._need_signer()
        else:
            owner = owner_key if isinstance(owner_key, Signer) else Signer(owner_key)
        account = smart_account or self.account
        if account is None:
            raise RuntimeError("no smart account: pass smart_account=")
        return self.bundler().redeem(
            condition_id,
            account,
            owner,
            exchange=exchange or self.exchange.verifying_contract,
            entry_point=entry_point,
            chain_id=chain_id,
            nonce=nonce,
            wait_timeout_s=wait_timeout_s,
            **gas,
        )

    def send_user_operation(self, op: Union[UserOperation, Json], entry_point: Optional[str] = None) -> str:
        """``eth_sendUserOperation`` of a signed operation (object or RPC JSON); its
        ``userOpHash``. ``entry_point`` defaults to the service's."""
        bundler = self.bundler()
        return bundler.send_user_operation(op, entry_point or bundler.supported_entry_points()[0])

    def get_user_operation_receipt(self, user_op_hash: Union[str, bytes]) -> Optional[Json]:
        """``eth_getUserOperationReceipt``: the receipt, or ``None`` for an unknown hash."""
        return self.bundler().get_user_operation_receipt(user_op_hash)

    def get_user_operation_by_hash(self, user_op_hash: Union[str, bytes]) -> Optional[Json]:
        """``eth_getUserOperationByHash``: the operation and where it was included, or ``None``."""
        return self.bundler().get_user_operation_by_hash(user_op_hash)

    # ------------------------------------------------------------------ API keys (L1)

    def create_api_key(self, nonce: int = 0) -> Credentials:
        """``POST /auth/api-key`` (L1): a new key for ``nonce``; kept as this client's credentials."""
        self.credentials = Credentials.from_json(self.call("POST", "/auth/api-key", auth="l1", nonce=nonce))
        return self.credentials

    def derive_api_key(self, nonce: int = 0) -> Credentials:
        """``GET /auth/derive-api-key`` (L1): the live key created with ``nonce``; kept."""
        self.credentials = Credentials.from_json(self.call("GET", "/auth/derive-api-key", auth="l1", nonce=nonce))
        return self.credentials

    def create_or_derive_api_key(self, nonce: int = 0) -> Credentials:
        """Derives the key of ``nonce``, creating it when there is none."""
        try:
            return self.derive_api_key(nonce)
        except LadderError as e:
            if e.status != 404:
                raise
            return self.create_api_key(nonce)

    def list_api_keys(self, *, use_l1: bool = False) -> list[str]:
        """``GET /auth/api-keys``: the address's key ids, oldest first (L2 when credentials are
        known, else L1)."""
        auth = "l1" if use_l1 or self.credentials is None else "l2"
        return list(self.call("GET", "/auth/api-keys", auth=auth)["apiKeys"])

    def delete_api_key(self, api_key: Optional[str] = None) -> str:
        """``DELETE /auth/api-key``: without ``api_key``, deletes this client's own key (L2) and
        forgets it; with one, deletes that key of the address (L1 + ``SVC_API_KEY``)."""
        if api_key is None:
            deleted = str(self.call("DELETE", "/auth/api-key", auth="l2")["deleted"])
            self.credentials = None
            return deleted
        deleted = str(self.call("DELETE", "/auth/api-key", auth="l1", headers={HEADER_API_KEY: api_key})["deleted"])
        if self.credentials is not None and self.credentials.api_key == deleted:
            self.credentials = None
        return deleted

    # ------------------------------------------------------------------ orders (L2)

    def build_order(
        self,
        token_id: Union[int, str],
        side: Union[Side, str],
        price: PriceLike,
        size: Union[int, str],
        **options: Any,
    ) -> SignedOrder:
        """An order of this trader's account, signed by its key (see :class:`OrderBuilder`)."""
        builder = OrderBuilder(token_id=token_id, side=side, price=price, size=size, maker=self.account, **options)
        return builder.sign(self._need_signer(), self.exchange)

    def post_order(
        self,
        order: SignedOrder,
        order_type: Union[OrderType, str] = OrderType.GTC,
        post_only: bool = False,
    ) -> Json:
        """``POST /order``: the placement result (``success`` false is a rejection, not an error)."""
        return self.call("POST", "/order", body=PostOrder(order, order_type, post_only).to_json(), auth="l2")

    def post_orders(self, orders: Sequence[Union[PostOrder, SignedOrder]]) -> list[Json]:
        """``POST /orders``: 1 to 15 placements; results in the same order."""
        requests = [o if isinstance(o, PostOrder) else PostOrder(o) for o in orders]
        return list(self.call("POST", "/orders", body=post_orders_body(requests), auth="l2"))

    def place_order(
        self,
        token_id: Union[int, str],
        side: Union[Side, str],
        price: PriceLike,
        size: Union[int, str],
        order_type: Union[OrderType, str] = OrderType.GTC,
        *,
        post_only: bool = False,
        **options: Any,
    ) -> Json:
        """Builds, signs and posts one order."""
        return self.post_order(self.build_order(token_id, side, price, size, **options), order_type, post_only)

    # ------------------------------------------------------------------ cancels (L2)

    def cancel_order(self, order_id: Union[int, str], market_id: str) -> Json:
        """``DELETE /order``: one order, signed as ``CancelOrder`` (signature type 3)."""
        body = cancel_order_body(self._need_signer(), int(order_id), market_id, domain=self.exchange)
        return self.call("DELETE", "/order", body=body, auth="l2")

    def cancel_orders(self, orders: Sequence[tuple[Union[int, str], str]]) -> Json:
        """``DELETE /orders``: several ``(order_id, market_id)`` at once (0 to 1,000)."""
        signer = self._need_signer()
        body = [cancel_order_body(signer, int(i), m, domain=self.exchange) for i, m in orders]
        return self.call("DELETE", "/orders", body=body, auth="l2")

    def cancel_market_orders(self, market_id: str, token_id: Optional[Union[int, str]] = None) -> Json:
        """``DELETE /cancel-market-orders``: every open order in a market (optionally one token)."""
        body = cancel_market_orders_body(self._need_signer(), market_id, token_id=token_id, domain=self.exchange)
        return self.call("DELETE", "/cancel-market-orders", body=body, auth="l2")

    def cancel_all(self) -> Json:
        """``DELETE /cancel-all``: every open order of the key's address."""
        return self.call("DELETE", "/cancel-all", auth="l2")

    # ------------------------------------------------------------------ lists (L2)

    def get_orders(
        self,
        *,
        market: Optional[str] = None,
        asset_id: Optional[Union[int, str]] = None,
        id: Optional[Union[int, str]] = None,
        address: Optional[str] = None,
        limit: Optional[int] = None,
        next_cursor: str = "",
    ) -> Json:
        """``GET /orders``: one page of open orders (oldest first)."""
        params = {"market": market, "asset_id": asset_id, "id": id, "address": address, "limit": limit, "next_cursor": next_cursor or None}
        return self.call("GET", "/orders", params=params, auth="l2")

    def iter_orders(self, **filters: Any) -> Iterator[Json]:
        """Every open order matching ``filters`` (those of :meth:`get_orders`), page by page."""
        return paginate(lambda cursor: self.get_orders(next_cursor=cursor, **filters))

    def get_trades(
        self,
        *,
        id: Optional[str] = None,
        market: Optional[str] = None,
        asset_id: Optional[Union[int, str]] = None,
        maker_address: Optional[str] = None,
        before: Optional[int] = None,
        after: Optional[int] = None,
        limit: Optional[int] = None,
        next_cursor: str = "",
        path: str = "/trades",
    ) -> Json:
        """``GET /trades`` (or ``path="/data/trades"``): one page of trades, newest first."""
        params = {"id": id, "market": market, "asset_id": asset_id, "maker_address": maker_address, "before": before, "after": after, "limit": limit, "next_cursor": next_cursor or None}
        return self.call("GET", path, params=params, auth="l2")

    def iter_trades(self, **filters: Any) -> Iterator[Json]:
        """Every trade matching ``filters`` (those of :meth:`get_trades`), page by page."""
        return paginate(lambda cursor: self.get_trades(next_cursor=cursor, **filters))

    def get_trade(self, trade_id: str) -> Json:
        """``GET /trades/{id}``: one trade the caller took part in."""
        return self.call("GET", f"/trades/{trade_id}", auth="l2")

    # ------------------------------------------------------------------ balances (L2)

    def get_balance_allowance(self, asset_type: str = "COLLATERAL", token_id: Optional[Union[int, str]] = None) -> Json:
        """``GET /balance-allowance``: ``{"balance", "allowance"}`` in base units."""
        params = {"asset_type": asset_type, "token_id": None if token_id is None else str(token_id)}
        return self.call("GET", "/balance-allowance", params=params, auth="l2")

    # ------------------------------------------------------------------ heartbeats (L2)

    def post_heartbeat(self, heartbeat_id: Optional[str] = None) -> str:
        """``POST /heartbeats``: starts the key's heartbeats (``None``) or beats with the last id;
        returns the next id. A wrong id raises a 400 :class:`LadderError` whose ``body`` carries
        the current ``heartbeat_id``."""
        return str(self.call("POST", "/heartbeats", body={"heartbeat_id": heartbeat_id}, auth="l2")["heartbeat_id"])

    def stop_heartbeats(self) -> Json:
        """``DELETE /heartbeats``: stops the key's heartbeats; cancels nothing."""
        return self.call("DELETE", "/heartbeats", auth="l2")

    def heartbeater(self, interval_s: float = 2.0, **kwargs: Any) -> "Heartbeater":
        """A background :class:`~ladder_client.heartbeat.Heartbeater` for this key (not started)."""
        from .heartbeat import Heartbeater

        return Heartbeater(self, interval_s, **kwargs)

    # ------------------------------------------------------------------ WebSockets

    def user_stream(self, markets: Sequence[str] = (), *, cancel_on_disconnect: bool = False, **kwargs: Any) -> "UserStream":
        """A ``/ws/user`` stream with this client's credentials (not yet connected)."""
        from .user_stream import UserStream

        credentials = self._need_credentials()
        self._ensure_clock()
        return UserStream(self.ws_url, credentials, markets, cancel_on_disconnect=cancel_on_disconnect, **kwargs)

    def market_stream(self, asset_ids: Sequence[Union[int, str]], **kwargs: Any) -> "MarketStream":
        """A ``/ws/market`` stream that keeps local books and repairs gaps from ``GET /book``."""
        from .market_stream import MarketStream

        return MarketStream(self.ws_url, asset_ids, book_source=self.clone().get_book, **kwargs)


def paginate(fetch: Callable[[str], Json]) -> Iterator[Json]:
    """Yields every item of a paged list: ``fetch(cursor)`` returns one page envelope; pages are
    followed through ``next_cursor`` until ``LTE=`` (an empty page also ends the stream)."""
    cursor = ""
    while True:
        page = fetch(cursor)
        yield from page["data"]
        cursor = page["next_cursor"]
        if cursor == END_CURSOR or not page["data"]:
            return
