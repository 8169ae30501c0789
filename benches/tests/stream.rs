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
    assert_eq!(
        cancels_hit, cancels,
        "the generator follows fills, so every cancel hits a live order"
    );
    let open = engine.open_order_count();
    assert!(
        (510..=690).contains(&open),
        "the books stay near their starting size: {open} open orders of 600"
    );
    assert!(trades > 300, "trades {trades}");
    engine.check_invariants().unwrap();
}

#[test]
fn without_stable_books_the_books_grow() {
    let spec = StreamSpec {
        markets: 3,
        traders: 50,
        resting_per_book: 200,
        commands: 20_000,
        stable_books: false,
        ..StreamSpec::default()
    };
    let stream = generate(&spec);
    let (mut engine, mut seq) = prepared_engine(&stream);
    for command in &stream.measured {
        engine.apply(seq, seq * 1_000, command);
        seq += 1;
    }
    assert!(
        engine.open_order_count() > 1_000,
        "places outnumber cancels: {} open orders",
        engine.open_order_count()
    );
}
