//! The writes a file has had since its last fsync, held in memory page by page as a kernel's
//! page cache holds them, so that a "power cut" can drop them (LazyFS's idea). The backing
//! file in the source directory is the disk: it holds only what was fsynced. A size change
//! (a truncate, an extending fallocate) is held too, and reaches the disk with the next
//! fsync of the file, or never.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

pub const PAGE_BYTES: u64 = 4096;

#[derive(Default)]
pub struct Unsynced {
    /// Page index -> the page's whole content as the file's users see it.
    pages: BTreeMap<u64, Box<[u8]>>,
    /// The end of the furthest unsynced write: the file's size is the larger of this and
    /// the backing file's size.
    dirty_end: u64,
    /// Pages whose write-back failed (an fsync answered EIO): as Linux does since 4.13, they
    /// stay readable, marked clean, and no later fsync writes them; a power cut drops them.
    lost: BTreeSet<u64>,
    /// The size a truncate or an extension set since the last fsync, if any.
    size: Option<u64>,
    /// The smallest size truncated to since the last fsync: the disk's bytes from here on are
    /// no longer the file's (they read as zeros until written again).
    shrunk_to: Option<u64>,
}

/// Reads what the disk holds at `offset` that is still the file's: nothing at or past
/// `shrunk_to`, a truncation not yet synced.
fn read_disk(backing: &File, shrunk_to: Option<u64>, buf: &mut [u8], offset: u64) -> io::Result<()> {
    let valid = shrunk_to.map_or(buf.len(), |end| {
        end.saturating_sub(offset).min(buf.len() as u64) as usize
    });
    read_some_at(backing, &mut buf[..valid], offset)
}

/// Reads as much of `buf` as the file holds at `offset`; the rest stays as it was (zeros).
fn read_some_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

impl Unsynced {
    /// Nothing held: no page, no size change.
    pub fn is_empty(&self) -> bool {
        self.pages.is_empty() && self.size.is_none()
    }

    pub fn bytes(&self) -> u64 {
        self.pages.len() as u64 * PAGE_BYTES
    }

    /// The file's size as its users see it.
    pub fn len(&self, backing: &File) -> io::Result<u64> {
        let base = match self.size {
            Some(size) => size,
            None => backing.metadata()?.len(),
        };
        Ok(base.max(self.dirty_end))
    }

    pub fn write(&mut self, backing: &File, offset: u64, data: &[u8]) -> io::Result<()> {
        let end = offset + data.len() as u64;
        let mut at = offset;
        while at < end {
            let page = at / PAGE_BYTES;
            let page_start = page * PAGE_BYTES;
            let from = (at - page_start) as usize;
            let to = ((end - page_start).min(PAGE_BYTES)) as usize;
            let buf = match self.pages.entry(page) {
                std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::btree_map::Entry::Vacant(e) => {
                    let mut buf = vec![0u8; PAGE_BYTES as usize].into_boxed_slice();
                    // A partly written page keeps what the disk already holds around the write.
                    if from > 0 || to < PAGE_BYTES as usize {
                        read_disk(backing, self.shrunk_to, &mut buf, page_start)?;
                    }
                    e.insert(buf)
                }
            };
            let src = (at - offset) as usize;
            buf[from..to].copy_from_slice(&data[src..src + (to - from)]);
            // Written again: dirty, and written back by the next fsync.
            self.lost.remove(&page);
            at = page_start + to as u64;
        }
        self.dirty_end = self.dirty_end.max(end);
        Ok(())
    }

    /// Up to `len` bytes at `offset`: the disk's content with the unsynced pages laid over it.
    pub fn read(&self, backing: &File, offset: u64, len: u32) -> io::Result<Vec<u8>> {
        let size = self.len(backing)?;
        if offset >= size {
            return Ok(Vec::new());
        }
        let end = (offset + len as u64).min(size);
        let mut out = vec![0u8; (end - offset) as usize];
        read_disk(backing, self.shrunk_to, &mut out, offset)?;
        for (&page, buf) in self.pages.range(offset / PAGE_BYTES..=(end - 1) / PAGE_BYTES) {
            let page_start = page * PAGE_BYTES;
            let from = offset.max(page_start);
            let to = end.min(page_start + PAGE_BYTES);
            out[(from - offset) as usize..(to - offset) as usize]
                .copy_from_slice(&buf[(from - page_start) as usize..(to - page_start) as usize]);
        }
        Ok(out)
    }

    /// A truncation (or an extension by `ftruncate`): held until the next fsync; unsynced
    /// pages past the new end go away.
    pub fn truncate(&mut self, backing: &File, size: u64) -> io::Result<()> {
        if size < self.len(backing)? {
            self.shrunk_to = Some(self.shrunk_to.map_or(size, |s| s.min(size)));
        }
        self.size = Some(size);
        let first_gone = size.div_ceil(PAGE_BYTES);
        self.pages.split_off(&first_gone);
        self.lost.split_off(&first_gone);
        if !size.is_multiple_of(PAGE_BYTES) {
            if let Some(buf) = self.pages.get_mut(&(size / PAGE_BYTES)) {
                buf[(size % PAGE_BYTES) as usize..].fill(0);
            }
        }
        self.dirty_end = self.dirty_end.min(size);
        Ok(())
    }

