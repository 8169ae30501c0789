//! The HTTP connections of an event loop: accept, read and parse, dispatch to the service,
//! hand work to the sequencer or the deferred pool, and write answers in request order.

use super::*;

impl Worker {
    pub(super) fn accept(&mut self) {
        loop {
            match self.lp.listener.accept() {
                Ok((mut stream, peer)) => {
                    if self.shared.connections.load(Ordering::Relaxed)
                        >= self.limits.connections_max
                    {
                        self.shared.refused_full.fetch_add(1, Ordering::Relaxed);
                        drop(stream);
                        continue;
                    }
                    if !self
                        .shared
                        .peers
                        .try_open(peer.ip(), self.limits.connections_per_ip_max)
                    {
                        self.shared.refused_per_ip.fetch_add(1, Ordering::Relaxed);
                        drop(stream);
                        continue;
                    }
                    let _ = stream.set_nodelay(true);
                    let index = self.free.pop().unwrap_or_else(|| {
                        self.conns.push(None);
                        self.conns.len() - 1
                    });
                    let token = Token(index + FIRST_CONNECTION);
                    let registered = self.lp.registry.register(
                        &mut stream,
                        token,
                        Interest::READABLE | Interest::WRITABLE,
                    );
                    let stream = registered
                        .and_then(|_| crate::stream::Stream::new(stream, self.limits.tls.as_ref()));
                    let Ok(stream) = stream else {
                        self.free.push(index);
                        self.shared.peers.close(peer.ip());
                        continue;
                    };
                    self.generation = self.generation.wrapping_add(1);
                    self.conns[index] = Some(Connection::new(stream, peer, self.generation));
                    self.shared.connections.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    return;
                }
            }
        }
    }

    /// Serves a readiness event of connection `index`: reads when it is `readable` (or
    /// TLS, whose state may want a read either way), then answers and writes.
    pub(super) fn serve(&mut self, index: usize, readiness: Readiness) {
        let Some(conn) = self.conns.get_mut(index).and_then(|c| c.as_mut()) else {
            return;
        };
        let open = if readiness.readable || !conn.stream.is_plain() {
            conn.fill(readiness.read_closed).unwrap_or_default()
        } else {
            true
        };
        if !open {
            conn.peer_closed = true;
        }
        self.parse_and_dispatch(index);
        self.flush(index);
    }

    pub(super) fn parse_and_dispatch(&mut self, index: usize) {
        let stopping = self.stop_seen.is_some();
        loop {
            let Some(conn) = self.conns[index].as_mut() else {
                return;
            };
            if conn.close_after_flush || conn.stop_reading {
                return;
            }
            if conn.waits_for_client() {
                // What already arrived waits for the client, not for the rest of a request:
                // the request timeout starts again once parsing does.
                conn.request_started = None;
                conn.paused_for_client = true;
                return;
            }
            if conn.request_started.is_none() && !conn.read_buf.is_empty() {
                conn.request_started = Some(Instant::now());
            }
            if conn.read_buf.is_empty() {
                if refill(conn) {
                    continue;
                }
                end_of_requests(conn);
                return;
            }
            let advanced = conn.progress.advance(&conn.read_buf);
            if conn.progress.take_continue() {
                // After the answers to the requests before it, as every answer goes.
                conn.push_interim(b"HTTP/1.1 100 Continue\r\n\r\n");
            }
            match advanced {
                Ok(None) if refill(conn) => continue,
                Ok(None) => {
                    end_of_requests(conn);
                    return;
                }
                Ok(Some((mut request, used))) => {
                    request.peer = Some(conn.peer.ip());
                    conn.read_buf.drain(..used);
                    conn.request_started = if conn.read_buf.is_empty() {
                        None
                    } else {
                        Some(Instant::now())
                    };
                    // A stopping loop takes no new request (a client that keeps sending would
                    // keep it from ever being idle): it is answered, and the connection ends.
                    if stopping {
                        let reason = match self.shared.changing_role.load(Ordering::Acquire) {
                            true => "node changing role: connect again",
                            false => "service shutting down",
                        };
                        let response = Response::error(Status::Unavailable, reason)
                            .retry_after(1)
                            .closing();
                        self.service
                            .count_answer(Some(request.path()), response.status.code());
                        conn.read_buf.clear();
                        conn.stop_reading = true;
                        conn.push_ready(&response, request.method == Method::Head);
                        return;
                    }
                    let peer = conn.peer;
                    if let Some(kind) = crate::ws::upgrade_kind(&request) {
                        self.upgrade(index, &request, kind, peer);
                        return;
                    }
                    let mut outcome = self.dispatch(&request, peer);
                    if request.keep_alive && asks_keep_alive(&request) {
                        outcome = super::finishing(outcome, Response::keeping_alive);
                    }
                    self.queue(index, &request, outcome);
                }
                Err(error) => {
                    let response = http_error_response(error).closing();
                    self.service.count_answer(None, response.status.code());
                    conn.read_buf.clear();
                    conn.progress = Default::default();
                    conn.push_ready(&response, false);
                    return;
                }
            }
        }
    }

