//! What a route handler returns: a response now, or work for the sequencer and how to turn
//! its completion into a response.

use ladder_sequencer::{Completion, Work};

use crate::http::{Response, Status};

/// Turns a completion into the response (runs on the gateway thread).
pub type Completer = Box<dyn FnOnce(Completion) -> Response + Send>;

/// Turns a completion into what happens next: an answer, more work, or a deferred job (runs
/// on the gateway thread).
pub type Continuation = Box<dyn FnOnce(Completion) -> Outcome + Send>;

/// A handler's decision.
pub enum Outcome {
    /// Answer now.
    Respond(Response),
    /// Send `work` to the sequencer; answer with `completer` once it completes.
    Submit(Box<Work>, Completer),
    /// Run `job` on a deferred-work worker (it waits on something outside the service);
    /// the outcome it returns is then carried out.
    Defer(crate::deferred::Job),
    /// Send `work` to the sequencer; once it completes, the outcome `continuation` gives
    /// is carried out (a read of the engine before a call outside the service, say).
    Continue(Box<Work>, Continuation),
}

impl Outcome {
    /// Submits `work`, answering with `completer`.
    pub fn submit(work: Work, completer: Completer) -> Outcome {
        Outcome::Submit(Box::new(work), completer)
    }

    /// Submits `work`; once it completes, carries out what `continuation` says.
    pub fn then(
        work: Work,
        continuation: impl FnOnce(Completion) -> Outcome + Send + 'static,
    ) -> Outcome {
        Outcome::Continue(Box::new(work), Box::new(continuation))
    }

    /// Runs `job` off the event loop.
    pub fn defer(job: impl FnOnce() -> Outcome + Send + 'static) -> Outcome {
        Outcome::Defer(Box::new(job))
    }

    /// An error response now.
    pub fn error(status: Status, message: &str) -> Outcome {
        Outcome::Respond(Response::error(status, message))
    }
}

/// The response to a completion the completer did not expect (a refusal, typically).
pub fn unexpected(completion: Completion) -> Response {
    match completion {
        Completion::Refused { reason, .. } => {
            Response::error(Status::Unavailable, reason).retry_after(1)
        }
        _ => Response::error(Status::Internal, "internal error"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ladder_sequencer::Ticket;

    #[test]
    fn a_refused_command_is_a_503_that_says_when_to_retry() {
        let response = unexpected(Completion::Refused {
            ticket: Ticket { sink: 0, token: 1 },
            reason: "replica unavailable",
        });
        assert_eq!(response.status, Status::Unavailable);
        assert_eq!(response.retry_after_s, Some(1));
        assert_eq!(
            response.body,
            br#"{"error":"replica unavailable"}"#.to_vec()
        );
    }
}
