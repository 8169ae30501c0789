//! The admin surface (API.md §15, 17): markets, account links, deposits, withdrawals,
//! redemptions, the state hash. Every change is a journaled command.

use ladder_engine::{
    Asset, Command, Engine, EngineLimits, MarketSpec, Reject, Reply, Resolution, UNITS_PER_SHARE,
};
use ladder_protocol::wire::responses::StateHashResponse;
use ladder_protocol::{Address, TickSize, B256, U256};
use serde_json::{json, Value};

use super::allow::{admin_allowed, market_action_path, method_not_allowed};
use super::refusals::Worded;
use super::{bad_request, command, ok_json, query, App};
use crate::convert::engine_token;
use crate::handler::Outcome;
use crate::http::{is_decimal, Method, Request, Response, Status};

/// Routes `/admin/...` (`rest` is the path after `/admin`). The route and its method are
/// settled first (404, 405), then whether this service takes writes (503 on a standby),
/// then the body (400).
pub(super) fn route(app: &App, request: &Request, rest: &str) -> Outcome {
    let Some(methods) = admin_allowed(rest) else {
        return Outcome::error(Status::NotFound, "not found");
    };
    let method = match request.method {
        Method::Head => Method::Get,
        other => other,
    };
    if !methods.split(", ").any(|m| m == method.as_str()) {
        return method_not_allowed(methods);
    }
    match (method, rest) {
        (Method::Get, "/state-hash") => return state_hash(),
        (Method::Post, "/promote") => return app.promote(),
        (Method::Post, "/snapshot") => return app.snapshot(),
        _ => {}
    }
    if let Err(refused) = app.writable() {
        return refused;
    }
    let body = match Body::parse(&request.body) {
        Ok(b) => b,
        Err(e) => return bad_request(e),
    };
    let built = match (method, rest) {
        (Method::Post, "/markets") => create_market(&body),
        (Method::Post, p) => match market_action_path(p) {
            Some((id, action)) => market_action(id, action, &body),
            None => match p {
                "/accounts" => link(&body, true),
                "/deposits" => funds(&body, true),
                "/withdrawals" => funds(&body, false),
                "/redemptions" => redemption(&body),
                _ => return Outcome::error(Status::NotFound, "not found"),
            },
        },
        (Method::Delete, "/accounts") => link(&body, false),
        _ => return method_not_allowed(methods),
    };
    match built {
        Ok(cmd) => command(cmd, |seq, reply| match reply {
            Reply::Ok => ok_json(&json!({ "ok": true, "seq": seq })),
            Reply::Rejected(r @ (Reject::UnknownMarket | Reject::UnknownToken)) => {
                Response::error(Status::NotFound, &r.words().to_string())
            }
            // Only a deposit can overflow a balance here: the text names the bound.
            Reply::Rejected(r @ Reject::Overflow) => Response::error(
                Status::BadRequest,
                &format!(
                    "{}: a balance holds at most {} base units",
                    r.words(),
                    EngineLimits::default().balance_units_max
                ),
            ),
            Reply::Rejected(r) => Response::error(Status::BadRequest, &r.words().to_string()),
            _ => Response::error(Status::Internal, "internal error"),
        }),
        Err(e) => bad_request(e),
    }
}

fn state_hash() -> Outcome {
    query(
        |e: &Engine| (e.last_seq(), e.state_hash()),
        |(seq, hash)| {
            ok_json(&StateHashResponse {
                seq,
                state_hash: hash,
            })
        },
    )
}

/// A JSON object body whose field errors name the field.
struct Body(Value);

impl Body {
    fn parse(bytes: &[u8]) -> Result<Body, String> {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(Body(json!({})));
        }
        let value: Value =
            serde_json::from_slice(bytes).map_err(|e| format!("body: not JSON ({e})"))?;
        if !value.is_object() {
            return Err("body: expected a JSON object".into());
        }
        Ok(Body(value))
    }

    fn text(&self, name: &str) -> Result<&str, String> {
        match self.0.get(name) {
            Some(Value::String(s)) => Ok(s),
            Some(_) => Err(format!("{name}: expected a string")),
            None => Err(format!("{name}: required")),
        }
    }

    fn address(&self, name: &str) -> Result<Address, String> {
        Address::parse(self.text(name)?).map_err(|e| format!("{name}: {e}"))
    }

    fn b256(&self, name: &str) -> Result<B256, String> {
        self.text(name)?
            .parse::<B256>()
            .map_err(|e| format!("{name}: {e}"))
    }

    fn u256(&self, name: &str) -> Result<U256, String> {
        U256::from_dec_str(self.text(name)?).map_err(|e| format!("{name}: {e}"))
    }

    /// A non-negative integer given as a JSON number or a decimal string.
    fn count(&self, name: &str, default: Option<u64>) -> Result<u64, String> {
        let expected = || format!("{name}: expected a non-negative integer");
        // Digits past 64 bits are an integer, too large: said so, not called malformed.
        let too_large = || format!("{name}: too large (at most {})", u64::MAX);
        match self.0.get(name) {
            None | Some(Value::Null) => default.ok_or_else(|| format!("{name}: required")),
            Some(Value::Number(n)) if n.is_u64() => n.as_u64().ok_or_else(expected),
            Some(Value::Number(n)) if is_decimal(&n.to_string()) => Err(too_large()),
            Some(Value::String(s)) if is_decimal(s) => s.parse().map_err(|_| too_large()),
            Some(_) => Err(expected()),
        }
    }

    fn flag(&self, name: &str) -> Result<bool, String> {
        match self.0.get(name) {
            None | Some(Value::Null) => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(format!("{name}: expected true or false")),
        }
    }

    fn tick(&self, name: &str) -> Result<u32, String> {
        let rule = || format!("{name}: expected one of 0.1, 0.01, 0.001, 0.0001");
        let text = match self.0.get(name) {
            None | Some(Value::Null) => return Ok(100),
            Some(Value::Number(n)) => n.to_string(),
            Some(Value::String(s)) => s.clone(),
            Some(_) => return Err(rule()),
        };
        TickSize::parse(&text)
            .map(TickSize::ticks)
            .map_err(|_| rule())
    }
}

