//! API credentials (API.md §7–4.2, API.md §7): create, derive, list, delete.

use std::sync::Arc;

use ladder_engine::{ApiKeySpec, Command, Engine, Reject, Reply};
use ladder_protocol::wire::responses::{ApiCredentials, ApiKeysList, DeletedApiKey};
use ladder_protocol::Address;
use uuid::Uuid;

use super::refusals::Worded;
use super::{command, now_s, ok_json, query, App};
use crate::auth::{authenticate_l1, credential, AuthError, ChainUnasked, L1Claim, L1_MISMATCH};
use crate::handler::Outcome;
use crate::http::{Method, Request, Response, Status};
use crate::keys::{Credentials, KeyTable, MasterKey};
use crate::smart::{ControlCheck, Verdict};

/// Routes the key endpoints; `None` when the path is not one of them.
pub(super) fn route(app: &App, method: Method, path: &str, request: &Request) -> Option<Outcome> {
    Some(match (method, path) {
        (Method::Post, "/auth/api-key") => create(app, request),
        (Method::Get, "/auth/derive-api-key") => derive(app, request),
        (Method::Get, "/auth/api-keys") => list(app, request),
        (Method::Delete, "/auth/api-key") => delete(app, request),
        _ => return None,
    })
}

fn unauthorized(e: AuthError) -> Outcome {
    Outcome::error(Status::Unauthorized, &e.0)
}

fn credentials_json(c: &Credentials) -> Response {
    ok_json(&ApiCredentials {
        api_key: c.api_key,
        secret: c.secret.clone(),
        passphrase: c.passphrase.clone(),
    })
}

fn l1(app: &App, request: &Request) -> Result<L1Claim, Outcome> {
    authenticate_l1(request, now_s(), &app.config.auth).map_err(unauthorized)
}

/// Goes on with `then` once the chain (with `--rpc-url`) has said whether a smart account
/// accepts the claim's signature: at once when no check is needed, on a deferred worker
/// otherwise. When the chain cannot be asked the registry decides, and a refusal says why
/// ([`mismatch`]).
fn with_claim(
    app: &App,
    request: &Request,
    claim: L1Claim,
    then: impl FnOnce(L1Claim) -> Outcome + Send + 'static,
) -> Outcome {
    let accounts = &app.config.smart_accounts;
    if !accounts.needs_check(&claim.address, &claim.signer) {
        return then(claim);
    }
    let check = ControlCheck {
        account: claim.address,
        signer: claim.signer,
        digest: claim.digest,
        signature: claim.signature,
    };
    // Before authentication, a call to the chain is the client's to pay for: one token of
    // its address's chain-call bucket (a cached answer costs nothing). Past its budget the
    // node is not asked and the registry decides alone: a linked owner still passes, and a
    // refusal is the 429.
    if !accounts.is_cached(&check) {
        if let Err(wait_s) = app.charge_chain_call(request) {
            let mut claim = claim;
            claim.chain_unasked = Some(ChainUnasked::OverBudget(wait_s));
            return then(claim);
        }
    }
    accounts.judge(vec![check], move |verdicts| {
        let mut claim = claim;
        match verdicts.into_iter().next() {
            Some(Verdict::Controls) => claim.accepted_on_chain = true,
            Some(Verdict::Unreachable(why)) => {
                claim.chain_unasked = Some(ChainUnasked::Unreachable(why))
            }
            Some(Verdict::NotOnChain) | None => {}
        }
        then(claim)
    })
}

/// Whether the claim's signer may act for its address: itself, or an owner of the smart account.
fn may_act(e: &Engine, claim: &L1Claim) -> bool {
    claim.acts_alone() || e.controls(&claim.address, &claim.signer)
}

fn create(app: &App, request: &Request) -> Outcome {
    if let Err(refused) = app.writable() {
        return refused;
    }
    let claim = match l1(app, request) {
        Ok(c) => c,
        Err(o) => return o,
    };
    let keys = app.keys.clone();
    let max_keys_per_address = app.config.max_keys_per_user;
    with_claim(app, request, claim, move |claim| {
        create_key(keys, claim, max_keys_per_address)
    })
}

/// The refusal of a signer that may not act for the address: 401; 503 when the chain that
/// might have said otherwise could not be asked, 429 when the client's chain calls are spent.
fn mismatch(chain_unasked: Option<&ChainUnasked>) -> Response {
    match chain_unasked {
        Some(ChainUnasked::Unreachable(why)) => {
            Response::error(Status::Unavailable, &Verdict::refusal(why)).retry_after(1)
        }
        Some(ChainUnasked::OverBudget(wait_s)) => Response::rate_limited(*wait_s),
        None => Response::error(Status::Unauthorized, L1_MISMATCH),
    }
}

