//! The stall detector: makes a socket thread that stops serving visible, with what it was
//! doing, without kprobes (invariant 5).
//!
//! Connection tasks run inside [`Doing`], which marks on the polling thread's slot what is
//! being polled and since when. A watchdog thread, outside the runtime, looks at every slot
//! each few milliseconds: a poll that has run longer than `event.loop.stall.threshold.ms`
//! is logged once, while it is still stuck, with the thread, the activity and the peer. That
//! is what Kafka's network thread looks like inside a cold `sendfile`.
//!
//! A probe task also measures how late the event loop wakes a timer, which catches stalls
//! outside connection tasks too; its histogram is exported.

use std::cell::RefCell;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use super::observe::NetMetrics;

/// How often the probe task asks to be woken.
const PROBE_INTERVAL_MS: u64 = 10;

/// What a socket thread is busy with.
#[derive(Clone, Copy)]
struct Activity {
    what: &'static str,
    peer: Option<SocketAddr>,
}

/// What the kernel says of one thread (`/proc/self/task/TID/schedstat` and `stat`): time on
/// a CPU, time runnable but waiting for one, in ns, and its state letter.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Sched {
    on_cpu_ns: u64,
    waiting_ns: u64,
    state: char,
}

impl Sched {
    /// `None` where /proc has no schedstat (a kernel without CONFIG_SCHEDSTATS).
    fn read(tid: i32) -> Option<Sched> {
        let schedstat = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).ok()?;
        let mut fields = schedstat.split_whitespace().map(|f| f.parse::<u64>().ok());
        let (on_cpu_ns, waiting_ns) = (fields.next()??, fields.next()??);
        let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
        // The state follows the command name, which is in parentheses and may hold spaces.
        let state = stat.rsplit_once(") ")?.1.chars().next()?;
        Some(Sched {
            on_cpu_ns,
            waiting_ns,
            state,
        })
    }
}

/// Where a stalled poll's time went, from the thread's scheduler counters since the watchdog
/// first saw the poll: on a CPU (the poll computes), waiting for a CPU (other threads or
/// processes have them: the machine is overloaded, not this thread blocked), or neither
/// (blocked in the kernel: a disk, a lock, a page fault).
fn describe_stall(before: Sched, now: Sched, elapsed_ns: u64) -> String {
    let on_cpu = now.on_cpu_ns.saturating_sub(before.on_cpu_ns);
    let waiting = now.waiting_ns.saturating_sub(before.waiting_ns);
    let blocked = elapsed_ns.saturating_sub(on_cpu + waiting);
    let cause = if waiting >= on_cpu && waiting >= blocked {
        "waiting for a CPU"
    } else if on_cpu >= blocked {
        "on a CPU"
    } else {
        "blocked in the kernel"
    };
    format!(
        "{cause}: of the last {} ms, {} ms on a CPU, {} ms waiting for one, {} ms blocked; thread state {}",
        elapsed_ns / 1_000_000,
        on_cpu / 1_000_000,
        waiting / 1_000_000,
        blocked / 1_000_000,
        now.state
    )
}

/// Where in the kernel a thread sleeps: its wait channel, and the top of its kernel stack
/// where it may be read (root), e.g. `folio_wait_bit_common` under `filemap_splice_read`.
fn where_blocked(tid: i32) -> String {
    let mut out = String::new();
    if let Ok(wchan) = std::fs::read_to_string(format!("/proc/self/task/{tid}/wchan")) {
        if !wchan.is_empty() && wchan != "0" {
            out.push_str(&format!("; in {wchan}"));
        }
    }
    if let Ok(stack) = std::fs::read_to_string(format!("/proc/self/task/{tid}/stack")) {
        let frames: Vec<&str> = stack
            .lines()
            .filter_map(|l| l.split_whitespace().nth(1))
            .map(|f| f.split('+').next().unwrap_or(f))
            .take(8)
            .collect();
        if !frames.is_empty() {
            out.push_str(&format!("; stack {}", frames.join(" < ")));
        }
    }
    out
}

