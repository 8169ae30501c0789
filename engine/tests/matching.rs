//! Every match path and order type, with exact fills and balances.

mod support;

use ladder_engine::*;
use support::*;

#[test]
fn complementary_fill_happens_at_the_makers_price() {
    let mut h = Harness::new();
    let maker = h.gtc(1, YES, Side::Sell, 4_000, 10);
    assert_eq!(maker.status, OrderStatus::Live);
    let taker = h.gtc(2, YES, Side::Buy, 5_500, 10);
    assert_eq!(taker.status, OrderStatus::Matched);
    assert_eq!(
        taker.making_units,
        4 * USDC,
        "the taker pays 0.40 x 10, not its 0.55 limit"
    );
    assert_eq!(taker.taking_units, 10 * SHARE);
    assert_eq!(taker.trade_ids.len(), 1);
    assert!(taker.transaction_hash.is_some());
    assert_eq!(h.collateral(2), free(996 * USDC));
    assert_eq!(h.tokens(2, YES), free(510 * SHARE));
    assert_eq!(h.collateral(1), free(1_004 * USDC));
    assert_eq!(h.tokens(1, YES), free(490 * SHARE));
    let trade = h.engine.trade(&taker.trade_ids[0]).unwrap();
    assert_eq!(trade.match_type, MatchType::Complementary);
    assert_eq!(trade.taker.price_ticks, 4_000);
    assert_eq!(trade.maker.order_id, maker.order_id);
    assert_eq!(trade.status, TradeStatus::Matched);
}

#[test]
fn mint_turns_both_buyers_collateral_into_a_full_set() {
    let mut h = Harness::new();
    // BUY No at 0.45 rests as a Yes ask at 0.55.
    h.gtc(1, NO, Side::Buy, 4_500, 10);
    assert_eq!(
        h.collateral(1),
        Balance {
            free: 995_500_000,
            reserved: 4_500_000,
            debt: 0
        }
    );
    let taker = h.gtc(2, YES, Side::Buy, 6_000, 10);
    assert_eq!(taker.status, OrderStatus::Matched);
    assert_eq!(
        taker.making_units, 5_500_000,
        "the Yes buyer pays 1 - 0.45 per share"
    );
    assert_eq!(h.collateral(1), free(995_500_000));
    assert_eq!(h.tokens(1, NO), free(510 * SHARE));
    assert_eq!(h.collateral(2), free(994_500_000));
    assert_eq!(h.tokens(2, YES), free(510 * SHARE));
    let trade = h.engine.trade(&taker.trade_ids[0]).unwrap();
    assert_eq!(trade.match_type, MatchType::Mint);
    assert_eq!(trade.maker.price_ticks, 4_500);
    assert_eq!(trade.taker.price_ticks, 5_500);
}

#[test]
fn merge_turns_a_yes_and_a_no_back_into_collateral() {
    let mut h = Harness::new();
    // SELL No at 0.35 rests as a Yes bid at 0.65.
    h.gtc(1, NO, Side::Sell, 3_500, 10);
    assert_eq!(
        h.tokens(1, NO),
        Balance {
            free: 490 * SHARE,
            reserved: 10 * SHARE,
            debt: 0
        }
    );
    let taker = h.gtc(2, YES, Side::Sell, 6_000, 10);
    assert_eq!(taker.status, OrderStatus::Matched);
    assert_eq!(
        taker.taking_units, 6_500_000,
        "the Yes seller gets 1 - 0.35 per share"
    );
    assert_eq!(h.collateral(1), free(1_003_500_000));
    assert_eq!(h.tokens(1, NO), free(490 * SHARE));
    assert_eq!(h.collateral(2), free(1_006_500_000));
    assert_eq!(h.tokens(2, YES), free(490 * SHARE));
    let trade = h.engine.trade(&taker.trade_ids[0]).unwrap();
    assert_eq!(trade.match_type, MatchType::Merge);
}

#[test]
fn price_time_priority_fills_the_best_price_then_the_oldest() {
    let mut h = Harness::new();
    let first_at_50 = h.gtc(1, YES, Side::Sell, 5_000, 5);
    let second_at_50 = h.gtc(2, YES, Side::Sell, 5_000, 5);
    let at_45 = h.gtc(3, YES, Side::Sell, 4_500, 5);
    let taker = h.gtc(4, YES, Side::Buy, 5_000, 8);
    assert_eq!(taker.trade_ids.len(), 2);
    let makers: Vec<_> = taker
        .trade_ids
        .iter()
        .map(|id| {
            let t = h.engine.trade(id).unwrap();
            (t.maker.order_id, t.size_units / SHARE)
        })
        .collect();
    assert_eq!(
        makers,
        vec![(at_45.order_id, 5), (first_at_50.order_id, 3)],
        "0.45 first, then the older 0.50"
    );
    let _ = second_at_50;
    assert_eq!(taker.making_units, 5 * 450_000 + 3 * 500_000);
    let book = h.engine.book(&YES, 10).unwrap();
    assert_eq!(book.asks, vec![(5_000, 7 * SHARE)]);
}

#[test]
fn a_remainder_rests_and_reserves_only_what_it_needs() {
    let mut h = Harness::new();
    h.gtc(1, YES, Side::Sell, 4_000, 4);
    let taker = h.gtc(2, YES, Side::Buy, 5_000, 10);
    assert_eq!(taker.status, OrderStatus::Live);
    assert_eq!(taker.making_units, 1_600_000);
    assert_eq!(
        h.collateral(2),
        Balance {
            free: 1_000 * USDC - 1_600_000 - 3 * USDC,
            reserved: 3 * USDC,
            debt: 0
        }
    );
    let open = h.engine.open_orders(&account(2), &OrderFilter::default());
    assert_eq!(open.len(), 1);
    assert_eq!(open[0].filled_units, 4 * SHARE);
    assert_eq!(open[0].status, OrderStatus::Live);
}

#[test]
fn fok_that_cannot_fill_entirely_is_killed_and_the_book_is_untouched() {
    let mut h = Harness::new();
    h.gtc(1, YES, Side::Sell, 5_000, 5);
    let before = h.engine.book(&YES, 10).unwrap();
    let mut fok = h.order(2, YES, Side::Buy, 5_000, 6);
    fok.order_type = OrderType::Fok;
    assert_eq!(h.reject(fok), Reject::FokNotFilled);
    assert_eq!(h.engine.book(&YES, 10).unwrap(), before);
    assert_eq!(h.collateral(2), free(1_000 * USDC));
}

#[test]
fn fok_that_can_fill_fills_entirely() {
    let mut h = Harness::new();
    h.gtc(1, YES, Side::Sell, 5_000, 5);
    h.gtc(3, NO, Side::Buy, 5_000, 5); // a Yes ask at 0.50 by MINT
    let mut fok = h.order(2, YES, Side::Buy, 5_000, 10);
    fok.order_type = OrderType::Fok;
    let p = h.place(fok);
    assert_eq!(p.status, OrderStatus::Matched);
    assert_eq!(p.taking_units, 10 * SHARE);
    assert!(h
        .engine
        .open_orders(&account(2), &OrderFilter::default())
        .is_empty());
}

