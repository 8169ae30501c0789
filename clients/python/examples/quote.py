"""A minimal market maker for the demo market of ``ladder serve --demo``.

It quotes both sides of the Yes token around the midpoint (a post-only bid below it and a
post-only ask above it), keeps heartbeats running so that the service cancels its quotes if the
process dies, follows its fills on ``/ws/user`` and re-quotes after each fill (and every
``--requote-every`` seconds). Ctrl-C (or SIGTERM) cancels every open order and exits.

    python examples/quote.py --url http://127.0.0.1:8080

The defaults are demo trader 0 (a public development key: never use it for real funds).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import time
from typing import Any, Optional

from ladder_client import (
    Heartbeater,
    LadderClient,
    LadderError,
    OrderType,
    PostOrder,
    StreamError,
    format_price_ticks,
    price_to_ticks,
)

DEMO_MARKET = "0x" + "3b" * 32
DEMO_YES = "52114319501245915516055106046884209969926127482827954674443846427813813222426"
DEMO_TRADERS = [
    ("0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80", "0x5a11c0C0a000000000000000000000000000A001"),
    ("0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d", "0x5A11C0C0a000000000000000000000000000a002"),
]

log = logging.getLogger("quote")


class Stop(Exception):
    """Raised by the SIGTERM handler to leave the loop like Ctrl-C does."""


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="http://127.0.0.1:8080", help="the service (default %(default)s)")
    parser.add_argument("--trader", type=int, choices=(0, 1), default=0, help="demo trader (default 0)")
    parser.add_argument("--private-key", help="EOA key (instead of a demo trader)")
    parser.add_argument("--account", help="the smart account the key trades for")
    parser.add_argument("--market", default=DEMO_MARKET, help="condition id (default: the demo market)")
    parser.add_argument("--token", default=DEMO_YES, help="token to quote (default: the demo Yes token)")
    parser.add_argument("--size", type=int, default=5, help="shares per side (default 5)")
    parser.add_argument("--half-spread", default="0.02", help="distance of each quote from the midpoint (default 0.02)")
    parser.add_argument("--fallback-mid", default="0.5", help="midpoint when the book has no two sides (default 0.5)")
    parser.add_argument("--heartbeat-every", type=float, default=2.0, help="seconds between heartbeats (default 2)")
    parser.add_argument("--requote-every", type=float, default=10.0, help="re-quote at least this often, seconds (default 10)")
    parser.add_argument("--duration", type=float, default=0.0, help="stop after this many seconds (default: run until Ctrl-C)")
    return parser.parse_args(argv)


class Quoter:
    """Quotes one token, re-quoting after fills."""

    def __init__(self, client: LadderClient, args: argparse.Namespace) -> None:
        self.client = client
        self.args = args
        self.tick = price_to_ticks(format(client.get_tick_size(args.token), "f"))
        self.half_spread = price_to_ticks(args.half_spread)
        self.quotes: dict[str, str] = {}  # order hash -> side

    def midpoint_ticks(self) -> int:
        """The book's midpoint (our quotes are cancelled first), else the last trade, else the fallback."""
        try:
            return price_to_ticks(self.client.get_midpoint(self.args.token))
        except LadderError as e:
            if e.status != 404:
                raise
        book = self.client.get_book(self.args.token)
        if book.get("last_trade_price"):
            return price_to_ticks(book["last_trade_price"])
        return price_to_ticks(self.args.fallback_mid)

    def requote(self, why: str) -> None:
        """Cancels the quotes and places a fresh bid and ask around the midpoint."""
        self.client.cancel_market_orders(self.args.market, token_id=self.args.token)
        mid = self.midpoint_ticks()
        bid = (mid - self.half_spread) // self.tick * self.tick
        ask = -(-(mid + self.half_spread) // self.tick) * self.tick
        bid, ask = max(bid, self.tick), min(ask, 10_000 - self.tick)
        orders = []
        if bid < mid:
            orders.append(PostOrder(self.client.build_order(self.args.token, "BUY", bid, self.args.size), OrderType.GTC, True))
        if ask > mid:
            orders.append(PostOrder(self.client.build_order(self.args.token, "SELL", ask, self.args.size), OrderType.GTC, True))
        results = self.client.post_orders(orders) if orders else []
        self.quotes = {}
        for order, result in zip(orders, results):
            side = order.order.order.side.value
            if result["success"]:
                self.quotes[result["orderID"]] = side
            else:
                log.warning("%s quote refused: %s", side, result["errorMsg"])
        log.info(
            "quoted (%s): mid %s, bid %s x %d, ask %s x %d",
            why, format_price_ticks(mid), format_price_ticks(bid), self.args.size, format_price_ticks(ask), self.args.size,
        )

    def is_our_fill(self, event: dict[str, Any]) -> bool:
        """True for an order UPDATE (a fill) of one of the current quotes."""
        return event.get("event_type") == "order" and event.get("type") == "UPDATE" and event.get("order_hash") in self.quotes


def run(args: argparse.Namespace) -> int:
    key, account = DEMO_TRADERS[args.trader]
    if args.private_key:
        key, account = args.private_key, args.account
    client = LadderClient(args.url, key, account=account)
    client.check_clock()
    client.create_or_derive_api_key()
    quoter = Quoter(client, args)

    def on_term(signum: int, frame: object) -> None:
        raise Stop()

    signal.signal(signal.SIGTERM, on_term)
    heartbeater = Heartbeater(client, args.heartbeat_every, on_expired=lambda: log.error("heartbeats expired: quotes were cancelled"))
    stream = client.user_stream([args.market])
    deadline = time.monotonic() + args.duration if args.duration > 0 else None
    try:
        heartbeater.start()
        stream.connect()
        quoter.requote("start")
        last_quote = time.monotonic()
        while deadline is None or time.monotonic() < deadline:
            wait = args.requote_every - (time.monotonic() - last_quote)
            if deadline is not None:
                wait = min(wait, deadline - time.monotonic())
            try:
                event = stream.recv(timeout=max(wait, 0.01))
            except TimeoutError:
                if time.monotonic() - last_quote >= args.requote_every:
                    quoter.requote("timer")
                    last_quote = time.monotonic()
                continue
            if event.get("event_type") == "trade":
                log.info("trade %s: %s %s @ %s (%s)", event["id"][:10], event["side"], event["size"], event["price"], event["status"])
            if quoter.is_our_fill(event):
                log.info("filled: %s %s/%s @ %s", event["side"], event["size_matched"], event["original_size"], event["price"])
                # Every fill, partial or whole, moves the inventory: quote afresh.
                quoter.requote("fill")
                last_quote = time.monotonic()
            if heartbeater.expiries:
                quoter.requote("after expiry")
                heartbeater.expiries = 0
                last_quote = time.monotonic()
    except (KeyboardInterrupt, Stop):
        log.info("stopping")
    except StreamError as e:
        log.error("/ws/user: %s", e)
        return 1
    finally:
        try:
            result = client.cancel_all()
            log.info("cancelled %d order(s)", len(result["canceled"]))
        finally:
            heartbeater.stop()
            stream.close()
            client.close()
    return 0


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s", stream=sys.stdout)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    sys.exit(run(parse_args()))


if __name__ == "__main__":
    main()
