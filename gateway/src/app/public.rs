//! Public reads: time, markets, books and prices, last trades, price history, claimable.

use ladder_engine::{
    format_price_ticks, BookView, Engine, MarketView, Outcome as YesNo, Side, UNITS_PER_SHARE,
};
use ladder_protocol::wire::cursor::{decode_cursor, next_cursor, Cursor};
use ladder_protocol::wire::responses::{ClaimableResponse, LastTradePrice, Page};
use ladder_protocol::{Address, B256, U256};
use ladder_sequencer::{merge_price_buckets, BookBoard, HistoryReads, HISTORY_BUCKETS_MAX};
use serde_json::{json, Map, Value};
use sha1::{Digest, Sha1};

use super::present::{claimable, market, midpoint_ticks, token_price};
use super::{bad_request, now_s, ok_json, query, App, QueryString};
use crate::convert::{engine_token, wire_token};
use crate::handler::Outcome;
use crate::http::{Method, Request, Response, Status};

/// Most tokens in one `/books` or `/last-trades-prices` request.
pub const TOKENS_PER_REQUEST_MAX: usize = 500;

/// Routes the public reads; `None` when the path is not one of them.
pub(super) fn route(app: &App, method: Method, path: &str, request: &Request) -> Option<Outcome> {
    let q = QueryString::parse(request.query());
    let board = &app.state.board;
    Some(match (method, path) {
        (Method::Get, "/time") => Outcome::Respond(ok_json(&now_s())),
        (Method::Get, "/markets") | (Method::Get, "/sampling-markets") => markets_page(&q),
        (Method::Get, p) if p.starts_with("/markets/") => market_one(&p["/markets/".len()..]),
        (Method::Get, "/book") => with_token(&q, |token| book_one(board, token)),
        (Method::Get | Method::Post, "/books") => books(app, request),
        (Method::Get, "/price") => price(board, &q),
        (Method::Get, "/midpoint") => with_token(&q, |token| midpoint(board, token)),
        (Method::Get, "/spread") => with_token(&q, |token| spread(board, token)),
        (Method::Get, "/tick-size") => with_token(&q, |token| {
            token_read(
                board,
                token,
                |m| json!({ "minimum_tick_size": tick_number(m.tick_size_ticks) }),
            )
        }),
        (Method::Get, "/neg-risk") => with_token(&q, |token| {
            token_read(board, token, |m| json!({ "neg_risk": m.neg_risk }))
        }),
        (Method::Get, "/fee-rate") => with_token(&q, |token| {
            token_read(
                board,
                token,
                |m| json!({ "fee_rate_bps": m.fee_rate_bps.to_string() }),
            )
        }),
        (Method::Get | Method::Post, "/last-trades-prices") => last_trades_prices(app, request),
        (Method::Get, "/prices-history") => prices_history(board, app.history().as_deref(), &q),
        (Method::Get, "/claimable") => claimable_of(&q),
        _ => return None,
    })
}

fn tick_number(tick_ticks: u32) -> Value {
    serde_json::from_str(&format_price_ticks(tick_ticks)).unwrap_or(Value::Null)
}

fn not_found() -> Response {
    Response::error(Status::NotFound, "not found")
}

fn with_token(q: &QueryString, handler: impl FnOnce(U256) -> Outcome) -> Outcome {
    match q.get("token_id") {
        None => bad_request("token_id: required"),
        Some(text) => match U256::from_dec_str(text) {
            Ok(token) => handler(token),
            Err(e) => bad_request(format!("token_id: {e}")),
        },
    }
}

/// The book of `token` on the read side, if the token is known.
fn board_book(board: &BookBoard, token: &U256) -> Option<BookView> {
    let (books, outcome) = board.books(&engine_token(token))?;
    Some(books.of(outcome))
}

/// Answers `render(market)` for a token's market from the read side, or 404.
fn token_read(
    board: &BookBoard,
    token: U256,
    render: impl FnOnce(&MarketView) -> Value,
) -> Outcome {
    match board.books(&engine_token(&token)) {
        Some((books, _)) => Outcome::Respond(ok_json(&render(&books.yes.market))),
        None => Outcome::Respond(not_found()),
    }
}

