//! The WebSocket connections of an event loop: the upgrade, frames in and out, book
//! snapshots read on the sequencer, feed frames, cancel-on-disconnect, slow consumers.

use super::*;

/// The kernel send buffer asked for a `/ws/user` connection with `cancel_on_disconnect`
/// (Linux doubles it for its own bookkeeping): enough for a burst of frames to a client that
/// reads, small beside the outbound queue's 1 MiB bound.
const DEAD_MAN_SWITCH_SEND_BUFFER_BYTES: usize = 128 * 1024;

/// How long a stopping loop waits for the answers to its dead-man switch records.
const DEAD_MAN_STOP_WAIT: Duration = Duration::from_secs(2);

/// What a loop journals for a `/ws/user` connection with `cancel_on_disconnect` (API.md §16):
/// its arming when it is accepted, and the cancel when it ends. Both go through the loop's
/// ring in that order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DeadManRecord {
    /// The API key's address.
    address: ladder_engine::Address,
    /// The connection's number within this run.
    connection: u64,
    /// Whether the connection ended (the cancel) rather than began (the arming).
    ended: bool,
}

impl DeadManRecord {
    /// The journaled command of this record, for connections of run `process`.
    fn command(self, process: u64) -> ladder_engine::Command {
        let (address, connection) = (self.address, self.connection);
        if self.ended {
            ladder_engine::Command::DeadManSwitchTripped {
                process,
                connection,
                address,
            }
        } else {
            ladder_engine::Command::ArmDeadManSwitch {
                process,
                connection,
                address,
            }
        }
    }
}

/// The books of `tokens`, read on the sequencer thread for a `/ws/market` subscription.
pub(super) type BookAnswer = Vec<(ladder_engine::Bytes32, Option<ladder_engine::BookView>)>;

impl Worker {
    /// Turns the HTTP connection at `index` into a WebSocket connection.
    pub(super) fn upgrade(
        &mut self,
        index: usize,
        request: &Request,
        kind: WsKind,
        peer: SocketAddr,
    ) {
        let handshake = match crate::ws::handshake_response(request) {
            _ if !self.service.ws_ready() => {
                Err(Response::error(Status::Unavailable, "service not ready").retry_after(1))
            }
            _ if let Err(wait_s) = self.service.admit_upgrade(peer) => {
                Err(Response::rate_limited(wait_s))
            }
            Err(why) => Err(Response::error(Status::BadRequest, why)),
            // Answers before it not yet taken by the client, computed or not: the 101 would
            // have to wait behind them (written at once, it would cut them).
            Ok(_)
                if self.conns[index]
                    .as_ref()
                    .is_some_and(|c| !c.slots.is_empty() || !c.write_buf.is_empty()) =>
            {
                Err(Response::error(
                    Status::BadRequest,
                    "websocket upgrade behind pipelined requests",
                ))
            }
            Ok(bytes) => Ok(bytes),
        };
        let handshake = match handshake {
            Ok(bytes) => bytes,
            Err(response) => {
                self.service
                    .count_answer(Some(request.path()), response.status.code());
                if let Some(conn) = self.conns[index].as_mut() {
                    conn.push_ready(&response.closing(), false);
                }
                return;
            }
        };
        let Some(mut conn) = self.conns[index].take() else {
            return;
        };
        self.free.push(index);
        let _ = self.lp.registry.deregister(conn.stream.socket());
        // Counted before the client learns of the upgrade (and before it can subscribe), so
        // the feed encodes every frame after its snapshot and /metrics already shows it.
        self.count_websocket(kind, true);
        if write_all_now(&mut conn.stream, &handshake).is_err() {
            self.count_websocket(kind, false);
            self.shared.connection_closed(peer.ip());
            return;
        }
        let slot = self.sockets_free.pop().unwrap_or_else(|| {
            self.sockets.push(None);
            self.sockets.len() - 1
        });
        self.generation = self.generation.wrapping_add(1);
        let leftover = std::mem::take(&mut conn.read_buf);
        let mut socket = WsConn::new(
            conn.stream,
            leftover,
            kind,
            self.generation,
            peer.ip(),
            self.shared.ws_user_overflow_bytes.clone(),
        );
        let token = Token(FIRST_WEBSOCKET + slot);
        let registered = self.lp.registry.register(
            socket.stream_mut(),
            token,
            Interest::READABLE | Interest::WRITABLE,
        );
        if registered.is_err() {
            self.sockets_free.push(slot);
            self.count_websocket(kind, false);
            self.shared.connection_closed(peer.ip());
            return;
        }
        // Upgraded after this stopping loop closed its connections: closed at once too.
        if self.sockets_closed_at.is_some() {
            socket.go_away(self.shared.changing_role.load(Ordering::Acquire));
        }
        self.sockets[slot] = Some(socket);
        self.shared.websockets.fetch_add(1, Ordering::Relaxed);
        self.serve_socket(slot);
    }