#[test]
fn fak_fills_what_it_can_and_cancels_the_rest() {
    let mut h = Harness::new();
    h.gtc(1, YES, Side::Sell, 5_000, 3);
    let mut fak = h.order(2, YES, Side::Buy, 6_000, 10);
    fak.order_type = OrderType::Fak;
    let p = h.place(fak);
    assert_eq!(p.status, OrderStatus::Matched);
    assert_eq!(p.taking_units, 3 * SHARE);
    assert_eq!(h.collateral(2), free(1_000 * USDC - 1_500_000));
    assert!(h
        .engine
        .open_orders(&account(2), &OrderFilter::default())
        .is_empty());
    let mut fak = h.order(2, YES, Side::Buy, 6_000, 10);
    fak.order_type = OrderType::Fak;
    assert_eq!(h.reject(fak), Reject::FakNoMatch);
}

#[test]
fn post_only_rests_or_is_refused_if_it_would_cross_by_any_path() {
    let mut h = Harness::new();
    h.gtc(1, NO, Side::Buy, 4_500, 5); // Yes ask at 0.55 (MINT liquidity)
    let mut cross = h.order(2, YES, Side::Buy, 5_500, 5);
    cross.post_only = true;
    assert_eq!(h.reject(cross), Reject::PostOnlyWouldCross);
    let mut rest = h.order(2, YES, Side::Buy, 5_400, 5);
    rest.post_only = true;
    assert_eq!(h.place(rest).status, OrderStatus::Live);
    let mut fak = h.order(2, YES, Side::Buy, 5_400, 5);
    fak.post_only = true;
    fak.order_type = OrderType::Fak;
    assert_eq!(h.reject(fak), Reject::PostOnlyNeedsRestingType);
}

#[test]
fn post_only_crossing_only_its_own_orders_cancels_them_and_rests() {
    let mut spec = support::market_spec();
    spec.taker_delay_ms = 250;
    let mut h = support::Harness::with_market(spec);
    let own = h.gtc(2, YES, Side::Sell, 5_000, 5);
    let mut quote = h.order(2, YES, Side::Buy, 5_000, 3);
    quote.post_only = true;
    let placed = h.place(quote);
    // No match (API.md §9: never with the same maker), so no refusal and no taker delay:
    // the own ask is cancelled and the bid rests.
    assert_eq!(placed.status, OrderStatus::Live);
    assert!(placed.trade_ids.is_empty());
    let cancelled = h.events().into_iter().any(|e| {
        matches!(e, Event::Order { kind: OrderEventKind::Cancellation, order }
            if order.id == own.order_id)
    });
    assert!(cancelled, "the own ask is reported cancelled");
    assert_eq!(h.engine.open_order_count(), 1);
    // Another maker's liquidity at the price still refuses a post-only order.
    h.gtc(1, YES, Side::Sell, 5_100, 5);
    let mut cross = h.order(2, YES, Side::Buy, 5_100, 1);
    cross.post_only = true;
    assert_eq!(h.reject(cross), Reject::PostOnlyWouldCross);
}

#[test]
fn self_trade_prevention_cancels_the_resting_order_and_continues() {
    let mut h = Harness::new();
    let own = h.gtc(2, YES, Side::Sell, 4_000, 5);
    let other = h.gtc(1, YES, Side::Sell, 4_500, 5);
    let taker = h.gtc(2, YES, Side::Buy, 5_000, 5);
    assert_eq!(taker.status, OrderStatus::Matched);
    assert_eq!(taker.trade_ids.len(), 1);
    let trade = h.engine.trade(&taker.trade_ids[0]).unwrap();
    assert_eq!(trade.maker.order_id, other.order_id);
    assert_eq!(h.cancelled(), vec![own.order_id]);
    assert_eq!(
        h.tokens(2, YES),
        free(505 * SHARE),
        "own sell cancelled and released, 5 bought from trader 1"
    );
}

#[test]
fn tick_range_size_and_expiration_rules_reject_with_their_reason() {
    let mut h = Harness::new();
    let o = h.order(1, YES, Side::Buy, 5_050, 1);
    assert_eq!(
        h.reject(o),
        Reject::PriceOffTick {
            price_ticks: 5_050,
            tick_ticks: 100
        }
    );
    let o = h.order(1, YES, Side::Buy, 9_950, 1);
    assert!(matches!(h.reject(o), Reject::PriceOutOfRange { .. }));
    let mut o = h.order(1, YES, Side::Buy, 5_000, 1);
    o.size_units = SHARE / 2;
    assert!(matches!(h.reject(o), Reject::SizeNotWhole { .. }));
    let mut o = h.order(1, YES, Side::Buy, 5_000, 1);
    o.order_type = OrderType::Gtd;
    assert_eq!(h.reject(o), Reject::GtdWithoutExpiration);
    let mut o = h.order(1, YES, Side::Buy, 5_000, 1);
    o.order_type = OrderType::Gtd;
    o.expiration_s = 1_000;
    assert!(matches!(h.reject(o), Reject::ExpirationPast { .. }));
    let mut o = h.order(1, YES, Side::Buy, 5_000, 1);
    o.expiration_s = 2_000_000_000;
    assert_eq!(h.reject(o), Reject::ExpirationNotGtd);
    let o = h.order(1, FixedBytes([9; 32]), Side::Buy, 5_000, 1);
    assert_eq!(h.reject(o), Reject::UnknownToken);
    let mut o = h.order(1, YES, Side::Buy, 5_000, 1);
    o.signer = signer(2);
    assert_eq!(h.reject(o), Reject::SignerNotController);
    let o = h.order(1, YES, Side::Buy, 5_000, 10_000);
    assert_eq!(h.reject(o), Reject::NotEnoughBalance);
    let o = h.order(1, YES, Side::Sell, 5_000, 501);
    assert_eq!(h.reject(o), Reject::NotEnoughBalance);
}

#[test]
fn below_minimum_size_is_rejected() {
    let mut spec = market_spec();
    spec.min_order_size_units = 5 * SHARE;
    let mut h = Harness::with_market(spec);
    let o = h.order(1, YES, Side::Buy, 5_000, 4);
    assert_eq!(
        h.reject(o),
        Reject::BelowMinimumSize {
            size_units: 4 * SHARE,
            minimum_units: 5 * SHARE
        }
    );
}

#[test]
fn a_duplicate_hash_is_rejected_even_after_the_first_is_gone() {
    let mut h = Harness::new();
    let o = h.order(1, YES, Side::Buy, 5_000, 1);
    let p = h.place(o.clone());
    h.apply(Command::CancelOrder {
        requester: account(1),
        order_id: p.order_id,
        condition_id: None,
        signer: None,
    });
    assert_eq!(h.reject(o), Reject::DuplicateOrder);
}

