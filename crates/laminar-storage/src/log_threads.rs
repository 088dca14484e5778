//! A few threads shared by every log, each pass looking at every registered log: the
//! flusher's and the preparer's. A log wakes them when it has work; they also look on
//! their own at the latest when the pass asks them to.

use std::sync::{Arc, Condvar, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::log::{Log, WakeThreads};

#[derive(Default)]
struct State {
    logs: Vec<Weak<Log>>,
    wakeups: u64,
    shutdown: bool,
}

/// What a log holds (weakly) to wake its threads.
#[derive(Default)]
struct LogThreadsShared {
    state: Mutex<State>,
    cv: Condvar,
}

impl WakeThreads for LogThreadsShared {
    fn wake(&self) {
        self.state.lock().unwrap().wakeups += 1;
        // One idle thread is enough: a busy one sees `wakeups` changed before it sleeps.
        self.cv.notify_one();
    }
}

pub(crate) struct LogThreads {
    shared: Arc<LogThreadsShared>,
    threads: Vec<JoinHandle<()>>,
}

impl LogThreads {
    /// Starts `threads` threads named `name-N`, each running `pass` over the live logs
    /// again and again; `pass` returns how long to sleep (unless woken) before the next.
    pub(crate) fn start(
        name: &str,
        threads: usize,
        pass: impl Fn(&[Arc<Log>]) -> Duration + Send + Sync + 'static,
    ) -> LogThreads {
        let shared = Arc::new(LogThreadsShared::default());
        let pass = Arc::new(pass);
        let threads = (0..threads.max(1))
            .map(|i| {
                let (shared, pass) = (shared.clone(), pass.clone());
                std::thread::Builder::new()
                    .name(format!("{name}-{i}"))
                    .spawn(move || run(&shared, pass.as_ref()))
                    .expect("spawn a log thread")
            })
            .collect();
        LogThreads { shared, threads }
    }

    /// Adds `log` to the passes, and returns what the log keeps to wake the threads.
    pub(crate) fn register(&self, log: &Arc<Log>) -> Weak<dyn WakeThreads> {
        self.shared.state.lock().unwrap().logs.push(Arc::downgrade(log));
        self.shared.wake();
        let shared: Arc<dyn WakeThreads> = self.shared.clone();
        Arc::downgrade(&shared)
    }

    /// Stops the threads after their current pass.
    pub(crate) fn stop(&mut self) {
        self.shared.state.lock().unwrap().shutdown = true;
        self.shared.cv.notify_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for LogThreads {
    fn drop(&mut self) {
        self.stop();
    }
}

fn run(shared: &LogThreadsShared, pass: &(dyn Fn(&[Arc<Log>]) -> Duration + Send + Sync)) {
    loop {
        let seen_wakeups;
        let logs: Vec<Arc<Log>> = {
            let mut st = shared.state.lock().unwrap();
            if st.shutdown {
                return;
            }
            st.logs.retain(|l| l.strong_count() > 0);
            seen_wakeups = st.wakeups;
            st.logs.iter().filter_map(Weak::upgrade).collect()
        };
        let wait = pass(&logs);
        drop(logs);
        if wait.is_zero() {
            continue;
        }
        let st = shared.state.lock().unwrap();
        let _ = shared
            .cv
            .wait_timeout_while(st, wait, |s| !s.shutdown && s.wakeups == seen_wakeups)
            .unwrap();
    }
}
