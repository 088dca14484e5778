//! The FUSE file system: every operation is passed through to a source directory, after the
//! fault rules have had their say (a delay, an error), and, in lazy mode, writes and size
//! changes stay in memory until the file is fsynced (see `pages`), and creations, removals
//! and renames can be taken back until their directory (or the file) is (see `namespace`).
//!
//! Delayed operations are finished and answered on a thread of their own, so that a stalled
//! file never holds up the FUSE threads that serve the other files: the stall is what the
//! caller of `write(2)` sees, as behind a slow disk, and nothing else.

use std::ffi::{CString, OsStr};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner, OpenFlags,
    RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen,
    ReplyStatfs, ReplyWrite, Request, TimeOrNow, WriteFlags,
};

use crate::rules::Op;
use crate::state::FileState;
pub use crate::state::{Options, PowerCut, Shared, Stats};

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
