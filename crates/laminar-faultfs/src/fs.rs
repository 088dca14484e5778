//! The FUSE file system: every operation is passed through to a source directory, after the
//! fault rules have had their say (a delay, an error), and, in lazy mode, writes and size
//! changes stay in memory until the file is fsynced (see `pages`), and creations, removals
//! and renames can be taken back until their directory (or the file) is (see `namespace`).
//!
//! Delayed operations are finished and answered on a thread of their own, so that a stalled
//! file never holds up the FUSE threads that serve the other files: the stall is what the
//! caller of `write(2)` sees, as behind a slow disk, and nothing else.

use std::collections::HashMap;
use std::ffi::{CString, OsStr};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner, OpenFlags,
    RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen,
    ReplyStatfs, ReplyWrite, Request, TimeOrNow, WriteFlags,
};
use rand::Rng;

use crate::namespace::{Namespace, Undone};
use crate::pages::Unsynced;
use crate::rules::{Op, Rules};

/// In lazy mode attributes and entries are never cached by the kernel: sizes change behind
/// its back at a power cut, and a stale size would hide or invent bytes. Otherwise every
/// change goes through the mount, which the kernel sees, so it may cache them for a second
/// (without it, a broker that stats its files often, as Kafka does, runs several times
/// slower on the mount).
const LAZY_TTL: Duration = Duration::ZERO;
const TTL: Duration = Duration::from_secs(1);

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

struct FileState {
    /// The file in the source directory: the "disk".
    backing: File,
    opens: u32,
    unsynced: Unsynced,
    unlinked: bool,
}

/// Inode numbers are ours, assigned at first sight of a path (1 is the root).
struct Nodes {
    by_ino: HashMap<u64, PathBuf>,
    by_path: HashMap<PathBuf, u64>,
    next: u64,
}

