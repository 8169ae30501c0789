"""examples/quote.py against the real service: it quotes both sides, re-quotes after a fill
seen on /ws/user, and Ctrl-C cancels everything and exits 0."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from conftest import MARKET, YES, Service, wait_until
from ladder_client import LadderClient

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "quote.py"


def test_quote_example(service: Service, trader0: LadderClient, trader1: LadderClient, clean_book: None) -> None:
    process = subprocess.Popen(
        [sys.executable, str(EXAMPLE), "--url", service.url, "--trader", "0", "--heartbeat-every", "0.25", "--size", "3"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    # The quoter's log, read as it comes: Ctrl-C waits for the line that says the re-quote is
    # done (its orders are visible before it logs it, and a signal in between would cut it).
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(process.stdout), daemon=True)
    reader.start()
    try:
        quotes = wait_until(lambda: len(trader0.get_orders(market=MARKET)["data"]) == 2 and trader0.get_orders()["data"], timeout=10)
        assert {o["side"] for o in quotes} == {"BUY", "SELL"}
        bid = next(o for o in quotes if o["side"] == "BUY")
        assert float(bid["price"]) < float(next(o for o in quotes if o["side"] == "SELL")["price"])
        # Hit the bid: the quoter sees the fill and quotes afresh around the new midpoint.
        assert trader1.place_order(YES, "SELL", bid["price"], 3, "FAK")["status"] == "matched"
        requoted = wait_until(
            lambda: (lambda data: len(data) == 2 and bid["id"] not in {o["id"] for o in data} and data)(trader0.get_orders()["data"]),
            timeout=10,
        )
        assert {o["side"] for o in requoted} == {"BUY", "SELL"}
        wait_until(lambda: any("quoted (fill)" in line for line in lines), timeout=10)
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=15)
        reader.join(timeout=15)
    output = "".join(lines)
    assert process.returncode == 0, output
    assert "quoted (fill)" in output and "cancelled 2 order(s)" in output, output
    assert trader0.get_orders()["data"] == []
