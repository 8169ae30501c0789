"""The amounts table of protocol/tests/data/amounts.json: (price, size, side) → makerAmount /
takerAmount exactly as the Rust client computes them, or the error it gives. No service needed."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest

from conftest import DATA_DIR
from ladder_client import AmountError, OrderBuilder, Side, amounts_from_price_and_size, parse_price_ticks, price_and_size_from_amounts, price_to_ticks
from ladder_client.units import format_price_ticks

ROWS: list[dict[str, Any]] = json.loads((DATA_DIR / "amounts.json").read_text())


def test_the_table_is_large_and_covers_both_sides() -> None:
    ok = [r for r in ROWS if "error" not in r]
    assert len(ok) >= 30
    assert {r["side"] for r in ok} == {"BUY", "SELL"}
    assert all(isinstance(v, str) for r in ROWS for v in r.values())


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r['side']} {r['size']} @ {r['price']!r}")
def test_amounts_row(row: dict[str, Any]) -> None:
    def compute() -> tuple[int, int]:
        ticks = parse_price_ticks(row["price"])
        if "price_ticks" in row:
            assert ticks == int(row["price_ticks"])
        return amounts_from_price_and_size(row["side"], ticks, int(row["size"]))

    if "error" in row:
        with pytest.raises(AmountError) as raised:
            compute()
        assert raised.value.kind == row["error"]
        return
    maker, taker = compute()
    assert (str(maker), str(taker)) == (row["makerAmount"], row["takerAmount"])
    # The inverse gives the price and size back.
    ticks, share_units = price_and_size_from_amounts(row["side"], maker, taker)
    assert ticks == int(row["price_ticks"]) and share_units == int(row["size"]) * 1_000_000
    # The order builder gives the same amounts.
    builder = OrderBuilder(token_id=1, side=row["side"], price=row["price"], size=row["size"])
    assert builder.amounts() == (maker, taker)


def test_prices_of_other_types_are_exact() -> None:
    assert price_to_ticks(0.55) == 5500
    assert price_to_ticks(Decimal("0.5500")) == 5500
    assert price_to_ticks(5500) == 5500
    assert price_to_ticks(0.0001) == 1
    assert price_to_ticks(1e-4) == 1
    with pytest.raises(AmountError):
        price_to_ticks(0.55001)
    with pytest.raises(AmountError):
        price_to_ticks(10_000)
    with pytest.raises(AmountError):
        OrderBuilder(token_id=1, side="BUY", price="0.5", size="1.5").amounts()
    assert format_price_ticks(5500) == "0.55" and format_price_ticks(10) == "0.001"


def test_inverse_refuses_what_the_service_refuses() -> None:
    with pytest.raises(AmountError) as e:
        price_and_size_from_amounts(Side.BUY, 5_500_001, 10_000_000)
    assert e.value.kind == "OffTick"
    with pytest.raises(AmountError) as e:
        price_and_size_from_amounts(Side.BUY, 500_000, 1_500_000)
    assert e.value.kind == "SharesNotWhole"
    with pytest.raises(AmountError) as e:
        price_and_size_from_amounts(Side.SELL, 10_000_000, 10_000_000)
    assert e.value.kind == "PriceOutOfRange"