fn create_key(keys: Arc<KeyTable>, claim: L1Claim, max_keys_per_address: u32) -> Outcome {
    let address = claim.address;
    let nonce = claim.nonce.to_be_bytes();
    let creations_before = keys.creations(&address, &nonce);
    let key_id = keys.master().key_id(&address, &nonce, creations_before);
    let chain_unasked = claim.chain_unasked.clone();
    command(
        Command::CreateCountedApiKey {
            spec: ApiKeySpec {
                address,
                signer: claim.registry_signer(),
                key_id: *key_id.as_bytes(),
                nonce: ladder_engine::FixedBytes(nonce),
                max_keys_per_address,
            },
            creations_before,
        },
        move |_, reply| match reply {
            Reply::Ok => {
                keys.set_creations(address, nonce, creations_before.saturating_add(1));
                credentials_json(&keys.insert(key_id, address))
            }
            Reply::Rejected(Reject::ApiKeyRaced { creations }) => {
                keys.set_creations(address, nonce, creations);
                Response::error(
                    Status::BadRequest,
                    &Reject::ApiKeyRaced { creations }.words().to_string(),
                )
            }
            Reply::Rejected(Reject::ApiKeyLimit) => {
                Response::error(Status::BadRequest, "api key limit reached")
            }
            Reply::Rejected(Reject::SignerNotController) => mismatch(chain_unasked.as_ref()),
            Reply::Rejected(other) => {
                Response::error(Status::BadRequest, &other.words().to_string())
            }
            _ => Response::error(Status::Internal, "internal error"),
        },
    )
}

fn derive(app: &App, request: &Request) -> Outcome {
    let claim = match l1(app, request) {
        Ok(c) => c,
        Err(o) => return o,
    };
    let master = app.keys.master();
    with_claim(app, request, claim, move |claim| derive_key(master, claim))
}

fn derive_key(master: MasterKey, claim: L1Claim) -> Outcome {
    let chain_unasked = claim.chain_unasked.clone();
    query(
        move |e: &Engine| {
            if !may_act(e, &claim) {
                return Err(());
            }
            let address = claim.address;
            Ok(e.api_keys_of(&address)
                .into_iter()
                .find(|k| {
                    e.api_key(k)
                        .is_some_and(|r| r.nonce.0 == claim.nonce.to_be_bytes())
                })
                .map(|k| (Uuid::from_bytes(k), claim.address)))
        },
        move |found| match found {
            Err(()) => mismatch(chain_unasked.as_ref()),
            Ok(None) => Response::error(
                Status::NotFound,
                "no api key was created with this SVC_NONCE for this address",
            ),
            Ok(Some((key_id, address))) => credentials_json(&master.credentials(key_id, &address)),
        },
    )
}

/// The address of an L2 request, or of an L1 request whose signer may act for it.
enum Caller {
    L2 { address: Address, key_id: Uuid },
    L1(L1Claim),
}

fn caller(app: &App, request: &Request) -> Result<Caller, Outcome> {
    if credential(request, "svc_passphrase").is_some() {
        let principal = app.l2(request)?;
        return Ok(Caller::L2 {
            address: principal.address,
            key_id: principal.key_id,
        });
    }
    l1(app, request).map(Caller::L1)
}

fn list(app: &App, request: &Request) -> Outcome {
    match caller(app, request) {
        Ok(Caller::L1(claim)) => {
            with_claim(app, request, claim, |claim| list_keys(Caller::L1(claim)))
        }
        Ok(l2) => list_keys(l2),
        Err(o) => o,
    }
}

fn list_keys(caller: Caller) -> Outcome {
    let chain_unasked = match &caller {
        Caller::L1(claim) => claim.chain_unasked.clone(),
        Caller::L2 { .. } => None,
    };
    query(
        move |e: &Engine| {
            let address = match &caller {
                Caller::L2 { address, .. } => *address,
                Caller::L1(claim) if may_act(e, claim) => claim.address,
                Caller::L1(_) => return None,
            };
            Some(
                e.api_keys_of(&address)
                    .into_iter()
                    .map(Uuid::from_bytes)
                    .collect::<Vec<_>>(),
            )
        },
        move |keys| match keys {
            None => mismatch(chain_unasked.as_ref()),
            Some(api_keys) => ok_json(&ApiKeysList { api_keys }),
        },
    )
}

fn delete(app: &App, request: &Request) -> Outcome {
    if let Err(refused) = app.writable() {
        return refused;
    }
    let keys = app.keys.clone();
    match caller(app, request) {
        Ok(Caller::L2 { address, key_id }) => delete_key(keys, address, address, key_id, None),
        Ok(Caller::L1(claim)) => {
            let named = credential(request, "svc_api_key").map(Uuid::parse_str);
            match named {
                Some(Ok(key_id)) => with_claim(app, request, claim, move |claim| {
                    let signer = claim.registry_signer();
                    delete_key(keys, claim.address, signer, key_id, claim.chain_unasked)
                }),
                // API.md §18: headers that are malformed or do not name the resource are a 401.
                Some(Err(_)) => {
                    Outcome::error(Status::Unauthorized, "SVC_API_KEY: expected a UUID")
                }
                None => Outcome::error(
                    Status::Unauthorized,
                    "SVC_API_KEY: required with L1 to name the key to delete",
                ),
            }
        }
        Err(o) => o,
    }
}

fn delete_key(
    keys: Arc<KeyTable>,
    address: Address,
    signer: Address,
    key_id: Uuid,
    chain_unasked: Option<ChainUnasked>,
) -> Outcome {
    command(
        Command::DeleteApiKey {
            address,
            signer,
            key_id: *key_id.as_bytes(),
        },
        move |_, reply| match reply {
            Reply::Ok => {
                keys.remove(&key_id);
                ok_json(&DeletedApiKey { deleted: key_id })
            }
            Reply::Rejected(Reject::UnknownApiKey) => {
                Response::error(Status::NotFound, "api key not found for this address")
            }
            Reply::Rejected(Reject::SignerNotController) => mismatch(chain_unasked.as_ref()),
            Reply::Rejected(other) => {
                Response::error(Status::BadRequest, &other.words().to_string())
            }
            _ => Response::error(Status::Internal, "internal error"),
        },
    )
}
