//! A local anvil node (installed by `.ci/install-chain-tools.sh`) for the tests that need a
//! chain: started on a free port with Ladder's chain id, the contracts of `contracts/build/`
//! deployed from its first (operator) account.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ladder_chain::abi::word_as_usize;
use ladder_chain::RpcClient;
use ladder_protocol::{Address, CHAIN_ID};
use serde_json::{json, Value};

/// A local anvil node, killed on drop.
pub struct Anvil {
    child: Child,
    /// Its JSON-RPC client.
    pub rpc: RpcClient,
    /// Its URL.
    pub url: String,
}

impl Drop for Anvil {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The repository.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("repository root")
        .to_path_buf()
}

/// The anvil binary: `LADDER_ANVIL`, the one `.ci/install-chain-tools.sh` installs, or PATH.
pub fn anvil_binary() -> Option<PathBuf> {
    if let Ok(path) = std::env::var("LADDER_ANVIL") {
        return Some(PathBuf::from(path));
    }
    let installed =
        repo_root().join(".ci/node/node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil");
    if installed.exists() {
        return Some(installed);
    }
    let on_path = std::env::var_os("PATH")?;
    std::env::split_paths(&on_path)
        .map(|dir| dir.join("anvil"))
        .find(|p| p.exists())
}

impl Anvil {
    pub fn start() -> Option<Anvil> {
        let Some(binary) = anvil_binary() else {
            assert!(
                std::env::var("LADDER_REQUIRE_CHAIN").as_deref() != Ok("1"),
                "LADDER_REQUIRE_CHAIN=1 but no anvil: run .ci/install-chain-tools.sh"
            );
            eprintln!("e2e_chain: no anvil binary (run .ci/install-chain-tools.sh); skipped");
            return None;
        };
        let port = super::free_port();
        let child = Command::new(binary)
            .args([
                "--chain-id",
                &CHAIN_ID.to_string(),
                "--port",
                &port.to_string(),
                "--block-time",
                "1",
                "--silent",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn anvil");
        let url = format!("http://127.0.0.1:{port}");
        let rpc = RpcClient::new(&url, Duration::from_secs(5)).expect("rpc client");
        let anvil = Anvil { child, rpc, url };
        let deadline = Instant::now() + Duration::from_secs(30);
        while anvil.rpc.chain_id().is_err() {
            assert!(Instant::now() < deadline, "anvil did not answer");
            std::thread::sleep(Duration::from_millis(100));
        }
        Some(anvil)
    }

    pub fn operator(&self) -> String {
        self.rpc.call("eth_accounts", json!([])).expect("accounts")[0]
            .as_str()
            .expect("account")
            .to_string()
    }

    /// Sends a transaction from the operator and waits for its receipt.
    pub fn transact(&self, to: Option<&str>, data: &[u8]) -> Value {
        let mut tx = json!({
            "from": self.operator(),
            "data": format!("0x{}", hex::encode(data)),
            "gas": "0x4c4b40",
        });
        if let Some(to) = to {
            tx["to"] = json!(to);
        }
        let hash = self
            .rpc
            .call("eth_sendTransaction", json!([tx]))
            .expect("send transaction");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let receipt = self
                .rpc
                .call("eth_getTransactionReceipt", json!([hash]))
                .expect("receipt");
            if !receipt.is_null() {
                assert_eq!(receipt["status"], json!("0x1"), "{receipt}");
                return receipt;
            }
            assert!(Instant::now() < deadline, "transaction not mined");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Deploys `contracts/build/<name>.bin` with ABI-encoded constructor `args`.
    pub fn deploy(&self, name: &str, args: &[[u8; 32]]) -> Address {
        let path = repo_root().join(format!("contracts/build/{name}.bin"));
        let text = std::fs::read_to_string(&path).expect("contract bytecode");
        let mut code = hex::decode(text.trim()).expect("bytecode hex");
        for arg in args {
            code.extend_from_slice(arg);
        }
        let receipt = self.transact(None, &code);
        Address::parse_ignoring_checksum(receipt["contractAddress"].as_str().expect("address"))
            .expect("contract address")
    }

    pub fn call_word(&self, to: &Address, data: &[u8]) -> usize {
        let out = self
            .rpc
            .eth_call(&to.to_lowercase_hex(), data)
            .expect("call");
        word_as_usize(&out[..32]).expect("small number")
    }
}
