//! State that only Redis's main thread touches, held without a lock.
//!
//! Redis runs commands, key-event handlers, timers and data loading on its main thread, so
//! the module's instance-wide state is never contended. A `Mutex` around it costs two
//! locked instructions on every `SNOWFLAKE.NEXT` and `SEGMENT.NEXT`, for nothing; this cell
//! costs two loads and two compares (docs/performance.md). It stays sound whatever calls it:
//! the first thread to use a cell owns it for the cell's life, any other thread's use
//! panics (every entry point from Redis catches panics), and a use from inside another
//! use of the same cell panics instead of handing out a second `&mut`.

use std::cell::{Cell, UnsafeCell};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A value only one thread — the first that uses it, Redis's main thread in the module —
/// can reach, through [`MainThreadCell::with`].
pub struct MainThreadCell<T> {
    /// The owner's `pthread_self()`, or 0 before the first use.
    owner: AtomicUsize,
    /// Whether a `with` on the owner thread is running (a re-entry would alias).
    in_use: Cell<bool>,
    value: UnsafeCell<T>,
}

// SAFETY: `in_use` and `value` are touched only inside `with`, after it has checked that the
// calling thread is the owner, and the owner is set once (a compare-exchange from 0). So
// they are only ever used by one thread: never shared. A `pthread_t` is reused only after
// its thread has ended and been joined or detached, and glibc hands the old thread's
// descriptor to the new one under its own lock, which orders the old thread's last use
// before the new thread's first. `T: Send` because the value is created (or dropped) on
// another thread than the one that uses it.
unsafe impl<T: Send> Sync for MainThreadCell<T> {}

/// The calling thread's identity: its `pthread_t` (the address of its descriptor, never 0).
#[cfg(not(test))]
#[inline]
fn current_thread() -> usize {
    os_thread()
}

/// The calling thread's `pthread_t`.
#[inline]
fn os_thread() -> usize {
    // SAFETY: pthread_self has no preconditions and cannot fail.
    unsafe { libc::pthread_self() as usize }
}

/// In unit tests, a test thread holding [`test_main::MainThread`] counts as the main thread.
#[cfg(test)]
fn current_thread() -> usize {
    if test_main::HELD.get() {
        test_main::MAIN
    } else {
        os_thread()
    }
}

/// The main thread of unit tests.
///
/// The module's state belongs to the first thread that uses it, and the test harness runs
/// each `#[test]` on a thread of its own: without this, only the first test to touch the
/// instance's sequence, reservations or lease fences could use them. A test that runs
/// handlers takes [`MainThread`] first; while it is held the test's thread is *the* main
/// thread for every cell (one identity, never a `pthread_t`), and no other test holds it,
/// so the cells are still used by one thread at a time, each use ordered after the last by
/// the lock. Tests without it keep their own thread's identity (the tests below rely on
/// that). Chosen over one `#[test]` running every keyed case in sequence so that each case
/// fails, and is named, on its own.
#[cfg(test)]
pub mod test_main {
    use std::cell::Cell;
    use std::sync::{Mutex, MutexGuard};

    /// The identity of the tests' main thread: no `pthread_t` is 1.
    pub(super) const MAIN: usize = 1;

    static LOCK: Mutex<()> = Mutex::new(());

    thread_local! {
        /// Whether this thread holds [`LOCK`] through a [`MainThread`].
        pub(super) static HELD: Cell<bool> = const { Cell::new(false) };
    }

    /// While alive, the calling test's thread is the module's main thread.
    pub struct MainThread {
        guard: Option<MutexGuard<'static, ()>>,
    }

    /// Makes the calling thread the module's main thread until the value drops (waiting
    /// for another test to drop its own); nested calls on one thread are free.
    pub fn become_main() -> MainThread {
        if HELD.get() {
            return MainThread { guard: None };
        }
        // A test that failed while holding it poisons the lock; its cells are still whole
        // (a use that unwinds releases its cell), so the next test goes on.
        let guard = LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        HELD.set(true);
        MainThread { guard: Some(guard) }
    }

