//! Orders: place one or a batch, list open orders, cancel by id, by market, or all; and the
//! caller's balances. Signatures are recovered here, on the gateway thread.

use std::sync::Arc;

use ladder_engine::{
    Asset, CancelReport, Command, Engine, EngineLimits, NewOrder, NotCanceled, OrderFilter,
    OrderStatus, Reject, Reply, SignedFields, HASH_GRACE_RECORDS,
};
use ladder_protocol::wire::cancel::{
    parse_cancel_orders, CancelMarketOrdersRequest, CancelOrderRequest,
};
use ladder_protocol::wire::cursor::{decode_cursor, next_cursor, Cursor};
use ladder_protocol::wire::order::{parse_post_orders, PostOrderRequest};
use ladder_protocol::wire::responses::{
    BalanceAllowance, CancelResult, OrderPlacementResult, Page,
};
use ladder_protocol::{
    Address, ExchangeDomain, OffendingPrice, Signature, SignatureType, VerifiedOrder, B256, U256,
};
use ladder_sequencer::{Completion, HistoryReads, Work};

use super::present::{cancel_result, open_order, placement};
use super::refusals::{
    format_shares, off_tick_message, price_out_of_range_message, Worded,
    POST_ONLY_NEEDS_RESTING_TYPE,
};
use super::{bad_request, command, ok_json, query, App, QueryString};
use crate::auth::L2Principal;
use crate::convert::{engine_token, wire_token};
use crate::handler::{unexpected, Outcome};
use crate::http::{Method, Request, Response, Status};
use crate::smart::{ControlCheck, SmartAccounts, Verdict};

/// Routes the order endpoints; `None` when the path is not one of them.
pub(super) fn route(app: &App, method: Method, path: &str, request: &Request) -> Option<Outcome> {
    let handler: fn(&App, &L2Principal, &Request) -> Outcome = match (method, path) {
        (Method::Post, "/order") => post_order,
        (Method::Post, "/orders") => post_orders,
        (Method::Get, "/orders") => open_orders,
        (Method::Delete, "/order") => cancel_order,
        (Method::Delete, "/orders") => cancel_orders,
        (Method::Delete, "/cancel-market-orders") => cancel_market,
        (Method::Delete, "/cancel-all") => cancel_all,
        (Method::Get, "/balance-allowance") => balance_allowance,
        _ => return None,
    };
    // A standby refuses every write (API.md §19), whoever sends it: before authentication.
    let writes = method != Method::Get;
    Some(
        (if writes { app.writable() } else { Ok(()) })
            .and_then(|()| app.l2(request))
            .map(|principal| handler(app, &principal, request))
            .unwrap_or_else(|refused| refused),
    )
}

/// Why an order cannot go to the engine.
enum Refusal {
    /// HTTP 400 with this text.
    BadRequest(String),
    /// A 200 placement result with `success: false`.
    Rejected(String, Option<B256>),
    /// A 200 rejection of a price off the market's tick or out of its range, whose message
    /// names the market's tick (API.md §8), read from the books' read side.
    Price(PriceRefusal),
}

/// An order's price refused before its amounts gave a price on the 0.0001 grid within (0, 1)
/// (a price on that grid is checked against its market's tick in `prepare`).
struct PriceRefusal {
    /// The order's token.
    token: ladder_engine::TokenId,
    /// The price the amounts give.
    price: OffendingPrice,
    /// The order hash.
    hash: B256,
}

impl PriceRefusal {
    /// The rejection, in the engine's words for the same cause: the tick of the token's
    /// market comes from the read side of the books (an unknown token's message when it
    /// knows no such market).
    fn rejection(&self, board: &ladder_sequencer::BookBoard) -> OrderPlacementResult {
        let tick = board
            .books(&self.token)
            .map(|(books, _)| books.yes.market.tick_size_ticks);
        let text = match tick {
            None => format!(
                "{} (tokenId {})",
                Reject::UnknownToken.words(),
                wire_token(&self.token)
            ),
            // Rows 6 then 7 of API.md §8: a price outside the market's range is refused
            // for its range first, even when it is off the tick too.
            Some(tick) if !self.price.within_range(tick) => {
                price_out_of_range_message(&self.price.text, tick)
            }
            Some(tick) => off_tick_message(&self.price.text, tick),
        };
        OrderPlacementResult::rejected(text, Some(self.hash))
    }
}

