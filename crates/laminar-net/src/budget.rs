//! The request budget (`queued.max.request.bytes`): bytes of requests read off the sockets
//! and not yet handled, over all connections.
//!
//! Bytes are taken from it as they are read, never when a frame's size is announced: three
//! connections that announced frames adding up to the whole budget and then sent nothing
//! held all of it for the 60 s a frame may take, and no other client could send even
//! ApiVersions (issue 29, item 5). Now a silent connection holds what it sent.
//!
//! Taking bytes as they come has a trap that taking a frame's size at once did not: frames
//! partly read may hold the whole budget between them, each waiting for more to finish.
//! When no whole frame holds any of it (so none will give any back), one partly read frame
//! at a time, the one that found the budget empty first, is read to its end past the
//! budget; its share of the overshoot goes with it until its handler is done. Memory stays
//! within the budget plus one frame (`socket.request.max.bytes`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

#[derive(Clone)]
pub(crate) struct RequestBudget {
    bytes: Arc<Semaphore>,
    /// What whole frames, read and not yet handled, hold: it comes back without any more
    /// bytes being read.
    whole_bytes: Arc<AtomicUsize>,
    /// One permit: the frame that may complete past the budget.
    completing: Arc<Semaphore>,
}

impl RequestBudget {
    pub(crate) fn new(bytes: Arc<Semaphore>) -> RequestBudget {
        RequestBudget {
            bytes,
            whole_bytes: Arc::new(AtomicUsize::new(0)),
            completing: Arc::new(Semaphore::new(1)),
        }
    }
}

/// What one connection's buffered bytes hold of the budget.
#[derive(Default)]
pub(crate) struct Held {
    /// Exactly the bytes buffered, except those read past the budget.
    bytes: Option<OwnedSemaphorePermit>,
    /// Taken for the next read and given back, but for what it read, by [`Held::keep`].
    granted: Option<OwnedSemaphorePermit>,
    /// The first buffered frame is being read past the budget.
    completing: Option<OwnedSemaphorePermit>,
}

/// A frame's share of the budget, dropped when its handler is done with it.
pub(crate) struct FrameBudget {
    bytes: Option<OwnedSemaphorePermit>,
    whole_bytes: Arc<AtomicUsize>,
    _completing: Option<OwnedSemaphorePermit>,
}

impl Drop for FrameBudget {
    fn drop(&mut self) {
        let n = self.bytes.as_ref().map_or(0, |p| p.num_permits());
        self.whole_bytes.fetch_sub(n, Ordering::SeqCst);
    }
}

impl Held {
    /// How many bytes the next read may take: up to `want`, within what the budget has, or
    /// the rest of the frame under way (`frame_left`) if it must complete past the budget.
    /// 0: nothing may be read now.
    pub(crate) fn room(&mut self, budget: &RequestBudget, want: usize, frame_left: Option<usize>) -> usize {
        debug_assert!(
            self.granted.is_none(),
            "a grant is kept or given back after each read"
        );
        if self.completing.is_some() {
            return frame_left.unwrap_or(0);
        }
        let n = want.min(budget.bytes.available_permits()).min(u32::MAX as usize);
        if n > 0 {
            if let Ok(p) = budget.bytes.clone().try_acquire_many_owned(n as u32) {
                self.granted = Some(p);
                return n;
            }
        }
        // Whole frames give their share back as they are handled: wait for that.
        if budget.whole_bytes.load(Ordering::SeqCst) > 0 {
            return 0;
        }
        match frame_left {
            Some(left) if left > 0 => match budget.completing.clone().try_acquire_owned() {
                Ok(token) => {
                    self.completing = Some(token);
                    left
                }
                Err(_) => 0,
            },
            _ => 0,
        }
    }

    /// `read` bytes were read with the room last given: they keep their share, the rest of
    /// the grant goes back.
    /// Whether it holds nothing of any budget (between frames).
    pub(crate) fn is_empty(&self) -> bool {
        self.bytes.as_ref().is_none_or(|b| b.num_permits() == 0)
            && self.granted.is_none()
            && self.completing.is_none()
    }

    pub(crate) fn keep(&mut self, read: usize) {
        let Some(mut granted) = self.granted.take() else {
            return; // read past the budget
        };
        let Some(used) = granted.split(read.min(granted.num_permits())) else {
            unreachable!("split within the grant")
        };
        match &mut self.bytes {
            // (An emptied permit may be of the other budget: it is replaced, never merged.)
            Some(held) if held.num_permits() > 0 => held.merge(used),
            _ => self.bytes = Some(used),
        }
    }

    /// The share of a whole frame of `frame_bytes` (its size prefix included) taken off the
    /// front of the buffer.
    pub(crate) fn take_frame(&mut self, budget: &RequestBudget, frame_bytes: usize) -> FrameBudget {
        let bytes = self.bytes.as_mut().and_then(|held| {
            let n = frame_bytes.min(held.num_permits());
            held.split(n)
        });
        let n = bytes.as_ref().map_or(0, |p| p.num_permits());
        budget.whole_bytes.fetch_add(n, Ordering::SeqCst);
        FrameBudget {
            bytes,
            whole_bytes: budget.whole_bytes.clone(),
            _completing: self.completing.take(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_held_as_read_and_go_with_their_frame() {
        let budget = RequestBudget::new(Arc::new(Semaphore::new(100)));
        let mut held = Held::default();
        assert_eq!(held.room(&budget, 64, None), 64);
        held.keep(10);
        assert_eq!(budget.bytes.available_permits(), 90);
        let frame = held.take_frame(&budget, 10);
        assert_eq!(budget.bytes.available_permits(), 90);
        drop(frame);
        assert_eq!(budget.bytes.available_permits(), 100);
    }

    /// A whole frame in its handler gives its share back: a partly read frame waits for that
    /// rather than read past the budget.
    #[test]
    fn a_partly_read_frame_waits_for_whole_frames_to_be_handled() {
        let budget = RequestBudget::new(Arc::new(Semaphore::new(100)));
        let (mut a, mut b) = (Held::default(), Held::default());
        assert_eq!(a.room(&budget, 60, Some(60)), 60);
        a.keep(60);
        let whole = a.take_frame(&budget, 60);
        assert_eq!(b.room(&budget, 60, Some(60)), 40);
        b.keep(40);
        assert_eq!(b.room(&budget, 20, Some(20)), 0, "b waits for the whole frame");
        drop(whole);
        assert_eq!(b.room(&budget, 20, Some(20)), 20);
    }

    /// Two frames partly read with the budget spent between them: one completes past it,
    /// the other waits; once the first is handled, the other goes on.
    #[test]
    fn one_partly_read_frame_completes_past_an_empty_budget() {
        let budget = RequestBudget::new(Arc::new(Semaphore::new(100)));
        let (mut a, mut b) = (Held::default(), Held::default());
        assert_eq!(a.room(&budget, 60, Some(80)), 60);
        a.keep(60);
        assert_eq!(b.room(&budget, 60, Some(80)), 40);
        b.keep(40);
        assert_eq!(a.room(&budget, 20, Some(20)), 20, "a completes past the budget");
        a.keep(20);
        assert_eq!(b.room(&budget, 40, Some(40)), 0, "b waits");
        let frame = a.take_frame(&budget, 80);
        assert_eq!(b.room(&budget, 40, Some(40)), 0, "still: a's bytes are in flight");
        drop(frame);
        assert_eq!(b.room(&budget, 40, Some(40)), 40);
    }
}
