//! `--rpc-url`: the service's link to a chain. One RPC client for the ERC-1271 verifier
//! (shared by the gateway's deferred-work workers) and one for the settlement thread.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use ladder_chain::{Erc1271Verifier, ExchangeClient, RpcClient, VerifierConfig};
use ladder_gateway::app::bundler::ChainBundler;
use ladder_protocol::{Address, CHAIN_ID};
use ladder_settlement::ChainSettings;

use super::ChainFlags;

/// A configured chain.
pub struct ChainLink {
    url: String,
    timeout: Duration,
    exchange: Address,
    from: Option<Address>,
    /// The chain settlement backend's pacing.
    pub settings: ChainSettings,
    /// The ERC-1271 verifier.
    pub verifier: Arc<Erc1271Verifier>,
    /// What POST /bundler does with `--rpc-url`: the node's chain id (Ladder's own when the
    /// node did not answer at start), `--bundler-url`'s client.
    pub chain_bundler: Arc<ChainBundler>,
}

impl ChainLink {
    /// The link `flags` describe (`None` without `--rpc-url`). The node need not be up yet:
    /// a failed first contact is logged, and requests that need the chain say so until it is.
    pub fn connect(flags: &ChainFlags, exchange: Address) -> Result<Option<ChainLink>, String> {
        let Some(url) = &flags.rpc_url else {
            return Ok(None);
        };
        let timeout = Duration::from_millis(flags.rpc_timeout_ms.max(1));
        let rpc = RpcClient::new(url, timeout).map_err(|e| e.to_string())?;
        let chain_id = match rpc.chain_id() {
            Ok(id) if id != CHAIN_ID => {
                tracing::warn!(
                    chain_id = id,
                    signing_chain_id = CHAIN_ID,
                    "the node's chain id differs from the EIP-712 domain's; signatures use the domain's"
                );
                id
            }
            Ok(id) => {
                tracing::info!(chain_id = id, url = %url, "chain node reached");
                id
            }
            Err(e) => {
                tracing::warn!(error = %e, url = %url, "chain node not reachable yet");
                CHAIN_ID
            }
        };
        let bundler = flags
            .bundler_url
            .as_deref()
            .map(|url| RpcClient::new(url, timeout))
            .transpose()
            .map_err(|e| format!("--bundler-url: {e}"))?;
        let from = flags
            .chain_from
            .as_deref()
            .map(Address::parse_ignoring_checksum)
            .transpose()
            .map_err(|e| format!("--chain-from: {e}"))?;
        if flags.chain_confirmations == 0 {
            return Err("--chain-confirmations: at least 1 (the batch's own block)".into());
        }
        Ok(Some(ChainLink {
            url: url.clone(),
            timeout,
            exchange,
            from,
            settings: ChainSettings {
                poll_interval: Duration::from_millis(flags.chain_poll_ms.max(10)),
                confirmations: flags.chain_confirmations,
                ..ChainSettings::default()
            },
            verifier: Arc::new(Erc1271Verifier::new(rpc, VerifierConfig::default())),
            chain_bundler: Arc::new(ChainBundler {
                bundler,
                node: RpcClient::new(url, timeout).map_err(|e| e.to_string())?,
                chain_id,
                exchange,
                redemptions_unrecorded_from: Arc::new(AtomicU64::new(0)),
            }),
        }))
    }

    /// The client chain settlement sends through, or `None` when no contract lives at
    /// `--exchange-address` (then batches settle with the built-in backend, and a warning
    /// says so: an address without code would accept every batch and record none). Without
    /// `--chain-from` the node's first account sends, so the node must answer now.
    pub fn settlement_client(&self) -> Result<Option<ExchangeClient>, String> {
        let client = self.exchange_client()?;
        match client.has_code() {
            Ok(true) => Ok(Some(client)),
            Ok(false) => {
                tracing::warn!(exchange = %self.exchange.to_lowercase_hex(), "no contract at --exchange-address on the chain: settling with the built-in backend (ERC-1271 checks still use the chain)");
                Ok(None)
            }
            Err(e) => {
                tracing::warn!(error = %e, "could not read the exchange contract's code; settling on the chain (batches retry until it answers)");
                Ok(Some(client))
            }
        }
    }

    /// Watches the exchange's redemption events (primary only), from `data_dir`'s cursor.
    pub fn redemption_watch(
        &self,
        data_dir: &std::path::Path,
    ) -> Result<super::redemption_watch::RedemptionWatch, String> {
        let rpc = RpcClient::new(&self.url, self.timeout).map_err(|e| e.to_string())?;
        super::redemption_watch::RedemptionWatch::start(
            rpc,
            self.exchange,
            self.settings.confirmations,
            self.settings.poll_interval,
            data_dir,
            self.chain_bundler.redemptions_unrecorded_from.clone(),
        )
    }

    /// A client of the exchange contract for the settlement thread. Without `--chain-from`
    /// the node's first account sends, so the node must answer now.
    fn exchange_client(&self) -> Result<ExchangeClient, String> {
        let rpc = RpcClient::new(&self.url, self.timeout).map_err(|e| e.to_string())?;
        let from = match self.from {
            Some(from) => from,
            None => ExchangeClient::first_account(&rpc).map_err(|e| {
                format!(
                    "chain settlement: no sender ({e}); give --chain-from or start the node first"
                )
            })?,
        };
        tracing::info!(exchange = %self.exchange.to_lowercase_hex(), from = %from.to_lowercase_hex(), "chain settlement");
        Ok(ExchangeClient::new(rpc, self.exchange, from))
    }
}
