//! What the file system and its control socket share: the inode table, each open file's
//! state (its unsynced pages), the journal of names, the fault rules and the counters, and
//! what a power cut and a sync do to them. `fs` serves FUSE requests over it.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, UNIX_EPOCH};

use fuser::{Errno, FileAttr, FileType, INodeNo};
use rand::Rng;

use crate::namespace::{Namespace, Undone};
use crate::pages::Unsynced;
use crate::rules::{Op, Rules};

/// In lazy mode attributes and entries are never cached by the kernel: sizes change behind
/// its back at a power cut, and a stale size would hide or invent bytes. Otherwise every
/// change goes through the mount, which the kernel sees, so it may cache them for a second
/// (without it, a broker that stats its files often, as Kafka does, runs several times
/// slower on the mount).
pub(crate) const LAZY_TTL: Duration = Duration::ZERO;
pub(crate) const TTL: Duration = Duration::from_secs(1);

#[derive(Debug, Clone)]
pub struct Options {
    /// Keep writes in memory until fsync, so that a power cut can drop them.
    pub lazy: bool,
    /// In lazy mode, writes fail with EIO once this many unsynced bytes are held.
    pub unsynced_max_bytes: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            lazy: false,
            unsynced_max_bytes: 4 << 30,
        }
    }
}

pub(crate) struct FileState {
    /// The file in the source directory: the "disk".
    pub(crate) backing: File,
    pub(crate) opens: u32,
    pub(crate) unsynced: Unsynced,
    pub(crate) unlinked: bool,
}

/// Inode numbers are ours, assigned at first sight of a path (1 is the root).
pub(crate) struct Nodes {
    pub(crate) by_ino: HashMap<u64, PathBuf>,
    pub(crate) by_path: HashMap<PathBuf, u64>,
    pub(crate) next: u64,
}

impl Nodes {
    pub(crate) fn ino(&mut self, rel: &Path) -> u64 {
        if let Some(&ino) = self.by_path.get(rel) {
            return ino;
        }
        let ino = self.next;
        self.next += 1;
        self.by_path.insert(rel.to_path_buf(), ino);
        self.by_ino.insert(ino, rel.to_path_buf());
        ino
    }

    /// A name a power cut took back, and every name under it.
    pub(crate) fn forget_tree(&mut self, rel: &Path) {
        let gone: Vec<PathBuf> = self
            .by_path
            .keys()
            .filter(|p| p.starts_with(rel))
            .cloned()
            .collect();
        for p in gone {
            self.forget_path(&p);
        }
    }

    pub(crate) fn forget_path(&mut self, rel: &Path) -> Option<u64> {
        let ino = self.by_path.remove(rel)?;
        self.by_ino.remove(&ino);
        Some(ino)
    }

    /// A rename moves the path and everything under it.
    pub(crate) fn rename(&mut self, from: &Path, to: &Path) {
        let moved: Vec<(PathBuf, u64)> = self
            .by_path
            .iter()
            .filter(|(p, _)| p.starts_with(from))
            .map(|(p, &i)| (p.clone(), i))
            .collect();
        for (p, ino) in moved {
            self.by_path.remove(&p);
            // `to.join("")` would end in a `/`, which a file's path must not.
            let rest = p.strip_prefix(from).unwrap();
            let new = if rest.as_os_str().is_empty() {
                to.to_path_buf()
            } else {
                to.join(rest)
            };
            self.by_path.insert(new.clone(), ino);
            self.by_ino.insert(ino, new);
        }
    }
}

#[derive(Default)]
pub struct Stats {
    pub delayed: AtomicU64,
    pub delaying_now: AtomicI64,
    pub failed: AtomicU64,
    pub power_cuts: AtomicU64,
}

/// What the file system and its control socket share.
pub struct Shared {
    pub(crate) source: PathBuf,
    pub(crate) options: Options,
    pub(crate) nodes: Mutex<Nodes>,
    pub(crate) files: Mutex<HashMap<u64, Arc<Mutex<FileState>>>>,
    /// Lazy mode: the changes to names not yet durable.
    pub(crate) namespace: Option<Mutex<Namespace>>,
    pub rules: RwLock<Rules>,
    pub stats: Stats,
}