    /// An extending fallocate: the size grows (held until the next fsync, like a truncate).
    pub fn extend(&mut self, backing: &File, end: u64) -> io::Result<()> {
        if end > self.len(backing)? {
            self.size = Some(end);
        }
        Ok(())
    }

    /// Writes the first `keep` unsynced pages (in file order; none that was lost) to the
    /// disk, and the first `torn_bytes` bytes of the page after them, and forgets the others
    /// but the lost ones. Not synced: the caller fsyncs the backing file when this is a real
    /// fsync.
    fn write_back(&mut self, backing: &File, keep: usize, torn_bytes: usize) -> io::Result<()> {
        let size = self.len(backing)?;
        let lost = &self.lost;
        let pages = self.pages.iter().filter(|(p, _)| !lost.contains(p));
        for (i, (&page, buf)) in pages.take(keep.saturating_add(1)).enumerate() {
            let page_start = page * PAGE_BYTES;
            let mut n = (size.saturating_sub(page_start)).min(PAGE_BYTES) as usize;
            if i == keep {
                n = n.min(torn_bytes);
            }
            backing.write_all_at(&buf[..n], page_start)?;
        }
        self.pages.retain(|p, _| lost.contains(p));
        if self.lost.is_empty() {
            self.dirty_end = 0;
        }
        Ok(())
    }

    /// An fsync failed: every page not yet written back is lost (see `lost`).
    pub fn fail_write_back(&mut self) {
        self.lost.extend(self.pages.keys().copied());
    }

    /// fsync: the size and every unsynced page go to the disk, and the disk is synced.
    pub fn sync(&mut self, backing: &File, data_only: bool) -> io::Result<()> {
        // A size set since the last fsync goes to the disk; otherwise the pages written back
        // decide it, as they always did.
        let size = match self.size {
            Some(_) => Some(self.len(backing)?),
            None => None,
        };
        if let Some(shrunk) = self.shrunk_to.take() {
            backing.set_len(shrunk)?;
        }
        self.write_back(backing, usize::MAX, 0)?;
        if let Some(size) = self.size.take().and(size) {
            backing.set_len(size)?;
        }
        if data_only {
            backing.sync_data()
        } else {
            backing.sync_all()
        }
    }

    /// Power cut: the disk keeps only the first `keep` unsynced pages and `torn_bytes` of
    /// the next (0 and 0: none; a torn write keeps a prefix that ends at any byte), as if the
    /// rest never left the page cache; a size change not synced is lost.
    pub fn power_cut(&mut self, backing: &File, keep: usize, torn_bytes: usize) -> io::Result<()> {
        self.write_back(backing, keep, torn_bytes)?;
        self.lost.clear();
        self.pages.clear();
        self.dirty_end = 0;
        self.size = None;
        self.shrunk_to = None;
        Ok(())
    }

