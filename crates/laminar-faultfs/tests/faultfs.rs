//! faultfs mounted for real (FUSE, as root, with fuse3 installed: `.ci/run` installs it), driven
//! the way the broker and the fault loop use it.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use laminar_faultfs::{Mount, Options};

struct Fixture {
    // Dropped first: the mount goes before its directories.
    mount: Mount,
    src: PathBuf,
    mnt: PathBuf,
    _dir: tempfile::TempDir,
}

fn mounted(lazy: bool) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&src).unwrap();
    std::fs::create_dir(&mnt).unwrap();
    let options = Options {
        lazy,
        ..Options::default()
    };
    let mount = Mount::new(&src, &mnt, options, 4)
        .unwrap_or_else(|e| panic!("mount faultfs (needs root, /dev/fuse and fuse3): {e}"));
    Fixture {
        mount,
        src,
        mnt,
        _dir: dir,
    }
}

fn open_rw(p: &Path) -> File {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(p)
        .unwrap()
}

#[test]
fn round_trips_through_the_mount() {
    let f = mounted(false);
    let (src, mnt) = (&f.src, &f.mnt);
    std::fs::create_dir_all(mnt.join("topic-0")).unwrap();
    let seg = mnt.join("topic-0/00000000000000000000.log");
    let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(&seg, &data).unwrap();
    assert_eq!(std::fs::read(&seg).unwrap(), data);
    assert_eq!(
        std::fs::read(src.join("topic-0/00000000000000000000.log")).unwrap(),
        data
    );
    assert_eq!(std::fs::metadata(&seg).unwrap().len(), 100_000);

    // Positional writes past the end, and reads of them.
    let file = open_rw(&seg);
    file.write_all_at(b"tail", 200_000).unwrap();
    let mut buf = [0u8; 4];
    file.read_exact_at(&mut buf, 200_000).unwrap();
    assert_eq!(&buf, b"tail");
    assert_eq!(file.metadata().unwrap().len(), 200_004);
    file.set_len(50).unwrap();
    assert_eq!(std::fs::read(&seg).unwrap(), &data[..50]);
    drop(file);

    // An atomic replace: temporary file, fsync, rename, directory fsync.
    let tmp = mnt.join("topic-0/recovery-point.tmp");
    let mut t = File::create(&tmp).unwrap();
    t.write_all(b"checkpoint").unwrap();
    t.sync_all().unwrap();
    drop(t);
    std::fs::rename(&tmp, mnt.join("topic-0/recovery-point")).unwrap();
    assert_eq!(
        std::fs::metadata(mnt.join("topic-0/recovery-point"))
            .unwrap()
            .len(),
        10
    );
    File::open(mnt.join("topic-0")).unwrap().sync_all().unwrap();
    assert_eq!(
        std::fs::read(src.join("topic-0/recovery-point")).unwrap(),
        b"checkpoint"
    );

    let mut names: Vec<String> = std::fs::read_dir(mnt.join("topic-0"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["00000000000000000000.log", "recovery-point"]);

    // A reader keeps reading a file that was unlinked under it.
    let reader = File::open(&seg).unwrap();
    std::fs::remove_file(&seg).unwrap();
    let mut buf = [0u8; 10];
    reader.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(buf, data[..10]);
    assert!(!src.join("topic-0/00000000000000000000.log").exists());

    std::fs::rename(mnt.join("topic-0"), mnt.join("topic-0-delete")).unwrap();
    assert_eq!(
        std::fs::read(mnt.join("topic-0-delete/recovery-point")).unwrap(),
        b"checkpoint"
    );
    std::fs::remove_dir_all(mnt.join("topic-0-delete")).unwrap();
    assert!(std::fs::read_dir(src).unwrap().next().is_none());
}

#[test]
fn a_power_cut_drops_exactly_the_unsynced_writes() {
    let f = mounted(true);
    let (src, mnt) = (&f.src, &f.mnt);
    let synced: Vec<u8> = (0..10_000u32).map(|i| i as u8).collect();
    let unsynced = vec![0xabu8; 20_000];

    let a = open_rw(&mnt.join("a"));
    a.write_all_at(&synced, 0).unwrap();
    a.sync_data().unwrap();
    a.write_all_at(&unsynced, synced.len() as u64).unwrap();
    // Also over the synced part: the disk must keep the old bytes there.
    a.write_all_at(b"OVERWRITE", 100).unwrap();
    // The writer sees everything; the disk holds only what was synced.
    assert_eq!(a.metadata().unwrap().len(), 30_000);
    assert_eq!(std::fs::read(src.join("a")).unwrap(), synced);
    drop(a);

    // Written and closed but never synced, and fully synced.
    std::fs::write(mnt.join("b"), b"never synced").unwrap();
    let mut c = File::create(mnt.join("c")).unwrap();
    c.write_all(b"all synced").unwrap();
    c.sync_all().unwrap();
    drop(c);

    let cut = f.mount.command("powercut").unwrap();
    assert!(cut.contains("\"files\":2"), "{cut}");
    assert!(cut.contains("\"names_undone\":1"), "{cut}");
    assert_eq!(std::fs::read(mnt.join("a")).unwrap(), synced);
    assert!(
        !mnt.join("b").exists(),
        "created, but neither its name nor its data reached the disk (nothing fsynced them)"
    );
    assert_eq!(std::fs::read(mnt.join("c")).unwrap(), b"all synced");
    assert_eq!(f.mount.shared().unsynced_bytes(), 0);
}

#[test]
fn a_torn_power_cut_keeps_a_prefix() {
    let f = mounted(true);
    let data: Vec<u8> = (0..64 * 4096u32).map(|i| (i / 4096) as u8 + 1).collect();
    let mut ends = std::collections::HashSet::new();
    for _ in 0..5 {
        let p = f.mnt.join("t");
        std::fs::write(&p, b"").unwrap();
        let t = open_rw(&p);
        t.sync_all().unwrap();
        t.write_all_at(&data, 0).unwrap();
        drop(t);
        f.mount.command("powercut torn").unwrap();
        let left = std::fs::read(&p).unwrap();
        assert_eq!(left, data[..left.len()], "a prefix of what was written");
        ends.insert(left.len());
    }
    assert!(ends.len() > 1, "the prefix is random: {ends:?}");
}

/// What LazyFS adds to a power cut: names and sizes are durable only once an fsync covered
/// them. A file's own fsync covers its name; its directory's fsync covers every change to
/// the directory's entries.
#[test]
fn a_power_cut_takes_back_names_and_sizes_no_fsync_covered() {
    let f = mounted(true);
    let (src, mnt) = (&f.src, &f.mnt);
    std::fs::create_dir(mnt.join("d")).unwrap();
    File::open(mnt).unwrap().sync_all().unwrap();
    let write_synced = |name: &str, body: &[u8]| {
        let mut w = File::create(mnt.join(name)).unwrap();
        w.write_all(body).unwrap();
        w.sync_all().unwrap();
    };
    write_synced("d/checkpoint", b"v1");
    write_synced("d/old", b"old");
    write_synced("d/segment", &[7u8; 10_000]);
    File::open(mnt.join("d")).unwrap().sync_all().unwrap();

    // A checkpoint written and synced, renamed over the old one; a file removed; a segment
    // truncated; a new directory: none of it covered by a directory fsync.
    write_synced("d/checkpoint.tmp", b"v2");
    std::fs::rename(mnt.join("d/checkpoint.tmp"), mnt.join("d/checkpoint")).unwrap();
    std::fs::remove_file(mnt.join("d/old")).unwrap();
    let seg = open_rw(&mnt.join("d/segment"));
    seg.set_len(100).unwrap();
    drop(seg);
    std::fs::create_dir(mnt.join("e")).unwrap();
    assert_eq!(std::fs::metadata(mnt.join("d/segment")).unwrap().len(), 100);
    assert_eq!(std::fs::read(mnt.join("d/checkpoint")).unwrap(), b"v2");

    let cut = f.mount.command("powercut").unwrap();
    assert!(cut.contains("\"names_undone\":3"), "{cut}");
    assert_eq!(
        std::fs::read(mnt.join("d/checkpoint")).unwrap(),
        b"v1",
        "the rename was lost"
    );
    assert_eq!(
        std::fs::read(mnt.join("d/checkpoint.tmp")).unwrap(),
        b"v2",
        "the new file's own fsync made its name durable"
    );
    assert_eq!(
        std::fs::read(mnt.join("d/old")).unwrap(),
        b"old",
        "the removal was lost"
    );
    assert_eq!(
        std::fs::metadata(mnt.join("d/segment")).unwrap().len(),
        10_000,
        "so was the truncation"
    );
    assert!(!mnt.join("e").exists());

    // The same, covered: the directory's fsync and the file's.
    std::fs::rename(mnt.join("d/checkpoint.tmp"), mnt.join("d/checkpoint")).unwrap();
    std::fs::remove_file(mnt.join("d/old")).unwrap();
    File::open(mnt.join("d")).unwrap().sync_all().unwrap();
    let seg = open_rw(&mnt.join("d/segment"));
    seg.set_len(100).unwrap();
    seg.sync_all().unwrap();
    drop(seg);
    let cut = f.mount.command("powercut").unwrap();
    assert!(cut.contains("\"names_undone\":0"), "{cut}");
    assert_eq!(std::fs::read(mnt.join("d/checkpoint")).unwrap(), b"v2");
    assert!(!mnt.join("d/old").exists());
    assert_eq!(std::fs::metadata(src.join("d/segment")).unwrap().len(), 100);
}

#[test]
fn delays_stall_only_the_matching_files() {
    let f = mounted(false);
    std::fs::create_dir(f.mnt.join("slow")).unwrap();
    std::fs::create_dir(f.mnt.join("fast")).unwrap();
    let slow = open_rw(&f.mnt.join("slow/seg"));
    let fast = open_rw(&f.mnt.join("fast/seg"));
    f.mount.command("delay write slow/* 600").unwrap();
    f.mount.command("delay fsync slow/* 600").unwrap();

    let stalled = std::thread::spawn(move || {
        let t = Instant::now();
        slow.write_all_at(b"x", 0).unwrap();
        let write = t.elapsed();
        let t = Instant::now();
        slow.sync_data().unwrap();
        (write, t.elapsed())
    });
    // While the slow file's write is stalled, the other file's writes and fsyncs go through.
    std::thread::sleep(Duration::from_millis(100));
    let t = Instant::now();
    for i in 0..20 {
        fast.write_all_at(b"y", i).unwrap();
        fast.sync_data().unwrap();
    }
    let fast_took = t.elapsed();
    let (write, fsync) = stalled.join().unwrap();
    assert!(write >= Duration::from_millis(600), "{write:?}");
    assert!(fsync >= Duration::from_millis(600), "{fsync:?}");
    assert!(
        fast_took < Duration::from_millis(400),
        "the other file waited: {fast_took:?}"
    );
    let stats = f.mount.command("stats").unwrap();
    assert!(stats.contains("\"delayed\":2"), "{stats}");

    f.mount.command("delay create slow/new* 300").unwrap();
    let t = Instant::now();
    std::fs::create_dir(f.mnt.join("slow/newdir")).unwrap();
    File::create(f.mnt.join("slow/newfile")).unwrap();
    assert!(t.elapsed() >= Duration::from_millis(600), "{:?}", t.elapsed());

    f.mount.command("clear").unwrap();
    let t = Instant::now();
    open_rw(&f.mnt.join("slow/seg")).write_all_at(b"z", 0).unwrap();
    assert!(t.elapsed() < Duration::from_millis(300));
}

#[test]
fn errors_on_command() {
    let f = mounted(true);
    let file = open_rw(&f.mnt.join("data"));
    f.mount.command("fail write * ENOSPC").unwrap();
    let e = file.write_all_at(b"x", 0).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "{e}");
    f.mount.command("clear").unwrap();
    file.write_all_at(b"x", 0).unwrap();

    f.mount.command("fail fsync data EIO").unwrap();
    let e = file.sync_data().unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");
    f.mount.command("fail create newdir EIO").unwrap();
    assert_eq!(
        std::fs::create_dir(f.mnt.join("newdir"))
            .unwrap_err()
            .raw_os_error(),
        Some(libc::EIO)
    );
    f.mount.command("clear").unwrap();
    // As a kernel since Linux 4.13: what the failed fsync did not write back is lost. It
    // still reads as written, and the next fsync succeeds without writing it.
    file.sync_data().unwrap();
    assert_eq!(std::fs::read(f.src.join("data")).unwrap(), b"");
    assert_eq!(std::fs::read(f.mnt.join("data")).unwrap(), b"x");
    file.write_all_at(b"x", 0).unwrap();
    file.sync_data().unwrap();
    assert_eq!(std::fs::read(f.src.join("data")).unwrap(), b"x");

    assert!(f.mount.command("fail write * ENOMEM").is_err());
    assert!(f.mount.command("delay open * 5").is_err());
    let e = std::fs::read(f.mnt.join("missing")).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound);
}
