//! Changes to the directory tree that no fsync has covered yet (lazy mode), so that a power
//! cut can take them back as LazyFS does: a file or directory created, removed or renamed is
//! durable only once its directory is fsynced, or (for its own name) the file itself (ext4
//! commits a file's name with it). Until then a cut undoes it: a new name disappears, a
//! removed one comes back with what it held, a rename goes back and the file it replaced
//! returns.
//!
//! Changes are applied to the source directory at once (the tree the file system shows is
//! the source's); what is removed or replaced is kept in a stash directory beside the source
//! (the same file system, so moving it there is a rename) until a sync makes its removal
//! durable.

use std::io;
use std::path::{Path, PathBuf};

enum Change {
    Created {
        path: PathBuf,
    },
    Removed {
        path: PathBuf,
        stashed: PathBuf,
    },
    Renamed {
        from: PathBuf,
        to: PathBuf,
        replaced: Option<PathBuf>,
    },
}

/// What a power cut did to a name, for the file system's inode table.
#[derive(Debug, PartialEq)]
pub enum Undone {
    /// The name (and everything under it) is gone.
    Forgotten(PathBuf),
    /// What was at `from` is at `to` again.
    Moved { from: PathBuf, to: PathBuf },
    /// A removed name is back.
    Restored(PathBuf),
}

pub struct Namespace {
    source: PathBuf,
    stash: PathBuf,
    next: u64,
    changes: Vec<Change>,
}

fn parent(p: &Path) -> &Path {
    p.parent().unwrap_or(Path::new(""))
}

/// Renames `from` to `to` unless `to` exists.
fn no_replace(from: &Path, to: &Path) -> io::Result<()> {
    if std::fs::symlink_metadata(to).is_ok() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("{} is there again; {} not put back", to.display(), from.display()),
        ));
    }
    std::fs::rename(from, to)
}

fn remove_any(p: &Path) -> io::Result<()> {
    if std::fs::symlink_metadata(p)?.is_dir() {
        std::fs::remove_dir_all(p)
    } else {
        std::fs::remove_file(p)
    }
}

impl Namespace {
    /// A journal for `source`, with its stash directory beside it (emptied).
    pub fn new(source: &Path) -> io::Result<Namespace> {
        let mut name = source.file_name().unwrap_or_default().to_os_string();
        name.push(".faultfs-stash");
        let stash = source.with_file_name(name);
        if stash.exists() {
            std::fs::remove_dir_all(&stash)?;
        }
        std::fs::create_dir_all(&stash)?;
        Ok(Namespace {
            source: source.to_path_buf(),
            stash,
            next: 0,
            changes: Vec::new(),
        })
    }

    fn full(&self, rel: &Path) -> PathBuf {
        self.source.join(rel)
    }

    fn stash_path(&mut self) -> PathBuf {
        self.next += 1;
        self.stash.join(self.next.to_string())
    }

    /// `rel` was just created (a file or a directory).
    pub fn created(&mut self, rel: &Path) {
        self.changes.push(Change::Created {
            path: rel.to_path_buf(),
        });
    }

    /// Removes `rel` (unlink, rmdir), keeping what it held in the stash.
    pub fn remove(&mut self, rel: &Path, dir: bool) -> io::Result<()> {
        let full = self.full(rel);
        let md = std::fs::symlink_metadata(&full)?;
        if dir != md.is_dir() {
            return Err(io::Error::from_raw_os_error(if dir {
                libc::ENOTDIR
            } else {
                libc::EISDIR
            }));
        }
        if dir && std::fs::read_dir(&full)?.next().is_some() {
            return Err(io::Error::from_raw_os_error(libc::ENOTEMPTY));
        }
        let stashed = self.stash_path();
        std::fs::rename(&full, &stashed)?;
        self.changes.push(Change::Removed {
            path: rel.to_path_buf(),
            stashed,
        });
        Ok(())
    }

    /// Renames `from` to `to`, keeping a file it replaces in the stash (by a hard link made
    /// first, so that the rename itself stays atomic).
    pub fn rename(&mut self, from: &Path, to: &Path) -> io::Result<()> {
        let (full_from, full_to) = (self.full(from), self.full(to));
        let from_dir = std::fs::symlink_metadata(&full_from)?.is_dir();
        let replaced = match std::fs::symlink_metadata(&full_to) {
            Ok(md) if md.is_dir() => {
                // Only a directory can replace a directory, and only an empty one, as
                // rename(2) says; it is moved aside first.
                if !from_dir {
                    return Err(io::Error::from_raw_os_error(libc::EISDIR));
                }
                if std::fs::read_dir(&full_to)?.next().is_some() {
                    return Err(io::Error::from_raw_os_error(libc::ENOTEMPTY));
                }
                let stashed = self.stash_path();
                std::fs::rename(&full_to, &stashed)?;
                Some(stashed)
            }
            Ok(_) if from_dir => return Err(io::Error::from_raw_os_error(libc::ENOTDIR)),
            Ok(_) => {
                let stashed = self.stash_path();
                std::fs::hard_link(&full_to, &stashed)?;
                Some(stashed)
            }
            Err(_) => None,
        };
        if let Err(e) = std::fs::rename(&full_from, &full_to) {
            if let Some(stashed) = &replaced {
                let _ = if full_to.exists() {
                    std::fs::remove_file(stashed)
                } else {
                    std::fs::rename(stashed, &full_to)
                };
            }
            return Err(e);
        }
        self.changes.push(Change::Renamed {
            from: from.to_path_buf(),
            to: to.to_path_buf(),
            replaced,
        });
        Ok(())
    }