impl Nodes {
    fn ino(&mut self, rel: &Path) -> u64 {
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
    fn forget_tree(&mut self, rel: &Path) {
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

    fn forget_path(&mut self, rel: &Path) -> Option<u64> {
        let ino = self.by_path.remove(rel)?;
        self.by_ino.remove(&ino);
        Some(ino)
    }

    /// A rename moves the path and everything under it.
    fn rename(&mut self, from: &Path, to: &Path) {
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
    source: PathBuf,
    options: Options,
    nodes: Mutex<Nodes>,
    files: Mutex<HashMap<u64, Arc<Mutex<FileState>>>>,
    /// Lazy mode: the changes to names not yet durable.
    namespace: Option<Mutex<Namespace>>,
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
    fn names<T>(&self, f: impl FnOnce(&mut Namespace) -> T) -> Option<T> {
        self.namespace.as_ref().map(|ns| f(&mut ns.lock().unwrap()))
    }

    pub fn lazy(&self) -> bool {
        self.options.lazy
    }

    fn ttl(&self) -> &'static Duration {
        if self.options.lazy {
            &LAZY_TTL
        } else {
            &TTL
        }
    }

    fn rel(&self, ino: INodeNo) -> Result<PathBuf, Errno> {
        self.nodes
            .lock()
            .unwrap()
            .by_ino
            .get(&ino.0)
            .cloned()
            .ok_or(Errno::ENOENT)
    }

    fn full(&self, rel: &Path) -> PathBuf {
        self.source.join(rel)
    }

    fn file(&self, ino: INodeNo) -> Result<Arc<Mutex<FileState>>, Errno> {
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

    fn attr(&self, ino: u64, rel: &Path) -> Result<FileAttr, Errno> {
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

    fn entry(&self, rel: PathBuf) -> Result<FileAttr, Errno> {
        let ino = self.nodes.lock().unwrap().ino(&rel);
        self.attr(ino, &rel)
    }

    /// The rules' verdict for `op` on `rel`: Err when it must fail now, else a delay.
    fn verdict(&self, op: Op, rel: &Path) -> (Option<Duration>, Option<Errno>) {
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
    fn verdict_for(&self, op: Op, ino: INodeNo) -> (Option<Duration>, Option<Errno>) {
        match self.rel(ino) {
            Ok(rel) => self.verdict(op, &rel),
            Err(_) => (None, None),
        }
    }

    /// Opens (or reuses) the backing file of `ino` for one more open.
    fn open_file(&self, ino: u64, backing: impl FnOnce() -> io::Result<File>) -> Result<(), Errno> {
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
    fn maybe_drop(&self, ino: u64) {
        let mut files = self.files.lock().unwrap();
        let done = files.get(&ino).is_some_and(|f| {
            let f = f.lock().unwrap();
            f.opens == 0 && (f.unsynced.is_empty() || f.unlinked)
        });
        if done {
            files.remove(&ino);
        }
    }

    fn unlinked(&self, ino: u64) {
        if let Some(f) = self.files.lock().unwrap().get(&ino) {
            f.lock().unwrap().unlinked = true;
        }
        self.maybe_drop(ino);
    }

    /// Every file with state, taken out of the map so that no file is locked under its lock.
    fn snapshot(&self) -> Vec<(u64, Arc<Mutex<FileState>>)> {
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
    fn each_file(&self, mut f: impl FnMut(&mut Unsynced, &File) -> io::Result<()>) -> io::Result<()> {
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

    fn write(&self, ino: INodeNo, offset: u64, data: &[u8]) -> Result<u32, Errno> {
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
    fn unsynced_bytes_hint(&self) -> u64 {
        let files: Vec<_> = self.files.lock().unwrap().values().cloned().collect();
        files
            .iter()
            .filter_map(|f| f.try_lock().ok().map(|f| f.unsynced.bytes()))
            .sum()
    }

    fn read(&self, ino: INodeNo, offset: u64, size: u32) -> Result<Vec<u8>, Errno> {
        let f = self.file(ino)?;
        let f = f.lock().unwrap();
        f.unsynced.read(&f.backing, offset, size).map_err(Errno::from)
    }

    fn fail_write_back(&self, ino: INodeNo) {
        if let Ok(f) = self.file(ino) {
            f.lock().unwrap().unsynced.fail_write_back();
        }
    }

    fn fsync(&self, ino: INodeNo, data_only: bool) -> Result<(), Errno> {
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
    fn cuts(&self) -> u64 {
        self.stats.power_cuts.load(Ordering::SeqCst)
    }

    /// At unmount: what the stash kept for a power cut is no longer needed.
    pub fn end(&self) {
        self.names(|ns| ns.remove_stash());
    }
}

fn cstring(p: &Path) -> Result<CString, Errno> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| Errno::EINVAL)
}

fn timespec(t: Option<TimeOrNow>) -> libc::timespec {
    match t {
        None => libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_OMIT,
        },
        Some(TimeOrNow::Now) => libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_NOW,
        },
        Some(TimeOrNow::SpecificTime(t)) => {
            let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
            libc::timespec {
                tv_sec: d.as_secs() as libc::time_t,
                tv_nsec: d.subsec_nanos() as libc::c_long,
            }
        }
    }
}

pub struct FaultFs {
    shared: Arc<Shared>,
}

impl FaultFs {
    pub fn new(shared: Arc<Shared>) -> FaultFs {
        FaultFs { shared }
    }

    /// Runs `f` now, or after `delay` on a thread of its own.
    fn after(&self, delay: Option<Duration>, f: impl FnOnce() + Send + 'static) {
        match delay {
            None => f(),
            Some(d) => {
                let shared = self.shared.clone();
                shared.stats.delayed.fetch_add(1, Ordering::Relaxed);
                shared.stats.delaying_now.fetch_add(1, Ordering::Relaxed);
                std::thread::spawn(move || {
                    std::thread::sleep(d);
                    f();
                    shared.stats.delaying_now.fetch_sub(1, Ordering::Relaxed);
                });
            }
        }
    }
}

impl Filesystem for FaultFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let r = self
            .shared
            .rel(parent)
            .and_then(|p| self.shared.entry(p.join(name)));
        match r {
            Ok(attr) => reply.entry(self.shared.ttl(), &attr, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.shared.rel(ino).and_then(|rel| self.shared.attr(ino.0, &rel)) {
            Ok(attr) => reply.attr(self.shared.ttl(), &attr),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let s = self.shared.clone();
        let (delay, error) = match size {
            Some(_) => s.verdict_for(Op::Truncate, ino),
            None => (None, None),
        };
        self.after(delay, move || {
            let r = (|| -> Result<FileAttr, Errno> {
                if let Some(e) = error {
                    return Err(e);
                }
                let rel = s.rel(ino)?;
                let full = s.full(&rel);
                if let Some(mode) = mode {
                    std::fs::set_permissions(&full, std::fs::Permissions::from_mode(mode & 0o7777))
                        .map_err(Errno::from)?;
                }
                if uid.is_some() || gid.is_some() {
                    std::os::unix::fs::lchown(&full, uid, gid).map_err(Errno::from)?;
                }
                if let Some(size) = size {
                    match s.file(ino) {
                        Ok(f) => {
                            let mut f = f.lock().unwrap();
                            let FileState {
                                backing, unsynced, ..
                            } = &mut *f;
                            unsynced.truncate(backing, size).map_err(Errno::from)?;
                        }
                        Err(_) if s.lazy() => {
                            // Held like a write: the file gets state of its own for it.
                            s.open_file(ino.0, || OpenOptions::new().read(true).write(true).open(&full))?;
                            let f = s.file(ino)?;
                            let mut f = f.lock().unwrap();
                            f.opens -= 1;
                            let FileState {
                                backing, unsynced, ..
                            } = &mut *f;
                            unsynced.truncate(backing, size).map_err(Errno::from)?;
                        }
                        Err(_) => OpenOptions::new()
                            .write(true)
                            .open(&full)
                            .and_then(|f| f.set_len(size))
                            .map_err(Errno::from)?,
                    }
                }
                if atime.is_some() || mtime.is_some() {
                    let times = [timespec(atime), timespec(mtime)];
                    let c = cstring(&full)?;
                    // SAFETY: a valid C string and a two-element timespec array.
                    let rc = unsafe {
                        libc::utimensat(
                            libc::AT_FDCWD,
                            c.as_ptr(),
                            times.as_ptr(),
                            libc::AT_SYMLINK_NOFOLLOW,
                        )
                    };
                    if rc != 0 {
                        return Err(Errno::from(io::Error::last_os_error()));
                    }
                }
                s.attr(ino.0, &rel)
            })();
            match r {
                Ok(attr) => reply.attr(s.ttl(), &attr),
                Err(e) => reply.error(e),
            }
        });
    }

    fn mkdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, reply: ReplyEntry) {
        let s = self.shared.clone();
        let rel = match s.rel(parent) {
            Ok(p) => p.join(name),
            Err(e) => return reply.error(e),
        };
        let (delay, error) = s.verdict(Op::Create, &rel);
        self.after(delay, move || {
            let r = error.map_or_else(
                || {
                    std::fs::DirBuilder::new()
                        .mode(mode & !umask)
                        .create(s.full(&rel))
                        .map_err(Errno::from)?;
                    s.names(|ns| ns.created(&rel));
                    s.entry(rel)
                },
                Err,
            );
            match r {
                Ok(attr) => reply.entry(s.ttl(), &attr, Generation(0)),
                Err(e) => reply.error(e),
            }
        });
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let s = self.shared.clone();
        let rel = match s.rel(parent) {
            Ok(p) => p.join(name),
            Err(e) => return reply.error(e),
        };
        let (delay, error) = s.verdict(Op::Unlink, &rel);
        self.after(delay, move || {
            let r = error.map_or_else(
                || -> Result<(), Errno> {
                    match s.names(|ns| ns.remove(&rel, false)) {
                        Some(r) => r.map_err(Errno::from)?,
                        None => std::fs::remove_file(s.full(&rel)).map_err(Errno::from)?,
                    }
                    let forgotten = s.nodes.lock().unwrap().forget_path(&rel);
                    if let Some(ino) = forgotten {
                        s.unlinked(ino);
                    }
                    Ok(())
                },
                Err,
            );
            match r {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(e),
            }
        });
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let s = &self.shared;
        let r = (|| -> Result<(), Errno> {
            let rel = s.rel(parent)?.join(name);
            match s.names(|ns| ns.remove(&rel, true)) {
                Some(r) => r.map_err(Errno::from)?,
                None => std::fs::remove_dir(s.full(&rel)).map_err(Errno::from)?,
            }
            s.nodes.lock().unwrap().forget_path(&rel);
            Ok(())
        })();
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let s = self.shared.clone();
        let paths = s
            .rel(parent)
            .and_then(|p| s.rel(newparent).map(|n| (p.join(name), n.join(newname))));
        let (from, to) = match paths {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
        let (d1, e1) = s.verdict(Op::Rename, &from);
        let (d2, e2) = s.verdict(Op::Rename, &to);
        self.after(d1.max(d2), move || {
            let r = (|| -> Result<(), Errno> {
                if let Some(e) = e1.or(e2) {
                    return Err(e);
                }
                if !flags.is_empty() {
                    return Err(Errno::EINVAL);
                }
                match s.names(|ns| ns.rename(&from, &to)) {
                    Some(r) => r.map_err(Errno::from)?,
                    None => std::fs::rename(s.full(&from), s.full(&to)).map_err(Errno::from)?,
                }
                let replaced = {
                    let mut nodes = s.nodes.lock().unwrap();
                    let replaced = nodes.forget_path(&to);
                    nodes.rename(&from, &to);
                    replaced
                };
                if let Some(ino) = replaced {
                    s.unlinked(ino);
                }
                Ok(())
            })();
            match r {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(e),
            }
        });
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let s = &self.shared;
        let r = s.rel(ino).and_then(|rel| {
            let full = s.full(&rel);
            s.open_file(ino.0, || {
                OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(&full)
                    .or_else(|_| File::open(&full))
            })
        });
        match r {
            // Without FOPEN_KEEP_CACHE the kernel drops its cached pages of the file at every
            // open, so a process started after a power cut reads what the "disk" holds.
            Ok(()) => reply.opened(FileHandle(ino.0), FopenFlags::empty()),
            Err(e) => reply.error(e),
        }
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let s = self.shared.clone();
        let rel = match s.rel(parent) {
            Ok(p) => p.join(name),
            Err(e) => return reply.error(e),
        };
        let (delay, error) = s.verdict(Op::Create, &rel);
        self.after(delay, move || {
            let r = error.map_or_else(
                || {
                    let existed = std::fs::symlink_metadata(s.full(&rel)).is_ok();
                    let file = OpenOptions::new()
                        .read(true)
                        .write(true)
                        .create(true)
                        .create_new(flags & libc::O_EXCL != 0)
                        .mode(mode & !umask)
                        .open(s.full(&rel))
                        .map_err(Errno::from)?;
                    if !existed {
                        s.names(|ns| ns.created(&rel));
                    }
                    let ino = s.nodes.lock().unwrap().ino(&rel);
                    s.open_file(ino, || Ok(file))?;
                    s.attr(ino, &rel)
                },
                Err,
            );
            match r {
                Ok(attr) => reply.created(
                    s.ttl(),
                    &attr,
                    Generation(0),
                    FileHandle(attr.ino.0),
                    FopenFlags::empty(),
                ),
                Err(e) => reply.error(e),
            }
        });
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let s = self.shared.clone();
        let (delay, error) = s.verdict_for(Op::Read, ino);
        self.after(delay, move || match error {
            Some(e) => reply.error(e),
            None => match s.read(ino, offset, size) {
                Ok(data) => reply.data(&data),
                Err(e) => reply.error(e),
            },
        });
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let s = self.shared.clone();
        let (delay, error) = s.verdict_for(Op::Write, ino);
        let cuts = s.cuts();
        let finish = move |data: &[u8], reply: ReplyWrite| match error {
            Some(e) => reply.error(e),
            None if s.cuts() != cuts => reply.written(data.len() as u32),
            None => match s.write(ino, offset, data) {
                Ok(n) => reply.written(n),
                Err(e) => reply.error(e),
            },
        };
        if delay.is_some() {
            let data = data.to_vec();
            self.after(delay, move || finish(&data, reply));
        } else {
            finish(data, reply);
        }
    }

    fn flush(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _lo: LockOwner, reply: ReplyEmpty) {
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        if let Ok(f) = self.shared.file(ino) {
            let mut f = f.lock().unwrap();
            f.opens = f.opens.saturating_sub(1);
        }
        self.shared.maybe_drop(ino.0);
        reply.ok();
    }

    fn fsync(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, datasync: bool, reply: ReplyEmpty) {
        let s = self.shared.clone();
        let (delay, error) = s.verdict_for(Op::Fsync, ino);
        let cuts = s.cuts();
        self.after(delay, move || {
            let result = match error {
                None if s.cuts() != cuts => Ok(()),
                None => s.fsync(ino, datasync),
                Some(e) => {
                    // A failed fsync loses what it did not write back, as a kernel's does.
                    s.fail_write_back(ino);
                    Err(e)
                }
            };
            match result {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(e),
            }
        });
    }

    fn readdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        let s = &self.shared;
        let r = (|| -> Result<Vec<(u64, FileType, std::ffi::OsString)>, Errno> {
            let rel = s.rel(ino)?;
            let mut out = vec![
                (ino.0, FileType::Directory, ".".into()),
                (ino.0, FileType::Directory, "..".into()),
            ];
            let mut names: Vec<_> = std::fs::read_dir(s.full(&rel))
                .map_err(Errno::from)?
                .filter_map(|e| e.ok())
                .collect();
            names.sort_by_key(|e| e.file_name());
            let mut nodes = s.nodes.lock().unwrap();
            for e in names {
                let kind = e
                    .file_type()
                    .ok()
                    .and_then(FileType::from_std)
                    .unwrap_or(FileType::RegularFile);
                let child = nodes.ino(&rel.join(e.file_name()));
                out.push((child, kind, e.file_name()));
            }
            Ok(out)
        })();
        match r {
            Ok(entries) => {
                for (i, (ino, kind, name)) in entries.into_iter().enumerate().skip(offset as usize) {
                    if reply.add(INodeNo(ino), i as u64 + 1, kind, name) {
                        break;
                    }
                }
                reply.ok();
            }
            Err(e) => reply.error(e),
        }
    }

    fn fsyncdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        let s = self.shared.clone();
        let (delay, error, rel) = match s.rel(ino) {
            Ok(rel) => {
                let (d, e) = s.verdict(Op::Fsync, &rel);
                (d, e, rel)
            }
            Err(e) => (None, Some(e), PathBuf::new()),
        };
        let cuts = s.cuts();
        self.after(delay, move || {
            let r = error.map_or_else(
                || {
                    if s.cuts() != cuts {
                        return Ok(());
                    }
                    File::open(s.full(&rel))
                        .and_then(|d| d.sync_all())
                        .map_err(Errno::from)?;
                    s.names(|ns| ns.synced_dir(&rel));
                    Ok(())
                },
                Err,
            );
            match r {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(e),
            }
        });
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let r = (|| -> Result<libc::statvfs, Errno> {
            let c = cstring(&self.shared.source)?;
            // SAFETY: statvfs is plain data, and `c` is a valid C string.
            let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
            if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
                return Err(Errno::from(io::Error::last_os_error()));
            }
            Ok(st)
        })();
        match r {
            Ok(st) => reply.statfs(
                st.f_blocks,
                st.f_bfree,
                st.f_bavail,
                st.f_files,
                st.f_ffree,
                st.f_bsize as u32,
                st.f_namemax as u32,
                st.f_frsize as u32,
            ),
            Err(e) => reply.error(e),
        }
    }

    fn fallocate(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let s = self.shared.clone();
        let (delay, error) = s.verdict_for(Op::Allocate, ino);
        self.after(delay, move || {
            let r = s.file(ino).and_then(|f| {
                if let Some(e) = error {
                    return Err(e);
                }
                let mut f = f.lock().unwrap();
                if s.lazy() && mode == 0 {
                    // An extending allocation changes the size, which waits for an fsync like a
                    // write; the blocks themselves are the disk's business.
                    let FileState {
                        backing, unsynced, ..
                    } = &mut *f;
                    return unsynced.extend(backing, offset + length).map_err(Errno::from);
                }
                // SAFETY: a valid descriptor; the kernel checks the range and mode.
                let rc = unsafe {
                    libc::fallocate(
                        f.backing.as_raw_fd(),
                        mode,
                        offset as libc::off_t,
                        length as libc::off_t,
                    )
                };
                if rc != 0 {
                    return Err(Errno::from(io::Error::last_os_error()));
                }
                Ok(())
            });
            match r {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(e),
            }
        });
    }
}