#[test]
fn gtd_orders_leave_the_book_at_their_expiration() {
    let mut h = Harness::new();
    let now_s = h.now_ns / NANOS_PER_SECOND;
    let mut o = h.order(1, YES, Side::Buy, 5_000, 2);
    o.order_type = OrderType::Gtd;
    o.expiration_s = now_s + 5;
    h.place(o);
    assert_eq!(h.collateral(1).reserved, USDC);
    assert_eq!(
        h.engine.next_deadline_ns(),
        Some((now_s + 5) * NANOS_PER_SECOND)
    );
    h.advance_ms(3_000);
    h.apply(Command::Tick);
    assert_eq!(
        h.engine
            .open_orders(&account(1), &OrderFilter::default())
            .len(),
        1
    );
    h.advance_ms(2_000);
    h.apply(Command::Tick);
    assert!(h
        .engine
        .open_orders(&account(1), &OrderFilter::default())
        .is_empty());
    assert_eq!(h.collateral(1), free(1_000 * USDC));
    assert!(h.events().iter().any(|e| matches!(
        e,
        Event::Order {
            kind: OrderEventKind::Cancellation,
            ..
        }
    )));
}

#[test]
fn a_taker_delay_answers_delayed_and_matches_when_it_is_over() {
    let mut spec = market_spec();
    spec.taker_delay_ms = 250;
    let mut h = Harness::with_market(spec);
    h.gtc(1, YES, Side::Sell, 5_000, 4);
    let p = h.gtc(2, YES, Side::Buy, 5_000, 10);
    assert_eq!(p.status, OrderStatus::Delayed);
    let open = h.engine.open_orders(&account(2), &OrderFilter::default());
    assert_eq!(open[0].status, OrderStatus::Delayed);
    assert_eq!(h.collateral(2).reserved, 5 * USDC);
    h.advance_ms(300);
    h.apply(Command::Tick);
    let open = h.engine.open_orders(&account(2), &OrderFilter::default());
    assert_eq!(open[0].status, OrderStatus::Live);
    assert_eq!(open[0].filled_units, 4 * SHARE);
    assert_eq!(h.tokens(2, YES), free(504 * SHARE));
    assert_eq!(
        h.collateral(2),
        Balance {
            free: 1_000 * USDC - 5 * USDC,
            reserved: 3 * USDC,
            debt: 0
        }
    );
    // A non-marketable order is not delayed.
    let p = h.gtc(3, YES, Side::Buy, 4_000, 1);
    assert_eq!(p.status, OrderStatus::Live);
}

#[test]
fn cancel_reasons_name_what_happened() {
    let mut h = Harness::new();
    let resting = h.gtc(1, YES, Side::Buy, 4_000, 2);
    let filled = h.gtc(1, YES, Side::Sell, 6_000, 2);
    h.gtc(2, YES, Side::Buy, 6_000, 2);
    let reply = h.apply(Command::CancelOrder {
        requester: account(2),
        order_id: resting.order_id,
        condition_id: None,
        signer: None,
    });
    assert_eq!(
        reply,
        Reply::Canceled(CancelReport {
            canceled: vec![].into(),
            not_canceled: vec![(resting.order_id, NotCanceled::NotOwner)].into()
        })
    );
    let reply = h.apply(Command::CancelOrder {
        requester: account(1),
        order_id: filled.order_id,
        condition_id: None,
        signer: None,
    });
    assert_eq!(
        reply,
        Reply::Canceled(CancelReport {
            canceled: vec![].into(),
            not_canceled: vec![(filled.order_id, NotCanceled::AlreadyFilled)].into()
        })
    );
    let reply = h.apply(Command::CancelOrder {
        requester: account(1),
        order_id: resting.order_id,
        condition_id: None,
        signer: None,
    });
    assert_eq!(
        reply,
        Reply::Canceled(CancelReport {
            canceled: vec![resting.order_id].into(),
            not_canceled: vec![].into()
        })
    );
    let reply = h.apply(Command::CancelOrder {
        requester: account(1),
        order_id: resting.order_id,
        condition_id: None,
        signer: None,
    });
    assert_eq!(
        reply,
        Reply::Canceled(CancelReport {
            canceled: vec![].into(),
            not_canceled: vec![(resting.order_id, NotCanceled::AlreadyCanceled)].into()
        })
    );
    let reply = h.apply(Command::CancelOrder {
        requester: account(1),
        order_id: 999,
        condition_id: None,
        signer: None,
    });
    assert_eq!(
        reply,
        Reply::Canceled(CancelReport {
            canceled: vec![].into(),
            not_canceled: vec![(999, NotCanceled::NotFound)].into()
        })
    );
}

#[test]
fn a_market_cancel_by_a_signer_that_controls_nothing_names_each_order_and_cancels_none() {
    let mut h = Harness::new();
    let a = h.gtc(1, YES, Side::Buy, 4_000, 1);
    let b = h.gtc(1, NO, Side::Buy, 4_000, 1);
    let reply = h.apply(Command::CancelMarket {
        requester: account(1),
        signer: Some(signer(2)),
        condition_id: CONDITION,
        token_id: None,
    });
    assert_eq!(
        reply,
        Reply::Canceled(CancelReport {
            canceled: vec![].into(),
            not_canceled: vec![
                (a.order_id, NotCanceled::InvalidSignature),
                (b.order_id, NotCanceled::InvalidSignature)
            ]
            .into()
        })
    );
    assert_eq!(
        h.engine
            .open_orders(&account(1), &OrderFilter::default())
            .len(),
        2
    );
}

#[test]
fn cancel_market_and_cancel_all_take_only_the_requesters_orders() {
    let mut h = Harness::new();
    let a = h.gtc(1, YES, Side::Buy, 4_000, 1);
    let b = h.gtc(1, NO, Side::Buy, 4_000, 1);
    h.gtc(2, YES, Side::Buy, 4_000, 1);
    let reply = h.apply(Command::CancelMarket {
        requester: account(1),
        signer: None,
        condition_id: CONDITION,
        token_id: Some(NO),
    });
    assert_eq!(
        reply,
        Reply::Canceled(CancelReport {
            canceled: vec![b.order_id].into(),
            not_canceled: vec![].into()
        })
    );
    let reply = h.apply(Command::CancelAll {
        requester: account(1),
    });
    assert_eq!(
        reply,
        Reply::Canceled(CancelReport {
            canceled: vec![a.order_id].into(),
            not_canceled: vec![].into()
        })
    );
    assert_eq!(
        h.engine
            .open_orders(&account(2), &OrderFilter::default())
            .len(),
        1
    );
    assert_eq!(h.collateral(1), free(1_000 * USDC));
}

