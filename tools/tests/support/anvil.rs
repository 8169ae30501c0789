//! A local anvil node (installed by `.ci/install-chain-tools.sh`) for the tests that need a
//! chain: started on a free port with Ladder's chain id, the contracts of `contracts/build/`
//! deployed from its first (operator) account; EntryPoint v0.7 at its canonical address; and
//! Pimlico's Alto, an ERC-4337 bundler, run beside it.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ladder_chain::abi::word_as_usize;
use ladder_chain::RpcClient;
use ladder_protocol::user_op::ENTRY_POINT_V07;
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

impl Anvil {
    /// EntryPoint v0.7, deployed, then its code placed at the canonical address (which the
    /// SmartAccount fixture trusts): the constructor's SenderCreator stays where it was made.
    pub fn place_entry_point(&self) -> Address {
        let deployed = self.deploy("EntryPoint", &[]);
        let code = self
            .rpc
            .call(
                "eth_getCode",
                json!([deployed.to_lowercase_hex(), "latest"]),
            )
            .expect("code");
        self.rpc
            .call("anvil_setCode", json!([ENTRY_POINT_V07, code]))
            .expect("anvil_setCode");
        Address::parse(ENTRY_POINT_V07).expect("canonical address")
    }

    /// Gives `account` 1 ETH (a smart account pays its operations' gas from it).
    pub fn fund(&self, account: &Address) {
        self.rpc
            .call(
                "anvil_setBalance",
                json!([account.to_lowercase_hex(), "0xde0b6b3a7640000"]),
            )
            .expect("anvil_setBalance");
    }
}

/// Anvil's development keys #2 and #3 (its default mnemonic): Alto's executor and utility
/// accounts, apart from the operator (#0) that sends settlement batches.
const ALTO_EXECUTOR_KEY: &str =
    "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a";
const ALTO_UTILITY_KEY: &str = "0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6";

/// Pimlico's Alto (`@pimlico/alto` from npm, installed by `.ci/install-chain-tools.sh`), an
/// ERC-4337 bundler for the canonical EntryPoint v0.7 on `anvil`; killed on drop.
pub struct Alto {
    child: Child,
    /// Its JSON-RPC URL.
    pub url: String,
    /// Its JSON-RPC client.
    pub rpc: RpcClient,
}

impl Drop for Alto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Alto {
    /// Starts Alto against `anvil` (whose EntryPoint must be placed) and waits until it
    /// answers; `None` (the test then passes, saying why) without Alto or Node.js, unless
    /// `LADDER_REQUIRE_CHAIN=1`.
    pub fn start(anvil: &Anvil) -> Option<Alto> {
        let script = repo_root().join(".ci/node/node_modules/@pimlico/alto/esm/cli/alto.js");
        let node_found = Command::new("node").arg("--version").output().is_ok();
        if !script.exists() || !node_found {
            assert!(
                std::env::var("LADDER_REQUIRE_CHAIN").as_deref() != Ok("1"),
                "LADDER_REQUIRE_CHAIN=1 but no Alto: run .ci/install-chain-tools.sh"
            );
            eprintln!("no Alto bundler (run .ci/install-chain-tools.sh); skipped");
            return None;
        }
        let port = super::free_port();
        let child = Command::new("node")
            .arg(&script)
            .args(["--entrypoints", ENTRY_POINT_V07])
            .args(["--executor-private-keys", ALTO_EXECUTOR_KEY])
            .args(["--utility-private-key", ALTO_UTILITY_KEY])
            .args(["--rpc-url", &anvil.url])
            .args(["--port", &port.to_string()])
            // Safe mode traces validation with a tracer anvil does not have; no stake rules.
            .args(["--safe-mode", "false", "--min-entity-stake", "0"])
            // LADDER_ALTO_LOG=info (say) shows its log (on stdout) when a test fails.
            .args([
                "--log-level",
                &std::env::var("LADDER_ALTO_LOG").unwrap_or_else(|_| "warn".into()),
            ])
            .stdout(match std::env::var_os("LADDER_ALTO_LOG") {
                Some(_) => Stdio::inherit(),
                None => Stdio::null(),
            })
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn alto");
        let url = format!("http://127.0.0.1:{port}");
        let rpc = RpcClient::new(&url, Duration::from_secs(30)).expect("rpc client");
        let mut alto = Alto { child, url, rpc };
        let deadline = Instant::now() + Duration::from_secs(120);
        while alto.rpc.call("eth_chainId", json!([])).is_err() {
            if let Ok(Some(status)) = alto.child.try_wait() {
                panic!("alto stopped: {status}");
            }
            assert!(Instant::now() < deadline, "alto did not answer");
            std::thread::sleep(Duration::from_millis(200));
        }
        Some(alto)
    }
}
