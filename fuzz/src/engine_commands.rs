//! The engine on arbitrary commands: the bytes are decoded as a stream of journal command
//! payloads (`ladder_sequencer::decode_command_prefix`, as replay and the standby decode
//! them; what a damaged journal or a faulty peer could hand to replay), after a fixed set-up (two markets, two funded
//! accounts). Applying any of them must never panic, and the engine's invariants (books not
//! crossed, reservations equal to what open orders need, value conserved) must hold after
//! each one: a panic on the sequencer thread stops the service, and a journaled command that
//! panics would stop every restart too.

use ladder_engine::{
    Address, Asset, Bytes32, Command, Engine, EngineLimits, FixedBytes, MarketSpec,
};

/// Most commands taken from one input.
const COMMANDS_MAX: usize = 64;

fn bytes32(n: u8) -> Bytes32 {
    FixedBytes([n; 32])
}

/// Two markets and two funded accounts, linked to owner EOAs.
fn set_up() -> Engine {
    let limits = EngineLimits {
        open_orders_preallocated: 64,
        orders_preallocated: 64,
        trades_preallocated: 64,
        prefault: false,
        ..EngineLimits::default()
    };
    let mut engine = Engine::new(limits);
    let mut seq = 0;
    let mut apply = |engine: &mut Engine, command: Command| {
        seq += 1;
        engine.apply(seq, seq * 1_000_000, &command);
    };
    for m in 1..=2u8 {
        apply(
            &mut engine,
            Command::CreateMarket(MarketSpec {
                condition_id: bytes32(m),
                yes_token_id: bytes32(10 + m),
                no_token_id: bytes32(20 + m),
                tick_size_ticks: 100,
                min_order_size_units: 1_000_000,
                neg_risk: false,
                taker_delay_ms: u64::from(m - 1) * 5,
                fee_rate_bps: u32::from(m - 1) * 25,
            }),
        );
    }
    for a in 1..=2u8 {
        let account = Address([a; 20]);
        apply(
            &mut engine,
            Command::LinkAccount {
                account,
                owner: Address([100 + a; 20]),
            },
        );
        apply(
            &mut engine,
            Command::Deposit {
                address: account,
                asset: Asset::Collateral,
                amount: 1_000_000_000,
            },
        );
        for token in [11u8, 12, 21, 22] {
            apply(
                &mut engine,
                Command::Deposit {
                    address: account,
                    asset: Asset::Token(bytes32(token)),
                    amount: 100_000_000,
                },
            );
        }
    }
    engine
}

/// Applies the commands `data` decodes to; panics (a bug) when an invariant breaks.
pub fn check(data: &[u8]) {
    let mut engine = set_up();
    let mut rest = data;
    let mut seq = engine.last_seq();
    let mut now_ns = engine.now_ns();
    for _ in 0..COMMANDS_MAX {
        // Decoded as replay and the standby decode a journal payload.
        let Ok((command, used)) = ladder_sequencer::decode_command_prefix(rest) else {
            return;
        };
        if used == 0 {
            return;
        }
        rest = &rest[used..];
        seq += 1;
        // Time moves on by a stamp taken from the input, as a journal's stamps do.
        now_ns += u64::from(rest.first().copied().unwrap_or(1)) * 1_000_000;
        engine.apply(seq, now_ns, &command);
        if let Err(broken) = engine.check_invariants() {
            panic!("invariant broken after {command:?}: {broken}");
        }
    }
}