#[test]
fn resolution_cancels_orders_and_lists_winners_as_claimable() {
    let mut h = Harness::new();
    h.gtc(1, YES, Side::Buy, 4_000, 3);
    h.ok(Command::ResolveMarket {
        condition_id: CONDITION,
        resolution: Resolution::Yes,
    });
    assert_eq!(h.collateral(1), free(1_000 * USDC));
    let claims = h.engine.claimable(&account(1));
    assert_eq!(claims.len(), 1);
    assert_eq!(claims[0].outcome, Outcome::Yes);
    assert_eq!(claims[0].balance_units, 500 * SHARE);
    assert_eq!(claims[0].reason, ClaimReason::ResolvedWinner);
    let o = h.order(2, YES, Side::Buy, 4_000, 1);
    assert!(matches!(h.reject(o), Reject::MarketNotActive { .. }));
    // An ended market's tick no longer changes, as its state does not.
    let tick = h.apply(Command::SetTickSize {
        condition_id: CONDITION,
        tick_size_ticks: 10,
    });
    assert!(
        matches!(tick, Reply::Rejected(Reject::MarketNotActive { .. })),
        "{tick:?}"
    );
    h.ok(Command::RecordRedemption {
        address: account(1),
        condition_id: CONDITION,
    });
    assert!(h.engine.claimable(&account(1)).is_empty());
    assert_eq!(h.collateral(1), free(1_500 * USDC));
}

#[test]
fn a_resolved_market_gives_its_ladders_memory_back() {
    let mut h = Harness::new();
    assert_eq!(h.engine.book_ladder_bytes(), 0, "nothing rested yet");
    h.gtc(1, YES, Side::Buy, 4_000, 3);
    h.gtc(2, YES, Side::Sell, 6_000, 3);
    assert!(h.engine.book_ladder_bytes() > 100_000);
    h.ok(Command::ResolveMarket {
        condition_id: CONDITION,
        resolution: Resolution::Yes,
    });
    assert_eq!(h.engine.book_ladder_bytes(), 0);
    let restored = Engine::from_snapshot_bytes(&h.engine.snapshot_bytes()).unwrap();
    assert_eq!(restored.state_hash(), h.engine.state_hash());
    assert_eq!(restored.book_ladder_bytes(), 0);
}

#[test]
fn a_snapshot_holds_only_the_occupied_levels_of_a_book() {
    let mut h = Harness::new();
    let empty = h.engine.snapshot_bytes().len();
    h.gtc(1, YES, Side::Buy, 4_000, 3);
    h.gtc(2, YES, Side::Sell, 6_000, 3);
    h.gtc(3, YES, Side::Sell, 6_100, 3);
    let bytes = h.engine.snapshot_bytes();
    // Three orders and their levels, not two ladders of 10,001 levels.
    assert!(
        bytes.len() - empty < 4_000,
        "{} bytes more",
        bytes.len() - empty
    );
    let mut restored = Engine::from_snapshot_bytes(&bytes).unwrap();
    assert_eq!(restored.state_hash(), h.engine.state_hash());
    assert_eq!(
        restored.book(&YES, 10).unwrap().asks,
        h.engine.book(&YES, 10).unwrap().asks
    );
    let taker = h.order(4, YES, Side::Buy, 6_100, 6);
    let command = Command::PlaceOrder(taker);
    let a = h.engine.apply(100, h.now_ns, &command);
    let b = restored.apply(100, h.now_ns, &command);
    assert_eq!(a, b);
    assert_eq!(restored.state_hash(), h.engine.state_hash());
}

#[test]
fn a_voided_market_pays_half_of_both_tokens_taken_together() {
    let mut h = Harness::new();
    for (token, units) in [(YES, 3), (NO, 1)] {
        h.ok(Command::Deposit {
            address: account(42),
            asset: Asset::Token(token),
            amount: units,
        });
    }
    h.ok(Command::ResolveMarket {
        condition_id: CONDITION,
        resolution: Resolution::Void,
    });
    h.ok(Command::RecordRedemption {
        address: account(42),
        condition_id: CONDITION,
    });
    // Four base units pay two; half of each rounded down apart would pay one.
    assert_eq!(h.collateral(42), free(2));
}

#[test]
fn a_voided_market_refunds_both_outcomes() {
    let mut h = Harness::new();
    h.ok(Command::ResolveMarket {
        condition_id: CONDITION,
        resolution: Resolution::Void,
    });
    let claims = h.engine.claimable(&account(3));
    assert_eq!(
        claims.iter().map(|c| c.reason).collect::<Vec<_>>(),
        vec![ClaimReason::VoidedRefund; 2]
    );
    h.ok(Command::RecordRedemption {
        address: account(3),
        condition_id: CONDITION,
    });
    assert_eq!(h.collateral(3), free(1_500 * USDC));
}

#[test]
fn losing_tokens_alone_or_an_unknown_market_are_nothing_to_redeem() {
    let mut h = Harness::new();
    // An account holding only the token that loses.
    h.ok(Command::Deposit {
        address: account(42),
        asset: Asset::Token(NO),
        amount: 7 * SHARE,
    });
    h.ok(Command::ResolveMarket {
        condition_id: CONDITION,
        resolution: Resolution::Yes,
    });
    assert!(h.engine.claimable(&account(42)).is_empty());
    assert_eq!(
        h.engine.check_redeemable(&account(42), &CONDITION),
        Err(Reject::NothingToRedeem)
    );
    // A holder of the winning token has something to redeem.
    assert_eq!(h.engine.check_redeemable(&account(3), &CONDITION), Ok(()));
    // A condition id no market has holds no claimable entry either.
    assert_eq!(
        h.engine
            .check_redeemable(&account(3), &FixedBytes([0x77; 32])),
        Err(Reject::NothingToRedeem)
    );
}

#[test]
fn a_paused_market_keeps_resting_orders_refuses_new_ones_and_accepts_cancels() {
    let mut h = Harness::new();
    let p = h.gtc(1, YES, Side::Buy, 4_000, 1);
    h.ok(Command::PauseMarket {
        condition_id: CONDITION,
    });
    let o = h.order(2, YES, Side::Sell, 4_000, 1);
    assert_eq!(h.reject(o), Reject::MarketNotActive { state: "paused" });
    assert_eq!(h.engine.book(&YES, 10).unwrap().bids, vec![(4_000, SHARE)]);
    let reply = h.apply(Command::CancelOrder {
        requester: account(1),
        order_id: p.order_id,
        condition_id: None,
        signer: None,
    });
    assert!(matches!(reply, Reply::Canceled(r) if r.canceled.as_slice() == [p.order_id]));
    h.ok(Command::ResumeMarket {
        condition_id: CONDITION,
    });
    h.gtc(2, YES, Side::Sell, 4_000, 1);
}

#[test]
fn a_failed_settlement_reverses_exactly_its_own_movement() {
    let mut h = Harness::new();
    h.gtc(1, NO, Side::Buy, 4_500, 10);
    let taker = h.gtc(2, YES, Side::Buy, 6_000, 10);
    let tx = taker.transaction_hash.unwrap();
    h.ok(Command::SettlementUpdate {
        transaction_hash: tx,
        status: TradeStatus::Retrying,
    });
    h.ok(Command::SettlementUpdate {
        transaction_hash: tx,
        status: TradeStatus::Failed,
    });
    for n in 1..=2 {
        assert_eq!(h.collateral(n), free(1_000 * USDC));
        assert_eq!(h.tokens(n, YES), free(500 * SHARE));
        assert_eq!(h.tokens(n, NO), free(500 * SHARE));
    }
    assert_eq!(
        h.engine.trade(&taker.trade_ids[0]).unwrap().status,
        TradeStatus::Failed
    );
    let again = h.apply(Command::SettlementUpdate {
        transaction_hash: tx,
        status: TradeStatus::Mined,
    });
    assert_eq!(again, Reply::Rejected(Reject::InvalidStatusChange));
}