fn markets_page(q: &QueryString) -> Outcome {
    let limit = match q.page_limit() {
        Ok(limit) => limit,
        Err(e) => return bad_request(e),
    };
    let offset = match decode_cursor(q.get("next_cursor").unwrap_or("")) {
        Ok(Cursor::Offset(offset)) => offset,
        Ok(Cursor::End) => u64::MAX,
        Err(e) => return bad_request(e),
    };
    query(
        move |e: &Engine| {
            let total = e.market_count() as u64;
            let markets: Vec<_> = e
                .markets()
                .skip(offset.min(total) as usize)
                .take(limit)
                .map(|m| market(&m, market_prices(e, &m)))
                .collect();
            let next = next_cursor(offset, markets.len(), limit);
            Page::new(markets, next, limit)
        },
        |page| ok_json(&page),
    )
}

fn market_prices(e: &Engine, m: &MarketView) -> [u32; 2] {
    [YesNo::Yes, YesNo::No].map(|o| {
        let token = m.token_id(o);
        token_price(
            m,
            o,
            e.best_price(&token, Side::Buy),
            e.best_price(&token, Side::Sell),
        )
    })
}

fn market_one(condition_id: &str) -> Outcome {
    let condition = match condition_id.parse::<B256>() {
        Ok(c) => c,
        Err(e) => return bad_request(format!("condition_id: {e}")),
    };
    query(
        move |e: &Engine| {
            e.market(&condition)
                .map(|m| market(&m, market_prices(e, &m)))
        },
        |m| m.map(|m| ok_json(&m)).unwrap_or_else(not_found),
    )
}

/// A book in API.md §14's shape (its keys in its order, bids and asks best last), then
/// `seq`, the market's event sequence it is current as of (API.md §14), with Polymarket's
/// hash over the whole object with `hash` set to "".
pub fn book_json(view: &BookView, seq: u64) -> Value {
    let level = |&(price, size): &(u32, u64)| json!({ "price": format_price_ticks(price), "size": (size / UNITS_PER_SHARE).to_string() });
    let m = &view.market;
    let last = m.last_trade[view.outcome.index()]
        .map(|l| format_price_ticks(l.price_ticks))
        .unwrap_or_default();
    let mut book = Map::new();
    book.insert("market".into(), json!(m.condition_id));
    book.insert(
        "asset_id".into(),
        json!(wire_token(&m.token_id(view.outcome)).to_string()),
    );
    book.insert("timestamp".into(), json!(now_ms().to_string()));
    book.insert("hash".into(), json!(""));
    book.insert(
        "bids".into(),
        Value::Array(view.bids.iter().rev().map(level).collect()),
    );
    book.insert(
        "asks".into(),
        Value::Array(view.asks.iter().rev().map(level).collect()),
    );
    book.insert(
        "min_order_size".into(),
        json!((m.min_order_size_units / UNITS_PER_SHARE).to_string()),
    );
    book.insert(
        "tick_size".into(),
        json!(format_price_ticks(m.tick_size_ticks)),
    );
    book.insert("neg_risk".into(), json!(m.neg_risk));
    book.insert("last_trade_price".into(), json!(last));
    book.insert("seq".into(), json!(seq));
    let compact = serde_json::to_string(&book).unwrap_or_default();
    let hash = hex::encode(Sha1::digest(compact.as_bytes()));
    book.insert("hash".into(), json!(hash));
    Value::Object(book)
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn book_one(board: &BookBoard, token: U256) -> Outcome {
    Outcome::Respond(
        board_book(board, &token)
            .map(|v| ok_json(&book_json(&v, v.market.event_seq)))
            .unwrap_or_else(not_found),
    )
}

fn token_list(body: &[u8]) -> Result<Vec<U256>, String> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|_| "body: expected a JSON array of {\"token_id\": string}".to_string())?;
    let items = value
        .as_array()
        .ok_or("body: expected a JSON array of {\"token_id\": string}")?;
    if items.len() > TOKENS_PER_REQUEST_MAX {
        return Err(format!(
            "body: at most {TOKENS_PER_REQUEST_MAX} tokens per request"
        ));
    }
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let text = item
                .get("token_id")
                .and_then(Value::as_str)
                .ok_or(format!("[{i}].token_id: expected a decimal string"))?;
            U256::from_dec_str(text).map_err(|e| format!("[{i}].token_id: {e}"))
        })
        .collect()
}