/// The longest taker delay a market may have: an hour (sports markets use seconds).
pub const TAKER_DELAY_MS_MAX: u64 = 3_600_000;

fn create_market(body: &Body) -> Result<Command, String> {
    let order_shares_max =
        ladder_engine::EngineLimits::default().order_size_units_max / UNITS_PER_SHARE;
    let min_shares = body.count("min_order_size", Some(1))?;
    if min_shares > order_shares_max {
        return Err(format!(
            "min_order_size: at most {order_shares_max} (the largest order), found {min_shares}"
        ));
    }
    let token = |name: &str| -> Result<_, String> {
        let id = body.u256(name)?;
        if id == U256::ZERO {
            return Err(format!("{name}: must not be 0"));
        }
        Ok(engine_token(&id))
    };
    let taker_delay_ms = body.count("taker_delay_ms", Some(0))?;
    if taker_delay_ms > TAKER_DELAY_MS_MAX {
        return Err(format!(
            "taker_delay_ms: at most {TAKER_DELAY_MS_MAX} (an hour), found {taker_delay_ms}"
        ));
    }
    Ok(Command::CreateMarket(MarketSpec {
        condition_id: body.b256("condition_id")?,
        yes_token_id: token("yes_token_id")?,
        no_token_id: token("no_token_id")?,
        tick_size_ticks: body.tick("minimum_tick_size")?,
        min_order_size_units: min_shares * UNITS_PER_SHARE,
        neg_risk: body.flag("neg_risk")?,
        taker_delay_ms,
        fee_rate_bps: u32::try_from(body.count("fee_rate_bps", Some(0))?)
            .ok()
            .filter(|b| *b <= 10_000)
            .ok_or("fee_rate_bps: expected 0..=10000")?,
    }))
}

fn market_action(id: &str, action: &str, body: &Body) -> Result<Command, String> {
    let condition_id = id
        .parse::<B256>()
        .map_err(|e| format!("condition_id: {e}"))?;
    match action {
        "pause" => Ok(Command::PauseMarket { condition_id }),
        "resume" => Ok(Command::ResumeMarket { condition_id }),
        "resolve" => {
            let resolution = match body.text("outcome")? {
                "Yes" | "YES" | "yes" => Resolution::Yes,
                "No" | "NO" | "no" => Resolution::No,
                "void" | "VOID" | "Void" => Resolution::Void,
                _ => return Err("outcome: expected \"Yes\", \"No\" or \"void\"".into()),
            };
            Ok(Command::ResolveMarket {
                condition_id,
                resolution,
            })
        }
        "tick-size" => Ok(Command::SetTickSize {
            condition_id,
            tick_size_ticks: body.tick("minimum_tick_size")?,
        }),
        _ => Err(format!(
            "unknown market action {action:?}: expected pause, resume, resolve or tick-size"
        )),
    }
}

fn link(body: &Body, add: bool) -> Result<Command, String> {
    let account = body.address("account")?;
    let owner = body.address("owner")?;
    Ok(if add {
        Command::LinkAccount { account, owner }
    } else {
        Command::UnlinkAccount { account, owner }
    })
}

fn funds(body: &Body, deposit: bool) -> Result<Command, String> {
    let address = body.address("address")?;
    // Any case, as `asset_type` of GET /balance-allowance.
    let asset = match body.text("asset")? {
        collateral if collateral.eq_ignore_ascii_case("COLLATERAL") => Asset::Collateral,
        token => {
            Asset::Token(engine_token(&U256::from_dec_str(token).map_err(|e| {
                format!("asset: expected COLLATERAL or a token id ({e})")
            })?))
        }
    };
    let amount = body.count("amount", None)?;
    Ok(if deposit {
        Command::Deposit {
            address,
            asset,
            amount,
        }
    } else {
        Command::Withdraw {
            address,
            asset,
            amount,
        }
    })
}

fn redemption(body: &Body) -> Result<Command, String> {
    Ok(Command::RecordRedemption {
        address: body.address("address")?,
        condition_id: body.b256("condition_id")?,
    })
}
