use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{Storage, StorageFile};

/// The filesystem. `allocate` uses `fallocate(2)` (mode 0, so the size grows with it);
/// `sync_data` uses `fdatasync(2)`.
#[derive(Debug, Default)]
pub struct RealStorage;

impl RealStorage {
    pub fn new() -> Arc<RealStorage> {
        Arc::new(RealStorage)
    }
}

#[derive(Debug)]
struct RealFile {
    file: File,
    #[allow(dead_code)] // kept for Debug output
    path: PathBuf,
}

/// Set once a file could not be opened with O_NOATIME (this user does not own it).
static NOATIME_REFUSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether some file was opened without O_NOATIME, so that its reads may update its access
/// time: the broker says so at startup, as a stall risk on socket threads.
pub fn noatime_refused() -> bool {
    NOATIME_REFUSED.load(std::sync::atomic::Ordering::Relaxed)
}

impl Storage for RealStorage {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        std::fs::create_dir_all(path)
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(path)? {
            out.push(entry?.file_name().to_string_lossy().into_owned());
        }
        out.sort();
        Ok(out)
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn open(&self, path: &Path, create: bool) -> io::Result<Arc<dyn StorageFile>> {
        let open = |flags| {
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(create)
                .truncate(false)
                .custom_flags(flags)
                .open(path)
        };
        // O_NOATIME: on a `relatime` mount every read of a file written since it was last
        // read updates its access time, which dirties the inode and opens a journal handle,
        // and that can wait behind a journal commit. Reads of the log happen on socket
        // threads (`sendfile`, the residency check), which must never wait on the disk.
        // Only the file's owner (or CAP_FOWNER) may ask for it; anyone else reads without.
        let file = match open(libc::O_NOATIME) {
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
                NOATIME_REFUSED.store(true, std::sync::atomic::Ordering::Relaxed);
                open(0)?
            }
            other => other?,
        };
        Ok(Arc::new(RealFile {
            file,
            path: path.to_path_buf(),
        }))
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_dir_all(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        File::open(path)?.sync_all()
    }
}

impl StorageFile for RealFile {
    fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    fn read_at(&self, buf: &mut [u8], pos: u64) -> io::Result<usize> {
        loop {
            match self.file.read_at(buf, pos) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                r => return r,
            }
        }
    }

    fn write_all_at(&self, buf: &[u8], pos: u64) -> io::Result<()> {
        self.file.write_all_at(buf, pos)
    }

    fn write_parts_at(&self, parts: &[&[u8]], pos: u64) -> io::Result<()> {
        /// `pwritev` takes at most this many buffers a call (Linux's `IOV_MAX`).
        const IOV_MAX: usize = 1024;
        let mut slices: Vec<io::IoSlice> = parts
            .iter()
            .filter(|p| !p.is_empty())
            .map(|p| io::IoSlice::new(p))
            .collect();
        let mut left = &mut slices[..];
        let mut pos = pos;
        while !left.is_empty() {
            let count = left.len().min(IOV_MAX);
            // SAFETY: `IoSlice` is ABI-compatible with `iovec` on Unix, and the `count`
            // slices it points at live (borrowed from `parts`) for the whole call.
            let written = unsafe {
                libc::pwritev(
                    self.file.as_raw_fd(),
                    left.as_ptr() as *const libc::iovec,
                    count as libc::c_int,
                    pos as libc::off_t,
                )
            };
            if written < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            if written == 0 {
                return Err(io::Error::new(io::ErrorKind::WriteZero, "pwritev wrote nothing"));
            }
            pos += written as u64;
            io::IoSlice::advance_slices(&mut left, written as usize);
        }
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.file.set_len(len)
    }

    fn allocate(&self, len: u64) -> io::Result<()> {
        let current = self.len()?;
        if len <= current {
            return Ok(());
        }
        // SAFETY: fallocate on a descriptor we own; the range is checked above.
        let rc = unsafe {
            libc::fallocate(
                self.file.as_raw_fd(),
                0,
                current as libc::off_t,
                (len - current) as libc::off_t,
            )
        };
        if rc == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::EOPNOTSUPP) {
            // tmpfs and some others: fall back to a sparse extension.
            return self.file.set_len(len);
        }
        Err(err)
    }

    fn raw_fd(&self) -> Option<RawFd> {
        Some(self.file.as_raw_fd())
    }

    fn is_resident(&self, pos: u64, len: u64) -> Option<bool> {
        crate::residency::is_resident(self.file.as_raw_fd(), pos, len)
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;

    use super::*;

    /// Parts written one after another, more of them than one `pwritev` takes, land as one
    /// write of their concatenation would.
    #[test]
    fn parts_are_written_in_order_whole() {
        let dir = tempfile::tempdir().unwrap();
        let file = RealStorage::new()
            .open(&dir.path().join("segment"), true)
            .unwrap();
        let owned: Vec<Vec<u8>> = (0..2500u32)
            .map(|i| vec![(i % 251) as u8; (i % 7) as usize])
            .collect();
        let parts: Vec<&[u8]> = owned.iter().map(|p| &p[..]).collect();
        let joined = parts.concat();
        file.write_parts_at(&parts, 100).unwrap();
        let mut back = vec![0u8; joined.len()];
        crate::backend::read_exact_at(file.as_ref(), &mut back, 100).unwrap();
        assert_eq!(back, joined);
        assert_eq!(file.len().unwrap(), 100 + joined.len() as u64);
    }

    /// Reading a file just written leaves its access time alone (O_NOATIME), where a
    /// `relatime` mount would otherwise update it, a journal write, on every such read.
    #[test]
    fn reads_do_not_update_the_access_time() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("segment");
        let file = RealStorage::new().open(&path, true).unwrap();
        file.write_all_at(&[7u8; 8192], 0).unwrap();
        let before = std::fs::metadata(&path).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        file.write_all_at(&[8u8; 16], 100).unwrap();
        let mut buf = [0u8; 64];
        file.read_at(&mut buf, 0).unwrap();
        let after = std::fs::metadata(&path).unwrap();
        assert_eq!(
            (before.atime(), before.atime_nsec()),
            (after.atime(), after.atime_nsec())
        );
    }
}