#[test]
fn tokens_owed_after_a_failed_settlement_are_repaid_from_the_offer_that_held_them() {
    let mut h = Harness::new();
    h.gtc(1, YES, Side::Sell, 5_000, 10);
    let taker = h.gtc(2, YES, Side::Buy, 5_000, 10);
    // Trader 2 offers every Yes share, the ten just bought included.
    h.gtc(2, YES, Side::Sell, 9_000, 510);
    assert_eq!(h.tokens(2, YES).free, 0);
    let tx = taker.transaction_hash.unwrap();
    for status in [TradeStatus::Retrying, TradeStatus::Failed] {
        h.ok(Command::SettlementUpdate {
            transaction_hash: tx,
            status,
        });
    }
    // The ten were on offer: an account that owes tokens offers none, so the offer is
    // cancelled, and what it held repays the debt before it is free.
    assert_eq!(h.cancelled().len(), 1, "the offer is cancelled");
    assert_eq!(h.tokens(2, YES), free(500 * SHARE));
    h.ok(Command::ResolveMarket {
        condition_id: CONDITION,
        resolution: Resolution::Yes,
    });
    assert_eq!(h.tokens(2, YES), free(500 * SHARE));
    let claims = h.engine.claimable(&account(2));
    assert_eq!(claims.len(), 1);
    assert_eq!(claims[0].balance_units, 500 * SHARE, "not the 510 it held");
    h.ok(Command::RecordRedemption {
        address: account(2),
        condition_id: CONDITION,
    });
    assert_eq!(h.collateral(2), free(1_000 * USDC + 500 * USDC));
}

#[test]
fn collateral_owed_after_a_failed_settlement_cancels_the_buy_it_would_pay() {
    let mut h = Harness::new();
    h.gtc(1, YES, Side::Sell, 5_000, 10);
    let taker = h.gtc(2, YES, Side::Buy, 5_000, 10);
    // The seller bids all it has, the 5 USDC it was just paid included.
    let bid = h.gtc(1, NO, Side::Buy, 5_000, 2_010);
    assert_eq!(h.collateral(1).free, 0);
    let tx = taker.transaction_hash.unwrap();
    for status in [TradeStatus::Retrying, TradeStatus::Failed] {
        h.ok(Command::SettlementUpdate {
            transaction_hash: tx,
            status,
        });
    }
    // The 5 USDC go back to the buyer; the bid could no longer pay its 1,005 USDC, so it is
    // cancelled and its reservation repays the debt: nothing owed, nothing on offer.
    assert_eq!(h.cancelled(), vec![bid.order_id]);
    let events = h.events();
    let failed_at = events
        .iter()
        .position(|e| matches!(e, Event::Trade(t) if t.status == TradeStatus::Failed));
    let cancelled_at = events.iter().position(|e| {
        matches!(
            e,
            Event::Order {
                kind: OrderEventKind::Cancellation,
                ..
            }
        )
    });
    assert!(
        matches!((failed_at, cancelled_at), (Some(f), Some(c)) if f < c),
        "the FAILED trade, then what it caused: {failed_at:?}, {cancelled_at:?}"
    );
    assert_eq!(h.collateral(1), free(1_000 * USDC));
    assert_eq!(h.tokens(1, YES), free(500 * SHARE));
    assert_eq!(h.collateral(2), free(1_000 * USDC));
}

#[test]
fn tokens_redeemed_before_their_trade_failed_are_paid_out_once() {
    let mut h = Harness::new();
    h.gtc(1, YES, Side::Sell, 5_000, 10);
    let taker = h.gtc(2, YES, Side::Buy, 5_000, 10);
    h.ok(Command::ResolveMarket {
        condition_id: CONDITION,
        resolution: Resolution::Yes,
    });
    // The buyer redeems the ten while the trade is still MATCHED...
    h.ok(Command::RecordRedemption {
        address: account(2),
        condition_id: CONDITION,
    });
    assert_eq!(h.collateral(2), free(995 * USDC + 510 * USDC));
    // ...and then the trade fails: its price comes back, and the ten Yes it no longer has
    // are owed in a market that no longer trades, so they cost it their payout.
    for status in [TradeStatus::Retrying, TradeStatus::Failed] {
        h.ok(Command::SettlementUpdate {
            transaction_hash: taker.transaction_hash.unwrap(),
            status,
        });
    }
    assert_eq!(h.tokens(2, YES), free(0));
    assert_eq!(
        h.collateral(2),
        free(1_500 * USDC),
        "its own 1,000 and 500 Yes"
    );
    // The seller has its ten back and redeems 500, not a share more.
    assert_eq!(h.tokens(1, YES), free(500 * SHARE));
    h.ok(Command::RecordRedemption {
        address: account(1),
        condition_id: CONDITION,
    });
    assert_eq!(h.collateral(1), free(1_500 * USDC));
}

#[test]
fn a_token_debt_left_when_a_market_ends_is_settled_at_its_payout() {
    for (resolution, owed_worth) in [
        (Resolution::Yes, 10 * USDC),
        (Resolution::No, 0),
        (Resolution::Void, 5 * USDC),
    ] {
        let mut h = Harness::new();
        h.gtc(1, YES, Side::Sell, 5_000, 10);
        let taker = h.gtc(2, YES, Side::Buy, 5_000, 10);
        // Trader 2 sells every Yes share it has, the ten just bought included.
        h.gtc(3, YES, Side::Buy, 6_000, 510);
        h.gtc(2, YES, Side::Sell, 6_000, 510);
        for status in [TradeStatus::Retrying, TradeStatus::Failed] {
            h.ok(Command::SettlementUpdate {
                transaction_hash: taker.transaction_hash.unwrap(),
                status,
            });
        }
        assert_eq!(h.tokens(2, YES).debt, 10 * SHARE);
        let before = h.collateral(2);
        h.ok(Command::ResolveMarket {
            condition_id: CONDITION,
            resolution,
        });
        assert_eq!(h.tokens(2, YES), free(0), "{resolution:?}");
        assert_eq!(
            h.collateral(2),
            free(before.free - owed_worth),
            "{resolution:?}"
        );
    }
}