/// Turns a parsed request into an engine order: checks the signature type, the maker, the
/// amounts, the price against the tick of the token's market (`tick_of`, from the books'
/// read side) and the signature (recovered here, off the sequencer), in the order of API.md
/// §8's rows 1 to 9.
fn prepare(
    domain: &ExchangeDomain,
    principal: &L2Principal,
    request: &PostOrderRequest,
    tick_of: &dyn Fn(&ladder_engine::TokenId) -> Option<u32>,
) -> Result<NewOrder, Refusal> {
    if request.post_only && !request.order_type.rests() {
        return Err(Refusal::BadRequest(POST_ONLY_NEEDS_RESTING_TYPE.into()));
    }
    let hashed = request.order.hashed(domain);
    let order = request.order.order;
    let hash = *hashed.hash();
    let reject = |r: Reject| Refusal::Rejected(r.words().to_string(), Some(hash));
    if order.signature_type != SignatureType::SmartAccount {
        return Err(reject(Reject::UnsupportedSignatureType {
            given: order.signature_type.as_u8(),
        }));
    }
    if order.maker != principal.address {
        return Err(Refusal::Rejected(
            format!(
                "{}: maker {}, API key address {}",
                Reject::MakerMismatch.words(),
                order.maker,
                principal.address
            ),
            Some(hash),
        ));
    }
    let (price_ticks, size_units) =
        order
            .price_and_size()
            .map_err(|e| match e.offending_price() {
                Some(price) => Refusal::Price(PriceRefusal {
                    token: engine_token(&order.token_id),
                    price,
                    hash,
                }),
                None => Refusal::Rejected(e.to_string(), Some(hash)),
            })?;
    let token_id = engine_token(&order.token_id);
    // Rows 6 and 7 with the market's own tick, before the signature; the engine checks them
    // again (row 12) against the tick it holds when the order's turn comes.
    if let Some(tick_ticks) = tick_of(&token_id) {
        ladder_engine::check_price_on_tick(price_ticks, tick_ticks).map_err(reject)?;
    }
    let verified = hashed
        .verify()
        .map_err(|_| reject(Reject::InvalidSignature))?;
    let expiration_s = expiration_seconds(request, hash)?;
    Ok(NewOrder {
        order_hash: *verified.hash(),
        maker: order.maker,
        signer: order.signer,
        token_id,
        side: order.side,
        price_ticks,
        size_units,
        order_type: request.order_type,
        post_only: request.post_only,
        expiration_s,
        signer_verified: false,
        signed: Some(Box::new(signed_fields(&verified))),
    })
}

/// The order's `expiration` in seconds. Past 64 bits a non-GTD order is refused for having
/// an expiration at all (the one message of that cause, API.md §8); a GTD one for a date the
/// service cannot hold.
fn expiration_seconds(request: &PostOrderRequest, hash: B256) -> Result<u64, Refusal> {
    let expiration = request.order.order.expiration;
    expiration.to_u64().ok_or_else(|| {
        let text = if request.order_type == ladder_protocol::wire::OrderType::Gtd {
            format!(
                "expiration {expiration} is too large (at most {})",
                u64::MAX
            )
        } else {
            expiration_not_gtd_text(request.order_type.as_str(), expiration)
        };
        Refusal::Rejected(text, Some(hash))
    })
}

/// The signed fields the engine journals with the order but does not match on (settlement
/// submits them on chain as signed).
fn signed_fields(verified: &VerifiedOrder) -> SignedFields {
    let order = verified.order();
    let to_units = |v: U256| v.to_u64().unwrap_or(u64::MAX);
    SignedFields {
        salt: order.salt.to_be_bytes(),
        beneficiary: order.beneficiary,
        maker_amount: to_units(order.maker_amount),
        taker_amount: to_units(order.taker_amount),
        nonce: order.nonce.to_be_bytes(),
        identifier: *order.identifier.as_bytes(),
        metadata: *order.metadata.as_bytes(),
        signature_type: order.signature_type.as_u8(),
        signature: verified.signature().as_bytes().to_vec(),
    }
}

/// The placement result of one engine reply.
/// `chain_error`: why the chain could not judge the signer, which explains a registry refusal.
fn placement_result(
    reply: &Reply,
    order: &NewOrder,
    chain_error: Option<&str>,
) -> Result<OrderPlacementResult, Response> {
    match reply {
        Reply::Placed(p) => Ok(placement(p, order.side)),
        Reply::Rejected(Reject::SignerNotController) if chain_error.is_some() => {
            Ok(OrderPlacementResult::rejected(
                Verdict::refusal(chain_error.unwrap_or_default()),
                Some(order.order_hash),
            ))
        }
        Reply::Rejected(r @ (Reject::PostOnlyWouldCross | Reject::PostOnlyNeedsRestingType)) => {
            Err(Response::error(Status::BadRequest, &r.words().to_string()))
        }
        Reply::Rejected(r) => Ok(OrderPlacementResult::rejected(
            rejection_text(r, order),
            Some(order.order_hash),
        )),
        _ => Err(Response::error(Status::Internal, "internal error")),
    }
}

/// The `errorMsg` of a non-GTD order with an expiration, naming both (API.md §8).
fn expiration_not_gtd_text(order_type: &str, expiration: impl std::fmt::Display) -> String {
    format!(
        "{} (orderType {order_type}, expiration {expiration})",
        Reject::ExpirationNotGtd.words()
    )
}

/// The `errorMsg` of an engine refusal of `order`: the engine's stable text, with the
/// offending value appended where the engine's reason does not carry it (API.md §8).
fn rejection_text(reject: &Reject, order: &NewOrder) -> String {
    match reject {
        Reject::UnknownToken => {
            format!(
                "{} (tokenId {})",
                reject.words(),
                wire_token(&order.token_id)
            )
        }
        Reject::ExpirationNotGtd => {
            expiration_not_gtd_text(order.order_type.as_str(), order.expiration_s)
        }
        Reject::SignerNotController => format!(
            "{} (signer {}, maker {})",
            reject.words(),
            order.signer,
            order.maker
        ),
        Reject::Overflow => format!(
            "{}: order size {} shares, at most {} shares",
            reject.words(),
            format_shares(order.size_units),
            format_shares(EngineLimits::default().order_size_units_max)
        ),
        other => other.words().to_string(),
    }
}

/// The chain check an order needs before it goes to the engine, if any.
fn order_check(accounts: &SmartAccounts, order: &NewOrder) -> Option<ControlCheck> {
    let maker = Address(order.maker.0);
    let signer = Address(order.signer.0);
    if !accounts.needs_check(&maker, &signer) {
        return None;
    }
    let signature: [u8; 65] = order
        .signed
        .as_ref()?
        .signature
        .as_slice()
        .try_into()
        .ok()?;
    Some(ControlCheck {
        account: maker,
        signer,
        digest: order.order_hash.0,
        signature: Signature::from_bytes(signature),
    })
}

