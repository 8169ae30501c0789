//! Signs every order of the run before the clock starts, on all cores, so that the measured
//! loop spends nothing on secp256k1: what it sends is a finished POST /order body.

use std::collections::HashMap;

use ladder_client::{post_order_body, OrderBuilder};
use ladder_protocol::{ExchangeDomain, SignatureType, SignedOrder, U256};

use super::plan::{ConnPlan, Intent, Role, Slot};
use super::setup::{Account, Market};

/// One request of a connection, ready to send.
#[derive(Clone, Debug)]
pub enum Prepared {
    /// A signed POST /order body, from the taker account when `taker`.
    Order {
        /// Sent by the connection's taker account (else its maker account).
        taker: bool,
        /// The body.
        body: String,
    },
    /// Cancel the oldest live quote (see [`super::plan::Slot::Cancel`]).
    Cancel,
}

/// A connection's prepared requests and spare quotes.
#[derive(Clone, Debug, Default)]
pub struct ConnWork {
    /// In sending order.
    pub slots: Vec<Prepared>,
    /// Signed maker quotes that stand in for cancels with nothing to cancel.
    pub spares: Vec<String>,
}

/// Indexes into the account list: who signs for each connection, and the book.
#[derive(Clone, Debug)]
pub struct Signers {
    /// Per connection: (maker account, taker account if any).
    pub conns: Vec<(usize, Option<usize>)>,
    /// The account that places the pre-built book.
    pub book: Option<usize>,
}

/// The signed run.
#[derive(Debug, Default)]
pub struct Presigned {
    /// One per connection.
    pub conns: Vec<ConnWork>,
    /// The pre-built book's POST /order bodies.
    pub book: Vec<String>,
    /// Order hash of every taker order → (connection, slot), to time fill notifications.
    pub takers: HashMap<[u8; 32], (u32, u32)>,
}

/// An order to sign by account `account`.
#[derive(Clone, Copy, Debug)]
struct Job {
    account: usize,
    intent: Intent,
}

/// A signed order's body and EIP-712 digest.
struct Signed {
    body: String,
    hash: [u8; 32],
}

/// Signs the plans and the book.
pub fn presign(
    plans: &[ConnPlan],
    book: &[Intent],
    signers: &Signers,
    accounts: &[Account],
    market: &Market,
    domain: &ExchangeDomain,
) -> Result<Presigned, String> {
    let mut jobs = Vec::new();
    for (c, plan) in plans.iter().enumerate() {
        let (maker, taker) = signers
            .conns
            .get(c)
            .copied()
            .ok_or("a connection has no signer")?;
        let who = |intent: &Intent| match intent.role {
            Role::Maker => Ok(maker),
            Role::Taker => taker.ok_or("a taker order on a connection without a taker account"),
        };
        for slot in &plan.slots {
            if let Slot::Order(intent) = slot {
                jobs.push(Job {
                    account: who(intent)?,
                    intent: *intent,
                });
            }
        }
        for intent in &plan.spares {
            jobs.push(Job {
                account: maker,
                intent: *intent,
            });
        }
    }
    if !book.is_empty() {
        let account = signers.book.ok_or("a book without a book account")?;
        jobs.extend(book.iter().map(|intent| Job {
            account,
            intent: *intent,
        }));
    }
    let signed = sign_all(&jobs, accounts, market, domain)?;
    Ok(assemble(plans, signed))
}

/// Puts the signed bodies back where the jobs came from (same traversal as [`presign`]).
fn assemble(plans: &[ConnPlan], signed: Vec<Signed>) -> Presigned {
    let mut out = Presigned::default();
    let mut signed = signed.into_iter();
    for (c, plan) in plans.iter().enumerate() {
        let mut work = ConnWork::default();
        for (k, slot) in plan.slots.iter().enumerate() {
            match slot {
                Slot::Cancel => work.slots.push(Prepared::Cancel),
                Slot::Order(intent) => {
                    let Some(s) = signed.next() else { break };
                    let taker = intent.role == Role::Taker;
                    if taker {
                        out.takers.insert(s.hash, (c as u32, k as u32));
                    }
                    work.slots.push(Prepared::Order {
                        taker,
                        body: s.body,
                    });
                }
            }
        }
        work.spares = signed
            .by_ref()
            .take(plan.spares.len())
            .map(|s| s.body)
            .collect();
        out.conns.push(work);
    }
    out.book = signed.map(|s| s.body).collect();
    out
}

/// Signs `jobs` on every core, keeping their order. Salts are a random run prefix plus the
/// job's index, so no two orders of a run (or of two runs) share a hash.
fn sign_all(
    jobs: &[Job],
    accounts: &[Account],
    market: &Market,
    domain: &ExchangeDomain,
) -> Result<Vec<Signed>, String> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = jobs.len().div_ceil(threads).max(1);
    let prefix: [u8; 16] = rand::random();
    let parts: Vec<Result<Vec<Signed>, String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = jobs
            .chunks(chunk)
            .enumerate()
            .map(|(i, part)| {
                scope.spawn(move || {
                    part.iter()
                        .enumerate()
                        .map(|(j, job)| {
                            let index = (i * chunk + j) as u64;
                            sign_one(job, accounts, market, domain, prefix, index)
                        })
                        .collect::<Result<Vec<Signed>, String>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a signing thread panicked".into()))
            })
            .collect()
    });
    let mut out = Vec::with_capacity(jobs.len());
    for part in parts {
        out.extend(part?);
    }
    Ok(out)
}

fn sign_one(
    job: &Job,
    accounts: &[Account],
    market: &Market,
    domain: &ExchangeDomain,
    prefix: [u8; 16],
    index: u64,
) -> Result<Signed, String> {
    let account = accounts.get(job.account).ok_or("no such account")?;
    let mut salt = [0u8; 32];
    salt[8..24].copy_from_slice(&prefix);
    salt[24..].copy_from_slice(&index.to_be_bytes());
    let intent = job.intent;
    let order = OrderBuilder::new(
        market.token(intent.yes),
        intent.side,
        intent.price_ticks,
        intent.shares,
    )
    .maker(account.address)
    .signature_type(SignatureType::SmartAccount)
    .salt(U256::from_be_bytes(salt))
    .build(account.wallet.address())
    .map_err(|e| format!("order {intent:?}: {e}"))?;
    let hash = order.digest(domain);
    let signed = SignedOrder {
        order,
        signature: account.wallet.sign_digest(&hash),
    };
    Ok(Signed {
        body: post_order_body(&signed, intent.order_type, false),
        hash,
    })
}
