//! Wraps another backend and injects faults into the files under chosen paths: latency,
//! errors and torn writes. Rules can change while files are open, so a test can make one
//! partition's disk stall in the middle of a run.

use std::io;
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use super::{Storage, StorageFile};

#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// Every `write_all_at` sleeps this long first.
    WriteLatency(Duration),
    /// Every `sync_data` sleeps this long first.
    SyncLatency(Duration),
    /// Every `read_at` sleeps this long first.
    ReadLatency(Duration),
    /// Every call that changes a file's allocation or a directory (creating a file,
    /// `allocate`, `set_len`, rename and remove) sleeps this long first: a file system
    /// whose metadata reads queue behind other reads.
    MetadataLatency(Duration),
    /// `is_resident` says `false`, and reads of more than [`COLD_READ_BYTES_MIN`] (record
    /// data, not the 61-byte batch headers an index walk reads) sleep this long: a disk that
    /// makes reading cold data slow.
    ColdReads(Duration),
    /// Every write fails with EIO.
    FailWrites,
    /// Every `sync_data` fails with EIO.
    FailSyncs,
    /// Every read fails with EIO.
    FailReads,
    /// The next write stores only its first `keep_bytes` bytes, then fails with EIO.
    TearNextWrite { keep_bytes: usize },
    /// Every `sync_data` waits until the test lets it through with
    /// [`FaultyStorage::release_syncs`]: a test can then act while an fsync is in flight.
    GatedSyncs,
}

/// Counts gated syncs that started and those let through.
#[derive(Debug, Default)]
struct SyncGate {
    counts: Mutex<(u64, u64)>,
    cv: Condvar,
}

/// Reads at most this long are not slowed by [`Fault::ColdReads`].
pub const COLD_READ_BYTES_MIN: usize = 4096;

#[derive(Debug, Default)]
struct Rules {
    rules: Vec<(PathBuf, Fault)>,
}

#[derive(Debug)]
pub struct FaultyStorage {
    inner: Arc<dyn Storage>,
    rules: Arc<Mutex<Rules>>,
    gate: Arc<SyncGate>,
}

#[derive(Debug)]
struct FaultyFile {
    inner: Arc<dyn StorageFile>,
    path: PathBuf,
    rules: Arc<Mutex<Rules>>,
    gate: Arc<SyncGate>,
}

fn eio(what: &str) -> io::Error {
    io::Error::other(format!("injected fault: {what} failed (EIO)"))
}

impl FaultyStorage {
    pub fn new(inner: Arc<dyn Storage>) -> Arc<FaultyStorage> {
        Arc::new(FaultyStorage {
            inner,
            rules: Arc::default(),
            gate: Arc::default(),
        })
    }

    /// Waits until `n` syncs held by [`Fault::GatedSyncs`] have started (in total); false if
    /// that has not happened within `timeout`.
    pub fn wait_syncs_started(&self, n: u64, timeout: Duration) -> bool {
        let counts = self.gate.counts.lock().unwrap();
        let (counts, _) = self
            .gate
            .cv
            .wait_timeout_while(counts, timeout, |c| c.0 < n)
            .unwrap();
        counts.0 >= n
    }

    /// Lets `n` more gated syncs through, in the order they started.
    pub fn release_syncs(&self, n: u64) {
        self.gate.counts.lock().unwrap().1 += n;
        self.gate.cv.notify_all();
    }

    /// Applies `fault` to every file whose path starts with `prefix`.
    pub fn inject(&self, prefix: impl Into<PathBuf>, fault: Fault) {
        self.rules.lock().unwrap().rules.push((prefix.into(), fault));
    }

    pub fn clear(&self) {
        self.rules.lock().unwrap().rules.clear();
    }

    /// Sleeps for each [`Fault::MetadataLatency`] that applies to `path`.
    fn metadata_call(&self, path: &Path) {
        metadata_latency(&self.rules, path);
    }
}