/// Applies the chain's verdict to `order`. When the chain could not be asked, the registry
/// decides; the reason is returned to explain its refusal.
fn apply_verdict(verdict: Verdict, order: &mut NewOrder) -> Option<String> {
    match verdict {
        Verdict::Controls => {
            order.signer_verified = true;
            None
        }
        Verdict::NotOnChain => None,
        Verdict::Unreachable(why) => Some(why),
    }
}

fn post_order(app: &App, principal: &L2Principal, request: &Request) -> Outcome {
    let parsed = match PostOrderRequest::parse(&request.body) {
        Ok(p) => p,
        Err(e) => return bad_request(e),
    };
    let tick_of = |token: &ladder_engine::TokenId| app.state.board.tick_of(token);
    match prepare(&app.config.exchange, principal, &parsed, &tick_of) {
        Err(Refusal::BadRequest(text)) => Outcome::error(Status::BadRequest, &text),
        Err(Refusal::Rejected(text, hash)) => {
            Outcome::Respond(ok_json(&OrderPlacementResult::rejected(text, hash)))
        }
        Err(Refusal::Price(refusal)) => {
            Outcome::Respond(ok_json(&refusal.rejection(&app.state.board)))
        }
        Ok(order) => match stored_before(app.history().as_deref(), &order) {
            Err(unavailable) => Outcome::Respond(unavailable),
            Ok(true) => refuse_stored(order),
            Ok(false) => match order_check(&app.config.smart_accounts, &order) {
                None => place_one(order, None),
                Some(check) => app
                    .config
                    .smart_accounts
                    .judge(vec![check], move |verdicts| {
                        let mut order = order;
                        let chain_error = verdicts
                            .into_iter()
                            .next()
                            .and_then(|v| apply_verdict(v, &mut order));
                        place_one(order, chain_error)
                    }),
            },
        },
    }
}

/// Whether the history store holds the order's hash: it was placed before and closed long
/// ago, and the engine has forgotten it (API.md §19). Refused while the store is too far
/// behind for the engine to cover what it has not stored yet (503, retry), or when it cannot
/// be read.
fn stored_before(history: Option<&dyn HistoryReads>, order: &NewOrder) -> Result<bool, Response> {
    let Some(history) = history else {
        return Ok(false);
    };
    let unavailable = |why: String| {
        tracing::warn!(error = %why, "history store read failed");
        Response::error(Status::Unavailable, "history store unavailable").retry_after(1)
    };
    history.usable().map_err(unavailable)?;
    if history.lag() > HASH_GRACE_RECORDS / 2 {
        return Err(
            Response::error(Status::Unavailable, "history store behind: try again").retry_after(1),
        );
    }
    history
        .order_hash_stored(&order.order_hash)
        .map_err(unavailable)
}

/// The refusal of an order whose hash only the history store holds: the first of the
/// checks before the duplicate check it fails (API.md §8 rows 10 to 16, asked of the
/// engine), else the duplicate's. An order the engine remembers is refused the same way.
fn stored_refusal(first_failed: Option<Reject>, order: &NewOrder) -> OrderPlacementResult {
    let reject = first_failed.unwrap_or(Reject::DuplicateOrder);
    OrderPlacementResult::rejected(rejection_text(&reject, order), Some(order.order_hash))
}

/// [`stored_refusal`] for one order, once the engine has checked its terms.
fn refuse_stored(order: NewOrder) -> Outcome {
    let checked = order.clone();
    query(
        move |e: &Engine| e.check_order_terms(&checked, super::now_ns()).err(),
        move |first_failed| ok_json(&stored_refusal(first_failed, &order)),
    )
}

fn place_one(order: NewOrder, chain_error: Option<String>) -> Outcome {
    let echo = order.clone();
    command(
        Command::PlaceOrder(order),
        move |_, reply| match placement_result(&reply, &echo, chain_error.as_deref()) {
            Ok(result) => ok_json(&result),
            Err(response) => response,
        },
    )
}

/// One element of a batch: an order for the engine (with why the chain could not judge its
/// signer, if so), or its result already.
type BatchSlot = Result<(NewOrder, Option<String>), OrderPlacementResult>;

