//! An in-memory filesystem that knows what is durable, for crash tests.
//!
//! Each file keeps its current bytes and the bytes as of its last `sync_data`. Each directory
//! entry is durable once its directory has been synced. [`SimStorage::crash`] throws away
//! everything that was not durable, optionally keeping a random prefix of each file's
//! unsynced appended tail, as a kernel that had written back some pages would.

use std::collections::BTreeMap;
use std::io;
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::{Storage, StorageFile};

#[derive(Debug, Default)]
struct Inode {
    data: Vec<u8>,
    durable: Vec<u8>,
}

#[derive(Debug, Default)]
struct Namespace {
    /// Directories that exist (directories are assumed durable once created).
    dirs: std::collections::BTreeSet<PathBuf>,
    /// What a running process sees.
    live: BTreeMap<PathBuf, Arc<Mutex<Inode>>>,
    /// What survives a crash.
    durable: BTreeMap<PathBuf, Arc<Mutex<Inode>>>,
    /// Bumped by every crash. Files opened before it fail every call afterwards, so a sync
    /// that returns `Ok` always happened before the crash and is in what survived.
    generation: u64,
}

#[derive(Debug, Default)]
pub struct SimStorage {
    ns: Arc<Mutex<Namespace>>,
}

#[derive(Debug)]
struct SimFile {
    inode: Arc<Mutex<Inode>>,
    /// Every call takes the namespace lock, so that it is ordered against a crash.
    ns: Arc<Mutex<Namespace>>,
    generation: u64,
}

impl SimFile {
    fn with<T>(&self, f: impl FnOnce(&mut Inode) -> io::Result<T>) -> io::Result<T> {
        let ns = self.ns.lock().unwrap();
        if ns.generation != self.generation {
            return Err(io::Error::other("simulated crash: file handle is stale"));
        }
        let mut inode = self.inode.lock().unwrap();
        f(&mut inode)
    }
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, format!("{} not found", path.display()))
}

impl SimStorage {
    pub fn new() -> Arc<SimStorage> {
        Arc::new(SimStorage::default())
    }

    /// Simulates power loss. Files opened before the crash must not be used afterwards.
    /// With `torn_seed`, each file keeps a random part of its unsynced appended bytes;
    /// without it, exactly the synced state survives.
    pub fn crash(&self, torn_seed: Option<u64>) {
        let mut rng = torn_seed.map(SmallRng::seed_from_u64);
        let mut ns = self.ns.lock().unwrap();
        let mut survivors = BTreeMap::new();
        for (path, inode) in ns.durable.iter() {
            let old = inode.lock().unwrap();
            let mut data = old.durable.clone();
            if let Some(rng) = rng.as_mut() {
                if old.data.len() > data.len() && old.data.starts_with(&data) {
                    let extra = rng.gen_range(0..=old.data.len() - data.len());
                    data.extend_from_slice(&old.data[data.len()..data.len() + extra]);
                }
            }
            let fresh = Inode {
                durable: data.clone(),
                data,
            };
            survivors.insert(path.clone(), Arc::new(Mutex::new(fresh)));
        }
        ns.live = survivors.clone();
        ns.durable = survivors;
        ns.generation += 1;
    }

    /// The current bytes of a file, for tests that corrupt files on purpose.
    pub fn read_file(&self, path: &Path) -> Option<Vec<u8>> {
        let ns = self.ns.lock().unwrap();
        ns.live.get(path).map(|i| i.lock().unwrap().data.clone())
    }

    /// The bytes of a file that would survive a crash now (as of its last `sync_data`), if
    /// its directory entry is durable.
    pub fn read_durable_file(&self, path: &Path) -> Option<Vec<u8>> {
        let ns = self.ns.lock().unwrap();
        ns.durable.get(path).map(|i| i.lock().unwrap().durable.clone())
    }

    /// Replaces a file's bytes, durably, as a disk that returned garbage would.
    pub fn write_file_durably(&self, path: &Path, bytes: &[u8]) {
        let mut ns = self.ns.lock().unwrap();
        let inode = Arc::new(Mutex::new(Inode {
            data: bytes.to_vec(),
            durable: bytes.to_vec(),
        }));
        ns.live.insert(path.to_path_buf(), inode.clone());
        ns.durable.insert(path.to_path_buf(), inode);
    }
}