    pub(super) fn dispatch(&self, request: &Request, peer: SocketAddr) -> Outcome {
        let service = self.service.clone();
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            service.handle(request, peer)
        })) {
            Ok(outcome) => outcome,
            Err(_) => {
                tracing::error!(path = request.path(), "handler panicked");
                Outcome::error(Status::Internal, "internal error")
            }
        }
    }

    pub(super) fn queue(&mut self, index: usize, request: &Request, outcome: Outcome) {
        let head_only = request.method == Method::Head;
        let Some(conn) = self.conns[index].as_mut() else {
            return;
        };
        match outcome {
            Outcome::Respond(mut response) => {
                if !request.keep_alive {
                    response.close = true;
                    conn.stop_reading = true;
                }
                conn.push_ready(&response, head_only);
            }
            Outcome::Submit(work, completer) => {
                let completer: crate::handler::Completer = if request.keep_alive {
                    completer
                } else {
                    conn.stop_reading = true;
                    Box::new(move |c| completer(c).closing())
                };
                let (serial, generation) = conn.push_pending(completer, head_only);
                self.submit_for(index, generation, serial, *work);
            }
            Outcome::Continue(work, continuation) => {
                let continuation: crate::handler::Continuation = if request.keep_alive {
                    continuation
                } else {
                    conn.stop_reading = true;
                    Box::new(move |c| closing(continuation(c)))
                };
                let (serial, generation) =
                    conn.push_pending(Box::new(crate::handler::unexpected), head_only);
                self.continue_for(index, generation, serial, *work, continuation);
            }
            Outcome::Defer(job) => {
                let keep_alive = request.keep_alive;
                if !keep_alive {
                    conn.stop_reading = true;
                }
                let (serial, generation) =
                    conn.push_pending(Box::new(crate::handler::unexpected), head_only);
                let job: crate::deferred::Job = if keep_alive {
                    job
                } else {
                    Box::new(move || closing(job()))
                };
                self.defer_for(index, generation, serial, job);
            }
        }
    }

    /// Submits `work` for the pending slot `serial` of connection `index`; a full or
    /// stopped ring answers the slot at once.
    pub(super) fn submit_for(
        &mut self,
        index: usize,
        generation: u32,
        serial: u64,
        work: Work,
    ) -> Option<u64> {
        // Only commands' completers may run in the seat of a sleeping loop.
        let seat = if matches!(work, Work::Command(_) | Work::Commands(_)) {
            SEAT_TICKET
        } else {
            0
        };
        let ticket_token = self.next_ticket | seat;
        self.next_ticket += 1;
        let submission = Submission {
            ticket: Ticket {
                sink: self.lp.sink_index,
                token: ticket_token,
            },
            work,
        };
        let refusal = match self.submitter.try_submit(submission) {
            Ok(()) => {
                self.tickets
                    .insert(ticket_token, (index, generation, serial));
                self.request_submitted();
                return Some(ticket_token);
            }
            Err(SubmitError::Full(_)) => {
                Response::error(Status::Unavailable, "service busy, retry shortly").retry_after(1)
            }
            Err(SubmitError::Stopped(_)) => {
                Response::error(Status::Unavailable, "service not ready").retry_after(1)
            }
        };
        if let Some(conn) = self.conns[index].as_mut() {
            conn.complete(serial, |_| refusal);
        }
        None
    }

    /// Submits `work` for the pending slot `serial`; its completion goes to `continuation`.
    pub(super) fn continue_for(
        &mut self,
        index: usize,
        generation: u32,
        serial: u64,
        work: Work,
        continuation: crate::handler::Continuation,
    ) {
        if let Some(token) = self.submit_for(index, generation, serial, work) {
            self.continuations.insert(token, continuation);
        }
    }

    /// Carries out `outcome` for the pending slot `serial` of a live connection.
    pub(super) fn carry_out(
        &mut self,
        index: usize,
        generation: u32,
        serial: u64,
        outcome: Outcome,
    ) {
        let Some(conn) = self.live_conn(index, generation) else {
            return;
        };
        match outcome {
            Outcome::Respond(response) => conn.complete(serial, |_| response),
            Outcome::Submit(work, completer) => {
                conn.replace_completer(serial, completer);
                self.submit_for(index, generation, serial, *work);
            }
            Outcome::Continue(work, continuation) => {
                self.continue_for(index, generation, serial, *work, continuation)
            }
            Outcome::Defer(job) => self.defer_for(index, generation, serial, job),
        }
    }

    /// Hands `job` to the deferred-work pool for the pending slot `serial`.
    pub(super) fn defer_for(
        &mut self,
        index: usize,
        generation: u32,
        serial: u64,
        job: crate::deferred::Job,
    ) {
        let token = self.next_ticket;
        self.next_ticket += 1;
        let back = Return {
            tx: self.lp.deferred_tx.clone(),
            waker: self.lp.waker.clone(),
            token,
        };
        if self.pool.run(job, back) {
            self.deferred.insert(token, (index, generation, serial));
        } else if let Some(conn) = self.conns[index].as_mut() {
            let busy =
                Response::error(Status::Unavailable, "service busy, retry shortly").retry_after(1);
            conn.complete(serial, |_| busy);
        }
    }

    /// Carries out the outcomes of finished deferred jobs.
    pub(super) fn take_deferred(&mut self) {
        let mut touched = Vec::new();
        while let Ok((token, outcome)) = self.lp.deferred_rx.try_recv() {
            let Some((index, generation, serial)) = self.deferred.remove(&token) else {
                continue;
            };
            if self.live_conn(index, generation).is_none() {
                continue;
            }
            self.carry_out(index, generation, serial, outcome);
            touched.push(index);
        }
        for index in touched {
            self.parse_and_dispatch(index);
            self.flush(index);
        }
    }

    pub(super) fn take_completions(&mut self) {
        // What another thread answered or held while the loop slept comes first.
        let mut touched: Vec<usize> = std::mem::take(&mut self.parse_later)
            .into_iter()
            .filter(|&(index, generation)| self.live_conn(index, generation).is_some())
            .map(|(index, _)| index)
            .collect();
        for completion in std::mem::take(&mut self.held) {
            self.take_completion(completion, &mut touched);
        }
        while let Ok(batch) = self.lp.completions.try_recv() {
            for completion in batch {
                self.take_completion(completion, &mut touched);
            }
        }
        touched.sort_unstable();
        touched.dedup();
        for index in touched {
            self.parse_and_dispatch(index);
            self.flush(index);
        }
    }

    /// The connection at `index` if it is still the one of `generation` (not closed, its
    /// slot not reused).
    pub(super) fn live_conn(&mut self, index: usize, generation: u32) -> Option<&mut Connection> {
        self.conns
            .get_mut(index)
            .and_then(|c| c.as_mut())
            .filter(|conn| conn.generation == generation)
    }

    /// Hands one completion to the request or subscription waiting for it; notes the
    /// connection in `touched` when a response was queued on it.
    pub(super) fn take_completion(&mut self, completion: Completion, touched: &mut Vec<usize>) {
        if self.dead_man_record_answered(&completion) {
            return;
        }
        let token = completion.ticket().token;
        if let Some((index, generation, books)) = self.ws_tickets.remove(&token) {
            self.socket_snapshot((index, generation), books, completion);
            return;
        }
        let Some((index, generation, serial)) = self.tickets.remove(&token) else {
            return;
        };
        self.request_answered();
        // A refusal the service words itself ends the request, whatever step it was at.
        let refusal = match &completion {
            Completion::Refused { reason, .. } => self.service.refusal(reason),
            _ => None,
        };
        if let Some(continuation) = self.continuations.remove(&token) {
            let outcome = match refusal {
                Some(response) => Outcome::Respond(response),
                None => std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    continuation(completion)
                }))
                .unwrap_or_else(|_| Outcome::error(Status::Internal, "internal error")),
            };
            self.carry_out(index, generation, serial, outcome);
            touched.push(index);
            return;
        }
        let Some(conn) = self.live_conn(index, generation) else {
            return;
        };
        conn.complete(serial, |completer| match refusal {
            Some(response) => response,
            None => {
                match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    completer(completion)
                })) {
                    Ok(response) => response,
                    Err(_) => Response::error(Status::Internal, "internal error"),
                }
            }
        });
        touched.push(index);
    }

    /// Writes what connection `index` has ready; closes it when it is done or broken. Input
    /// that waited for the client (or for the connection's turn) is parsed in the loop's next
    /// turn, after the other connections', once the client has made room.
    pub(super) fn flush(&mut self, index: usize) {
        let Some(conn) = self.conns[index].as_mut() else {
            return;
        };
        match conn.flush() {
            Ok(done) if done && conn.close_after_flush => self.close(index),
            Ok(_) => {
                let resumes = conn.paused_for_client
                    && !conn.close_after_flush
                    && !conn.stop_reading
                    && !conn.waits_for_client();
                if resumes {
                    conn.paused_for_client = false;
                    self.parse_later.push((index, conn.generation));
                }
            }
            Err(_) => self.close(index),
        }
    }

    pub(super) fn close(&mut self, index: usize) {
        if let Some(mut conn) = self.conns[index].take() {
            let _ = self.lp.registry.deregister(conn.stream.socket());
            self.free.push(index);
            self.shared.connection_closed(conn.peer.ip());
        }
    }

    pub(super) fn sweep_timeouts(&mut self) {
        let now = Instant::now();
        let mut expired = Vec::new();
        let mut unread = Vec::new();
        for (index, conn) in self.conns.iter_mut().enumerate() {
            let Some(conn) = conn else { continue };
            let slow = conn
                .request_started
                .is_some_and(|t| now.duration_since(t) > self.limits.request_timeout);
            let idle = conn.slots.is_empty()
                && conn.read_buf.is_empty()
                && now.duration_since(conn.last_active) > self.limits.idle_timeout;
            // Nothing of a request yet (a TLS handshake not finished counts as nothing).
            let silent = !conn.received_any
                && now.duration_since(conn.opened) > self.limits.first_bytes_timeout;
            // Answers it has not read for as long as a request may take to arrive.
            // A client reading slowly may have made room without a writable edge (the kernel
            // raises one only once a third of the buffer is free): write before judging.
            if conn.unread_for(now, self.limits.request_timeout)
                && (conn.flush().is_err() || conn.unread_for(now, self.limits.request_timeout))
            {
                unread.push(index);
                continue;
            }
            if silent {
                self.shared
                    .first_bytes_timeouts
                    .fetch_add(1, Ordering::Relaxed);
                expired.push(index);
                conn.close_after_flush = true;
            } else if slow {
                conn.read_buf.clear();
                conn.progress = Default::default();
                conn.request_started = None;
                let timeout =
                    Response::error(Status::RequestTimeout, "request not received in time");
                self.service.count_answer(None, timeout.status.code());
                conn.push_ready(&timeout.closing(), false);
                expired.push(index);
            } else if idle {
                expired.push(index);
                conn.close_after_flush = true;
            }
        }
        for index in unread {
            if let Some(conn) = self.conns[index].as_ref() {
                tracing::debug!(peer = %conn.peer, unsent = conn.write_buf.len(), "closing a connection that does not read its answers");
            }
            self.close(index);
        }
        for index in expired {
            self.flush(index);
            if let Some(conn) = self.conns[index].as_ref() {
                if conn.close_after_flush && conn.slots.is_empty() {
                    self.close(index);
                }
            }
        }
    }
}

/// Parsing ran out of whole requests: when the peer closed its side, none will come, and the
/// connection closes once its answers are written.
fn end_of_requests(conn: &mut Connection) {
    if conn.peer_closed {
        conn.close_after_flush = true;
    }
}

/// Reads what a socket held beyond a full buffer, once requests have made room: nothing
/// else says it is there (readiness is edge-triggered). Whether new bytes came.
fn refill(conn: &mut Connection) -> bool {
    if !conn.capped || conn.read_buf.len() >= READ_BUFFER_MAX {
        return false;
    }
    let before = conn.read_buf.len();
    match conn.fill(false) {
        Ok(true) => conn.read_buf.len() > before,
        Ok(false) | Err(_) => {
            conn.close_after_flush = true;
            false
        }
    }
}

/// Whether the client asked for the connection to stay open (`Connection: keep-alive`): it is
/// then told it does (an HTTP/1.0 client, which closes by default, waits to be told).
fn asks_keep_alive(request: &Request) -> bool {
    request
        .header("connection")
        .is_some_and(|value| value.to_ascii_lowercase().contains("keep-alive"))
}
