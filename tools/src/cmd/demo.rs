//! `serve --demo`: one market and two funded smart accounts, with the public development
//! keys of `protocol/tests/data/signing.json`, so the README walk-through works at once.

use std::net::SocketAddr;

use ladder_engine::{Address, Asset, Bytes32, Command, FixedBytes, MarketSpec, UNITS_PER_SHARE};
use ladder_protocol::U256;

/// The demo market's condition id.
pub const CONDITION_ID: &str = "0x3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b";
/// Its Yes token.
pub const YES_TOKEN: &str =
    "52114319501245915516055106046884209969926127482827954674443846427813813222426";
/// Its No token.
pub const NO_TOKEN: &str =
    "71321045679252212594626385532706912750332728571942532289631379312455583992563";

/// A demo trader: its owner's (public, development-only) key and its smart account.
pub struct DemoTrader {
    /// Private key of the EOA that signs.
    pub private_key: &'static str,
    /// The EOA.
    pub owner: &'static str,
    /// The smart account that trades.
    pub account: &'static str,
}

/// The two demo traders.
pub const TRADERS: [DemoTrader; 2] = [
    DemoTrader {
        private_key: "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
        owner: "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266",
        account: "0x5a11c0C0a000000000000000000000000000A001",
    },
    DemoTrader {
        private_key: "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
        owner: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
        account: "0x5A11C0C0a000000000000000000000000000a002",
    },
];

/// Collateral each demo account gets (10,000 USDC).
pub const DEMO_COLLATERAL_UNITS: u64 = 10_000 * 1_000_000;
/// Shares of each outcome each demo account gets.
pub const DEMO_SHARES: u64 = 1_000;

fn address(text: &str) -> Address {
    let p = ladder_protocol::Address::parse(text).expect("demo addresses are valid EIP-55");
    Address(*p.as_bytes())
}

fn token(text: &str) -> Bytes32 {
    FixedBytes(
        U256::from_dec_str(text)
            .expect("demo token ids are valid")
            .to_be_bytes(),
    )
}

/// The set-up commands, journaled like any others.
pub fn commands() -> Vec<Command> {
    let condition = ladder_protocol::B256::from_hex(CONDITION_ID).expect("valid condition id");
    let mut out = vec![Command::CreateMarket(MarketSpec {
        condition_id: FixedBytes(*condition.as_bytes()),
        yes_token_id: token(YES_TOKEN),
        no_token_id: token(NO_TOKEN),
        tick_size_ticks: 10,
        min_order_size_units: UNITS_PER_SHARE,
        neg_risk: false,
        taker_delay_ms: 0,
        fee_rate_bps: 0,
    })];
    for trader in &TRADERS {
        let account = address(trader.account);
        out.push(Command::LinkAccount {
            account,
            owner: address(trader.owner),
        });
        out.push(Command::Deposit {
            address: account,
            asset: Asset::Collateral,
            amount: DEMO_COLLATERAL_UNITS,
        });
        for t in [YES_TOKEN, NO_TOKEN] {
            out.push(Command::Deposit {
                address: account,
                asset: Asset::Token(token(t)),
                amount: DEMO_SHARES * UNITS_PER_SHARE,
            });
        }
    }
    out
}

/// Tells the operator the demo was not created (or not all of it), and why.
pub fn say_not_created(reason: &str) {
    tracing::error!(
        reason,
        "--demo: the demo market and accounts were not created"
    );
    eprintln!(
        "ladder: --demo: the demo market and accounts were not created ({reason}); start again \
         on an empty data directory once that is resolved"
    );
}

/// Tells the operator what was created and how to use it.
pub fn print_instructions(bound: &SocketAddr) {
    use std::fmt::Write;
    let mut text = String::new();
    let _ = writeln!(
        text,
        "ladder: demo market and accounts created (development keys: never use them for real funds)"
    );
    let _ = writeln!(
        text,
        "  market      {CONDITION_ID} (tick 0.001, min size 1)"
    );
    let _ = writeln!(text, "  Yes token   {YES_TOKEN}");
    let _ = writeln!(text, "  No token    {NO_TOKEN}");
    for (i, t) in TRADERS.iter().enumerate() {
        let _ = writeln!(
            text,
            "  trader {i}    account {} owned by {} (key {})",
            t.account, t.owner, t.private_key
        );
        let _ = writeln!(
            text,
            "              funded with 10000 USDC, {DEMO_SHARES} Yes and {DEMO_SHARES} No"
        );
    }
    let _ = write!(
        text,
        "  try: ladder client --url http://{bound} create-key --trader 0"
    );
    crate::cmd::stdout::print_notice(text);
}