    /// Counts a WebSocket connection of `kind` opening or closing: in the service's count by
    /// kind (the feed encodes a kind's frames only while one is open) and in this loop's
    /// (the feed hands frames only to loops that have one).
    fn count_websocket(&self, kind: WsKind, opening: bool) {
        let (by_kind, here) = (self.shared.websockets_of(kind), &self.lp.websockets);
        if opening {
            by_kind.fetch_add(1, Ordering::SeqCst);
            here.fetch_add(1, Ordering::SeqCst);
        } else {
            by_kind.fetch_sub(1, Ordering::SeqCst);
            here.fetch_sub(1, Ordering::SeqCst);
        }
    }

    pub(super) fn serve_socket(&mut self, slot: usize) {
        let Some(socket) = self.sockets.get_mut(slot).and_then(|s| s.as_mut()) else {
            return;
        };
        let (service, peer) = (&self.service, socket.peer_ip);
        let actions = socket.read(&|units| service.admit_ws_message(peer, units));
        if socket.has_unread() {
            self.sockets_unread.push((slot, socket.generation));
        }
        for action in actions {
            self.act(slot, action);
        }
        self.flush_socket(slot);
    }

    /// Reads on from the sockets whose last read stopped at its budget (a client sending
    /// without pause): one more turn's worth each, after the loop served everything else.
    pub(super) fn serve_unread_sockets(&mut self) {
        for (slot, generation) in std::mem::take(&mut self.sockets_unread) {
            let same = self.sockets[slot]
                .as_ref()
                .is_some_and(|socket| socket.generation == generation);
            if same {
                self.serve_socket(slot);
            }
        }
    }

    pub(super) fn act(&mut self, slot: usize, action: Action) {
        match action {
            Action::AuthenticateUser {
                auth,
                markets,
                cancel_on_disconnect,
            } => {
                let mut result = self.service.ws_user_auth(&auth);
                if cancel_on_disconnect && result.is_ok() {
                    if let Some(why) = self.service.dead_man_switch_refusal() {
                        result = Err(why.to_string());
                    }
                }
                let Some(socket) = self.sockets[slot].as_mut() else {
                    return;
                };
                // A stopping service arms no more switches: the stop disarms them.
                let stopping = self.shared.stop.load(Ordering::Acquire);
                let armed = match &result {
                    Ok(user) if cancel_on_disconnect && !stopping => {
                        // A dead-man switch's connection: the kernel's share of its outbound
                        // queue stays small, so the 1 MiB bound and the catch-up second past
                        // it decide when a client that stopped reading is dropped and its
                        // orders go (autotuning would
                        // let the kernel hold megabytes more first). Other connections keep
                        // autotuning, for subscribers far away.
                        let _ = socket2::SockRef::from(&*socket.stream_mut())
                            .set_send_buffer_size(DEAD_MAN_SWITCH_SEND_BUFFER_BYTES);
                        let connection = self
                            .shared
                            .next_dead_man_connection
                            .fetch_add(1, Ordering::Relaxed);
                        Some(DeadManRecord {
                            address: user.address,
                            connection,
                            ended: false,
                        })
                    }
                    _ => None,
                };
                socket.authenticated(result, markets, armed.map(|record| record.connection));
                if let Some(record) = armed {
                    // Journaled so that a crash, which ends the connection unseen, still
                    // cancels: the next run finds it armed (`DeadManSwitchesLost`).
                    self.dead_man_records.push(record);
                    self.submit_dead_man_records();
                }
            }
            Action::Snapshot(tokens) => {
                let Some(generation) = self.sockets[slot].as_ref().map(|s| s.generation) else {
                    return;
                };
                let (query, books) = ladder_sequencer::query(move |e: &ladder_engine::Engine| {
                    let books: BookAnswer =
                        tokens.iter().map(|t| (*t, e.book(t, usize::MAX))).collect();
                    books
                });
                let token = self.next_ticket;
                self.next_ticket += 1;
                let ticket = Ticket {
                    sink: self.lp.sink_index,
                    token,
                };
                let submission = Submission {
                    ticket,
                    work: ladder_sequencer::Work::Query(query),
                };
                match self.submitter.try_submit(submission) {
                    Ok(()) => {
                        self.ws_tickets.insert(token, (slot, generation, books));
                    }
                    Err(_) => {
                        if let Some(socket) = self.sockets[slot].as_mut() {
                            socket.fail(CloseCode::Again, "service busy, subscribe again shortly");
                        }
                    }
                }
            }
        }
    }

