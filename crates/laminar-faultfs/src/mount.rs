//! Mounting in this process: the binary's `mount` uses it, and so do tests, which then drive
//! the faults through [`Mount::command`] without a socket.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use fuser::{BackgroundSession, Config, MountOption, SessionACL};

use crate::control;
use crate::fs::{FaultFs, Options, Shared};

pub struct Mount {
    shared: Arc<Shared>,
    session: Option<BackgroundSession>,
    mountpoint: PathBuf,
}

impl Mount {
    /// Serves `source` at `mountpoint` (an existing empty directory) on `threads` FUSE
    /// threads until dropped.
    pub fn new(source: &Path, mountpoint: &Path, options: Options, threads: usize) -> io::Result<Mount> {
        let source = std::fs::canonicalize(source)?;
        let shared = Shared::new(source.clone(), options)?;
        let mut config = Config::default();
        config.mount_options = vec![
            MountOption::FSName(format!("faultfs:{}", source.display())),
            MountOption::Subtype("laminar-faultfs".into()),
            // The kernel checks permissions from the attributes: no access() round trips.
            MountOption::DefaultPermissions,
        ];
        config.acl = SessionACL::All;
        config.n_threads = Some(threads.max(1));
        let session = fuser::spawn_mount(FaultFs::new(shared.clone()), mountpoint, &config)?;
        Ok(Mount {
            shared,
            session: Some(session),
            mountpoint: mountpoint.to_path_buf(),
        })
    }

    /// For tests: `dir/disk` (the disk) mounted at `dir/mnt`, both created here. Returns the
    /// mount and its mount point. Fails with a hint when FUSE is not available.
    pub fn in_dir(dir: &Path, options: Options) -> io::Result<(Mount, PathBuf)> {
        let (disk, mnt) = (dir.join("disk"), dir.join("mnt"));
        std::fs::create_dir_all(&disk)?;
        std::fs::create_dir_all(&mnt)?;
        let mount = Mount::new(&disk, &mnt, options, 4).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("mount faultfs (needs root, /dev/fuse and fuse3's fusermount3): {e}"),
            )
        })?;
        Ok((mount, mnt))
    }

    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// A control command (see `control`), answered without the socket.
    pub fn command(&self, line: &str) -> Result<String, String> {
        control::execute(&self.shared, line)
    }

    /// Unmounts; if a process still has a file open, detaches the mount as `umount -l` does.
    pub fn unmount(mut self) -> io::Result<()> {
        self.unmount_now()
    }

    fn unmount_now(&mut self) -> io::Result<()> {
        let Some(session) = self.session.take() else {
            return Ok(());
        };
        // Faults must not hold up the unmount.
        self.shared.rules.write().unwrap().clear();
        self.shared.end();
        if let Err(e) = session.umount_and_join() {
            eprintln!(
                "faultfs: unmount {}: {e}; detaching lazily",
                self.mountpoint.display()
            );
            let c = std::ffi::CString::new(self.mountpoint.as_os_str().as_encoded_bytes())
                .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
            // SAFETY: a valid C string.
            if unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        if let Err(e) = self.unmount_now() {
            eprintln!("faultfs: {e}");
        }
    }
}