/// One socket thread's current poll.
struct Slot {
    thread: String,
    /// The kernel's id of the thread, for its scheduler counters.
    tid: i32,
    /// The counters when the watchdog first saw the poll in progress, with that poll's
    /// `poll_started_us` and the watchdog's clock then.
    baseline: Mutex<Option<(u64, u64, Sched)>>,
    /// Start of the outermost poll in progress, as µs since `Registry::epoch` plus 1; 0 when
    /// idle.
    poll_started_us: AtomicU64,
    /// The innermost activity being polled.
    activity: Mutex<Activity>,
    /// `poll_started_us` of the poll already reported, so each stall is logged once.
    reported_us: AtomicU64,
    /// Where the poll in progress (its `poll_started_us`) was last seen asleep in the kernel,
    /// and in how many of the watchdog's looks: a thread that slept and has just woken is
    /// runnable when the stall is reported, and its stack then says nothing.
    blocked_seen: Mutex<Option<(u64, u32, String)>>,
}

/// The slots of one server's socket threads.
pub struct Registry {
    /// Unique in the process, unlike an address that a later registry could reuse.
    id: u64,
    epoch: Instant,
    slots: Mutex<Vec<Arc<Slot>>>,
    threshold_us: u64,
    metrics: Arc<NetMetrics>,
    stop: AtomicBool,
    /// When the watchdog thread last looked (`now_us`), to tell when it did not get a CPU
    /// either.
    last_check_us: AtomicU64,
}

static NEXT_REGISTRY_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// This thread's slot in each registry that has polled on it (a process can run several
    /// servers, as the tests do).
    static SLOTS: RefCell<Vec<(u64, Arc<Slot>)>> = const { RefCell::new(Vec::new()) };
}

impl Registry {
    pub fn new(threshold: Duration, metrics: Arc<NetMetrics>) -> Arc<Registry> {
        Arc::new(Registry {
            id: NEXT_REGISTRY_ID.fetch_add(1, Ordering::Relaxed),
            epoch: Instant::now(),
            slots: Mutex::new(Vec::new()),
            threshold_us: threshold.as_micros().max(1) as u64,
            metrics,
            stop: AtomicBool::new(false),
            last_check_us: AtomicU64::new(0),
        })
    }

    fn now_us(&self) -> u64 {
        self.epoch.elapsed().as_micros() as u64 + 1
    }

    fn slot(self: &Arc<Self>) -> Arc<Slot> {
        SLOTS.with(|s| {
            let mut s = s.borrow_mut();
            if let Some((_, slot)) = s.iter().find(|(id, _)| *id == self.id) {
                return slot.clone();
            }
            let slot = Arc::new(Slot {
                thread: std::thread::current().name().unwrap_or("unnamed").to_string(),
                // SAFETY: gettid has no preconditions.
                tid: unsafe { libc::gettid() },
                baseline: Mutex::new(None),
                poll_started_us: AtomicU64::new(0),
                activity: Mutex::new(Activity { what: "", peer: None }),
                reported_us: AtomicU64::new(0),
                blocked_seen: Mutex::new(None),
            });
            self.slots.lock().unwrap().push(slot.clone());
            s.push((self.id, slot.clone()));
            slot
        })
    }

