//! A one-shot completion for durability waiters. It is a `Future` for the async broker and
//! has a blocking `wait` for threads and tests; it needs no runtime.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use crate::error::{Result, StorageError};
use crate::types::Offset;

#[derive(Default)]
struct State {
    result: Option<Result<Offset>>,
    /// When `result` was set.
    completed_at: Option<Instant>,
    waker: Option<Waker>,
}

#[derive(Default)]
pub(crate) struct Completion {
    state: Mutex<State>,
    cv: Condvar,
}

impl Completion {
    pub(crate) fn complete(&self, result: Result<Offset>) {
        let mut st = self.state.lock().unwrap();
        if st.result.is_some() {
            return;
        }
        st.result = Some(result);
        st.completed_at = Some(Instant::now());
        if let Some(w) = st.waker.take() {
            w.wake();
        }
        self.cv.notify_all();
    }
}

/// Resolves to the log's flushed end (exclusive) once an fsync covering the awaited offset
/// has finished, or to the error that took the log offline.
pub struct FlushWait {
    inner: Arc<Completion>,
}

impl FlushWait {
    pub(crate) fn pending() -> (FlushWait, Arc<Completion>) {
        let inner = Arc::new(Completion::default());
        (FlushWait { inner: inner.clone() }, inner)
    }

    pub(crate) fn ready(result: Result<Offset>) -> FlushWait {
        let (w, c) = FlushWait::pending();
        c.complete(result);
        w
    }

    pub fn wait(self) -> Result<Offset> {
        let mut st = self.inner.state.lock().unwrap();
        loop {
            if let Some(r) = st.result.take() {
                return r;
            }
            st = self.inner.cv.wait(st).unwrap();
        }
    }

    /// Like [`FlushWait::wait`], with the instant the flush completed it (a benchmark's
    /// latency then does not include how late the waiting thread looked).
    pub fn wait_completed_at(self) -> (Result<Offset>, Instant) {
        let mut st = self.inner.state.lock().unwrap();
        loop {
            if let Some(r) = st.result.take() {
                return (r, st.completed_at.expect("set with the result"));
            }
            st = self.inner.cv.wait(st).unwrap();
        }
    }

    /// `None` if the flush has not finished within `timeout`.
    pub fn wait_timeout(&self, timeout: Duration) -> Option<Result<Offset>> {
        let st = self.inner.state.lock().unwrap();
        let (mut st, _) = self
            .inner
            .cv
            .wait_timeout_while(st, timeout, |s| s.result.is_none())
            .unwrap();
        st.result.take()
    }
}

impl Future for FlushWait {
    type Output = Result<Offset, StorageError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut st = self.inner.state.lock().unwrap();
        match st.result.take() {
            Some(r) => Poll::Ready(r),
            None => {
                st.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}
