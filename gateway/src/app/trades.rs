//! Trades of the caller (API.md §11–4.9, API.md §11): one by id, or a page, newest first.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ladder_engine::{trade_index, Engine, TradeFilter, TradeView};
use ladder_protocol::wire::cursor::{decode_cursor, next_cursor, Cursor};
use ladder_protocol::wire::responses::Page;
use ladder_protocol::{Address, B256, U256};
use ladder_sequencer::{merge_newest_first, HistoryReads};

use super::present::trade;
use super::{bad_request, ok_json, query, App, QueryString};
use crate::convert::engine_token;
use crate::handler::Outcome;
use crate::http::{Method, Request, Response, Status};

/// The history store, shared.
type History = Arc<dyn HistoryReads>;

/// Routes the trade reads; `None` when the path is not one of them.
pub(super) fn route(app: &App, method: Method, path: &str, request: &Request) -> Option<Outcome> {
    let one = path.strip_prefix("/trades/");
    if method != Method::Get || !(path == "/trades" || path == "/data/trades" || one.is_some()) {
        return None;
    }
    let principal = match app.l2(request) {
        Ok(p) => p,
        Err(refused) => return Some(refused),
    };
    let history = app.history();
    Some(match one {
        Some(id) => trade_by_id(principal.address, id, history),
        None => trades_page(
            principal.address,
            &QueryString::parse(request.query()),
            history,
        ),
    })
}

/// Longest wait for the history store to hold what the engine has forgotten.
const CATCH_UP_WAIT: Duration = Duration::from_millis(20);

/// Waits (briefly) until the store holds what the engine had forgotten when it answered: on
/// a primary at once (it forgets only what its store holds); a standby forgets as its
/// primary's store allows, and its own store may be a moment behind. 503 if it stays behind.
fn caught_up(history: Option<&dyn HistoryReads>, forgotten_through: u64) -> Result<(), Response> {
    let Some(store) = history else {
        return Ok(());
    };
    store.usable().map_err(|why| store_unavailable(&why))?;
    let deadline = Instant::now() + CATCH_UP_WAIT;
    while store.stored_through() < forgotten_through {
        if Instant::now() >= deadline {
            return Err(
                Response::error(Status::Unavailable, "history store catching up").retry_after(1),
            );
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

/// The answer when the history store cannot be read.
fn store_unavailable(why: &str) -> Response {
    tracing::warn!(error = %why, "history store read failed");
    Response::error(Status::Unavailable, "history store unavailable").retry_after(1)
}

fn trade_by_id(caller: Address, id: &str, history: Option<History>) -> Outcome {
    let id = match id.parse::<B256>() {
        Ok(id) => id,
        Err(e) => return bad_request(format!("id: {e}")),
    };
    let me = caller;
    let party = move |t: &TradeView| t.taker.address == me || t.maker.address == me;
    query(
        move |e: &Engine| (e.trade(&id), e.forgotten_through()),
        move |(held, forgotten_through)| {
            if let Err(behind) = caught_up(history.as_deref(), forgotten_through) {
                return behind;
            }
            // Not in the engine: a final trade it has forgotten is in the store.
            let found = match (held, &history, trade_index(&id)) {
                (Some(t), _, _) => Some(t),
                (None, Some(store), Some(index)) => match store.trade(index) {
                    Ok(stored) => stored,
                    Err(why) => return store_unavailable(&why),
                },
                (None, _, _) => None,
            };
            match found.filter(party) {
                Some(t) => ok_json(&trade(&t, &caller)),
                None => Response::error(Status::NotFound, "not found"),
            }
        },
    )
}

fn trades_page(caller: Address, q: &QueryString, history: Option<History>) -> Outcome {
    let parsed = (|| -> Result<(TradeFilter, usize, u64), String> {
        let filter = TradeFilter {
            id: q
                .get("id")
                .map(|v| v.parse::<B256>().map_err(|e| format!("id: {e}")))
                .transpose()?,
            market: q
                .get("market")
                .map(|v| v.parse::<B256>().map_err(|e| format!("market: {e}")))
                .transpose()?,
            token_id: q
                .get("asset_id")
                .map(|v| {
                    U256::from_dec_str(v)
                        .map(|t| engine_token(&t))
                        .map_err(|e| format!("asset_id: {e}"))
                })
                .transpose()?,
            maker_address: q
                .get("maker_address")
                .map(|v| Address::parse(v).map_err(|e| format!("maker_address: {e}")))
                .transpose()?,
            before_s: q.parsed("before", "expected Unix seconds")?,
            after_s: q.parsed("after", "expected Unix seconds")?,
        };
        let limit = q.page_limit()?;
        let offset =
            match decode_cursor(q.get("next_cursor").unwrap_or("")).map_err(|e| e.to_string())? {
                Cursor::Offset(o) => o,
                Cursor::End => u64::MAX,
            };
        Ok((filter, limit, offset))
    })();
    let (filter, limit, offset) = match parsed {
        Ok(p) => p,
        Err(e) => return bad_request(e),
    };
    let me = caller;
    let store_filter = filter.clone();
    query(
        move |e: &Engine| (e.trades_of(&me, &filter), e.forgotten_through()),
        move |(held, forgotten_through)| {
            if let Err(behind) = caught_up(history.as_deref(), forgotten_through) {
                return behind;
            }
            // The engine first, then the store: whatever the engine had forgotten when it
            // answered is stored (API.md §19, "History and bounded state").
            let all = match &history {
                Some(store) if offset != u64::MAX => {
                    let wanted = usize::try_from(offset)
                        .unwrap_or(usize::MAX)
                        .saturating_add(limit);
                    match store.trades_of(&me, &store_filter, wanted) {
                        Ok(stored) => merge_newest_first(held, stored),
                        Err(why) => return store_unavailable(&why),
                    }
                }
                _ => held,
            };
            let total = all.len() as u64;
            let page: Vec<_> = all
                .iter()
                .skip(offset.min(total) as usize)
                .take(limit)
                .map(|t| trade(t, &caller))
                .collect();
            let next = next_cursor(offset, page.len(), limit);
            ok_json(&Page::new(page, next, limit))
        },
    )
}