    pub fn page_count(&self) -> usize {
        self.pages.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn backing(content: &[u8]) -> (tempfile::TempDir, File) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, content).unwrap();
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        (dir, f)
    }

    fn disk(f: &File) -> Vec<u8> {
        let mut out = vec![0u8; f.metadata().unwrap().len() as usize];
        f.read_exact_at(&mut out, 0).unwrap();
        out
    }

    #[test]
    fn reads_see_unsynced_writes_and_the_disk_does_not() {
        let (_d, f) = backing(b"0123456789");
        let mut u = Unsynced::default();
        u.write(&f, 5, b"abcdefgh").unwrap();
        assert_eq!(u.read(&f, 0, 100).unwrap(), b"01234abcdefgh");
        assert_eq!(u.read(&f, 11, 100).unwrap(), b"gh");
        assert_eq!(u.len(&f).unwrap(), 13);
        assert_eq!(disk(&f), b"0123456789");
        u.sync(&f, true).unwrap();
        assert!(u.is_empty());
        assert_eq!(disk(&f), b"01234abcdefgh");
    }

    #[test]
    fn writes_across_pages_and_a_power_cut() {
        let (_d, f) = backing(&[7u8; 100]);
        let mut u = Unsynced::default();
        let data: Vec<u8> = (0..3 * PAGE_BYTES as usize).map(|i| i as u8).collect();
        u.write(&f, 50, &data).unwrap();
        assert_eq!(u.page_count(), 4);
        let read = u.read(&f, 0, u32::MAX).unwrap();
        assert_eq!(read.len(), 50 + data.len());
        assert_eq!(&read[..50], &[7u8; 50]);
        assert_eq!(&read[50..], &data[..]);
        u.power_cut(&f, 0, 0).unwrap();
        assert_eq!(disk(&f), vec![7u8; 100], "nothing unsynced survives");
        assert_eq!(u.read(&f, 0, 1000).unwrap(), vec![7u8; 100]);
    }

    #[test]
    fn a_torn_power_cut_keeps_a_prefix_ending_at_any_byte() {
        let (_d, f) = backing(b"");
        let mut u = Unsynced::default();
        let data = vec![1u8; 3 * PAGE_BYTES as usize + 10];
        u.write(&f, 0, &data).unwrap();
        u.power_cut(&f, 2, 0).unwrap();
        assert_eq!(disk(&f), vec![1u8; 2 * PAGE_BYTES as usize]);
        let (_d, f) = backing(&[7u8; 2 * PAGE_BYTES as usize]);
        let mut u = Unsynced::default();
        u.write(&f, 0, &data).unwrap();
        u.power_cut(&f, 1, 100).unwrap();
        let mut expect = vec![1u8; PAGE_BYTES as usize + 100];
        expect.resize(2 * PAGE_BYTES as usize, 7);
        assert_eq!(
            disk(&f),
            expect,
            "page 1 torn after 100 bytes, the rest as the disk held it"
        );
    }

    /// A truncation or an extension is held like a write: the file's users see it at once,
    /// an fsync writes it, a power cut before that drops it.
    #[test]
    fn size_changes_wait_for_an_fsync() {
        let (_d, f) = backing(&[5u8; 3 * PAGE_BYTES as usize]);
        let mut u = Unsynced::default();
        u.truncate(&f, 10).unwrap();
        u.truncate(&f, 2 * PAGE_BYTES).unwrap();
        assert_eq!(u.len(&f).unwrap(), 2 * PAGE_BYTES);
        let r = u.read(&f, 0, u32::MAX).unwrap();
        assert_eq!(
            (&r[..10], r[10..].iter().all(|&b| b == 0)),
            (&[5u8; 10][..], true),
            "past the cut, zeros"
        );
        assert_eq!(disk(&f).len(), 3 * PAGE_BYTES as usize, "not on the disk yet");
        u.power_cut(&f, 0, 0).unwrap();
        assert_eq!(
            disk(&f),
            vec![5u8; 3 * PAGE_BYTES as usize],
            "the cut took the truncation"
        );
        assert_eq!(u.len(&f).unwrap(), 3 * PAGE_BYTES);

        u.truncate(&f, 10).unwrap();
        u.write(&f, 12, b"ab").unwrap();
        u.sync(&f, false).unwrap();
        let mut expect = vec![5u8; 10];
        expect.extend([0, 0, b'a', b'b']);
        assert_eq!(
            disk(&f),
            expect,
            "an fsync writes the truncation and the write after it"
        );

        u.extend(&f, PAGE_BYTES).unwrap();
        assert_eq!(u.len(&f).unwrap(), PAGE_BYTES);
        assert!(!u.is_empty());
        u.power_cut(&f, 0, 0).unwrap();
        assert_eq!(disk(&f).len(), 14, "the extension was never synced");
    }

    /// As Linux since 4.13: after a failed write-back the pages still read as written, a
    /// later fsync succeeds without writing them, and a power cut shows the disk without them.
    #[test]
    fn pages_whose_write_back_failed_are_read_but_never_written() {
        let (_d, f) = backing(b"0123456789");
        let mut u = Unsynced::default();
        u.write(&f, 5, b"abcde").unwrap();
        u.fail_write_back();
        u.write(&f, PAGE_BYTES, b"z").unwrap();
        u.sync(&f, true).unwrap();
        assert_eq!(&u.read(&f, 0, 10).unwrap(), b"01234abcde");
        let disk_now = disk(&f);
        assert_eq!(
            &disk_now[..10],
            b"0123456789",
            "the lost page never reached the disk"
        );
        assert_eq!(
            disk_now[PAGE_BYTES as usize], b'z',
            "the page written after it did"
        );
        u.power_cut(&f, 0, 0).unwrap();
        assert_eq!(&u.read(&f, 0, 10).unwrap(), b"0123456789");
    }

    #[test]
    fn truncate_drops_pages_past_the_end() {
        let (_d, f) = backing(b"");
        let mut u = Unsynced::default();
        u.write(&f, 0, &vec![9u8; 2 * PAGE_BYTES as usize]).unwrap();
        u.truncate(&f, 10).unwrap();
        assert_eq!(u.len(&f).unwrap(), 10);
        assert_eq!(u.read(&f, 0, 100).unwrap(), vec![9u8; 10]);
        u.write(&f, 20, b"x").unwrap();
        let r = u.read(&f, 0, 100).unwrap();
        assert_eq!(&r[10..20], &[0u8; 10], "the truncated tail reads as zeros");
        u.sync(&f, false).unwrap();
        assert_eq!(disk(&f).len(), 21);
    }
}