/// What a power cut did.
#[derive(Debug, Default, PartialEq)]
pub struct PowerCut {
    pub files: u64,
    pub bytes_dropped: u64,
    pub bytes_kept: u64,
    /// Creations, removals and renames taken back.
    pub names_undone: u64,
}

impl Shared {
    pub fn new(source: PathBuf, options: Options) -> io::Result<Arc<Shared>> {
        let mut nodes = Nodes {
            by_ino: HashMap::new(),
            by_path: HashMap::new(),
            next: INodeNo::ROOT.0,
        };
        nodes.ino(Path::new(""));
        let namespace = match options.lazy {
            true => Some(Mutex::new(Namespace::new(&source)?)),
            false => None,
        };
        Ok(Arc::new(Shared {
            source,
            options,
            nodes: Mutex::new(nodes),
            files: Mutex::new(HashMap::new()),
            namespace,
            rules: RwLock::new(Rules::default()),
            stats: Stats::default(),
        }))
    }

    /// Runs `f` on the journal of names, in lazy mode.
    pub(crate) fn names<T>(&self, f: impl FnOnce(&mut Namespace) -> T) -> Option<T> {
        self.namespace.as_ref().map(|ns| f(&mut ns.lock().unwrap()))
    }

    pub fn lazy(&self) -> bool {
        self.options.lazy
    }

