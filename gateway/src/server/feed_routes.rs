//! Which sockets of an event loop want which feed frames.

use super::*;

/// Which sockets of this event loop want which feed frames: an index by market and by
/// account, so a frame is offered only to its subscribers.
#[derive(Default)]
pub(super) struct FeedRoutes {
    by_market: HashMap<ladder_engine::Bytes32, Vec<usize>>,
    by_user: HashMap<ladder_engine::Address, Vec<usize>>,
    all_markets: Vec<usize>,
    current: HashMap<usize, Interests>,
}

impl FeedRoutes {
    /// Records what socket `slot` wants now.
    pub(super) fn update(&mut self, slot: usize, interests: Interests) {
        if self.current.get(&slot) == Some(&interests) {
            return;
        }
        if let Some(old) = self.current.remove(&slot) {
            for market in old.markets {
                remove_slot(self.by_market.get_mut(&market), slot);
            }
            if let Some(user) = old.user {
                remove_slot(self.by_user.get_mut(&user), slot);
            }
            self.all_markets.retain(|s| *s != slot);
        }
        self.by_market.retain(|_, v| !v.is_empty());
        self.by_user.retain(|_, v| !v.is_empty());
        if interests == Interests::default() {
            return;
        }
        for market in &interests.markets {
            self.by_market.entry(*market).or_default().push(slot);
        }
        if let Some(user) = interests.user {
            self.by_user.entry(user).or_default().push(slot);
        }
        if interests.all_markets {
            self.all_markets.push(slot);
        }
        self.current.insert(slot, interests);
    }

    /// At most how many sockets `item` goes to (without listing them).
    pub(super) fn count_for(&self, item: &crate::ws::feed::FeedItem) -> usize {
        use crate::ws::feed::FeedItem;
        match item {
            FeedItem::User { address, .. } => self.by_user.get(address).map_or(0, Vec::len),
            FeedItem::Market { market, .. } => {
                self.by_market.get(market).map_or(0, Vec::len) + self.all_markets.len()
            }
        }
    }

    /// The sockets that want `item`.
    pub(super) fn slots_for(&self, item: &crate::ws::feed::FeedItem) -> Vec<usize> {
        use crate::ws::feed::FeedItem;
        match item {
            FeedItem::User { address, .. } => {
                self.by_user.get(address).cloned().unwrap_or_default()
            }
            FeedItem::Market { market, .. } => {
                let mut slots = self.by_market.get(market).cloned().unwrap_or_default();
                for slot in &self.all_markets {
                    if !slots.contains(slot) {
                        slots.push(*slot);
                    }
                }
                slots
            }
        }
    }
}

fn remove_slot(list: Option<&mut Vec<usize>>, slot: usize) {
    if let Some(list) = list {
        list.retain(|s| *s != slot);
    }
}