impl Storage for SimStorage {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        let mut ns = self.ns.lock().unwrap();
        for ancestor in path.ancestors() {
            ns.dirs.insert(ancestor.to_path_buf());
        }
        Ok(())
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        let ns = self.ns.lock().unwrap();
        if !ns.dirs.contains(path) {
            return Err(not_found(path));
        }
        let mut out: Vec<String> = ns
            .live
            .keys()
            .chain(ns.dirs.iter())
            .filter(|p| p.parent() == Some(path))
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect();
        out.sort();
        out.dedup();
        Ok(out)
    }

    fn exists(&self, path: &Path) -> bool {
        let ns = self.ns.lock().unwrap();
        ns.live.contains_key(path) || ns.dirs.contains(path)
    }

    fn open(&self, path: &Path, create: bool) -> io::Result<Arc<dyn StorageFile>> {
        let mut ns = self.ns.lock().unwrap();
        let generation = ns.generation;
        if let Some(inode) = ns.live.get(path) {
            return Ok(Arc::new(SimFile {
                inode: inode.clone(),
                ns: self.ns.clone(),
                generation,
            }));
        }
        if !create {
            return Err(not_found(path));
        }
        let parent = path.parent().unwrap_or(Path::new("/"));
        if !ns.dirs.contains(parent) {
            return Err(not_found(parent));
        }
        let inode = Arc::new(Mutex::new(Inode::default()));
        ns.live.insert(path.to_path_buf(), inode.clone());
        Ok(Arc::new(SimFile {
            inode,
            ns: self.ns.clone(),
            generation,
        }))
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let mut ns = self.ns.lock().unwrap();
        ns.live.remove(path).map(|_| ()).ok_or_else(|| not_found(path))
    }

    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        let mut ns = self.ns.lock().unwrap();
        ns.live.retain(|p, _| !p.starts_with(path));
        ns.dirs.retain(|p| !p.starts_with(path));
        // Removing a directory tree is made durable at once: the engine never relies on a
        // removed directory coming back.
        ns.durable.retain(|p, _| !p.starts_with(path));
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut ns = self.ns.lock().unwrap();
        let inode = ns.live.remove(from).ok_or_else(|| not_found(from))?;
        ns.live.insert(to.to_path_buf(), inode);
        Ok(())
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        let mut ns = self.ns.lock().unwrap();
        let ns = &mut *ns;
        ns.durable.retain(|p, _| p.parent() != Some(path));
        for (p, inode) in ns.live.iter() {
            if p.parent() == Some(path) {
                ns.durable.insert(p.clone(), inode.clone());
            }
        }
        Ok(())
    }
}

impl StorageFile for SimFile {
    fn len(&self) -> io::Result<u64> {
        self.with(|inode| Ok(inode.data.len() as u64))
    }

    fn read_at(&self, buf: &mut [u8], pos: u64) -> io::Result<usize> {
        self.with(|inode| {
            let len = inode.data.len() as u64;
            if pos >= len {
                return Ok(0);
            }
            let n = buf.len().min((len - pos) as usize);
            buf[..n].copy_from_slice(&inode.data[pos as usize..pos as usize + n]);
            Ok(n)
        })
    }

    fn write_all_at(&self, buf: &[u8], pos: u64) -> io::Result<()> {
        self.with(|inode| {
            let end = pos as usize + buf.len();
            if inode.data.len() < end {
                inode.data.resize(end, 0);
            }
            inode.data[pos as usize..end].copy_from_slice(buf);
            Ok(())
        })
    }

    fn sync_data(&self) -> io::Result<()> {
        self.with(|inode| {
            inode.durable = inode.data.clone();
            Ok(())
        })
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.with(|inode| {
            inode.data.resize(len as usize, 0);
            Ok(())
        })
    }

    fn allocate(&self, len: u64) -> io::Result<()> {
        self.with(|inode| {
            if (inode.data.len() as u64) < len {
                inode.data.resize(len as usize, 0);
            }
            Ok(())
        })
    }

    fn raw_fd(&self) -> Option<RawFd> {
        None
    }
}
