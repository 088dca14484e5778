//! The one interface through which the storage engine touches files.
//!
//! Every call here may block on a disk, so none of it may run on a socket thread. There are
//! three implementations: [`RealStorage`] (the filesystem), [`SimStorage`] (in memory, with
//! a crash that drops everything not synced) and [`FaultyStorage`] (wraps either, adding
//! latency, errors and torn writes).

mod faulty;
mod real;
mod sim;

use std::fmt::Debug;
use std::io;
use std::os::fd::RawFd;
use std::path::Path;
use std::sync::Arc;

pub use faulty::{Fault, FaultyStorage};
pub use real::{noatime_refused, RealStorage};
pub use sim::SimStorage;

pub trait Storage: Send + Sync + Debug + 'static {
    fn create_dir_all(&self, path: &Path) -> io::Result<()>;
    /// The names (not paths) of the entries of a directory.
    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>>;
    fn exists(&self, path: &Path) -> bool;
    /// Opens a file for reading and writing. With `create`, a missing file is created empty;
    /// an existing one is never truncated.
    fn open(&self, path: &Path, create: bool) -> io::Result<Arc<dyn StorageFile>>;
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    fn remove_dir_all(&self, path: &Path) -> io::Result<()>;
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Makes the directory's entries durable: needed after a create, rename or remove.
    fn sync_dir(&self, path: &Path) -> io::Result<()>;
}

#[allow(clippy::len_without_is_empty)] // a file's length is an I/O call, not a collection's
pub trait StorageFile: Send + Sync + Debug {
    fn len(&self) -> io::Result<u64>;
    /// Reads up to `buf.len()` bytes at `pos`; fewer only at the end of the file.
    fn read_at(&self, buf: &mut [u8], pos: u64) -> io::Result<usize>;
    fn write_all_at(&self, buf: &[u8], pos: u64) -> io::Result<()>;
    /// Writes `parts` one after another from `pos`, whole: a batch's new header and its
    /// records from the request's buffer, without joining them first. Files that are not
    /// real files join them and write once.
    fn write_parts_at(&self, parts: &[&[u8]], pos: u64) -> io::Result<()> {
        match parts {
            [one] => self.write_all_at(one, pos),
            _ => self.write_all_at(&parts.concat(), pos),
        }
    }
    /// `fdatasync`: the data and the size are durable when it returns.
    fn sync_data(&self) -> io::Result<()>;
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// Grows the file to at least `len` bytes with blocks reserved, so that writes below
    /// `len` do not change the file's size (and so mostly avoid journal commits).
    fn allocate(&self, len: u64) -> io::Result<()>;
    /// The descriptor, for zero-copy sends; `None` for files that are not real files.
    fn raw_fd(&self) -> Option<RawFd>;
    /// Whether `[pos, pos+len)` is in the page cache, when that can be known. Files that are
    /// not real files answer `None`.
    fn is_resident(&self, _pos: u64, _len: u64) -> Option<bool> {
        None
    }
}

/// Reads exactly `buf.len()` bytes at `pos`, or fails with `UnexpectedEof`.
pub fn read_exact_at(file: &dyn StorageFile, buf: &mut [u8], pos: u64) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        let n = file.read_at(&mut buf[done..], pos + done as u64)?;
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "short read"));
        }
        done += n;
    }
    Ok(())
}

/// Replaces `dir/name` with `bytes` atomically and durably: `name.tmp` is written and synced,
/// renamed over `name`, and the directory is synced. After a crash the file holds either
/// the old bytes or the new ones, never a mix.
pub fn write_atomically(storage: &dyn Storage, dir: &Path, name: &str, bytes: &[u8]) -> io::Result<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    let file = storage.open(&tmp, true)?;
    file.set_len(0)?;
    file.write_all_at(bytes, 0)?;
    file.sync_data()?;
    storage.rename(&tmp, &dir.join(name))?;
    storage.sync_dir(dir)
}

/// Creates `dir` and its missing parents durably: each directory created is made durable by
/// an fsync of its parent (a directory's name is an entry of its parent, which only an fsync
/// of the parent makes durable; Kafka's LogManager does the same). `dir`'s parent is synced
/// even when `dir` exists: an earlier start may have died between the two.
pub fn create_dir_all_durably(storage: &dyn Storage, dir: &Path) -> io::Result<()> {
    let mut missing = vec![dir];
    let mut at = dir.parent();
    while let Some(d) = at.filter(|d| !d.as_os_str().is_empty() && !storage.exists(d)) {
        missing.push(d);
        at = d.parent();
    }
    storage.create_dir_all(dir)?;
    for d in missing.into_iter().rev() {
        let parent = d
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        storage.sync_dir(parent)?;
    }
    Ok(())
}

/// Removes `name` from `dir`, durably (the directory is fsynced); nothing if it is not there.
pub fn remove_durably(storage: &dyn Storage, dir: &Path, name: &str) -> io::Result<()> {
    match storage.remove_file(&dir.join(name)) {
        Ok(()) => storage.sync_dir(dir),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Reads a whole (small) file; `Ok(None)` if it does not exist.
pub fn read_whole(storage: &dyn Storage, path: &Path) -> io::Result<Option<Vec<u8>>> {
    let file = match storage.open(path, false) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut buf = vec![0u8; file.len()? as usize];
    read_exact_at(file.as_ref(), &mut buf, 0)?;
    Ok(Some(buf))
}