    pub(super) fn socket_snapshot(
        &mut self,
        (slot, generation): (usize, u32),
        books: ladder_sequencer::Answer<BookAnswer>,
        completion: Completion,
    ) {
        let Some(socket) = self.sockets.get_mut(slot).and_then(|s| s.as_mut()) else {
            return;
        };
        if socket.generation != generation {
            return;
        }
        if let Completion::Answered { .. } = completion {
            if let Some(books) = books.take() {
                let now_ms = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_millis() as u64)
                    .unwrap_or(0);
                socket.snapshot(books, now_ms);
            }
        }
        self.flush_socket(slot);
    }

    /// Takes the frames queued for this loop (those a releasing thread left in the seat
    /// first) and writes them to their sockets.
    pub(super) fn take_feed(&mut self) {
        let mut batches = std::mem::take(&mut self.held_feed);
        batches.extend(self.lp.feed.try_iter());
        self.deliver_feed(&batches);
    }

    /// Run in a sleeping loop's seat: writes the queued frames if they go to at most
    /// `SEAT_FRAMES_MAX` sockets in all, else leaves them to the loop. Whether it wrote them.
    pub(super) fn take_feed_in_seat(&mut self) -> bool {
        let batches: Vec<FeedBatch> = self.lp.feed.try_iter().collect();
        let deliveries: usize = batches
            .iter()
            .flat_map(|batch| batch.iter())
            .map(|item| self.routes.count_for(item))
            .sum();
        // Frames already left for the loop go first: these wait behind them.
        if deliveries > SEAT_FRAMES_MAX || !self.held_feed.is_empty() {
            self.held_feed.extend(batches);
            return false;
        }
        self.in_seat = true;
        self.deliver_feed(&batches);
        self.in_seat = false;
        true
    }

    fn deliver_feed(&mut self, batches: &[FeedBatch]) {
        let mut touched = std::collections::BTreeSet::new();
        for batch in batches {
            for item in batch.iter() {
                let for_user = matches!(item, crate::ws::feed::FeedItem::User { .. });
                for slot in self.routes.slots_for(item) {
                    if let Some(socket) = self.sockets[slot].as_mut() {
                        // A user subscription's key is looked at once per delivery round: a
                        // deleted key's subscription ends before it is sent anything more.
                        if for_user && touched.insert(slot) {
                            end_if_key_deleted(&*self.service, socket);
                        }
                        socket.deliver(item);
                        touched.insert(slot);
                    }
                }
            }
        }
        for slot in touched {
            self.flush_socket(slot);
        }
    }

    pub(super) fn flush_socket(&mut self, slot: usize) {
        let Some(socket) = self.sockets.get_mut(slot).and_then(|s| s.as_mut()) else {
            return;
        };
        socket.flush();
        if socket.take_slow_close() {
            self.shared
                .ws_slow_consumer_closes
                .fetch_add(1, Ordering::Relaxed);
        }
        self.routes.update(slot, socket.interests());
        let ended_cancel = socket.take_ended_cancel();
        let closed = socket.is_closed();
        // Every way a connection ends counts but a service shutdown (API.md §16), and the
        // orders go as it starts closing: a slow consumer or a client that stopped answering
        // pings may never read its close frame, and its grace is no time to keep quotes.
        if let Some((address, connection)) = ended_cancel {
            if !self.shared.stop.load(Ordering::Acquire) {
                self.dead_man_records.push(DeadManRecord {
                    address,
                    connection,
                    ended: true,
                });
                // In a sleeping loop's seat the loop is woken to submit it.
                if !self.in_seat {
                    self.submit_dead_man_records();
                }
            }
        }
        if closed {
            self.routes.update(slot, Interests::default());
            if let Some(mut socket) = self.sockets[slot].take() {
                let _ = self.lp.registry.deregister(socket.stream_mut());
                self.count_websocket(socket.kind, false);
                self.shared.connection_closed(socket.peer_ip);
            }
            self.sockets_free.push(slot);
            self.shared.websockets.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Tells every WebSocket client that the service is stopping (close 1001), once, as
    /// RFC 6455 7.4.1 asks of a server going away; a stop cancels no dead-man switch's
    /// orders (`flush_socket` checks the stop flag).
    pub(super) fn close_sockets_going_away(&mut self) {
        let changing_role = self.shared.changing_role.load(Ordering::Acquire);
        for slot in 0..self.sockets.len() {
            if let Some(socket) = self.sockets[slot].as_mut() {
                socket.go_away(changing_role);
                self.flush_socket(slot);
            }
        }
    }

    /// Submits the dead-man switch records in order: the armings of new connections, and for
    /// each one that ended a journaled cancel-all, whose answer comes back to this loop
    /// ([`Worker::dead_man_record_answered`]); kept for the next turn of the loop while the
    /// ring is full.
    pub(super) fn submit_dead_man_records(&mut self) {
        while let Some(&record) = self.dead_man_records.first() {
            let token = self.next_ticket;
            let submission = Submission {
                ticket: Ticket {
                    sink: self.lp.sink_index,
                    token,
                },
                work: ladder_sequencer::Work::Command(record.command(self.shared.process)),
            };
            match self.submitter.try_submit(submission) {
                Ok(()) => {
                    self.next_ticket += 1;
                    self.dead_man_records.remove(0);
                    self.dead_man_in_flight.insert(token, record);
                    self.request_submitted();
                }
                Err(ladder_sequencer::SubmitError::Full(_)) => return,
                Err(ladder_sequencer::SubmitError::Stopped(_)) => {
                    self.dead_man_records.clear();
                    return;
                }
            }
        }
    }

    /// Takes the answer to a dead-man switch record, if `completion` is one. A cancel is
    /// counted when carried out; submitted again at the next sweep when the sequencer refused
    /// it for a while (too few standbys for `--replicas`, a full journal), so that the orders
    /// still go once writes are taken again (API.md §16); dropped when this service is no
    /// longer the one that writes (a standby, or a primary that lost its lease). A refused
    /// arming is not tried again: the switch still trips from this loop's memory, and only a
    /// crash would end it unseen. Whether it was one.
    pub(super) fn dead_man_record_answered(&mut self, completion: &Completion) -> bool {
        // Looked at for every completion: nothing to hash while none is in flight.
        if self.dead_man_in_flight.is_empty() {
            return false;
        }
        let token = completion.ticket().token;
        let Some(record) = self.dead_man_in_flight.remove(&token) else {
            return false;
        };
        self.request_answered();
        let requester = record.address;
        match completion {
            // Journaled and applied, only not confirmed (a lost standby, etcd that took no
            // position): carried out, and never sent again (a trip sent again would cancel
            // what the market maker placed since).
            Completion::Refused { reason, .. }
                if ladder_sequencer::applied_anyway(reason) && record.ended =>
            {
                self.dead_man_unarmed.remove(&record.connection);
                self.shared
                    .cancels_on_disconnect
                    .fetch_add(1, Ordering::Relaxed);
            }
            Completion::Refused { reason, .. } if ladder_sequencer::applied_anyway(reason) => {}
            Completion::Refused { reason, .. } if !record.ended => {
                self.dead_man_unarmed.insert(record.connection);
                tracing::warn!(%requester, reason, "cancel-on-disconnect armed in memory only");
            }
            // Tried again while the refusal lasts: a full disk, too few standbys, or (for a
            // connection this node armed as the writer) a lost lease, which this run may
            // win back. Another leader cancels for it meanwhile (`DeadManSwitchesLost`), and
            // this run then ends.
            Completion::Refused { reason, .. }
                if refusal_passes(reason)
                    || !self.dead_man_unarmed.contains(&record.connection) =>
            {
                self.dead_man_later.push(record);
            }
            Completion::Refused { reason, .. } => {
                self.dead_man_unarmed.remove(&record.connection);
                tracing::warn!(%requester, reason, "cancel-on-disconnect not carried out here");
            }
            _ if record.ended => {
                self.dead_man_unarmed.remove(&record.connection);
                self.shared
                    .cancels_on_disconnect
                    .fetch_add(1, Ordering::Relaxed);
            }
            _ => {}
        }
        true
    }

    /// Whether a stopping loop may leave: its dead-man switch records are answered, or
    /// `DEAD_MAN_STOP_WAIT` passed since it saw the stop.
    pub(super) fn dead_man_records_settled(&self) -> bool {
        self.dead_man_in_flight.is_empty()
            || self
                .stop_seen
                .is_some_and(|seen| seen.elapsed() >= DEAD_MAN_STOP_WAIT)
    }

    /// At a stopping loop's end: hands the cancels of connections that ended and were not
    /// seen journaled (not submitted, refused for a while, unanswered) to the runtime, which
    /// journals them or keeps them armed past the stop.
    pub(super) fn hand_over_dead_man_records(&mut self) {
        // No longer waited for here: the other loops' stops no longer wait for them either.
        self.shared
            .requests_in_flight
            .fetch_sub(self.dead_man_in_flight.len(), Ordering::AcqRel);
        let unfinished = self
            .dead_man_records
            .drain(..)
            .chain(self.dead_man_later.drain(..))
            .chain(self.dead_man_in_flight.drain().map(|(_, record)| record))
            .filter(|record| record.ended)
            .map(|record| (record.address, record.connection));
        self.shared.dead_man_unfinished.lock().extend(unfinished);
    }

    /// Ends the `/ws/user` subscriptions whose API key was deleted (an API key was: each
    /// subscription's key is looked at).
    pub(super) fn end_deleted_keys_subscriptions(&mut self) {
        for slot in 0..self.sockets.len() {
            let Some(socket) = self.sockets[slot].as_mut() else {
                continue;
            };
            if socket.user_key().is_some() {
                end_if_key_deleted(&*self.service, socket);
                self.flush_socket(slot);
            }
        }
    }

    pub(super) fn sweep_sockets(&mut self) {
        // Cancels refused for a while are tried again at each sweep, not at each turn.
        if !self.shared.stop.load(Ordering::Acquire) {
            let later = std::mem::take(&mut self.dead_man_later);
            self.dead_man_records.extend(later);
        }
        let limit = Duration::from_secs(crate::ws::SUBSCRIBE_TIMEOUT_S);
        let ping_after = self.limits.ws_ping_after;
        for slot in 0..self.sockets.len() {
            if let Some(socket) = self.sockets[slot].as_mut() {
                if !socket.subscribed() && socket.opened.elapsed() > limit {
                    socket.fail(CloseCode::Policy, "no subscribe message within 10 s");
                } else if socket.subscribed() {
                    end_if_key_deleted(&*self.service, socket);
                    socket.close_if_overdue();
                    socket.keep_alive(ping_after);
                    socket.release_stale_books();
                }
            }
            self.flush_socket(slot);
        }
    }
}

/// Whether the sequencer's refusal `reason` passes once the service takes writes again (too
/// few standbys, a full journal), rather than saying this service no longer writes.
fn refusal_passes(reason: &str) -> bool {
    [
        ladder_sequencer::REPLICA_UNAVAILABLE,
        ladder_sequencer::JOURNAL_FULL,
    ]
    .contains(&reason)
}

/// Ends `socket`'s user subscription if the API key it authenticated with was deleted
/// (API.md §16: a deleted key fails at once, on every channel).
fn end_if_key_deleted(service: &dyn Service, socket: &mut WsConn) {
    if socket
        .user_key()
        .is_some_and(|key_id| !service.api_key_live(&key_id))
    {
        socket.end_for_deleted_key();
    }
}

/// Writes a few bytes to a fresh non-blocking socket, waiting briefly if it is full.
fn write_all_now(stream: &mut crate::stream::Stream, mut bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let deadline = Instant::now() + Duration::from_secs(1);
    while !bytes.is_empty() {
        match stream.write(bytes) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && Instant::now() < deadline => {
                std::thread::yield_now()
            }
            Err(e) => return Err(e),
        }
    }
    loop {
        match stream.flush() {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && Instant::now() < deadline => {
                std::thread::yield_now()
            }
            Err(e) => return Err(e),
        }
    }
}