/// `POST /books`: a request costs a rate-limit token per book.
fn books(app: &App, request: &Request) -> Outcome {
    let board = &app.state.board;
    let tokens = match token_list(&request.body) {
        Ok(t) => t,
        Err(e) => return bad_request(e),
    };
    if let Err(refused) = app.charge(request, None, tokens.len()) {
        return refused;
    }
    let views: Vec<Value> = tokens
        .iter()
        .filter_map(|t| board_book(board, t))
        .map(|v| book_json(&v, v.market.event_seq))
        .collect();
    Outcome::Respond(ok_json(&views))
}

fn price(board: &BookBoard, q: &QueryString) -> Outcome {
    let side = match q.get("side").map(|s| s.to_ascii_uppercase()) {
        Some(s) if s == "BUY" => Side::Buy,
        Some(s) if s == "SELL" => Side::Sell,
        _ => return bad_request("side: expected BUY or SELL"),
    };
    with_token(q, |token| {
        Outcome::Respond(match best_both(board, &token) {
            None => not_found(),
            Some((bid, ask)) => match if side == Side::Buy { bid } else { ask } {
                None => Response::error(Status::NotFound, "no orders"),
                Some(p) => ok_json(&json!({ "price": format_price_ticks(p) })),
            },
        })
    })
}

/// The best bid and ask of `token` on the read side, if the token is known.
fn best_both(board: &BookBoard, token: &U256) -> Option<(Option<u32>, Option<u32>)> {
    let view = board_book(board, token)?;
    Some((
        view.bids.first().map(|l| l.0),
        view.asks.first().map(|l| l.0),
    ))
}

fn midpoint(board: &BookBoard, token: U256) -> Outcome {
    Outcome::Respond(match best_both(board, &token) {
        None => not_found(),
        Some((Some(b), Some(a))) => {
            ok_json(&json!({ "mid": format_price_ticks(midpoint_ticks(b, a)) }))
        }
        Some(_) => Response::error(Status::NotFound, "no orders"),
    })
}

fn spread(board: &BookBoard, token: U256) -> Outcome {
    Outcome::Respond(match best_both(board, &token) {
        None => not_found(),
        Some((Some(b), Some(a))) => {
            ok_json(&json!({ "spread": format_price_ticks(a.saturating_sub(b)) }))
        }
        Some(_) => Response::error(Status::NotFound, "no orders"),
    })
}

/// `/last-trades-prices`: a request costs a rate-limit token per token asked for.
fn last_trades_prices(app: &App, request: &Request) -> Outcome {
    let board = &app.state.board;
    let tokens = match token_list(&request.body) {
        Ok(t) => t,
        Err(e) => return bad_request(e),
    };
    if let Err(refused) = app.charge(request, None, tokens.len()) {
        return refused;
    }
    let list: Vec<LastTradePrice> = tokens
        .iter()
        .filter_map(|t| {
            let (books, outcome) = board.books(&engine_token(t))?;
            let last = books.yes.market.last_trade[outcome.index()]?;
            Some(LastTradePrice {
                token_id: *t,
                price_ticks: last.price_ticks,
                side: last.side,
            })
        })
        .collect();
    Outcome::Respond(ok_json(&list))
}

