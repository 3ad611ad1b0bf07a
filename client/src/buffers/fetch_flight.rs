//! One fetch in flight per buffer, and what callers waiting for it learn when it lands.
//!
//! A buffer's fetch runs as its own task, never inside a caller's future: a caller that
//! gives up (its future dropped, or an error returned) does not cancel a fetch that other
//! callers wait for, and a fetch cut off mid-way cannot leave the buffer thinking one is
//! still under way (the flight lands with an error when its task is dropped).
//!
//! Callers that find the buffer empty wait for the flight under way (or start one) and, if
//! it fails, get its error rather than starting another: a caller waits at most one fetch,
//! whose length the client's `connect_timeout` and `response_timeout` bound.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use crate::buffers::wait_stats::{WaitCounter, WaitStats, WaitTimer};
use crate::error::{Error, Result};

/// Which flight: increases by one per fetch started.
pub(crate) type Flight = u64;

#[derive(Debug, Default)]
struct State {
    /// The flight under way, if any.
    running: Option<Flight>,
    /// Flights started so far.
    started: Flight,
    /// The last flight that failed, and how.
    failed: Option<(Flight, Error)>,
}

/// The single fetch of one buffer.
#[derive(Debug, Default)]
pub(crate) struct FetchFlight {
    state: Mutex<State>,
    /// `state.running.is_some()`, written under the lock, read without it (the snowflake
    /// cache asks it on every take, under its own lock).
    under_way: AtomicBool,
    landed: Notify,
    /// The callers that waited for a flight, and how long.
    waits: WaitCounter,
}

impl FetchFlight {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        crate::lock::lock(&self.state)
    }

    /// Starts a flight unless one is under way: `Ok` with the new flight for the caller to
    /// run (and land), `Err` with the flight already under way.
    pub fn start(&self) -> std::result::Result<Flight, Flight> {
        let mut state = self.lock();
        if let Some(running) = state.running {
            return Err(running);
        }
        state.started += 1;
        state.running = Some(state.started);
        self.under_way.store(true, Ordering::Release);
        Ok(state.started)
    }

    /// Whether a flight is under way (without taking the lock).
    pub fn is_running(&self) -> bool {
        self.under_way.load(Ordering::Acquire)
    }

    /// Ends `flight`, failed if `error` is given, and wakes every waiting caller.
    pub fn land(&self, flight: Flight, error: Option<Error>) {
        {
            let mut state = self.lock();
            if state.running == Some(flight) {
                state.running = None;
                self.under_way.store(false, Ordering::Release);
            }
            if let Some(error) = error {
                state.failed = Some((flight, error));
            }
        }
        self.landed.notify_waiters();
    }

    /// A value from `try_take`, which is called again each time a flight lands: after each
    /// miss the caller waits for the flight under way, or the one `launch` starts. Returns the
    /// error of a flight the caller waited for that failed: a caller waits at most one failed
    /// fetch. Counted in [`FetchFlight::wait_stats`] if it waited.
    pub async fn take_or_wait<T>(
        &self,
        mut try_take: impl FnMut() -> Option<T>,
        mut launch: impl FnMut() -> Flight,
    ) -> Result<T> {
        let mut waited_for = None;
        let mut timer = WaitTimer::new(&self.waits);
        loop {
            // Enabled before looking, so that a landing in between is not missed.
            let landed = self.landed.notified();
            tokio::pin!(landed);
            landed.as_mut().enable();
            if let Some(value) = try_take() {
                return Ok(value);
            }
            if let Some(error) = waited_for.and_then(|flight| self.failure_since(flight)) {
                return Err(error);
            }
            waited_for = Some(launch());
            timer.waiting();
            landed.await;
        }
    }

    /// How many callers waited for a flight, and the longest wait since the last read.
    pub fn wait_stats(&self) -> WaitStats {
        self.waits.read()
    }

    /// The error of the last failed flight if it is `flight` or a later one.
    pub fn failure_since(&self, flight: Flight) -> Option<Error> {
        match &self.lock().failed {
            Some((failed, error)) if *failed >= flight => Some(error.clone()),
            _ => None,
        }
    }
}

/// Starts a fetch for `owner` in its own task unless one is under way on `flight_of(owner)`;
/// returns the flight to wait for. The fetch returns its error, if any: the flight lands
/// with it (and with an error of its own if the task is dropped before it finishes).
pub(crate) fn launch<S, F, Fut>(
    owner: &Arc<S>,
    flight_of: fn(&S) -> &FetchFlight,
    fetch: F,
) -> Flight
where
    S: Send + Sync + 'static,
    F: FnOnce(Arc<S>) -> Fut + Send + 'static,
    Fut: Future<Output = Option<Error>> + Send + 'static,
{
    let flight = match flight_of(owner).start() {
        Ok(flight) => flight,
        Err(running) => return running,
    };
    let owner = Arc::clone(owner);
    tokio::spawn(async move {
        let landing = LandOnDrop::new(flight_of(&owner), flight);
        let error = fetch(Arc::clone(&owner)).await;
        landing.land(error);
    });
    flight
}

/// Lands a flight when dropped, with an error unless [`LandOnDrop::land`] was called: a
/// fetch task dropped mid-way (its runtime shutting down) must not leave waiters waiting.
pub(crate) struct LandOnDrop<'a> {
    flight: &'a FetchFlight,
    id: Flight,
    landed: bool,
}

impl<'a> LandOnDrop<'a> {
    pub fn new(flight: &'a FetchFlight, id: Flight) -> Self {
        LandOnDrop {
            flight,
            id,
            landed: false,
        }
    }

    /// Lands the flight with the fetch's outcome.
    pub fn land(mut self, error: Option<Error>) {
        self.landed = true;
        self.flight.land(self.id, error);
    }
}

impl Drop for LandOnDrop<'_> {
    fn drop(&mut self) {
        if !self.landed {
            let error = redis::RedisError::from((
                redis::ErrorKind::Io,
                "the fetch was stopped before it finished (its runtime shut down)",
            ));
            self.flight.land(self.id, Some(Error::Transport(error)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transport() -> Error {
        Error::Transport(redis::RedisError::from((redis::ErrorKind::Io, "timed out")))
    }

    #[test]
    fn one_flight_at_a_time_and_its_failure_reaches_those_who_waited_for_it() {
        let flight = FetchFlight::default();
        assert_eq!(flight.start(), Ok(1));
        assert_eq!(flight.start(), Err(1), "one in flight");
        assert!(flight.is_running());
        flight.land(1, Some(transport()));
        assert!(!flight.is_running());
        let error = flight.failure_since(1).expect("the failure of flight 1");
        assert!(error.is_retryable());
        assert_eq!(flight.start(), Ok(2));
        flight.land(2, None);
        assert!(flight.failure_since(2).is_none(), "flight 2 succeeded");
        assert!(flight.failure_since(1).is_some(), "flight 1 did not");
    }

    #[test]
    fn a_flight_dropped_before_it_landed_lands_with_a_retryable_error() {
        let flight = FetchFlight::default();
        let id = flight.start().unwrap();
        drop(LandOnDrop::new(&flight, id));
        assert!(!flight.is_running());
        assert!(flight.failure_since(id).unwrap().is_retryable());
        let id = flight.start().unwrap();
        LandOnDrop::new(&flight, id).land(None);
        assert!(flight.failure_since(id).is_none());
    }
}