fn post_orders(app: &App, principal: &L2Principal, request: &Request) -> Outcome {
    let parsed = match parse_post_orders(&request.body) {
        Ok(p) => p,
        Err(e) => return bad_request(e),
    };
    let batch_len = parsed.len();
    if let Err(refused) = app.charge(request, Some(&principal.key_id), batch_len) {
        return refused;
    }
    let exchange = app.config.exchange;
    let accounts = app.config.smart_accounts.clone();
    let board = app.state.board.clone();
    let principal = principal.clone();
    let history = app.history();
    let recover_and_place = move || {
        let mut slots: Vec<BatchSlot> = Vec::with_capacity(parsed.len());
        let mut checks: Vec<(usize, ControlCheck)> = Vec::new();
        // Orders whose hash only the history store holds: refused, for a cause the engine
        // names (see `stored_refusal`).
        let mut stored_orders: Vec<(usize, NewOrder)> = Vec::new();
        for (i, item) in parsed.iter().enumerate() {
            let prepared = prepare(&exchange, &principal, item, &|token| board.tick_of(token));
            let stored = match &prepared {
                Ok(order) => stored_before(history.as_deref(), order),
                Err(_) => Ok(false),
            };
            match (prepared, stored) {
                (_, Err(unavailable)) => return Outcome::Respond(unavailable),
                (Ok(order), Ok(true)) => {
                    slots.push(Err(stored_refusal(None, &order)));
                    stored_orders.push((i, order));
                }
                (Ok(order), Ok(false)) => {
                    if let Some(check) = order_check(&accounts, &order) {
                        checks.push((i, check));
                    }
                    slots.push(Ok((order, None)));
                }
                (Err(Refusal::BadRequest(text)), _) => {
                    return bad_request(format!("orders[{i}]: {text}"))
                }
                (Err(Refusal::Rejected(text, hash)), _) => {
                    slots.push(Err(OrderPlacementResult::rejected(text, hash)))
                }
                (Err(Refusal::Price(refusal)), _) => slots.push(Err(refusal.rejection(&board))),
            }
        }
        let judge_and_place = move |slots: Vec<BatchSlot>| {
            if checks.is_empty() {
                return place_batch(slots);
            }
            let (positions, checks): (Vec<usize>, Vec<ControlCheck>) = checks.into_iter().unzip();
            accounts.judge(checks, move |verdicts| {
                let mut slots = slots;
                for (i, verdict) in positions.into_iter().zip(verdicts) {
                    if let Some(Ok((order, chain_error))) = slots.get_mut(i) {
                        *chain_error = apply_verdict(verdict, order);
                    }
                }
                place_batch(slots)
            })
        };
        if stored_orders.is_empty() {
            return judge_and_place(slots);
        }
        // The stored orders' terms are checked before the batch is placed: an order of the
        // batch cannot change a market's state, tick or size limits, nor the time.
        let (read, answer) = ladder_sequencer::query(move |e: &Engine| {
            stored_orders
                .into_iter()
                .map(|(i, order)| (i, e.check_order_terms(&order, super::now_ns()).err(), order))
                .collect::<Vec<_>>()
        });
        Outcome::then(Work::Query(read), move |completion| {
            let (Completion::Answered { .. }, Some(checked)) = (&completion, answer.take()) else {
                return Outcome::Respond(unexpected(completion));
            };
            let mut slots = slots;
            for (i, first_failed, order) in checked {
                slots[i] = Err(stored_refusal(first_failed, &order));
            }
            judge_and_place(slots)
        })
    };
    // Each element's signature is recovered: a batch of more than one goes to a worker, so
    // that no client stalls an event loop serving others.
    if batch_len <= INLINE_ORDER_RECOVERIES_MAX {
        recover_and_place()
    } else {
        Outcome::defer(recover_and_place)
    }
}

/// Most orders of a `POST /orders` whose signatures are recovered on the event loop.
pub const INLINE_ORDER_RECOVERIES_MAX: usize = 1;

fn place_batch(slots: Vec<BatchSlot>) -> Outcome {
    let commands: Vec<Command> = slots
        .iter()
        .filter_map(|s| s.as_ref().ok().map(|(o, _)| Command::PlaceOrder(o.clone())))
        .collect();
    if commands.is_empty() {
        let results: Vec<_> = slots.into_iter().filter_map(Result::err).collect();
        return Outcome::Respond(ok_json(&results));
    }
    Outcome::submit(
        Work::Commands(commands),
        Box::new(move |completion| {
            let Completion::AppliedAll { results, .. } = completion else {
                return unexpected(completion);
            };
            let mut replies = results.into_iter();
            let mut out = Vec::with_capacity(slots.len());
            for slot in slots {
                match slot {
                    Err(rejected) => out.push(rejected),
                    Ok((order, chain_error)) => {
                        let Some((_, reply)) = replies.next() else {
                            return Response::error(Status::Internal, "internal error");
                        };
                        match placement_result(&reply, &order, chain_error.as_deref()) {
                            Ok(result) => out.push(result),
                            Err(response) if response.status == Status::BadRequest => {
                                let text = String::from_utf8_lossy(&response.body).into_owned();
                                let message = serde_json::from_str::<serde_json::Value>(&text)
                                    .ok()
                                    .and_then(|v| v["error"].as_str().map(str::to_string))
                                    .unwrap_or(text);
                                out.push(OrderPlacementResult::rejected(
                                    message,
                                    Some(order.order_hash),
                                ));
                            }
                            Err(response) => return response,
                        }
                    }
                }
            }
            ok_json(&out)
        }),
    )
}

fn open_orders(_app: &App, principal: &L2Principal, request: &Request) -> Outcome {
    let q = QueryString::parse(request.query());
    let filter = (|| -> Result<(OrderFilter, Option<Address>, usize, u64), String> {
        let market = q
            .get("market")
            .map(|m| m.parse::<B256>().map_err(|e| format!("market: {e}")))
            .transpose()?;
        let asset = q
            .get("asset_id")
            .map(|a| U256::from_dec_str(a).map_err(|e| format!("asset_id: {e}")))
            .transpose()?;
        let id = q.parsed::<u64>("id", "expected an integer order id")?;
        let address = q
            .get("address")
            .map(|a| Address::parse(a).map_err(|e| format!("address: {e}")))
            .transpose()?;
        let limit = q.page_limit()?;
        let offset =
            match decode_cursor(q.get("next_cursor").unwrap_or("")).map_err(|e| e.to_string())? {
                Cursor::Offset(o) => o,
                Cursor::End => u64::MAX,
            };
        let filter = OrderFilter {
            market,
            token_id: asset.as_ref().map(engine_token),
            id,
        };
        Ok((filter, address, limit, offset))
    })();
    let (filter, address, limit, offset) = match filter {
        Ok(f) => f,
        Err(e) => return bad_request(e),
    };
    let caller = principal.address;
    query(
        move |e: &Engine| {
            if address.is_some_and(|a| a != caller) {
                return Vec::new();
            }
            e.open_orders(&caller, &filter)
        },
        move |orders| {
            let total = orders.len() as u64;
            let page: Vec<_> = orders
                .iter()
                .skip(offset.min(total) as usize)
                .take(limit)
                .map(open_order)
                .collect();
            let next = next_cursor(offset, page.len(), limit);
            ok_json(&Page::new(page, next, limit))
        },
    )
}

