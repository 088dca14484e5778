//! Is a byte range of a file in the page cache, and read in? Asked first with `cachestat(2)`
//! (Linux 6.5+), which neither reads the data nor faults anything in, so a range that is not
//! cached goes to the I/O pool without the socket thread starting any I/O for it. On older
//! kernels (or where a seccomp filter refuses it) that step is skipped. Which is in use is
//! decided once, and the broker says so at startup.
//!
//! `cachestat` counts a page as cached from the moment readahead puts it in the page cache,
//! before the read that fills it completes: measured here behind a throttled disk, a 1 MB
//! range it reported whole took 400-800 ms to read (readahead on this disk reaches 8 MB, and
//! a catching-up follower's fetch reads ahead of what it sends). So a range it calls cached
//! is then read with `preadv2(RWF_NOWAIT)`, which stops at the first page still being read
//! and never waits for the disk (see `nowait_read`). One-byte probes every 32 KiB did this
//! until a folio under read between two probes got through and `sendfile` waited 51 ms for it
//! on a socket thread.
//!
//! What is left: a page evicted between this check and the `sendfile` that follows would be
//! read again by `sendfile`. The check runs just before each piece is sent, and eviction of a
//! page used a moment ago needs memory pressure this broker does not create itself. And a
//! `RWF_NOWAIT` read that meets a missing page or a readahead mark starts that readahead from
//! the socket thread, as `sendfile` would: it does not wait for the read, but submitting it
//! can wait briefly in the file system or the block layer (no stall was seen there).

use std::cell::RefCell;
use std::os::fd::RawFd;
use std::sync::OnceLock;

/// How residency is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Cachestat,
    /// `preadv2(RWF_NOWAIT)` alone: a short read or EAGAIN means "not all cached".
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
             each range sent is first read with preadv2(RWF_NOWAIT) alone, which starts \
             readahead of a missing range on the socket thread"
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
            Some(true) => match nowait_read(fd, pos, len) {
                Ok(uptodate) => Some(uptodate),
                // A file system without RWF_NOWAIT (FUSE, NFS): cachestat's answer is all
                // there is.
                Err(libc::EOPNOTSUPP) => Some(true),
                Err(_) => None,
            },
            other => other,
        },
        Method::NowaitProbe => nowait_read(fd, pos, len).ok(),
    }
}

/// The scratch buffer a range is read into to see whether it is up to date: every piece of
/// the range lands in this one buffer (the iovecs all point at it), so checking a MiB reads
/// it once from the page cache into 16 KiB that stay in the CPU's cache.
const SCRATCH_BYTES: usize = 16 * 1024;
/// Iovecs per `preadv2`: a MiB per call.
const IOVECS_PER_CALL: usize = 64;

/// Whether every page of `[pos, pos+len)` is cached *and* up to date, exactly: one
/// `preadv2(RWF_NOWAIT)` of the whole range, which stops at the first folio that is missing
/// or still being read (`filemap_read` returns the bytes before it, or EAGAIN) and never
/// waits for the disk. The copy is the cost of an exact answer: measured here, 36 us per MiB
/// against 166 us for a one-byte probe per page and 18 us for one per 32 KiB, which once let
/// through a folio under read that `sendfile` then waited 51 ms for
/// (`bench/results/2026-11-24-vm-cluster-s1f-kernel-stacks-2/`).
///
/// A miss can start readahead (as a `sendfile` of the range would), which the I/O pool's
/// read of the range then finds under way. `Err` carries the errno of any other failure.
fn nowait_read(fd: RawFd, pos: u64, len: u64) -> Result<bool, i32> {
    thread_local! {
        static SCRATCH: RefCell<Box<[u8]>> =
            RefCell::new(vec![0u8; SCRATCH_BYTES].into_boxed_slice());
    }
    SCRATCH.with(|scratch| {
        let mut buf = scratch.borrow_mut();
        let base = buf.as_mut_ptr();
        let mut at = pos;
        let end = pos + len;
        while at < end {
            let mut iovs = [libc::iovec {
                iov_base: base.cast(),
                iov_len: 0,
            }; IOVECS_PER_CALL];
            let mut count = 0;
            let mut asked = 0u64;
            while count < IOVECS_PER_CALL && at + asked < end {
                let n = (end - at - asked).min(SCRATCH_BYTES as u64);
                iovs[count].iov_len = n as usize;
                asked += n;
                count += 1;
            }
            // SAFETY: `count` iovecs, each over at most SCRATCH_BYTES of the live scratch
            // buffer; the kernel writing the same bytes several times is harmless.
            let rc = unsafe {
                libc::preadv2(
                    fd,
                    iovs.as_ptr(),
                    count as libc::c_int,
                    at as libc::off_t,
                    libc::RWF_NOWAIT,
                )
            };
            if rc < 0 {
                return match std::io::Error::last_os_error().raw_os_error() {
                    Some(libc::EAGAIN) => Ok(false),
                    errno => Err(errno.unwrap_or(libc::EIO)),
                };
            }
            if (rc as u64) < asked {
                // Missing or under read from here on (or the end of the file).
                return Ok(false);
            }
            at += asked;
        }
        Ok(true)
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
        assert_eq!(super::nowait_read(fd, 4096, 200 * 1024), Ok(true));
        f.sync_all().unwrap();
        // SAFETY: advice on our own descriptor.
        unsafe { libc::posix_fadvise(fd, 0, 0, libc::POSIX_FADV_DONTNEED) };
        // cachestat first: a NOWAIT read that misses starts readahead of the range.
        assert_eq!(super::cachestat(fd, 4096, 200 * 1024), Some(false));
        assert_eq!(super::nowait_read(fd, 4096, 200 * 1024), Ok(false));
    }

    /// One page missing in the middle of a range, away from any 32 KiB boundary (where the
    /// one-byte probes this replaced looked), is seen.
    #[test]
    fn one_page_missing_inside_a_range_is_seen() {
        use std::os::unix::fs::FileExt;
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(&vec![7u8; 512 * 1024]).unwrap();
        f.sync_all().unwrap();
        let fd = f.as_raw_fd();
        // Evict it all (a whole write may sit in one large folio), then read it back a page
        // at a time without readahead, skipping one.
        // SAFETY: advice on our own descriptor.
        unsafe {
            libc::posix_fadvise(fd, 0, 0, libc::POSIX_FADV_DONTNEED);
            libc::posix_fadvise(fd, 0, 0, libc::POSIX_FADV_RANDOM);
        }
        let missing = 300 * 1024 + 4096;
        let mut page = [0u8; 4096];
        for at in (0..512 * 1024).step_by(4096).filter(|&at| at != missing) {
            f.read_exact_at(&mut page, at).unwrap();
        }
        assert_eq!(super::nowait_read(fd, 0, 256 * 1024), Ok(true));
        // A miss starts the missing page's read (as `sendfile` would), and the next look
        // could find it read: before each look, wait for any such read, then evict the
        // page again.
        let evict_missing = || {
            f.read_exact_at(&mut [0u8; 4096], missing).unwrap();
            // SAFETY: advice on our own descriptor.
            unsafe { libc::posix_fadvise(fd, missing as i64, 4096, libc::POSIX_FADV_DONTNEED) };
        };
        assert_eq!(super::nowait_read(fd, 0, 512 * 1024), Ok(false));
        evict_missing();
        assert_eq!(super::nowait_read(fd, 296 * 1024, 16 * 1024), Ok(false));
        evict_missing();
        assert_eq!(super::nowait_read(fd, 0, 512 * 1024), Ok(false));
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
