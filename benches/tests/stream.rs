//! The generated stream does real work: every placement is accepted (so the generator's
//! order ids are right), most cancels hit a live order, and aggressive orders trade.

use ladder_benches::engine_replay::prepared_engine;
use ladder_benches::engine_stream::{generate, StreamSpec};
use ladder_engine::{Command, Reply};

#[test]
fn the_stream_places_cancels_and_trades_as_intended() {
    let spec = StreamSpec {
        markets: 3,
        traders: 50,
        resting_per_book: 200,
        commands: 20_000,
        ..StreamSpec::default()
    };
    let stream = generate(&spec);
    let (mut engine, mut seq) = prepared_engine(&stream);
    assert_eq!(
        engine.open_order_count(),
        600,
        "the books start with their resting orders"
    );
    let (mut placed, mut rejected, mut cancels, mut cancels_hit, mut trades) = (0, 0, 0, 0, 0);
    for command in &stream.measured {
        let reply = engine.apply(seq, seq * 1_000, command);
        seq += 1;
        match (command, reply) {
            (Command::PlaceOrder(_), Reply::Placed(p)) => {
                placed += 1;
                trades += p.trade_ids.len();
            }
            (Command::PlaceOrder(o), Reply::Rejected(r)) => {
                if rejected < 3 {
                    eprintln!("rejected {r:?}: {o:?}");
                }
                rejected += 1
            }
            (Command::CancelOrder { .. }, Reply::Canceled(report)) => {
                cancels += 1;
                cancels_hit += report.canceled.len();
            }
            (command, reply) => panic!("unexpected {command:?} -> {reply:?}"),
        }
    }
    assert_eq!(rejected, 0);
    assert!(placed > 8_000, "placed {placed}");
    assert!(
        cancels_hit * 10 > cancels * 7,
        "{cancels_hit} of {cancels} cancels hit a live order"
    );
    assert!(trades > 300, "trades {trades}");
    engine.check_invariants().unwrap();
}