#[test]
fn settlement_moves_matched_to_mined_to_confirmed() {
    let mut h = Harness::new();
    h.gtc(1, YES, Side::Sell, 5_000, 1);
    let taker = h.gtc(2, YES, Side::Buy, 5_000, 1);
    let tx = taker.transaction_hash.unwrap();
    h.ok(Command::SettlementUpdate {
        transaction_hash: tx,
        status: TradeStatus::Mined,
    });
    h.ok(Command::SettlementUpdate {
        transaction_hash: tx,
        status: TradeStatus::Confirmed,
    });
    assert_eq!(
        h.engine.trade(&taker.trade_ids[0]).unwrap().status,
        TradeStatus::Confirmed
    );
    assert!(matches!(h.events()[0], Event::Trade(t) if t.status == TradeStatus::Confirmed));
}

#[test]
fn the_taker_pays_the_markets_fee_in_collateral() {
    let mut spec = market_spec();
    spec.fee_rate_bps = 100; // 1%
    let mut h = Harness::with_market(spec);
    h.gtc(1, YES, Side::Sell, 5_000, 10);
    let taker = h.gtc(2, YES, Side::Buy, 5_000, 10);
    assert_eq!(taker.making_units, 5 * USDC);
    assert_eq!(h.collateral(2), free(1_000 * USDC - 5 * USDC - 50_000));
    assert_eq!(h.collateral(1), free(1_005 * USDC), "the maker pays no fee");
}

/// A market with a 1 % taker fee.
fn fee_market() -> Harness {
    let mut spec = market_spec();
    spec.fee_rate_bps = 100;
    Harness::with_market(spec)
}

#[test]
fn a_buy_that_does_not_cross_reserves_only_its_collateral_on_a_market_with_a_fee() {
    let mut h = fee_market();
    // 2,000 Yes at 0.5 is all of trader 2's 1,000 USDC: a maker pays no fee.
    let placed = h.gtc(2, YES, Side::Buy, 5_000, 2_000);
    assert_eq!(placed.status, OrderStatus::Live);
    let held = h.collateral(2);
    assert_eq!((held.free, held.reserved), (0, 1_000 * USDC));
}

#[test]
fn a_crossing_buy_on_a_market_with_a_fee_reserves_what_its_fills_cost() {
    let mut h = fee_market();
    h.gtc(1, YES, Side::Sell, 4_000, 500);
    // 500 fill at 0.4 (200 USDC + a 2 USDC fee), 1,500 rest at 0.5 (750 USDC): 952 USDC,
    // within the 1,000 USDC its limit needs.
    let placed = h.gtc(2, YES, Side::Buy, 5_000, 2_000);
    assert_eq!(placed.making_units, 200 * USDC);
    let held = h.collateral(2);
    assert_eq!((held.free, held.reserved), (48 * USDC, 750 * USDC));

    // At its limit the fills' fee is on top: 500 at 0.5 (250 + 2.5) and 1,500 resting
    // (750) is 1,002.5 USDC, more than trader 3 has.
    let mut h = fee_market();
    h.gtc(1, NO, Side::Buy, 5_000, 500); // a Yes ask at 0.5 (a MINT with a Yes buyer)
    let too_much = h.order(3, YES, Side::Buy, 5_000, 2_000);
    assert_eq!(h.reject(too_much), Reject::NotEnoughBalance);
    // 1,995 shares: 252.5 + 747.5 = 1,000 USDC exactly.
    let placed = h.gtc(3, YES, Side::Buy, 5_000, 1_995);
    assert_eq!(placed.making_units, 250 * USDC);
    let held = h.collateral(3);
    assert_eq!((held.free, held.reserved), (0, 747_500_000));
}

#[test]
fn a_delayed_buy_on_a_market_with_a_fee_reserves_the_largest_fee() {
    let mut spec = market_spec();
    spec.fee_rate_bps = 100;
    spec.taker_delay_ms = 1_000;
    let mut h = Harness::with_market(spec);
    h.gtc(1, YES, Side::Sell, 4_000, 1);
    // The book may move during the delay, so 1 % of its whole limit is held on top.
    let crossing = h.order(2, YES, Side::Buy, 5_000, 2_000);
    assert_eq!(h.reject(crossing), Reject::NotEnoughBalance);
    let placed = h.gtc(2, YES, Side::Buy, 5_000, 1_980);
    assert_eq!(placed.status, OrderStatus::Delayed);
    assert_eq!(h.collateral(2).reserved, 999_900_000);
}

#[test]
fn withdrawals_never_go_below_what_is_reserved() {
    let mut h = Harness::new();
    h.gtc(1, YES, Side::Buy, 5_000, 1_000); // reserves 500 USDC
    let reply = h.apply(Command::Withdraw {
        address: account(1),
        asset: Asset::Collateral,
        amount: 501 * USDC,
    });
    assert_eq!(
        reply,
        Reply::Rejected(Reject::WithdrawalExceedsFree {
            amount_units: 501 * USDC,
            free_units: 500 * USDC
        })
    );
    h.ok(Command::Withdraw {
        address: account(1),
        asset: Asset::Collateral,
        amount: 500 * USDC,
    });
}

#[test]
fn api_keys_are_limited_per_address() {
    let mut h = Harness::new();
    for i in 0..2u8 {
        h.ok(Command::CreateApiKey(ApiKeySpec {
            address: account(1),
            signer: signer(1),
            key_id: [i; 16],
            nonce: FixedBytes([i; 32]),
            max_keys_per_address: 2,
        }));
    }
    let reply = h.apply(Command::CreateApiKey(ApiKeySpec {
        address: account(1),
        signer: signer(1),
        key_id: [9; 16],
        nonce: FixedBytes([9; 32]),
        max_keys_per_address: 2,
    }));
    assert_eq!(reply, Reply::Rejected(Reject::ApiKeyLimit));
    let reused_nonce_at_the_limit = h.apply(Command::CreateApiKey(ApiKeySpec {
        address: account(1),
        signer: signer(1),
        key_id: [8; 16],
        nonce: FixedBytes([0; 32]),
        max_keys_per_address: 2,
    }));
    assert_eq!(
        reused_nonce_at_the_limit,
        Reply::Rejected(Reject::ApiKeyLimit),
        "API.md §7: at the limit the answer is the limit, even for a nonce already used"
    );
    h.ok(Command::DeleteApiKey {
        address: account(1),
        signer: account(1),
        key_id: [0; 16],
    });
    assert_eq!(h.engine.api_keys_of(&account(1)), vec![[1; 16]]);
    assert_eq!(h.engine.api_key(&[0; 16]), None);
}

#[test]
fn an_l1_nonce_makes_one_key_per_address_until_that_key_is_deleted() {
    let mut h = Harness::new();
    let spec = |address: u8, key: u8| {
        Command::CreateApiKey(ApiKeySpec {
            address: account(address),
            signer: account(address),
            key_id: [key; 16],
            nonce: FixedBytes([7; 32]),
            max_keys_per_address: 5,
        })
    };
    h.ok(spec(1, 1));
    assert_eq!(
        h.apply(spec(1, 2)),
        Reply::Rejected(Reject::ApiKeyNonceUsed)
    );
    h.ok(spec(2, 3)); // another address may use the same nonce
    h.ok(Command::DeleteApiKey {
        address: account(1),
        signer: account(1),
        key_id: [1; 16],
    });
    h.ok(spec(1, 2));
    assert_eq!(h.engine.api_keys_of(&account(1)), vec![[2; 16]]);
}