/// Whether a cancel's signature is good: type 0 recovers to the maker, type 3 to the signer.
fn cancel_signed_ok(
    digest: &[u8; 32],
    request_signature: &ladder_protocol::Signature,
    signature_type: SignatureType,
    signer: Option<Address>,
    maker: &Address,
) -> bool {
    let expected = match signature_type {
        SignatureType::Eoa => *maker,
        SignatureType::SmartAccount => match signer {
            Some(s) => s,
            None => return false,
        },
        // The cancel parsers admit 0 and 3 only.
        SignatureType::Other(_) => return false,
    };
    request_signature.verify(digest, &expected).is_ok()
}

/// The signer the engine must check against its registry: a type-3 cancel's signer.
fn smart_signer(
    signature_type: SignatureType,
    signer: Option<Address>,
) -> Option<ladder_engine::Address> {
    match signature_type {
        SignatureType::SmartAccount => signer,
        SignatureType::Eoa | SignatureType::Other(_) => None,
    }
}

/// A cancel for the engine and, for a smart account's signer with `--rpc-url`, the chain
/// check it needs first.
type CheckedCancel = (Command, Option<ControlCheck>);

fn cancel_command(
    exchange: &ExchangeDomain,
    accounts: &SmartAccounts,
    principal: &L2Principal,
    cancel: &CancelOrderRequest,
) -> Result<CheckedCancel, u64> {
    let digest = cancel.digest(exchange);
    if !cancel_signed_ok(
        &digest,
        &cancel.signature,
        cancel.signature_type,
        cancel.signer,
        &principal.address,
    ) {
        return Err(cancel.order_id);
    }
    let signer = smart_signer(cancel.signature_type, cancel.signer);
    Ok((
        Command::CancelOrder {
            requester: principal.address,
            order_id: cancel.order_id,
            condition_id: Some(cancel.market_id),
            signer,
        },
        cancel_check(accounts, principal, signer, &digest, &cancel.signature),
    ))
}

/// The chain check of a type-3 cancel's signer, when one is needed.
fn cancel_check(
    accounts: &SmartAccounts,
    principal: &L2Principal,
    signer: Option<ladder_engine::Address>,
    digest: &[u8; 32],
    signature: &Signature,
) -> Option<ControlCheck> {
    let signer = Address(signer?.0);
    accounts
        .needs_check(&principal.address, &signer)
        .then_some(ControlCheck {
            account: principal.address,
            signer,
            digest: *digest,
            signature: *signature,
        })
}

/// Applies the chain's verdict to a cancel: a signer the chain accepts needs no registry
/// entry (the command goes without a signer to check). When the chain could not be asked
/// the registry decides, and the reason explains its refusal (kept in `chain_errors`).
fn apply_cancel_verdict(
    verdict: Verdict,
    cmd: &mut Command,
    chain_errors: &mut Vec<(u64, String)>,
) {
    match verdict {
        Verdict::Controls => clear_signer(cmd),
        Verdict::NotOnChain => {}
        Verdict::Unreachable(why) => {
            if let Command::CancelOrder { order_id, .. } = cmd {
                chain_errors.push((*order_id, Verdict::refusal(&why)));
            }
        }
    }
}

fn clear_signer(cmd: &mut Command) {
    if let Command::CancelOrder { signer, .. } | Command::CancelMarket { signer, .. } = cmd {
        *signer = None;
    }
}

fn merge(
    reports: impl IntoIterator<Item = CancelReport>,
    not_done: &[(u64, String)],
) -> CancelResult {
    let mut all = CancelReport::default();
    for report in reports {
        all.canceled.extend(report.canceled);
        all.not_canceled.extend(report.not_canceled);
    }
    let mut result = cancel_result(&all);
    for (id, reason) in not_done {
        result.not_canceled.insert(id.to_string(), reason.clone());
    }
    // An order named twice is reported once: cancelled, when one of its copies cancelled it
    // (the other then found it `already canceled`).
    for id in &result.canceled {
        result.not_canceled.remove(id);
    }
    result
}

/// When the chain could not be asked whether a signer controls the account, a cancel the
/// registry refused for its signature says why instead; any other reason (`not found`,
/// `already filled`...) is the engine's own and stays.
fn explain_signature_refusal(reason: Option<&mut String>, why: String) {
    if let Some(reason) = reason.filter(|r| r.as_str() == NotCanceled::InvalidSignature.as_str()) {
        *reason = why;
    }
}

fn invalid_signature(id: u64) -> (u64, String) {
    (id, NotCanceled::InvalidSignature.as_str().into())
}

fn cancel_order(app: &App, principal: &L2Principal, request: &Request) -> Outcome {
    let cancel = match CancelOrderRequest::parse(&request.body) {
        Ok(c) => c,
        Err(e) => return bad_request(e),
    };
    let accounts = &app.config.smart_accounts;
    match cancel_command(&app.config.exchange, accounts, principal, &cancel) {
        Err(id) => Outcome::Respond(ok_json(&merge([], &[invalid_signature(id)]))),
        Ok(checked) => run_cancels(
            Canceller::of(app, principal),
            accounts,
            vec![checked],
            Vec::new(),
        ),
    }
}

