//! Is a byte range of a file in the page cache? Answered with `cachestat(2)` (Linux 6.5+),
//! which neither reads the data nor faults anything in.

use std::os::fd::RawFd;

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