fn metadata_latency(rules: &Mutex<Rules>, path: &Path) {
    let delays: Vec<Duration> = rules
        .lock()
        .unwrap()
        .rules
        .iter()
        .filter_map(|(p, f)| match f {
            Fault::MetadataLatency(d) if path.starts_with(p) => Some(*d),
            _ => None,
        })
        .collect();
    for d in delays {
        std::thread::sleep(d);
    }
}

impl FaultyFile {
    fn matching(&self) -> Vec<Fault> {
        let rules = self.rules.lock().unwrap();
        rules
            .rules
            .iter()
            .filter(|(p, _)| self.path.starts_with(p))
            .map(|(_, f)| f.clone())
            .collect()
    }

    /// Removes and returns a pending torn write for this file.
    fn take_tear(&self) -> Option<usize> {
        let mut rules = self.rules.lock().unwrap();
        let i = rules
            .rules
            .iter()
            .position(|(p, f)| self.path.starts_with(p) && matches!(f, Fault::TearNextWrite { .. }))?;
        match rules.rules.remove(i).1 {
            Fault::TearNextWrite { keep_bytes } => Some(keep_bytes),
            _ => unreachable!(),
        }
    }
}

impl Storage for FaultyStorage {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.inner.create_dir_all(path)
    }
    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        self.inner.list_dir(path)
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn open(&self, path: &Path, create: bool) -> io::Result<Arc<dyn StorageFile>> {
        if create && !self.inner.exists(path) {
            self.metadata_call(path);
        }
        let inner = self.inner.open(path, create)?;
        Ok(Arc::new(FaultyFile {
            inner,
            path: path.to_path_buf(),
            rules: self.rules.clone(),
            gate: self.gate.clone(),
        }))
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.metadata_call(path);
        self.inner.remove_file(path)
    }
    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        self.inner.remove_dir_all(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.metadata_call(from);
        self.inner.rename(from, to)
    }
    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        self.inner.sync_dir(path)
    }
}

impl StorageFile for FaultyFile {
    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }

    fn read_at(&self, buf: &mut [u8], pos: u64) -> io::Result<usize> {
        for fault in self.matching() {
            match fault {
                Fault::ReadLatency(d) => std::thread::sleep(d),
                Fault::ColdReads(d) if buf.len() > COLD_READ_BYTES_MIN => std::thread::sleep(d),
                Fault::FailReads => return Err(eio("read")),
                _ => {}
            }
        }
        self.inner.read_at(buf, pos)
    }

    fn write_all_at(&self, buf: &[u8], pos: u64) -> io::Result<()> {
        for fault in self.matching() {
            match fault {
                Fault::WriteLatency(d) => std::thread::sleep(d),
                Fault::FailWrites => return Err(eio("write")),
                _ => {}
            }
        }
        if let Some(keep_bytes) = self.take_tear() {
            self.inner.write_all_at(&buf[..keep_bytes.min(buf.len())], pos)?;
            return Err(eio("torn write"));
        }
        self.inner.write_all_at(buf, pos)
    }

    fn sync_data(&self) -> io::Result<()> {
        for fault in self.matching() {
            match fault {
                Fault::SyncLatency(d) => std::thread::sleep(d),
                Fault::FailSyncs => return Err(eio("fdatasync")),
                Fault::GatedSyncs => {
                    let mut counts = self.gate.counts.lock().unwrap();
                    counts.0 += 1;
                    let ticket = counts.0;
                    self.gate.cv.notify_all();
                    while counts.1 < ticket {
                        counts = self.gate.cv.wait(counts).unwrap();
                    }
                }
                _ => {}
            }
        }
        self.inner.sync_data()
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        metadata_latency(&self.rules, &self.path);
        self.inner.set_len(len)
    }

    fn allocate(&self, len: u64) -> io::Result<()> {
        metadata_latency(&self.rules, &self.path);
        self.inner.allocate(len)
    }

    fn raw_fd(&self) -> Option<RawFd> {
        self.inner.raw_fd()
    }

    fn is_resident(&self, pos: u64, len: u64) -> Option<bool> {
        if self.matching().iter().any(|f| matches!(f, Fault::ColdReads(_))) {
            return Some(false);
        }
        self.inner.is_resident(pos, len)
    }
}