/// Most cancels of a `DELETE /orders` whose signatures are recovered on the event loop; a
/// larger batch is recovered on a deferred worker, so that no client stalls a loop that
/// serves others (a recovery takes tens of microseconds).
pub const INLINE_CANCEL_RECOVERIES_MAX: usize = 4;

fn cancel_orders(app: &App, principal: &L2Principal, request: &Request) -> Outcome {
    let cancels = match parse_cancel_orders(&request.body) {
        Ok(c) => c,
        Err(e) => return bad_request(e),
    };
    let cancels_len = cancels.len();
    if let Err(refused) = app.charge(request, Some(&principal.key_id), cancels_len) {
        return refused;
    }
    let exchange = app.config.exchange;
    let accounts = app.config.smart_accounts.clone();
    let canceller = Canceller::of(app, principal);
    let principal = principal.clone();
    let recover_and_run = move || {
        let mut not_done = Vec::new();
        let mut checked = Vec::new();
        for cancel in &cancels {
            match cancel_command(&exchange, &accounts, &principal, cancel) {
                Ok(c) => checked.push(c),
                Err(id) => not_done.push(invalid_signature(id)),
            }
        }
        run_cancels(canceller, &accounts, checked, not_done)
    };
    if cancels_len <= INLINE_CANCEL_RECOVERIES_MAX {
        recover_and_run()
    } else {
        Outcome::defer(recover_and_run)
    }
}

/// Checks (deferred, when any cancel needs the chain) and applies `checked`; the answer
/// merges the engine's reports with `not_done`.
/// Who cancels, and the store that knows the orders the engine has forgotten.
#[derive(Clone)]
struct Canceller {
    requester: ladder_engine::Address,
    history: Option<Arc<dyn HistoryReads>>,
}

impl Canceller {
    fn of(app: &App, principal: &L2Principal) -> Canceller {
        Canceller {
            requester: principal.address,
            history: app.history(),
        }
    }

    /// Gives each order the engine had forgotten the reason the history store tells: its
    /// owner and fate (API.md §10).
    fn resolve_forgotten(&self, report: &mut CancelReport) -> Result<(), String> {
        for (id, reason) in report.not_canceled.iter_mut() {
            if *reason != NotCanceled::Forgotten {
                continue;
            }
            let stored = match &self.history {
                Some(history) => history.closed_order(*id)?,
                None => None,
            };
            *reason = match stored {
                None => NotCanceled::NotFound,
                Some((owner, _)) if owner != self.requester => NotCanceled::NotOwner,
                Some((_, OrderStatus::Matched)) => NotCanceled::AlreadyFilled,
                Some(_) => NotCanceled::AlreadyCanceled,
            };
        }
        Ok(())
    }
}

fn run_cancels(
    canceller: Canceller,
    accounts: &SmartAccounts,
    checked: Vec<CheckedCancel>,
    not_done: Vec<(u64, String)>,
) -> Outcome {
    let mut commands = Vec::with_capacity(checked.len());
    let mut positions = Vec::new();
    let mut checks = Vec::new();
    for (cmd, check) in checked {
        if let Some(check) = check {
            positions.push(commands.len());
            checks.push(check);
        }
        commands.push(cmd);
    }
    if checks.is_empty() {
        return submit_cancels(canceller, commands, not_done, Vec::new());
    }
    accounts.judge(checks, move |verdicts| {
        let mut commands = commands;
        let mut chain_errors = Vec::new();
        for (i, verdict) in positions.into_iter().zip(verdicts) {
            apply_cancel_verdict(verdict, &mut commands[i], &mut chain_errors);
        }
        submit_cancels(canceller, commands, not_done, chain_errors)
    })
}

/// Submits `commands`; the answer adds `not_done`, and a cancel the registry refused whose
/// signer the chain could not judge gives the chain's reason (`chain_errors`).
fn submit_cancels(
    canceller: Canceller,
    commands: Vec<Command>,
    not_done: Vec<(u64, String)>,
    chain_errors: Vec<(u64, String)>,
) -> Outcome {
    if commands.is_empty() {
        return Outcome::Respond(ok_json(&merge([], &not_done)));
    }
    Outcome::submit(
        Work::Commands(commands),
        Box::new(move |completion| match completion {
            Completion::AppliedAll { results, .. } => {
                let mut reports: Vec<CancelReport> = results
                    .into_iter()
                    .filter_map(|(_, r)| match r {
                        Reply::Canceled(report) => Some(report),
                        _ => None,
                    })
                    .collect();
                // Orders whose reason only the unreadable history store knows: the answer
                // is 503 when nothing was cancelled, else those ids say why they are not.
                let mut unresolved = Vec::new();
                for report in &mut reports {
                    if let Err(why) = canceller.resolve_forgotten(report) {
                        tracing::warn!(error = %why, "history store read failed");
                        report.not_canceled.retain(|(id, reason)| {
                            let forgotten = *reason == NotCanceled::Forgotten;
                            if forgotten {
                                unresolved.push((*id, "history store unavailable".to_string()));
                            }
                            !forgotten
                        });
                    }
                }
                if !unresolved.is_empty() && reports.iter().all(|r| r.canceled.is_empty()) {
                    return Response::error(Status::Unavailable, "history store unavailable")
                        .retry_after(1);
                }
                let mut not_done = not_done;
                not_done.extend(unresolved);
                let mut result = merge(reports, &not_done);
                for (id, why) in chain_errors {
                    explain_signature_refusal(result.not_canceled.get_mut(&id.to_string()), why);
                }
                ok_json(&result)
            }
            other => unexpected(other),
        }),
    )
}

