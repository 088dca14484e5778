//! Is a byte range of a file in the page cache? Answered with `cachestat(2)` (Linux 6.5+),
//! which neither reads the data nor faults anything in. On older kernels (or where a seccomp
//! filter refuses it) the range is probed with `preadv2(RWF_NOWAIT)` instead, which reads
//! only what is cached and never waits for the disk, at the cost of copying the range once.
//! Which one is in use is decided once, and the broker says so at startup.
//!
//! `cachestat` counts a page as cached from the moment readahead puts it in the page cache,
//! before the read that fills it completes: measured here behind a throttled disk, a 1 MB
//! range it reported whole took 400-800 ms to read (readahead on this disk reaches 8 MB, and
//! a catching-up follower's fetch reads ahead of what it sends). So a range it calls cached
//! is then probed with one-byte `preadv2(RWF_NOWAIT)` reads, which fail on a page still
//! being read: at the range's last byte and every `UPTODATE_PROBE_STEP_BYTES` before it
//! (readahead fills a contiguous run of pages, front to back, so a page in flight inside the
//! range almost always shows at one of them).

use std::cell::RefCell;
use std::os::fd::RawFd;
use std::sync::OnceLock;

/// How residency is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Cachestat,
    /// `preadv2(RWF_NOWAIT)` into a scratch buffer: a short read or EAGAIN means "not all
    /// cached".
    NowaitProbe,
}

/// Set to `nowait` to use the probe even where `cachestat` works (to test the fallback).
pub const METHOD_ENV: &str = "LAMINAR_RESIDENCY";

/// The method this process uses, decided at the first call.
pub fn method() -> Method {
    static METHOD: OnceLock<Method> = OnceLock::new();
    *METHOD.get_or_init(|| {
        if std::env::var(METHOD_ENV).is_ok_and(|v| v == "nowait") {
            return Method::NowaitProbe;
        }
        // Ask about stdin's first page: any answer but ENOSYS/EPERM means the call exists.
        let range = CachestatRange { off: 0, len: 4096 };
        let mut stat = Cachestat::default();
        // SAFETY: as in `cachestat` below.
        let rc = unsafe {
            libc::syscall(
                SYS_CACHESTAT,
                0 as libc::c_uint,
                &range as *const CachestatRange,
                &mut stat as *mut Cachestat,
                0u32,
            )
        };
        let errno = std::io::Error::last_os_error().raw_os_error();
        if rc != 0 && matches!(errno, Some(libc::ENOSYS) | Some(libc::EPERM)) {
            Method::NowaitProbe
        } else {
            Method::Cachestat
        }
    })
}

/// A line for the startup log.
pub fn describe() -> &'static str {
    match method() {
        Method::Cachestat => "page-cache residency: cachestat(2)",
        Method::NowaitProbe => {
            "page-cache residency: cachestat(2) is unavailable (Linux < 6.5, or refused), so \
             each range sent is first probed with preadv2(RWF_NOWAIT), which copies it once"
        }
    }
}

#[repr(C)]
struct CachestatRange {
    off: u64,
    len: u64,
}

#[repr(C)]
#[derive(Default)]
struct Cachestat {
    nr_cache: u64,
    nr_dirty: u64,
    nr_writeback: u64,
    nr_evicted: u64,
    nr_recently_evicted: u64,
}

/// The syscall number is the same in the generic table and on x86_64.
const SYS_CACHESTAT: libc::c_long = 451;
const PAGE_BYTES: u64 = 4096;

/// `Some(true)` if every page of `[pos, pos+len)` is cached, `Some(false)` if any is not,
/// `None` if the kernel cannot tell us.
pub fn is_resident(fd: RawFd, pos: u64, len: u64) -> Option<bool> {
    if len == 0 {
        return Some(true);
    }
    match method() {
        Method::Cachestat => match cachestat(fd, pos, len) {
            Some(true) => uptodate(fd, pos, len),
            other => other,
        },
        Method::NowaitProbe => nowait_probe(fd, pos, len),
    }
}

/// The distance between the one-byte probes of a range `cachestat` found cached.
const UPTODATE_PROBE_STEP_BYTES: u64 = 32 * 1024;