#[test]
fn a_counted_key_names_how_many_were_created_before_for_its_nonce() {
    let mut h = Harness::new();
    let counted = |key: u8, creations_before: u32| Command::CreateCountedApiKey {
        spec: ApiKeySpec {
            address: account(1),
            signer: account(1),
            key_id: [key; 16],
            nonce: FixedBytes([7; 32]),
            max_keys_per_address: 5,
        },
        creations_before,
    };
    assert_eq!(
        h.apply(counted(1, 1)),
        Reply::Rejected(Reject::ApiKeyRaced { creations: 0 }),
        "a count that is not the engine's"
    );
    h.ok(counted(1, 0));
    assert_eq!(
        h.engine
            .api_key_creations(&account(1), &FixedBytes([7; 32])),
        1
    );
    h.ok(Command::DeleteApiKey {
        address: account(1),
        signer: account(1),
        key_id: [1; 16],
    });
    // A create that read the count before the first key was made: refused, so the deleted
    // key's id (derived from count 0) never comes back.
    assert_eq!(
        h.apply(counted(1, 0)),
        Reply::Rejected(Reject::ApiKeyRaced { creations: 1 })
    );
    h.ok(counted(2, 1));
    assert_eq!(h.engine.api_keys_of(&account(1)), vec![[2; 16]]);
    // Journals written before counted keys: each legacy creation counts too.
    h.ok(Command::DeleteApiKey {
        address: account(1),
        signer: account(1),
        key_id: [2; 16],
    });
    h.ok(Command::CreateApiKey(ApiKeySpec {
        address: account(1),
        signer: account(1),
        key_id: [3; 16],
        nonce: FixedBytes([7; 32]),
        max_keys_per_address: 5,
    }));
    assert_eq!(
        h.engine
            .api_key_creations(&account(1), &FixedBytes([7; 32])),
        3
    );
    assert_eq!(
        h.engine.api_key_creation_counts(),
        vec![(account(1), FixedBytes([7; 32]), 3)]
    );
}

#[test]
fn an_api_key_for_a_smart_account_needs_a_signer_that_controls_it() {
    let mut h = Harness::new();
    let reply = h.apply(Command::CreateApiKey(ApiKeySpec {
        address: account(1),
        signer: signer(2),
        key_id: [5; 16],
        nonce: Bytes32::default(),
        max_keys_per_address: 5,
    }));
    assert_eq!(reply, Reply::Rejected(Reject::SignerNotController));
    h.ok(Command::CreateApiKey(ApiKeySpec {
        address: signer(3),
        signer: signer(3),
        key_id: [6; 16],
        nonce: Bytes32::default(),
        max_keys_per_address: 5,
    }));
}

#[test]
fn the_no_token_sees_the_mirrored_book() {
    let mut h = Harness::new();
    h.gtc(1, YES, Side::Buy, 4_000, 2); // Yes bid 0.40 = No ask 0.60
    h.gtc(1, NO, Side::Buy, 3_000, 3); // No bid 0.30 = Yes ask 0.70
    let yes = h.engine.book(&YES, 10).unwrap();
    assert_eq!(
        (yes.bids.clone(), yes.asks.clone()),
        (vec![(4_000, 2 * SHARE)], vec![(7_000, 3 * SHARE)])
    );
    let no = h.engine.book(&NO, 10).unwrap();
    assert_eq!(
        (no.bids, no.asks),
        (vec![(3_000, 3 * SHARE)], vec![(6_000, 2 * SHARE)])
    );
    assert_eq!(h.engine.best_price(&NO, Side::Buy), Some(3_000));
    assert_eq!(h.engine.best_price(&NO, Side::Sell), Some(6_000));
}

#[test]
fn a_snapshot_restores_the_same_state_hash_and_keeps_working() {
    let mut h = Harness::new();
    h.gtc(1, YES, Side::Sell, 5_000, 5);
    h.gtc(2, NO, Side::Buy, 4_000, 5);
    h.gtc(3, YES, Side::Buy, 5_000, 2);
    let bytes = h.engine.snapshot_bytes();
    let mut restored = Engine::from_snapshot_bytes(&bytes).unwrap();
    assert_eq!(restored.state_hash(), h.engine.state_hash());
    let order = h.order(4, YES, Side::Buy, 6_000, 4);
    let command = Command::PlaceOrder(order);
    let a = h.engine.apply(100, h.now_ns, &command);
    let b = restored.apply(100, h.now_ns, &command);
    assert_eq!(a, b);
    assert_eq!(restored.state_hash(), h.engine.state_hash());
    assert_eq!(restored.events(), h.engine.events());
}

