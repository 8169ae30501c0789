//! The order amounts of a price and a size, against the known answers of
//! `protocol/tests/data/amounts.json`, which the Python client's tests read too: both clients
//! turn the same price and size into the same signed amounts, and refuse the same inputs.

use ladder_protocol::units::amounts_from_price_and_size;
use ladder_protocol::{parse_price_ticks, Side};
use serde_json::Value;

const TABLE_PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/amounts.json");

/// The variant name of an error (`TooPrecise { text: .. }` is `TooPrecise`).
fn variant(error: &impl std::fmt::Debug) -> String {
    format!("{error:?}")
        .split(|c: char| !c.is_alphanumeric())
        .next()
        .unwrap_or_default()
        .to_string()
}

/// The row's outcome as the table writes it: `Ok((price_ticks, maker, taker))` or the error.
fn outcome(row: &Value) -> Result<(u32, u64, u64), String> {
    let field = |key: &str| row[key].as_str().unwrap_or_else(|| panic!("{row}: {key}"));
    let side = match field("side") {
        "BUY" => Side::Buy,
        "SELL" => Side::Sell,
        other => panic!("{row}: side {other}"),
    };
    let ticks = parse_price_ticks(field("price")).map_err(|e| variant(&e))?;
    let shares: u64 = field("size").parse().map_err(|_| "Malformed".to_string())?;
    let (maker, taker) =
        amounts_from_price_and_size(side, ticks, shares).map_err(|e| variant(&e))?;
    Ok((ticks, maker, taker))
}

#[test]
fn every_price_and_size_gives_the_tables_amounts_or_its_refusal() {
    let text = std::fs::read_to_string(TABLE_PATH)
        .unwrap_or_else(|e| panic!("cannot read {TABLE_PATH}: {e}"));
    let table: Vec<Value> = serde_json::from_str(&text).expect("the table is JSON");
    assert!(table.len() >= 30, "a table of {} rows", table.len());
    let (mut amounts, mut refusals) = (0, 0);
    for row in &table {
        let got = outcome(row);
        match row.get("error").and_then(Value::as_str) {
            Some(error) => {
                assert_eq!(got, Err(error.to_string()), "{row}");
                refusals += 1;
            }
            None => {
                let number = |key: &str| -> u64 {
                    row[key]
                        .as_str()
                        .and_then(|t| t.parse().ok())
                        .unwrap_or_else(|| panic!("{row}: {key}"))
                };
                let want = (
                    number("price_ticks") as u32,
                    number("makerAmount"),
                    number("takerAmount"),
                );
                assert_eq!(got, Ok(want), "{row}");
                amounts += 1;
            }
        }
    }
    assert!(
        amounts > 0 && refusals > 0,
        "{amounts} amounts, {refusals} refusals"
    );
}