fn cancel_market(app: &App, principal: &L2Principal, request: &Request) -> Outcome {
    let cancel = match CancelMarketOrdersRequest::parse(&request.body) {
        Ok(c) => c,
        Err(e) => return bad_request(e),
    };
    let digest = cancel.digest(&app.config.exchange);
    let requester = principal.address;
    let condition_id = cancel.market_id;
    let token_id = cancel.token_id.as_ref().map(engine_token);
    if !cancel_signed_ok(
        &digest,
        &cancel.signature,
        cancel.signature_type,
        cancel.signer,
        &principal.address,
    ) {
        // Nothing is cancelled; each order the cancel would take is `invalid signature`.
        return query(
            move |e| e.market_order_ids(&requester, &condition_id, token_id.as_ref()),
            |ids| {
                let reply = ids.map(|ids| {
                    Reply::Canceled(CancelReport::none_canceled(
                        ids,
                        NotCanceled::InvalidSignature,
                    ))
                });
                market_cancel_result(reply.unwrap_or_else(Reply::Rejected), None)
            },
        );
    }
    let signer = smart_signer(cancel.signature_type, cancel.signer);
    let mut cmd = Command::CancelMarket {
        requester,
        condition_id,
        token_id,
        signer,
    };
    let Some(check) = cancel_check(
        &app.config.smart_accounts,
        principal,
        signer,
        &digest,
        &cancel.signature,
    ) else {
        return submit_cancel_market(cmd, None);
    };
    app.config
        .smart_accounts
        .judge(vec![check], move |verdicts| {
            match verdicts.into_iter().next() {
                Some(Verdict::Controls) => {
                    clear_signer(&mut cmd);
                    submit_cancel_market(cmd, None)
                }
                Some(Verdict::Unreachable(why)) => submit_cancel_market(cmd, Some(why)),
                Some(Verdict::NotOnChain) | None => submit_cancel_market(cmd, None),
            }
        })
}

/// `chain_error`: why the chain could not judge the signer, which explains a registry refusal.
fn submit_cancel_market(cmd: Command, chain_error: Option<String>) -> Outcome {
    command(cmd, move |_, reply| {
        market_cancel_result(reply, chain_error.as_deref())
    })
}

/// The answer to a market cancel (API.md §10: a cancel result): an unknown market has
/// nothing to cancel; a token that is not the market's is a 400 naming `tokenId`; orders
/// refused for the signature carry the chain's reason when the chain could not judge it.
fn market_cancel_result(reply: Reply, chain_error: Option<&str>) -> Response {
    match reply {
        Reply::Canceled(report) => {
            let mut result = merge([report], &[]);
            if let Some(why) = chain_error {
                for reason in result.not_canceled.values_mut() {
                    explain_signature_refusal(Some(reason), Verdict::refusal(why));
                }
            }
            ok_json(&result)
        }
        Reply::Rejected(Reject::UnknownMarket) => ok_json(&merge([], &[])),
        Reply::Rejected(Reject::UnknownToken) => Response::error(
            Status::BadRequest,
            "tokenId: not a token of the market named by marketId",
        ),
        Reply::Rejected(r) => Response::error(Status::BadRequest, &r.words().to_string()),
        _ => Response::error(Status::Internal, "internal error"),
    }
}

fn cancel_all(_app: &App, principal: &L2Principal, _request: &Request) -> Outcome {
    command(
        Command::CancelAll {
            requester: principal.address,
        },
        |_, reply| match reply {
            Reply::Canceled(report) => ok_json(&merge([report], &[])),
            _ => Response::error(Status::Internal, "internal error"),
        },
    )
}