/// The span of a `/prices-history` `interval`, ending now, as Polymarket reads it: `1m` is a
/// month (30 days), `1w` a week, `1d` a day, `6h` and `1h` hours; `max` (or none) is all.
fn interval_seconds(interval: Option<&str>) -> Result<Option<u64>, String> {
    const HOUR: u64 = 3_600;
    const DAY: u64 = 24 * HOUR;
    Ok(match interval {
        None | Some("max") | Some("all") => None,
        Some("1h") => Some(HOUR),
        Some("6h") => Some(6 * HOUR),
        Some("1d") => Some(DAY),
        Some("1w") => Some(7 * DAY),
        Some("1m") => Some(30 * DAY),
        Some(_) => {
            return Err("interval: expected 1h, 6h, 1d, 1w, 1m (a month) or max".into());
        }
    })
}

fn prices_history(
    board: &BookBoard,
    history: Option<&dyn HistoryReads>,
    q: &QueryString,
) -> Outcome {
    let token = match q.get("market").map(U256::from_dec_str) {
        None => return bad_request("market: required (a token id)"),
        Some(Err(e)) => return bad_request(format!("market: {e}")),
        Some(Ok(t)) => engine_token(&t),
    };
    let parsed = (|| -> Result<(u64, u64, u64), String> {
        let now = now_s();
        let interval_s = interval_seconds(q.get("interval"))?;
        let start = q
            .parsed::<u64>("startTs", "expected Unix seconds")?
            .unwrap_or(interval_s.map_or(0, |i| now.saturating_sub(i)));
        let end = q
            .parsed::<u64>("endTs", "expected Unix seconds")?
            .unwrap_or(now);
        let fidelity_min = q
            .parsed::<u64>("fidelity", "expected minutes")?
            .unwrap_or(1)
            .max(1);
        // However many minutes: one bucket at most spans all time (no overflow).
        Ok((start, end, fidelity_min.saturating_mul(60)))
    })();
    let (start, end, bucket_s) = match parsed {
        Ok(p) => p,
        Err(e) => return bad_request(e),
    };
    // The read side first, the store after: a price that left the read side was stored.
    let Some((market, outcome, recent)) = board.price_history(&token, start, end, bucket_s) else {
        return Outcome::Respond(not_found());
    };
    let stored = match history {
        Some(store) => {
            match store.price_buckets(&market, outcome, start, end, bucket_s, HISTORY_BUCKETS_MAX) {
                Ok(stored) => stored,
                Err(why) => {
                    tracing::warn!(error = %why, "history store read failed");
                    return Outcome::Respond(
                        Response::error(Status::Unavailable, "history store unavailable")
                            .retry_after(1),
                    );
                }
            }
        }
        None => Vec::new(),
    };
    let points: Vec<Value> = merge_price_buckets(stored, recent)
        .iter()
        .map(|b| {
            let price = ladder_sequencer::token_price(outcome, b.yes_price_ticks);
            json!({ "t": b.start_s, "p": tick_number(price) })
        })
        .collect();
    Outcome::Respond(ok_json(&json!({ "history": points })))
}

fn claimable_of(q: &QueryString) -> Outcome {
    let address = match q.get("address").map(Address::parse) {
        None => return bad_request("address: required"),
        Some(Err(e)) => return bad_request(format!("address: {e}")),
        Some(Ok(a)) => a,
    };
    let engine_addr = address;
    query(
        move |e: &Engine| e.claimable(&engine_addr),
        move |list| {
            ok_json(&ClaimableResponse {
                address,
                claimable: list.iter().map(claimable).collect(),
            })
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn price_history_intervals_are_polymarkets_with_1m_a_month() {
        assert_eq!(interval_seconds(Some("1m")), Ok(Some(30 * 86_400)));
        assert_eq!(interval_seconds(Some("1w")), Ok(Some(7 * 86_400)));
        assert_eq!(interval_seconds(Some("1d")), Ok(Some(86_400)));
        assert_eq!(interval_seconds(Some("6h")), Ok(Some(21_600)));
        assert_eq!(interval_seconds(Some("1h")), Ok(Some(3_600)));
        assert_eq!(interval_seconds(Some("max")), Ok(None));
        assert_eq!(interval_seconds(None), Ok(None));
        assert!(interval_seconds(Some("5m"))
            .unwrap_err()
            .starts_with("interval:"));
    }
}
