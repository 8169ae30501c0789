//! Room made at start-up: vectors with their capacity reserved and, when asked, their
//! pages touched (prefaulted), so that the operating system maps them before the first
//! command instead of on the sequencer thread. On the machines measured a first touch of a
//! page costs a few microseconds: more than a whole command.

/// An empty vector with room for `capacity` items; with `prefault`, every page of that room
/// is written once (with `filler`) before the vector is emptied again.
pub(crate) fn vec_with_room<T: Clone>(capacity: usize, filler: T, prefault: bool) -> Vec<T> {
    let mut items = Vec::with_capacity(capacity);
    if prefault {
        // The writes are the point: hiding the filler keeps the optimiser from turning a
        // fresh allocation filled with zeros into `calloc`, which touches nothing.
        items.resize(capacity, std::hint::black_box(filler));
        std::hint::black_box(&mut items);
        items.clear();
    }
    items
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn room_is_made_and_left_empty() {
        for prefault in [false, true] {
            let v = vec_with_room(1_000, 7u64, prefault);
            assert!(v.is_empty());
            assert!(v.capacity() >= 1_000);
        }
    }
}
