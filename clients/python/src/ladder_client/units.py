"""Units of price and amount, and the exact conversions between a (price, size) and the signed
``makerAmount``/``takerAmount`` of an order (API.md §1, CONTRACT §1).

This mirrors ``protocol/src/units.rs`` of the service: prices are integer *price ticks* of
0.0001 (``0.55`` is ``5500``), amounts are integer base units of 6 decimals (one share is
``1_000_000`` units). Nothing is rounded: a price with non-zero digits past the fourth decimal,
a price outside (0, 1), a size that is not a whole number of shares, or amounts that overflow
64 bits are errors, exactly where the Rust client fails.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from enum import Enum
from typing import Union

from .errors import AmountError

#: Decimals of the collateral and of outcome tokens.
COLLATERAL_DECIMALS = 6
#: Base units in one share (and in one unit of collateral).
UNITS_PER_SHARE = 1_000_000
#: Price ticks in a price of 1: one tick is 0.0001.
PRICE_SCALE = 10_000
#: Decimal places of one price tick.
PRICE_DECIMALS = 4
#: Smallest price an order can carry, in ticks (0.0001).
PRICE_TICKS_MIN = 1
#: Largest price an order can carry, in ticks (0.9999).
PRICE_TICKS_MAX = PRICE_SCALE - 1
#: Collateral base units of one share at a price of one tick.
UNITS_PER_SHARE_TICK = UNITS_PER_SHARE // PRICE_SCALE
#: Largest amount the service accepts (``u64::MAX``).
U64_MAX = 2**64 - 1
#: Largest order size the engine accepts, in shares (API.md §8 row 13).
ORDER_SHARES_MAX = 1_000_000_000


class Side(str, Enum):
    """Order side. The signed order carries ``0`` for BUY and ``1`` for SELL."""

    BUY = "BUY"
    SELL = "SELL"

    @property
    def code(self) -> int:
        """The integer written in a signed order (``0`` = BUY, ``1`` = SELL)."""
        return 0 if self is Side.BUY else 1

    @classmethod
    def of(cls, value: Union["Side", str, int]) -> "Side":
        """A side from ``Side``, ``"BUY"``/``"SELL"`` (any case) or ``0``/``1``."""
        if isinstance(value, Side):
            return value
        if isinstance(value, bool):
            raise ValueError(f"side: expected BUY, SELL, 0 or 1, found {value!r}")
        if isinstance(value, int):
            if value in (0, 1):
                return Side.BUY if value == 0 else Side.SELL
            raise ValueError(f"side: expected 0 (BUY) or 1 (SELL), found {value}")
        text = str(value).upper()
        if text in ("BUY", "SELL"):
            return Side(text)
        raise ValueError(f"side: expected BUY or SELL, found {value!r}")


PriceLike = Union[str, Decimal, float, int]


def parse_decimal_ticks(text: str) -> int:
    """Parses a non-negative decimal (``"0.55"``, ``"0.5500"``, ``"1"``) into price ticks.

    The same grammar as the Rust ``parse_decimal_ticks``: digits, optionally a point and at least
    one more digit; no sign, exponent or whitespace. Digits past the fourth decimal must be zero.
    """
    if "." in text:
        whole, fraction = text.split(".", 1)
        if fraction == "":
            raise AmountError("Malformed", f"expected a decimal number such as 0.55, found {text!r}")
    else:
        whole, fraction = text, ""
    if whole == "" or not _all_digits(whole) or not _all_digits(fraction):
        raise AmountError("Malformed", f"expected a decimal number such as 0.55, found {text!r}")
    kept, dropped = fraction[:PRICE_DECIMALS], fraction[PRICE_DECIMALS:]
    if any(c != "0" for c in dropped):
        raise AmountError(
            "TooPrecise",
            f"price {text!r} has non-zero digits beyond 4 decimal places "
            "(the smallest tick is 0.0001)",
        )
    ticks = int(whole) * PRICE_SCALE + int(kept.ljust(PRICE_DECIMALS, "0"))
    if ticks > 2**32 - 1:
        raise AmountError("TooLarge", f"decimal {text!r} is too large")
    return ticks


def _all_digits(part: str) -> bool:
    return all("0" <= c <= "9" for c in part)


def parse_price_ticks(text: str) -> int:
    """Parses an order price: a decimal strictly between 0 and 1 with at most 4 decimals."""
    ticks = parse_decimal_ticks(text)
    if not PRICE_TICKS_MIN <= ticks <= PRICE_TICKS_MAX:
        raise AmountError("OutOfRange", f"price {text!r} must be greater than 0 and less than 1")
    return ticks


def price_to_ticks(price: PriceLike) -> int:
    """Price ticks of a price given as text, ``Decimal`` or ``float``.

    A ``float`` is read through its shortest decimal form (``0.55`` is ``"0.55"``), then parsed
    exactly; an ``int`` is taken as a number of ticks (``5500``). Nothing is rounded.
    """
    if isinstance(price, bool):
        raise AmountError("Malformed", f"expected a price, found {price!r}")
    if isinstance(price, int):
        if not PRICE_TICKS_MIN <= price <= PRICE_TICKS_MAX:
            raise AmountError(
                "PriceTicksOutOfRange",
                f"price {format_price_ticks(max(price, 0))} must be greater than 0 and less than 1",
            )
        return price
    if isinstance(price, float):
        text = repr(price)
        if "e" in text or "E" in text:
            text = format(Decimal(text), "f")
        return parse_price_ticks(text)
    if isinstance(price, Decimal):
        if not price.is_finite() or price < 0:
            raise AmountError("Malformed", f"expected a decimal number such as 0.55, found {price}")
        return parse_price_ticks(format(price, "f"))
    return parse_price_ticks(str(price))


def format_price_ticks(price_ticks: int) -> str:
    """Price ticks as a trimmed decimal: ``5500`` is ``"0.55"``, ``10000`` is ``"1"``."""
    whole, fraction = divmod(price_ticks, PRICE_SCALE)
    if fraction == 0:
        return str(whole)
    return f"{whole}." + f"{fraction:04d}".rstrip("0")


def shares_of(size: Union[int, str, Decimal]) -> int:
    """A number of whole shares from an ``int`` or an integral text/``Decimal`` (``"10"``)."""
    if isinstance(size, bool):
        raise AmountError("Malformed", f"expected a whole number of shares, found {size!r}")
    if isinstance(size, int):
        value = size
    else:
        try:
            number = Decimal(str(size))
        except InvalidOperation:
            raise AmountError("Malformed", f"expected a whole number of shares, found {size!r}") from None
        if not number.is_finite() or number != number.to_integral_value():
            raise AmountError(
                "SharesNotWhole", f"size {size} is not a whole number of shares"
            )
        value = int(number)
    if value < 0:
        raise AmountError("Malformed", f"size {size} must not be negative")
    return value


def amounts_from_price_and_size(side: Union[Side, str, int], price_ticks: int, shares: int) -> tuple[int, int]:
    """The signed ``(makerAmount, takerAmount)`` in base units of ``shares`` at ``price_ticks``.

    BUY: maker = collateral paid, taker = shares received; SELL: the reverse. The exact inverse
    of :func:`price_and_size_from_amounts`, with the Rust client's checks: ticks in
    ``1..=9999``, at least one share, and both amounts within ``u64``.
    """
    side = Side.of(side)
    if not PRICE_TICKS_MIN <= price_ticks <= PRICE_TICKS_MAX:
        raise AmountError(
            "PriceTicksOutOfRange",
            f"price {format_price_ticks(max(price_ticks, 0))} must be greater than 0 and less than 1",
        )
    if shares == 0:
        raise AmountError(
            "ZeroShares",
            "share amount is 0; an order must be for at least 1 share (1000000 base units)",
        )
    if shares < 0:
        raise AmountError("Malformed", f"size {shares} must not be negative")
    share_units = shares * UNITS_PER_SHARE
    collateral_units = shares * (price_ticks * UNITS_PER_SHARE_TICK)
    if share_units > U64_MAX or collateral_units > U64_MAX:
        raise AmountError(
            "Overflow",
            f"{shares} shares at price {format_price_ticks(price_ticks)} overflow the amount range",
        )
    if side is Side.BUY:
        return collateral_units, share_units
    return share_units, collateral_units


def price_and_size_from_amounts(side: Union[Side, str, int], maker_amount: int, taker_amount: int) -> tuple[int, int]:
    """``(price_ticks, share_units)`` of signed amounts, refusing what the service refuses."""
    side = Side.of(side)
    if maker_amount > U64_MAX:
        raise AmountError("TooLarge", f"makerAmount {maker_amount} is too large (at most {U64_MAX} base units)")
    if taker_amount > U64_MAX:
        raise AmountError("TooLarge", f"takerAmount {taker_amount} is too large (at most {U64_MAX} base units)")
    collateral, share_units = (maker_amount, taker_amount) if side is Side.BUY else (taker_amount, maker_amount)
    if share_units == 0:
        raise AmountError("ZeroShares", "share amount is 0")
    if share_units % UNITS_PER_SHARE:
        raise AmountError("SharesNotWhole", f"share amount {share_units} is not a whole number of shares")
    if collateral == 0 or collateral >= share_units:
        raise AmountError("PriceOutOfRange", f"price = collateral {collateral} / shares {share_units} must be greater than 0 and less than 1")
    units_per_tick = share_units // PRICE_SCALE
    if collateral % units_per_tick:
        raise AmountError("OffTick", f"price = collateral {collateral} / shares {share_units} is not an exact multiple of 0.0001")
    return collateral // units_per_tick, share_units


def tick_allows(tick_size_ticks: int, price_ticks: int) -> bool:
    """True when ``price_ticks`` is a multiple of the market tick and lies in ``[tick, 1 - tick]``."""
    return (
        price_ticks % tick_size_ticks == 0
        and tick_size_ticks <= price_ticks <= PRICE_SCALE - tick_size_ticks
    )