    /// Forgets the changes that `keep` says are durable now, and what they stashed.
    fn cover(&mut self, mut covered: impl FnMut(usize, &Change) -> bool) {
        let mut kept = Vec::new();
        for (i, c) in std::mem::take(&mut self.changes).into_iter().enumerate() {
            if !covered(i, &c) {
                kept.push(c);
                continue;
            }
            let stashed = match &c {
                Change::Removed { stashed, .. } => Some(stashed),
                Change::Renamed { replaced, .. } => replaced.as_ref(),
                Change::Created { .. } => None,
            };
            if let Some(s) = stashed {
                if let Err(e) = remove_any(s) {
                    eprintln!("faultfs: dropping {}: {e}", s.display());
                }
            }
        }
        self.changes = kept;
    }

    /// `dir` was fsynced: every change to its entries is durable, and so is everything under
    /// a directory it removed (nothing can bring that back).
    pub fn synced_dir(&mut self, dir: &Path) {
        let removed_dirs: Vec<PathBuf> = self
            .changes
            .iter()
            .filter_map(|c| match c {
                Change::Removed { path, stashed } if parent(path) == dir && stashed.is_dir() => {
                    Some(path.clone())
                }
                _ => None,
            })
            .collect();
        let under = |p: &Path| removed_dirs.iter().any(|d| p.starts_with(d));
        self.cover(|_, c| match c {
            Change::Created { path } | Change::Removed { path, .. } => parent(path) == dir || under(path),
            Change::Renamed { from, to, .. } => {
                parent(from) == dir || parent(to) == dir || (under(from) && under(to))
            }
        });
    }

    /// The file at `rel` was fsynced: the names that led to it (its creation and the renames
    /// that brought it here) are durable, and so is whatever took away what those names held
    /// before (a removal, a rename elsewhere): a cut must not bring an old file back over it.
    pub fn synced_file(&mut self, rel: &Path) {
        let mut name = rel.to_path_buf();
        let mut covered = Vec::new();
        let mut placed = Vec::new();
        for (i, c) in self.changes.iter().enumerate().rev() {
            match c {
                Change::Renamed { from, to, .. } if *to == name => {
                    covered.push(i);
                    placed.push((i, to.clone()));
                    name = from.clone();
                }
                Change::Created { path } if *path == name => {
                    covered.push(i);
                    placed.push((i, path.clone()));
                    break;
                }
                Change::Removed { path, .. } if *path == name => break,
                _ => {}
            }
        }
        for (at, p) in placed {
            for (i, c) in self.changes[..at].iter().enumerate() {
                let cleared = match c {
                    Change::Removed { path, .. } => *path == p,
                    Change::Renamed { from, .. } => *from == p,
                    Change::Created { .. } => false,
                };
                if cleared {
                    covered.push(i);
                }
            }
        }
        self.cover(|i, _| covered.contains(&i));
    }

    /// At unmount: nothing will be restored any more.
    pub fn remove_stash(&mut self) {
        self.changes.clear();
        let _ = std::fs::remove_dir_all(&self.stash);
    }

    /// `sync(2)`: every change is durable.
    pub fn synced_all(&mut self) {
        self.cover(|_, _| true);
    }

    /// Changes not yet durable.
    pub fn pending(&self) -> usize {
        self.changes.len()
    }