    impl Drop for MainThread {
        fn drop(&mut self) {
            if self.guard.is_some() {
                HELD.set(false);
            }
        }
    }
}

impl<T> MainThreadCell<T> {
    /// A cell holding `value`, owned by no thread yet.
    pub const fn new(value: T) -> Self {
        MainThreadCell {
            owner: AtomicUsize::new(0),
            in_use: Cell::new(false),
            value: UnsafeCell::new(value),
        }
    }

    /// Runs `f` on the value.
    ///
    /// # Panics
    /// On a thread other than the cell's owner (the first thread that called `with`), and
    /// when called from inside `f` on the same cell.
    #[inline]
    pub fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        let me = current_thread();
        if self.owner.load(Ordering::Acquire) != me {
            self.claim(me);
        }
        assert!(
            !self.in_use.replace(true),
            "idgen's main-thread state was used from inside its own use"
        );
        struct Release<'a>(&'a Cell<bool>);
        impl Drop for Release<'_> {
            fn drop(&mut self) {
                self.0.set(false);
            }
        }
        let _release = Release(&self.in_use);
        // SAFETY: this thread owns the cell (checked above, and no other thread can become
        // the owner), and `in_use` was false: no other reference to the value exists until
        // `_release` drops, after `f` returned or unwound.
        f(unsafe { &mut *self.value.get() })
    }

    /// Makes `me` the owner if the cell has none; panics if another thread owns it.
    #[cold]
    #[inline(never)]
    fn claim(&self, me: usize) {
        if let Err(owner) = self
            .owner
            .compare_exchange(0, me, Ordering::AcqRel, Ordering::Acquire)
        {
            assert_eq!(
                owner, me,
                "idgen's main-thread state was used from another thread than Redis's main thread"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_owner_reads_and_writes_the_value() {
        let cell = MainThreadCell::new(1);
        cell.with(|value| *value += 1);
        assert_eq!(cell.with(|value| *value), 2);
    }

    #[test]
    fn another_thread_is_refused_and_the_value_is_unchanged() {
        let cell = MainThreadCell::new(1);
        cell.with(|value| *value = 5);
        let refused = std::thread::scope(|scope| {
            scope
                .spawn(|| cell.with(|value| *value = 7))
                .join()
                .is_err()
        });
        assert!(refused);
        assert_eq!(cell.with(|value| *value), 5);
    }

    #[test]
    fn the_first_thread_to_use_a_cell_owns_it() {
        let cell = MainThreadCell::new(0);
        std::thread::scope(|scope| {
            scope
                .spawn(|| cell.with(|value| *value = 3))
                .join()
                .unwrap();
        });
        let refused =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| cell.with(|value| *value)));
        assert!(refused.is_err());
    }

    #[test]
    fn test_threads_holding_the_main_thread_share_a_cell_and_others_are_refused() {
        let cell = MainThreadCell::new(0);
        std::thread::scope(|scope| {
            for _ in 0..2 {
                scope.spawn(|| {
                    let _main = test_main::become_main();
                    // Nested: the same thread, still the main thread.
                    let _again = test_main::become_main();
                    cell.with(|value| *value += 1);
                });
            }
        });
        let _main = test_main::become_main();
        assert_eq!(cell.with(|value| *value), 2);
        drop(_main);
        let refused = std::thread::scope(|scope| {
            scope
                .spawn(|| cell.with(|value| *value = 7))
                .join()
                .is_err()
        });
        assert!(refused);
    }

    #[test]
    fn a_use_inside_a_use_panics_and_the_cell_stays_usable() {
        let cell = MainThreadCell::new(0);
        let inner = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            cell.with(|_| cell.with(|value| *value = 9))
        }));
        assert!(inner.is_err());
        assert_eq!(cell.with(|value| *value), 0);
    }
}
