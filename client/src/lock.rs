//! Locking a mutex whose data stays valid when a holder panicked: every lock in the client
//! guards plain values (a timestamp, a verdict, the current node) that a panic cannot leave
//! half-written, so a poisoned lock is used as it is rather than passing the panic on.

use std::sync::{Mutex, MutexGuard};

/// Locks `mutex`, ignoring poisoning (see the module's note).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_poisoned_by_a_panic_still_gives_its_value() {
        let mutex = std::sync::Arc::new(Mutex::new(7));
        let held = mutex.clone();
        let _ = std::thread::spawn(move || {
            let _guard = held.lock().unwrap();
            panic!("poison the lock");
        })
        .join();
        assert!(mutex.is_poisoned());
        *lock(&mutex) += 1;
        assert_eq!(*lock(&mutex), 8);
    }
}