    /// Power cut: every change not covered is undone, the latest first.
    pub fn power_cut(&mut self) -> Vec<Undone> {
        let mut undone = Vec::new();
        for c in std::mem::take(&mut self.changes).into_iter().rev() {
            // Never over a name that is there now (a durable one that replaced it).
            let r = match c {
                Change::Created { path } => remove_any(&self.full(&path)).map(|()| Undone::Forgotten(path)),
                Change::Removed { path, stashed } => {
                    no_replace(&stashed, &self.full(&path)).map(|()| Undone::Restored(path))
                }
                Change::Renamed { from, to, replaced } => no_replace(&self.full(&to), &self.full(&from))
                    .and_then(|()| replaced.map_or(Ok(()), |s| no_replace(&s, &self.full(&to))))
                    .map(|()| Undone::Moved { from: to, to: from }),
            };
            match r {
                Ok(u) => undone.push(u),
                Err(e) => eprintln!("faultfs: power cut: undoing a change: {e}"),
            }
        }
        undone
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.stash);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(root: &Path) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for e in walk(root) {
            let rel = e.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            let content = if e.is_dir() {
                "/".into()
            } else {
                std::fs::read_to_string(&e).unwrap()
            };
            out.push((rel, content));
        }
        out.sort();
        out
    }

    fn walk(p: &Path) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(p).unwrap() {
            let e = e.unwrap().path();
            if e.is_dir() {
                out.extend(walk(&e));
            }
            out.push(e);
        }
        out
    }

    fn setup() -> (tempfile::TempDir, PathBuf, Namespace) {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src");
        std::fs::create_dir(&src).unwrap();
        std::fs::create_dir(src.join("d")).unwrap();
        std::fs::write(src.join("d/old"), "old").unwrap();
        std::fs::write(src.join("d/ckpt"), "v1").unwrap();
        let ns = Namespace::new(&src).unwrap();
        (tmp, src, ns)
    }

    #[test]
    fn a_cut_undoes_what_no_fsync_covered() {
        let (_t, src, mut ns) = setup();
        let before = tree(&src);
        std::fs::write(src.join("d/new"), "new").unwrap();
        ns.created(Path::new("d/new"));
        ns.remove(Path::new("d/old"), false).unwrap();
        std::fs::write(src.join("d/ckpt.tmp"), "v2").unwrap();
        ns.created(Path::new("d/ckpt.tmp"));
        ns.rename(Path::new("d/ckpt.tmp"), Path::new("d/ckpt")).unwrap();
        assert_eq!(std::fs::read_to_string(src.join("d/ckpt")).unwrap(), "v2");
        assert!(!src.join("d/old").exists());
        assert_eq!(ns.pending(), 4);
        let undone = ns.power_cut();
        assert_eq!(tree(&src), before, "as it was");
        assert!(undone.contains(&Undone::Forgotten("d/new".into())));
    }

    #[test]
    fn a_directory_fsync_makes_its_entries_durable() {
        let (_t, src, mut ns) = setup();
        std::fs::write(src.join("d/new"), "new").unwrap();
        ns.created(Path::new("d/new"));
        ns.remove(Path::new("d/old"), false).unwrap();
        ns.rename(Path::new("d/new"), Path::new("d/ckpt")).unwrap();
        ns.synced_dir(Path::new("d"));
        assert_eq!(ns.pending(), 0);
        let after = tree(&src);
        ns.power_cut();
        assert_eq!(tree(&src), after, "nothing to undo");
        assert_eq!(
            std::fs::read_dir(&ns.stash).unwrap().count(),
            0,
            "the stash emptied"
        );
    }

    /// A file removed and made again under the same name, the new one fsynced: a cut keeps
    /// the new one (its fsync made the removal of the old durable too).
    #[test]
    fn a_cut_never_brings_an_old_file_back_over_a_durable_new_one() {
        let (_t, src, mut ns) = setup();
        ns.remove(Path::new("d/old"), false).unwrap();
        std::fs::write(src.join("d/old"), "new").unwrap();
        ns.created(Path::new("d/old"));
        ns.synced_file(Path::new("d/old"));
        assert_eq!(ns.pending(), 0);
        ns.power_cut();
        assert_eq!(std::fs::read_to_string(src.join("d/old")).unwrap(), "new");
    }

    #[test]
    fn renames_over_directories_follow_rename_2() {
        let (_t, src, mut ns) = setup();
        std::fs::create_dir(src.join("e")).unwrap();
        let err = |r: io::Result<()>| r.unwrap_err().raw_os_error();
        assert_eq!(
            err(ns.rename(Path::new("d/old"), Path::new("e"))),
            Some(libc::EISDIR)
        );
        assert_eq!(
            err(ns.rename(Path::new("e"), Path::new("d"))),
            Some(libc::ENOTEMPTY)
        );
        assert_eq!(
            err(ns.rename(Path::new("e"), Path::new("d/old"))),
            Some(libc::ENOTDIR)
        );
        assert_eq!(ns.pending(), 0);
    }

    #[test]
    fn a_sync_of_everything_makes_every_name_durable() {
        let (_t, src, mut ns) = setup();
        std::fs::create_dir(src.join("e")).unwrap();
        ns.created(Path::new("e"));
        ns.remove(Path::new("d/old"), false).unwrap();
        ns.synced_all();
        let after = tree(&src);
        ns.power_cut();
        assert_eq!(tree(&src), after);
    }

    #[test]
    fn a_file_fsync_makes_its_own_names_durable_only() {
        let (_t, src, mut ns) = setup();
        std::fs::create_dir(src.join("e")).unwrap();
        ns.created(Path::new("e"));
        std::fs::write(src.join("d/a"), "a").unwrap();
        ns.created(Path::new("d/a"));
        ns.rename(Path::new("d/a"), Path::new("d/b")).unwrap();
        std::fs::write(src.join("d/other"), "o").unwrap();
        ns.created(Path::new("d/other"));
        ns.synced_file(Path::new("d/b"));
        assert_eq!(ns.pending(), 2, "the directory e and the file other");
        ns.power_cut();
        assert_eq!(std::fs::read_to_string(src.join("d/b")).unwrap(), "a");
        assert!(!src.join("e").exists() && !src.join("d/other").exists());
    }
}