/// The order events of order `id` in the last command's events: kind, status, filled.
fn order_events_of(h: &Harness, id: OrderId) -> Vec<(OrderEventKind, OrderStatus, u64)> {
    h.events()
        .into_iter()
        .filter_map(|e| match e {
            Event::Order { kind, order } if order.id == id => {
                Some((kind, order.status, order.filled_units))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn every_accepted_order_is_announced_by_a_placement_before_its_fills() {
    use OrderEventKind::{Placement, Update};
    use OrderStatus::{Live, Matched};
    let mut h = Harness::new();
    let passive = h.gtc(1, YES, Side::Sell, 4_000, 10);
    assert_eq!(
        order_events_of(&h, passive.order_id),
        [(Placement, Live, 0)]
    );
    // A taker filled at once: PLACEMENT (live, nothing filled) first, then its final state,
    // with the trade and the maker's update in between.
    let taker = h.gtc(2, YES, Side::Buy, 5_500, 4);
    assert_eq!(
        order_events_of(&h, taker.order_id),
        [(Placement, Live, 0), (Update, Matched, 4 * SHARE)]
    );
    let first_trade = h
        .events()
        .iter()
        .position(|e| matches!(e, Event::Trade(_)))
        .expect("a trade event");
    let placement = h
        .events()
        .iter()
        .position(|e| {
            matches!(
                e,
                Event::Order {
                    kind: Placement,
                    ..
                }
            )
        })
        .expect("a placement event");
    assert!(placement < first_trade, "announced before it trades");
    // A taker whose rest rests: PLACEMENT, then UPDATE live with what it filled.
    let rester = h.gtc(3, YES, Side::Buy, 4_000, 10);
    assert_eq!(
        order_events_of(&h, rester.order_id),
        [(Placement, Live, 0), (Update, Live, 6 * SHARE)]
    );
    // Crossing only its own order: self-trade prevention cancels that one, and the order
    // rests with nothing filled: its PLACEMENT said all there is to say.
    let crossing_own = h.gtc(3, YES, Side::Sell, 3_900, 2);
    assert_eq!(crossing_own.status, Live);
    assert_eq!(
        order_events_of(&h, crossing_own.order_id),
        [(Placement, Live, 0)]
    );
    assert_eq!(
        order_events_of(&h, rester.order_id),
        [(
            OrderEventKind::Cancellation,
            OrderStatus::Canceled,
            6 * SHARE
        )]
    );
}

/// The `/ws/user` dead-man switch (API.md §16): a connection's end cancels its address's
/// orders; a process that serves next cancels for the connections other processes left
/// armed (they ended unseen, with a crash); a clean stop disarms without cancelling.
#[test]
fn dead_man_switches_cancel_when_tripped_or_lost_with_their_process_and_not_once_disarmed() {
    let mut h = Harness::new();
    let ids: Vec<u64> = (1..=3)
        .map(|n| h.gtc(n, YES, Side::Buy, 4_000, 1).order_id)
        .collect();
    let arm = |process, connection, n| Command::ArmDeadManSwitch {
        process,
        connection,
        address: account(n),
    };
    for command in [arm(1, 1, 1), arm(1, 2, 2), arm(2, 1, 3)] {
        h.ok(command);
    }
    assert_eq!(h.engine.dead_man_switches_elsewhere(2), 2);
    // Trader 2's connection ends while process 1 runs: its order goes, its arming too.
    h.apply(Command::DeadManSwitchTripped {
        process: 1,
        connection: 2,
        address: account(2),
    });
    assert_eq!(h.cancelled(), vec![ids[1]]);
    // Process 2 serves now: process 1's connections ended with it (trader 1's); its own
    // (trader 3's) did not.
    h.apply(Command::DeadManSwitchesLost { process: 2 });
    assert_eq!(h.cancelled(), vec![ids[0]]);
    assert_eq!(h.engine.dead_man_switches_armed(), 1);
    h.apply(Command::DeadManSwitchesLost { process: 2 });
    assert_eq!(h.cancelled(), Vec::<u64>::new());
    // A clean stop forgets trader 3's without cancelling but keeps the one it was told to (a
    // connection that ended before the stop, whose cancel could not be journaled); a later
    // process cancels for that one only.
    let kept = h.gtc(4, YES, Side::Buy, 4_000, 1).order_id;
    h.ok(arm(2, 2, 4));
    h.ok(Command::DisarmDeadManSwitches { keep: vec![(2, 2)] });
    h.apply(Command::DeadManSwitchesLost { process: 3 });
    assert_eq!(h.cancelled(), vec![kept]);
    h.apply(Command::DeadManSwitchesLost { process: 3 });
    assert_eq!(h.cancelled(), Vec::<u64>::new());
    assert_eq!(h.engine.dead_man_switches_armed(), 0);
    assert_eq!(h.engine.open_order_count(), 1, "trader 3's order stays");
}

/// Tops trader `n`'s `asset` up to `units` below the largest balance.
fn fill_up_to_room(h: &mut Harness, n: u8, asset: Asset, units: u64) {
    let held = h.engine.balance(&account(n), asset).total();
    let max = h.engine.limits().balance_units_max;
    h.ok(Command::Deposit {
        address: account(n),
        asset,
        amount: max - units - held,
    });
}

/// No balance passes the bound a deposit is held to (API.md §8 and §9): a crossing order
/// whose fills could take its maker's balance past it is refused; a resting order that
/// cannot receive a fill's proceeds leaves the book when it would fill, as an own order
/// does; and the FOK and FAK judgements count the makers the taker phase would fill.
#[test]
fn fills_never_take_a_balance_past_the_largest_one() {
    let mut h = Harness::new();
    let max = h.engine.limits().balance_units_max;
    // A SELL that crosses, by a trader whose collateral has room for less than its size.
    h.gtc(2, YES, Side::Buy, 5_000, 10);
    fill_up_to_room(&mut h, 1, Asset::Collateral, 9 * SHARE);
    let sell = h.order(1, YES, Side::Sell, 5_000, 10);
    assert_eq!(
        h.reject(sell),
        Reject::BalanceLimit {
            collateral: true,
            max_units: max
        }
    );
    // The same trader's resting SELLs at 0.6: room for 9 x 0.6 = 5.4 USDC of proceeds. The
    // first (5 shares, 3 USDC) fits; the second then does not (2.4 left for 3 USDC).
    let mut h = Harness::new();
    fill_up_to_room(&mut h, 1, Asset::Collateral, 5_400_000);
    let first = h.gtc(1, YES, Side::Sell, 6_000, 5);
    let second = h.gtc(1, YES, Side::Sell, 6_000, 5);
    let third = h.gtc(3, YES, Side::Sell, 6_000, 5);
    // A FOK for 10 finds 5 + 5 (the second maker has no room, the third does).
    let mut fok = h.order(2, YES, Side::Buy, 6_000, 10);
    fok.order_type = OrderType::Fok;
    let placed = h.place(fok);
    assert_eq!(placed.status, OrderStatus::Matched);
    assert_eq!(placed.taking_units, 10 * SHARE);
    assert_eq!(h.cancelled(), vec![second.order_id]);
    let trades: Vec<u64> = h
        .events()
        .iter()
        .filter_map(|e| match e {
            Event::Trade(t) => Some(t.maker.order_id),
            _ => None,
        })
        .collect();
    assert_eq!(trades, vec![first.order_id, third.order_id]);
    let collateral = h.collateral(1);
    assert!(collateral.total() <= max, "{collateral:?}");
    // A FOK the makers with room cannot fill is refused, and nothing moves.
    let mut h = Harness::new();
    fill_up_to_room(&mut h, 1, Asset::Collateral, 1_000_000);
    h.gtc(1, YES, Side::Sell, 6_000, 5);
    let mut fok = h.order(2, YES, Side::Buy, 6_000, 5);
    fok.order_type = OrderType::Fok;
    assert_eq!(h.reject(fok), Reject::FokNotFilled);
    let mut fak = h.order(2, YES, Side::Buy, 6_000, 5);
    fak.order_type = OrderType::Fak;
    assert_eq!(h.reject(fak), Reject::FakNoMatch);
    assert_eq!(h.engine.open_order_count(), 1);
}

/// A delayed order is judged against the largest balance again when its delay ends: its
/// maker's collateral grew meanwhile, so its fills no longer fit and it is cancelled.
#[test]
fn a_delayed_order_whose_fills_no_longer_fit_is_cancelled_when_its_delay_ends() {
    let mut spec = support::market_spec();
    spec.taker_delay_ms = 250;
    let mut h = support::Harness::with_market(spec);
    h.gtc(2, YES, Side::Buy, 5_000, 10);
    let delayed = h.gtc(1, YES, Side::Sell, 5_000, 10);
    assert_eq!(delayed.status, OrderStatus::Delayed);
    fill_up_to_room(&mut h, 1, Asset::Collateral, 9 * SHARE);
    h.advance_ms(300);
    h.apply(Command::Tick);
    assert_eq!(h.cancelled(), vec![delayed.order_id]);
    assert!(h.collateral(1).total() <= h.engine.limits().balance_units_max);
    assert_eq!(h.engine.open_order_count(), 1, "the bid stays");
}