/// Whether the pages of a cached range have been read in (none is still under readahead):
/// one-byte `preadv2(RWF_NOWAIT)` probes, which never wait for the disk.
fn uptodate(fd: RawFd, pos: u64, len: u64) -> Option<bool> {
    let end = pos + len;
    let mut byte = [0u8; 1];
    let mut at = pos;
    loop {
        let probe = (at + UPTODATE_PROBE_STEP_BYTES).min(end) - 1;
        let iov = libc::iovec {
            iov_base: byte.as_mut_ptr().cast(),
            iov_len: 1,
        };
        // SAFETY: one iovec over a live one-byte buffer.
        let rc = unsafe { libc::preadv2(fd, &iov, 1, probe as libc::off_t, libc::RWF_NOWAIT) };
        if rc < 0 {
            return match std::io::Error::last_os_error().raw_os_error() {
                Some(libc::EAGAIN) => Some(false),
                // A file system without RWF_NOWAIT (FUSE, NFS): cachestat's answer is all
                // there is, as before these probes.
                Some(libc::EOPNOTSUPP) => Some(true),
                _ => None,
            };
        }
        if rc == 0 {
            return Some(false); // past the end of the file: not what was asked
        }
        if probe + 1 >= end {
            return Some(true);
        }
        at = probe + 1;
    }
}

/// The probe's scratch buffer grows to at most this; longer ranges are probed in pieces.
const PROBE_CHUNK_BYTES: usize = 1 << 20;

fn nowait_probe(fd: RawFd, pos: u64, len: u64) -> Option<bool> {
    thread_local! {
        static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    }
    SCRATCH.with(|scratch| {
        let mut buf = scratch.borrow_mut();
        let mut at = pos;
        let end = pos + len;
        while at < end {
            let n = ((end - at) as usize).min(PROBE_CHUNK_BYTES);
            if buf.len() < n {
                buf.resize(n, 0);
            }
            let iov = libc::iovec {
                iov_base: buf.as_mut_ptr().cast(),
                iov_len: n,
            };
            // SAFETY: one iovec over `n` bytes of a live buffer.
            let rc = unsafe { libc::preadv2(fd, &iov, 1, at as libc::off_t, libc::RWF_NOWAIT) };
            if rc < 0 {
                return match std::io::Error::last_os_error().raw_os_error() {
                    Some(libc::EAGAIN) => Some(false),
                    _ => None,
                };
            }
            if (rc as usize) < n {
                // Not cached from here on (or the end of the file). The miss starts
                // readahead, which the I/O pool's read of this range then finds under way.
                return Some(false);
            }
            at += n as u64;
        }
        Some(true)
    })
}

fn cachestat(fd: RawFd, pos: u64, len: u64) -> Option<bool> {
    let first_page = pos / PAGE_BYTES;
    let last_page = (pos + len - 1) / PAGE_BYTES;
    let range = CachestatRange {
        off: first_page * PAGE_BYTES,
        len: (last_page - first_page + 1) * PAGE_BYTES,
    };
    let mut stat = Cachestat::default();
    // SAFETY: both pointers refer to live, correctly laid out structs for the call's duration.
    let rc = unsafe {
        libc::syscall(
            SYS_CACHESTAT,
            fd as libc::c_uint,
            &range as *const CachestatRange,
            &mut stat as *mut Cachestat,
            0u32,
        )
    };
    if rc != 0 {
        return None;
    }
    Some(stat.nr_cache > last_page - first_page)
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::os::fd::AsRawFd;

    /// Both methods agree: resident after a write, not after the pages are dropped.
    #[test]
    fn the_nowait_probe_tells_cached_from_evicted() {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(&vec![7u8; 256 * 1024]).unwrap();
        let fd = f.as_raw_fd();
        assert_eq!(super::nowait_probe(fd, 4096, 200 * 1024), Some(true));
        f.sync_all().unwrap();
        // SAFETY: advice on our own descriptor.
        unsafe { libc::posix_fadvise(fd, 0, 0, libc::POSIX_FADV_DONTNEED) };
        // cachestat first: a NOWAIT read that misses starts readahead of the range.
        assert_eq!(super::cachestat(fd, 4096, 200 * 1024), Some(false));
        assert_eq!(super::nowait_probe(fd, 4096, 200 * 1024), Some(false));
    }

    #[test]
    fn freshly_written_pages_are_resident() {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(&vec![7u8; 64 * 1024]).unwrap();
        match super::is_resident(f.as_raw_fd(), 0, 64 * 1024) {
            None => eprintln!("cachestat unavailable on this kernel"),
            Some(r) => assert!(r),
        }
    }
}