    pub(crate) fn ttl(&self) -> &'static Duration {
        if self.options.lazy {
            &LAZY_TTL
        } else {
            &TTL
        }
    }

    pub(crate) fn rel(&self, ino: INodeNo) -> Result<PathBuf, Errno> {
        self.nodes
            .lock()
            .unwrap()
            .by_ino
            .get(&ino.0)
            .cloned()
            .ok_or(Errno::ENOENT)
    }

    pub(crate) fn full(&self, rel: &Path) -> PathBuf {
        self.source.join(rel)
    }

    pub(crate) fn file(&self, ino: INodeNo) -> Result<Arc<Mutex<FileState>>, Errno> {
        self.files
            .lock()
            .unwrap()
            .get(&ino.0)
            .cloned()
            .ok_or(Errno::EBADF)
    }

    pub fn unsynced_bytes(&self) -> u64 {
        let files: Vec<_> = self.files.lock().unwrap().values().cloned().collect();
        files.iter().map(|f| f.lock().unwrap().unsynced.bytes()).sum()
    }

    pub(crate) fn attr(&self, ino: u64, rel: &Path) -> Result<FileAttr, Errno> {
        let md = std::fs::symlink_metadata(self.full(rel)).map_err(Errno::from)?;
        let mut size = md.len();
        let state = self.files.lock().unwrap().get(&ino).cloned();
        if let Some(state) = state {
            let s = state.lock().unwrap();
            size = s.unsynced.len(&s.backing).map_err(Errno::from)?;
        }
        let time = |secs: i64, nsecs: i64| {
            if secs >= 0 {
                UNIX_EPOCH + Duration::new(secs as u64, nsecs as u32)
            } else {
                UNIX_EPOCH
            }
        };
        Ok(FileAttr {
            ino: INodeNo(ino),
            size,
            blocks: md.blocks().max(size.div_ceil(512)),
            atime: time(md.atime(), md.atime_nsec()),
            mtime: time(md.mtime(), md.mtime_nsec()),
            ctime: time(md.ctime(), md.ctime_nsec()),
            crtime: UNIX_EPOCH,
            kind: FileType::from_std(md.file_type()).unwrap_or(FileType::RegularFile),
            perm: (md.mode() & 0o7777) as u16,
            nlink: md.nlink() as u32,
            uid: md.uid(),
            gid: md.gid(),
            rdev: md.rdev() as u32,
            blksize: 4096,
            flags: 0,
        })
    }

    pub(crate) fn entry(&self, rel: PathBuf) -> Result<FileAttr, Errno> {
        let ino = self.nodes.lock().unwrap().ino(&rel);
        self.attr(ino, &rel)
    }

    /// The rules' verdict for `op` on `rel`: Err when it must fail now, else a delay.
    pub(crate) fn verdict(&self, op: Op, rel: &Path) -> (Option<Duration>, Option<Errno>) {
        let rules = self.rules.read().unwrap();
        if rules.is_empty() {
            return (None, None);
        }
        let v = rules.check(op, &rel.to_string_lossy());
        if v.error.is_some() {
            self.stats.failed.fetch_add(1, Ordering::Relaxed);
        }
        (v.delay, v.error.map(Errno::from_i32))
    }

    /// The rules' verdict for `op` on an open file. A file unlinked while still open (a
    /// reader may keep reading it) has no path, and gets no fault.
    pub(crate) fn verdict_for(&self, op: Op, ino: INodeNo) -> (Option<Duration>, Option<Errno>) {
        match self.rel(ino) {
            Ok(rel) => self.verdict(op, &rel),
            Err(_) => (None, None),
        }
    }

    /// Opens (or reuses) the backing file of `ino` for one more open.
    pub(crate) fn open_file(
        &self,
        ino: u64,
        backing: impl FnOnce() -> io::Result<File>,
    ) -> Result<(), Errno> {
        let mut files = self.files.lock().unwrap();
        if let Some(f) = files.get(&ino) {
            f.lock().unwrap().opens += 1;
            return Ok(());
        }
        let backing = backing().map_err(Errno::from)?;
        files.insert(
            ino,
            Arc::new(Mutex::new(FileState {
                backing,
                opens: 1,
                unsynced: Unsynced::default(),
                unlinked: false,
            })),
        );
        Ok(())
    }

    /// Forgets a file's state once nobody has it open and nothing of it is unsynced (an
    /// unlinked file's unsynced data can never be read again).
    pub(crate) fn maybe_drop(&self, ino: u64) {
        let mut files = self.files.lock().unwrap();
        let done = files.get(&ino).is_some_and(|f| {
            let f = f.lock().unwrap();
            f.opens == 0 && (f.unsynced.is_empty() || f.unlinked)
        });
        if done {
            files.remove(&ino);
        }
    }

    pub(crate) fn unlinked(&self, ino: u64) {
        if let Some(f) = self.files.lock().unwrap().get(&ino) {
            f.lock().unwrap().unlinked = true;
        }
        self.maybe_drop(ino);
    }

    /// Every file with state, taken out of the map so that no file is locked under its lock.
    pub(crate) fn snapshot(&self) -> Vec<(u64, Arc<Mutex<FileState>>)> {
        self.files
            .lock()
            .unwrap()
            .iter()
            .map(|(&i, f)| (i, f.clone()))
            .collect()
    }

    /// Power cut: every file's unsynced writes and size changes are dropped (with `torn`,
    /// each file keeps a random prefix of its unsynced pages instead, ending at any byte), then
    /// every creation, removal and rename that no fsync covered is undone.
    pub fn power_cut(&self, torn: bool) -> io::Result<PowerCut> {
        // Counted first: a delayed call finishing from here on finds the power gone.
        self.stats.power_cuts.fetch_add(1, Ordering::SeqCst);
        let mut out = PowerCut::default();
        let mut rng = rand::thread_rng();
        self.each_file(|unsynced, backing| {
            if unsynced.is_empty() {
                return Ok(());
            }
            let pages = unsynced.page_count();
            let keep = if torn { rng.gen_range(0..=pages) } else { 0 };
            let torn_bytes = if torn && keep < pages {
                rng.gen_range(0..crate::pages::PAGE_BYTES as usize)
            } else {
                0
            };
            out.files += 1;
            out.bytes_kept += keep as u64 * crate::pages::PAGE_BYTES + torn_bytes as u64;
            out.bytes_dropped += (pages - keep) as u64 * crate::pages::PAGE_BYTES - torn_bytes as u64;
            unsynced.power_cut(backing, keep, torn_bytes)
        })?;
        let undone = self.names(|ns| ns.power_cut()).unwrap_or_default();
        out.names_undone = undone.len() as u64;
        let mut nodes = self.nodes.lock().unwrap();
        for u in undone {
            match u {
                Undone::Forgotten(p) => nodes.forget_tree(&p),
                Undone::Restored(_) => {}
                Undone::Moved { from, to } => {
                    nodes.forget_tree(&to);
                    nodes.rename(&from, &to);
                }
            }
        }
        drop(nodes);
        Ok(out)
    }

    /// `sync(2)`: writes every file's unsynced data to the disk and syncs it, and makes every
    /// name durable.
    pub fn sync_all(&self) -> io::Result<u64> {
        let mut bytes = 0;
        self.each_file(|unsynced, backing| {
            bytes += unsynced.bytes();
            unsynced.sync(backing, false)
        })?;
        self.names(|ns| ns.synced_all());
        Ok(bytes)
    }

    /// Runs `f` on each file's unsynced pages and disk file, one file locked at a time, and
    /// forgets the files that nobody has open and that hold nothing unsynced any more.
    pub(crate) fn each_file(
        &self,
        mut f: impl FnMut(&mut Unsynced, &File) -> io::Result<()>,
    ) -> io::Result<()> {
        for (ino, state) in self.snapshot() {
            {
                let mut state = state.lock().unwrap();
                let FileState {
                    backing, unsynced, ..
                } = &mut *state;
                f(unsynced, backing)?;
            }
            self.maybe_drop(ino);
        }
        Ok(())
    }

    pub(crate) fn write(&self, ino: INodeNo, offset: u64, data: &[u8]) -> Result<u32, Errno> {
        let f = self.file(ino)?;
        let mut f = f.lock().unwrap();
        if self.options.lazy {
            if self.unsynced_bytes_hint() > self.options.unsynced_max_bytes {
                eprintln!(
                    "faultfs: over {} unsynced bytes held; failing a write with EIO",
                    self.options.unsynced_max_bytes
                );
                return Err(Errno::EIO);
            }
            let FileState {
                backing, unsynced, ..
            } = &mut *f;
            unsynced.write(backing, offset, data).map_err(Errno::from)?;
        } else {
            use std::os::unix::fs::FileExt;
            f.backing.write_all_at(data, offset).map_err(Errno::from)?;
        }
        Ok(data.len() as u32)
    }

    /// The unsynced total, computed without taking every file's lock while one is held.
    pub(crate) fn unsynced_bytes_hint(&self) -> u64 {
        let files: Vec<_> = self.files.lock().unwrap().values().cloned().collect();
        files
            .iter()
            .filter_map(|f| f.try_lock().ok().map(|f| f.unsynced.bytes()))
            .sum()
    }

    pub(crate) fn read(&self, ino: INodeNo, offset: u64, size: u32) -> Result<Vec<u8>, Errno> {
        let f = self.file(ino)?;
        let f = f.lock().unwrap();
        f.unsynced.read(&f.backing, offset, size).map_err(Errno::from)
    }

    pub(crate) fn fail_write_back(&self, ino: INodeNo) {
        if let Ok(f) = self.file(ino) {
            f.lock().unwrap().unsynced.fail_write_back();
        }
    }

    pub(crate) fn fsync(&self, ino: INodeNo, data_only: bool) -> Result<(), Errno> {
        // The name first: `nodes` is never locked under a file's lock.
        let rel = self.rel(ino);
        let f = self.file(ino)?;
        let mut f = f.lock().unwrap();
        let FileState {
            backing, unsynced, ..
        } = &mut *f;
        unsynced.sync(backing, data_only).map_err(Errno::from)?;
        drop(f);
        // ext4 commits a file's own name with it (not the names of other files).
        if let Ok(rel) = rel {
            self.names(|ns| ns.synced_file(&rel));
        }
        Ok(())
    }

    /// Power cuts so far: a delayed call issued before a cut and finished after it belongs to
    /// a process whose power went out, and does nothing.
    pub(crate) fn cuts(&self) -> u64 {
        self.stats.power_cuts.load(Ordering::SeqCst)
    }

    /// At unmount: what the stash kept for a power cut is no longer needed.
    pub fn end(&self) {
        self.names(|ns| ns.remove_stash());
    }
}
