//! API credentials (SPEC 4.1–4.2, CONTRACT 5): create, derive, list, delete.

use std::sync::Arc;

use ladder_engine::{ApiKeySpec, Command, Engine, Reject, Reply};
use ladder_protocol::wire::responses::{ApiCredentials, ApiKeysList, DeletedApiKey};
use ladder_protocol::Address;
use uuid::Uuid;

use super::{command, now_s, ok_json, query, App};
use crate::auth::{authenticate_l1, AuthError, L1Claim, L1_MISMATCH};
use crate::convert::engine_address;
use crate::handler::Outcome;
use crate::http::{Method, Request, Response, Status};
use crate::keys::{Credentials, KeyTable};

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

/// Whether the claim's signer may act for its address: itself, or an owner of the smart account.
fn may_act(e: &Engine, claim: &L1Claim) -> bool {
    claim.is_direct()
        || e.controls(
            &engine_address(&claim.address),
            &engine_address(&claim.signer),
        )
}

fn create(app: &App, request: &Request) -> Outcome {
    if let Err(refused) = app.writable() {
        return refused;
    }
    let claim = match l1(app, request) {
        Ok(c) => c,
        Err(o) => return o,
    };
    let key_id = Uuid::new_v4();
    let address = claim.address;
    let keys = app.keys.clone();
    command(
        Command::CreateApiKey(ApiKeySpec {
            address: engine_address(&address),
            signer: engine_address(&claim.signer),
            key_id: *key_id.as_bytes(),
            nonce: ladder_engine::Bytes32(claim.nonce.to_be_bytes()),
            max_keys_per_address: app.config.max_keys_per_user,
        }),
        move |_, reply| match reply {
            Reply::Ok => credentials_json(&keys.insert(key_id, address)),
            Reply::Rejected(Reject::ApiKeyLimit) => {
                Response::error(Status::BadRequest, "api key limit reached")
            }
            Reply::Rejected(Reject::SignerNotController) => {
                Response::error(Status::Unauthorized, L1_MISMATCH)
            }
            Reply::Rejected(other) => Response::error(Status::BadRequest, &other.to_string()),
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
    query(
        move |e: &Engine| {
            if !may_act(e, &claim) {
                return Err(());
            }
            let address = engine_address(&claim.address);
            Ok(e.api_keys_of(&address)
                .into_iter()
                .find(|k| {
                    e.api_key(k)
                        .is_some_and(|r| r.nonce.0 == claim.nonce.to_be_bytes())
                })
                .map(|k| (Uuid::from_bytes(k), claim.address)))
        },
        move |found| match found {
            Err(()) => Response::error(Status::Unauthorized, L1_MISMATCH),
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
    if request.header("svc_passphrase").is_some() {
        let principal = app.l2(request)?;
        return Ok(Caller::L2 {
            address: principal.address,
            key_id: principal.key_id,
        });
    }
    l1(app, request).map(Caller::L1)
}

fn list(app: &App, request: &Request) -> Outcome {
    let caller = match caller(app, request) {
        Ok(c) => c,
        Err(o) => return o,
    };
    query(
        move |e: &Engine| {
            let address = match &caller {
                Caller::L2 { address, .. } => *address,
                Caller::L1(claim) if may_act(e, claim) => claim.address,
                Caller::L1(_) => return None,
            };
            Some(
                e.api_keys_of(&engine_address(&address))
                    .into_iter()
                    .map(Uuid::from_bytes)
                    .collect::<Vec<_>>(),
            )
        },
        |keys| match keys {
            None => Response::error(Status::Unauthorized, L1_MISMATCH),
            Some(api_keys) => ok_json(&ApiKeysList { api_keys }),
        },
    )
}

fn delete(app: &App, request: &Request) -> Outcome {
    if let Err(refused) = app.writable() {
        return refused;
    }
    let (address, key_id, signer) = match caller(app, request) {
        Ok(Caller::L2 { address, key_id }) => (address, key_id, address),
        Ok(Caller::L1(claim)) => {
            let named = request.header("svc_api_key").map(Uuid::parse_str);
            match named {
                Some(Ok(key_id)) => (claim.address, key_id, claim.signer),
                Some(Err(_)) => {
                    return Outcome::error(Status::BadRequest, "SVC_API_KEY: expected a UUID")
                }
                None => {
                    return Outcome::error(
                        Status::BadRequest,
                        "SVC_API_KEY: required with L1 to name the key to delete",
                    )
                }
            }
        }
        Err(o) => return o,
    };
    delete_key(app.keys.clone(), address, signer, key_id)
}

fn delete_key(keys: Arc<KeyTable>, address: Address, signer: Address, key_id: Uuid) -> Outcome {
    command(
        Command::DeleteApiKey {
            address: engine_address(&address),
            signer: engine_address(&signer),
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
            Reply::Rejected(Reject::SignerNotController) => {
                Response::error(Status::Unauthorized, L1_MISMATCH)
            }
            Reply::Rejected(other) => Response::error(Status::BadRequest, &other.to_string()),
            _ => Response::error(Status::Internal, "internal error"),
        },
    )
}
