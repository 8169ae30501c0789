"""Python client of Ladder, a central limit order book for two-outcome prediction markets.

>>> from ladder_client import LadderClient
>>> client = LadderClient("http://127.0.0.1:8080", KEY, account=ACCOUNT)  # doctest: +SKIP
>>> client.create_or_derive_api_key()  # doctest: +SKIP
>>> client.place_order(YES_TOKEN, "BUY", "0.55", 10)  # doctest: +SKIP
"""

from .auth import (
    CLOCK_SKEW_MAX_S,
    Credentials,
    check_clock_skew,
    l1_headers,
    l2_headers,
    l2_signature,
    owner_uuid,
    ws_user_subscribe,
)
from .book import LocalBook, book_hash
from .bundler import Bundler
from .cancels import cancel_market_orders_body, cancel_order_body
from .client import END_CURSOR, START_CURSOR, LadderClient, paginate
from .eip712 import CHAIN_ID, DEFAULT_EXCHANGE_ADDRESS, AuthDomain, ExchangeDomain
from .errors import AmountError, BundlerError, LadderError, StreamClosed, StreamError
from .heartbeat import Heartbeater
from .market_stream import MarketStream
from .orders import (
    SIGNATURE_TYPE_EOA,
    SIGNATURE_TYPE_SMART_ACCOUNT,
    Order,
    OrderBuilder,
    OrderType,
    PostOrder,
    SignedOrder,
    post_orders_body,
)
from .signing import Signer
from .units import (
    UNITS_PER_SHARE,
    Side,
    amounts_from_price_and_size,
    format_price_ticks,
    parse_price_ticks,
    price_and_size_from_amounts,
    price_to_ticks,
)
from .user_ops import (
    ENTRY_POINT_V07,
    UserOperation,
    eip191_digest,
    execute_redeem_call_data,
    redeem_call_data,
    redeem_operation,
    sign_user_op_hash,
)
from .user_stream import UserStream

__version__ = "1.0.0"

__all__ = [
    "AmountError",
    "AuthDomain",
    "Bundler",
    "BundlerError",
    "CHAIN_ID",
    "CLOCK_SKEW_MAX_S",
    "Credentials",
    "DEFAULT_EXCHANGE_ADDRESS",
    "END_CURSOR",
    "ENTRY_POINT_V07",
    "ExchangeDomain",
    "Heartbeater",
    "LadderClient",
    "LadderError",
    "LocalBook",
    "MarketStream",
    "Order",
    "OrderBuilder",
    "OrderType",
    "PostOrder",
    "SIGNATURE_TYPE_EOA",
    "SIGNATURE_TYPE_SMART_ACCOUNT",
    "START_CURSOR",
    "Side",
    "SignedOrder",
    "Signer",
    "StreamClosed",
    "StreamError",
    "UNITS_PER_SHARE",
    "UserOperation",
    "UserStream",
    "amounts_from_price_and_size",
    "book_hash",
    "cancel_market_orders_body",
    "cancel_order_body",
    "check_clock_skew",
    "eip191_digest",
    "execute_redeem_call_data",
    "format_price_ticks",
    "l1_headers",
    "l2_headers",
    "l2_signature",
    "owner_uuid",
    "paginate",
    "parse_price_ticks",
    "post_orders_body",
    "price_and_size_from_amounts",
    "price_to_ticks",
    "redeem_call_data",
    "redeem_operation",
    "sign_user_op_hash",
    "ws_user_subscribe",
]