    /// Starts the watchdog thread and the lateness probe (on the current runtime). Both
    /// end after [`Registry::stop`].
    pub fn start(self: &Arc<Self>) {
        let registry = self.clone();
        let check = Duration::from_micros((self.threshold_us / 4).clamp(1_000, 50_000));
        std::thread::Builder::new()
            .name("laminar-watchdog".into())
            .spawn(move || {
                while !registry.stop.load(Ordering::Acquire) {
                    std::thread::sleep(check);
                    for line in registry.check() {
                        laminar_metrics::warn!("{line}");
                    }
                }
            })
            .expect("spawn watchdog thread");
        let registry = self.clone();
        tokio::spawn(async move {
            let interval = Duration::from_millis(PROBE_INTERVAL_MS);
            while !registry.stop.load(Ordering::Acquire) {
                let due = tokio::time::Instant::now() + interval;
                tokio::time::sleep_until(due).await;
                let late = tokio::time::Instant::now().saturating_duration_since(due);
                registry.metrics.event_loop_lateness_us.record(late);
            }
        });
    }

    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
    }

    /// One look at every slot; returns the lines to log for stalls newly over the threshold.
    fn check(&self) -> Vec<String> {
        let mut reports = Vec::new();
        let now = self.now_us();
        let last_check = self.last_check_us.swap(now, Ordering::Relaxed);
        for slot in self.slots.lock().unwrap().iter() {
            let started = slot.poll_started_us.load(Ordering::Acquire);
            if started == 0 {
                continue;
            }
            // The scheduler counters when this poll was first seen running (at most one
            // check interval after it began), so that a stall can say where its time went.
            let (baseline, seen_before) = {
                let mut b = slot.baseline.lock().unwrap();
                let seen_before = b.is_some_and(|(s, _, _)| s == started);
                if !seen_before {
                    *b = Sched::read(slot.tid).map(|sched| (started, now, sched));
                }
                (*b, seen_before)
            };
            let sched = Sched::read(slot.tid);
            if seen_before && sched.is_some_and(|s| s.state != 'R') {
                self.note_blocked(slot, started);
            }
            if now.saturating_sub(started) < self.threshold_us {
                continue;
            }
            if slot.reported_us.swap(started, Ordering::AcqRel) == started {
                continue;
            }
            let a = *slot.activity.lock().unwrap();
            self.metrics.stalls_total.fetch_add(1, Ordering::Relaxed);
            let peer = a.peer.map(|p| format!(" for {p}")).unwrap_or_default();
            let cause = match (baseline, sched) {
                (Some((_, seen_us, before)), Some(sched)) if seen_us < now => {
                    let mut described = describe_stall(before, sched, (now - seen_us) * 1000);
                    if described.starts_with("waiting") {
                        self.metrics
                            .stalls_waiting_for_cpu_total
                            .fetch_add(1, Ordering::Relaxed);
                    }
                    if sched.state != 'R' {
                        described.push_str(&where_blocked(slot.tid));
                    } else if let Some((_, looks, at)) = slot
                        .blocked_seen
                        .lock()
                        .unwrap()
                        .as_ref()
                        .filter(|(s, _, _)| *s == started)
                    {
                        described.push_str(&format!("; asleep at {looks} earlier look(s){at}"));
                    }
                    format!(" ({described})")
                }
                // First seen only now, past its threshold: the watchdog thread itself did
                // not run in between.
                (Some((_, seen_us, _)), _) if seen_us == now && last_check != 0 => format!(
                    " (the watchdog itself had not run for {} ms: the machine's CPUs were taken)",
                    now.saturating_sub(last_check) / 1000
                ),
                _ => String::new(),
            };
            reports.push(format!(
                "socket thread {} stalled: one poll has run {} ms so far, {}{peer}{cause}",
                slot.thread,
                (now - started) / 1000,
                a.what
            ));
        }
        reports
    }

    /// Records where a long poll's thread sleeps in the kernel, unless the poll ended while
    /// looking (the thread then sleeps in `epoll_wait`, between polls).
    fn note_blocked(&self, slot: &Slot, started: u64) {
        let at = where_blocked(slot.tid);
        if slot.poll_started_us.load(Ordering::Acquire) != started {
            return;
        }
        let mut seen = slot.blocked_seen.lock().unwrap();
        let looks = match &*seen {
            Some((s, looks, _)) if *s == started => looks + 1,
            _ => 1,
        };
        *seen = Some((started, looks, at));
    }
}

/// A future whose polls are marked on the polling thread's slot.
pub struct Doing<F> {
    inner: Pin<Box<F>>,
    registry: Arc<Registry>,
    activity: Activity,
}