fn balance_allowance(_app: &App, principal: &L2Principal, request: &Request) -> Outcome {
    let q = QueryString::parse(request.query());
    let asset = match (
        q.get("asset_type").map(str::to_ascii_uppercase).as_deref(),
        q.get("token_id"),
    ) {
        (Some("COLLATERAL"), _) => Asset::Collateral,
        (Some("CONDITIONAL"), Some(token)) => match U256::from_dec_str(token) {
            Ok(t) => Asset::Token(engine_token(&t)),
            Err(e) => return bad_request(format!("token_id: {e}")),
        },
        (Some("CONDITIONAL"), None) => {
            return bad_request("token_id: required with asset_type=CONDITIONAL")
        }
        _ => return bad_request("asset_type: expected COLLATERAL or CONDITIONAL"),
    };
    let address = principal.address;
    query(
        move |e: &Engine| e.balance(&address, asset),
        |balance| {
            let net = |v: u64| v.saturating_sub(balance.debt);
            ok_json(&BalanceAllowance {
                balance_units: net(balance.total()),
                allowance_units: balance.free.saturating_sub(balance.debt),
            })
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    use ladder_engine::CancelReport;

    fn reasons(response: Response) -> BTreeMap<String, String> {
        let result: CancelResult = serde_json::from_slice(&response.body).expect("a cancel result");
        result.not_canceled
    }

    #[test]
    fn an_unreachable_chain_explains_only_a_signature_refusal() {
        let report = CancelReport {
            canceled: Default::default(),
            not_canceled: vec![
                (1, NotCanceled::InvalidSignature),
                (2, NotCanceled::NotFound),
                (3, NotCanceled::AlreadyFilled),
            ]
            .into(),
        };
        let got = reasons(market_cancel_result(
            Reply::Canceled(report),
            Some("connection refused"),
        ));
        assert_eq!(got["1"], Verdict::refusal("connection refused"));
        assert_eq!(got["2"], "not found");
        assert_eq!(got["3"], "already filled");
    }

    /// A store that holds one order (hash 0x11…, id 7, owned by 0x22…, filled) and is
    /// `lag` records behind; every read fails when `broken`.
    #[derive(Debug)]
    struct OneOrderStore {
        lag: u64,
        broken: bool,
    }

    const STORED_HASH: ladder_engine::Hash32 = ladder_engine::FixedBytes([0x11; 32]);
    const OWNER: ladder_engine::Address = ladder_engine::Address([0x22; 20]);

    impl HistoryReads for OneOrderStore {
        fn trade(&self, _: u64) -> Result<Option<ladder_engine::TradeView>, String> {
            Ok(None)
        }
        fn trades_of(
            &self,
            _: &ladder_engine::Address,
            _: &ladder_engine::TradeFilter,
            _: usize,
        ) -> Result<Vec<ladder_engine::TradeView>, String> {
            Ok(Vec::new())
        }
        fn closed_order(
            &self,
            id: u64,
        ) -> Result<Option<(ladder_engine::Address, OrderStatus)>, String> {
            if self.broken {
                return Err("disk I/O error".into());
            }
            Ok((id == 7).then_some((OWNER, OrderStatus::Matched)))
        }
        fn order_hash_stored(&self, hash: &ladder_engine::Hash32) -> Result<bool, String> {
            if self.broken {
                return Err("disk I/O error".into());
            }
            Ok(*hash == STORED_HASH)
        }
        fn price_buckets(
            &self,
            _: &ladder_engine::ConditionId,
            _: ladder_engine::Outcome,
            _: u64,
            _: u64,
            _: u64,
            _: usize,
        ) -> Result<Vec<ladder_sequencer::PriceBucket>, String> {
            Ok(Vec::new())
        }
        fn stored_through(&self) -> u64 {
            0
        }
        fn lag(&self) -> u64 {
            self.lag
        }
    }

    fn order(hash: ladder_engine::Hash32) -> NewOrder {
        NewOrder {
            order_hash: hash,
            maker: OWNER,
            signer: OWNER,
            token_id: ladder_engine::FixedBytes([1; 32]),
            side: ladder_engine::Side::Buy,
            price_ticks: 5_000,
            size_units: 1_000_000,
            order_type: ladder_engine::OrderType::Gtc,
            post_only: false,
            expiration_s: 0,
            signer_verified: false,
            signed: None,
        }
    }

    #[test]
    fn an_order_the_store_holds_is_refused_as_the_engine_refuses_a_duplicate() {
        let store = OneOrderStore {
            lag: 0,
            broken: false,
        };
        assert_eq!(stored_before(Some(&store), &order(STORED_HASH)), Ok(true));
        let refused = stored_refusal(None, &order(STORED_HASH));
        let engine_says = placement_result(
            &Reply::Rejected(Reject::DuplicateOrder),
            &order(STORED_HASH),
            None,
        )
        .expect("a placement result");
        assert_eq!(
            serde_json::to_value(&refused).unwrap(),
            serde_json::to_value(&engine_says).unwrap()
        );
        let other = ladder_engine::FixedBytes([0x12; 32]);
        assert_eq!(stored_before(Some(&store), &order(other)), Ok(false));
        assert_eq!(stored_before(None, &order(STORED_HASH)), Ok(false));
        // A check before the duplicate's that fails is the refusal, as in the engine.
        let paused = Reject::MarketNotActive { state: "paused" };
        let engine_says = placement_result(&Reply::Rejected(paused), &order(STORED_HASH), None)
            .expect("a placement result");
        assert_eq!(
            serde_json::to_value(stored_refusal(Some(paused), &order(STORED_HASH))).unwrap(),
            serde_json::to_value(&engine_says).unwrap()
        );
    }

    #[test]
    fn a_store_far_behind_or_broken_refuses_placements_for_a_while() {
        for store in [
            OneOrderStore {
                lag: HASH_GRACE_RECORDS / 2 + 1,
                broken: false,
            },
            OneOrderStore {
                lag: 0,
                broken: true,
            },
        ] {
            let refused = stored_before(Some(&store), &order(ladder_engine::FixedBytes([3; 32])))
                .expect_err("refused");
            assert_eq!(refused.status, Status::Unavailable);
            assert_eq!(refused.retry_after_s, Some(1));
        }
        let at_the_edge = OneOrderStore {
            lag: HASH_GRACE_RECORDS / 2,
            broken: false,
        };
        assert!(stored_before(
            Some(&at_the_edge),
            &order(ladder_engine::FixedBytes([3; 32]))
        )
        .is_ok());
    }

    #[test]
    fn a_forgotten_order_gets_the_reason_of_its_stored_owner_and_fate() {
        let canceller = |requester| Canceller {
            requester,
            history: Some(Arc::new(OneOrderStore {
                lag: 0,
                broken: false,
            })),
        };
        let report = || CancelReport {
            canceled: Default::default(),
            not_canceled: vec![(7, NotCanceled::Forgotten), (8, NotCanceled::Forgotten)].into(),
        };
        let mut mine = report();
        canceller(OWNER).resolve_forgotten(&mut mine).unwrap();
        assert_eq!(
            mine.not_canceled.to_vec(),
            [(7, NotCanceled::AlreadyFilled), (8, NotCanceled::NotFound)]
        );
        let mut theirs = report();
        canceller(ladder_engine::Address([9; 20]))
            .resolve_forgotten(&mut theirs)
            .unwrap();
        assert_eq!(theirs.not_canceled[0], (7, NotCanceled::NotOwner));
        let broken = Canceller {
            requester: OWNER,
            history: Some(Arc::new(OneOrderStore {
                lag: 0,
                broken: true,
            })),
        };
        assert!(broken.resolve_forgotten(&mut report()).is_err());
    }
}
