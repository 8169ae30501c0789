//! The `engine` bench compares like with like: the single-token stream, replayed through
//! Ladder's engine and through orderbook-rs, makes the same fills (taker, maker, price, size)
//! and cancels, and leaves the same book; so does the naive direct-indexed baseline book.

mod orderbook_ref;

use ladder_benches::engine_replay::prepared_engine;
use ladder_benches::engine_stream::generate;
use ladder_engine::{Command, Reply};
use orderbook_ref::{
    apply, apply_naive, compare_books, compare_naive, prepared_naive_book, single_token_spec,
    RefOp, RefStream,
};
use orderbook_rs::prelude::{Id, TimeInForce};

#[test]
fn ladder_and_orderbook_rs_fill_and_rest_alike() {
    let stream = generate(&single_token_spec(20_000));
    let reference = RefStream::of(&stream);
    assert_eq!(reference.measured.len(), stream.measured.len());
    let (mut engine, mut seq) = prepared_engine(&stream);
    let book = reference.prepared_book();
    compare_books(&engine, &book).expect("the starting books agree");
    let mut naive = prepared_naive_book(&reference);
    compare_naive(&engine, &naive).expect("the starting naive book agrees");

    let (mut fills, mut cancels_hit) = (0, 0);
    for (i, (command, op)) in stream.measured.iter().zip(&reference.measured).enumerate() {
        let reply = engine.apply(seq, seq * 1_000, command);
        seq += 1;
        apply_naive(&mut naive, op);
        match (command, reply, *op) {
            (
                Command::PlaceOrder(_),
                Reply::Placed(placed),
                RefOp::Add {
                    id,
                    price,
                    shares,
                    side,
                    ..
                },
            ) => {
                assert_eq!(
                    Id::sequential(placed.order_id),
                    id,
                    "Ladder's ids are the placement count"
                );
                let ours: Vec<(Id, u128, u64)> = placed
                    .trade_ids
                    .iter()
                    .map(|t| {
                        let trade = engine.trade(t).expect("a trade of this order");
                        (
                            Id::sequential(trade.maker.order_id),
                            u128::from(trade.maker.price_ticks),
                            trade.size_units,
                        )
                    })
                    .collect();
                let (_, result) = book
                    .add_limit_order_with_result(id, price, shares, side, TimeInForce::Gtc, None)
                    .expect("orderbook-rs accepts the order");
                let theirs: Vec<(Id, u128, u64)> = result
                    .map(|r| {
                        r.match_result
                            .trades()
                            .as_vec()
                            .iter()
                            .map(|t| {
                                assert_eq!(t.taker_order_id(), id);
                                (
                                    t.maker_order_id(),
                                    t.price().as_u128(),
                                    t.quantity().as_u64() * ladder_engine::UNITS_PER_SHARE,
                                )
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                assert_eq!(ours, theirs, "fills of command {i}");
                fills += ours.len();
            }
            (Command::CancelOrder { .. }, Reply::Canceled(report), RefOp::Cancel { .. }) => {
                let hit = apply(&book, op).expect("orderbook-rs cancel");
                assert_eq!(report.canceled.len() == 1, hit, "cancel of command {i}");
                cancels_hit += usize::from(hit);
            }
            (command, reply, op) => panic!("unexpected {command:?} -> {reply:?} / {op:?}"),
        }
        if i % 1_000 == 999 {
            compare_books(&engine, &book).unwrap_or_else(|e| panic!("after command {i}: {e}"));
            compare_naive(&engine, &naive).unwrap_or_else(|e| panic!("after command {i}: {e}"));
        }
    }
    compare_books(&engine, &book).expect("the final books agree");
    compare_naive(&engine, &naive).expect("the final naive book agrees");
    eprintln!(
        "{fills} fills, {cancels_hit} cancels hit, {} orders resting",
        engine.open_order_count()
    );
    assert!(fills > 300, "fills {fills}");
    assert!(cancels_hit > 5_000, "cancels that hit {cancels_hit}");
    engine.check_invariants().unwrap();
}