/// Marks each poll of `f` as `what` (for `peer`) while it runs.
pub fn doing<F: Future>(
    registry: &Arc<Registry>,
    what: &'static str,
    peer: Option<SocketAddr>,
    f: F,
) -> Doing<F> {
    Doing {
        inner: Box::pin(f),
        registry: registry.clone(),
        activity: Activity { what, peer },
    }
}

impl<F: Future> Future for Doing<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let slot = self.registry.slot();
        let outer = std::mem::replace(&mut *slot.activity.lock().unwrap(), self.activity);
        let outermost = slot.poll_started_us.load(Ordering::Relaxed) == 0;
        if outermost {
            slot.poll_started_us
                .store(self.registry.now_us(), Ordering::Release);
        }
        // Restores the slot even if the inner poll panics, or the thread would look busy
        // (and every later poll nested) for the rest of its life.
        let registry = self.registry.clone();
        let _restore = Restore {
            slot: &slot,
            registry: &registry,
            outer,
            outermost,
        };
        self.inner.as_mut().poll(cx)
    }
}

struct Restore<'a> {
    slot: &'a Slot,
    registry: &'a Registry,
    outer: Activity,
    outermost: bool,
}

impl Drop for Restore<'_> {
    fn drop(&mut self) {
        if let Ok(mut a) = self.slot.activity.lock() {
            *a = self.outer;
        }
        if self.outermost {
            let started = self.slot.poll_started_us.swap(0, Ordering::AcqRel);
            let ran_us = self.registry.now_us().saturating_sub(started);
            if ran_us >= self.registry.threshold_us {
                self.registry.metrics.stalled_poll_us.record_us(ran_us);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stall_says_where_its_time_went() {
        let at = |on_cpu_ms: u64, waiting_ms: u64| Sched {
            on_cpu_ns: on_cpu_ms * 1_000_000,
            waiting_ns: waiting_ms * 1_000_000,
            state: 'R',
        };
        let d = describe_stall(at(10, 5), at(15, 45), 50_000_000);
        assert!(
            d.starts_with("waiting for a CPU: of the last 50 ms, 5 ms on a CPU, 40 ms waiting"),
            "{d}"
        );
        let d = describe_stall(at(0, 0), at(48, 1), 50_000_000);
        assert!(d.starts_with("on a CPU"), "{d}");
        let d = describe_stall(at(0, 0), at(1, 1), 50_000_000);
        assert!(d.starts_with("blocked in the kernel"), "{d}");
        // This thread's own counters can be read (a kernel with schedstats).
        let me = Sched::read(unsafe { libc::gettid() });
        if let Some(me) = me {
            assert_eq!(me.state, 'R', "the reading thread runs");
        }
    }

    /// A poll that slept and then computes is runnable when its stall is reported; where it
    /// slept is still said, from the watchdog's earlier looks.
    #[test]
    fn a_stall_that_slept_says_where_after_it_woke() {
        if Sched::read(unsafe { libc::gettid() }).is_none() {
            eprintln!("no schedstat on this kernel");
            return;
        }
        let registry = Registry::new(Duration::from_millis(150), Arc::new(NetMetrics::default()));
        let worker = {
            let registry = registry.clone();
            std::thread::spawn(move || {
                let stall = doing(&registry, "testing", None, async {
                    std::thread::sleep(Duration::from_millis(100));
                    let spin = Instant::now();
                    while spin.elapsed() < Duration::from_millis(250) {
                        std::hint::spin_loop();
                    }
                });
                tokio::runtime::Builder::new_current_thread()
                    .build()
                    .unwrap()
                    .block_on(stall);
            })
        };
        let mut reports = Vec::new();
        while !worker.is_finished() {
            std::thread::sleep(Duration::from_millis(5));
            reports.extend(registry.check());
        }
        worker.join().unwrap();
        assert_eq!(reports.len(), 1, "{reports:?}");
        assert!(reports[0].contains("testing"), "{}", reports[0]);
        assert!(reports[0].contains("thread state R; asleep at"), "{}", reports[0]);
    }
}
