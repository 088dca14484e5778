//! `laminar-faultfs mount SOURCE MOUNTPOINT` serves SOURCE at MOUNTPOINT until SIGINT or
//! SIGTERM, then unmounts; `laminar-faultfs ctl SOCKET COMMAND...` sends it a command.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use laminar_faultfs::{control, Mount, Options};

#[derive(Parser)]
#[command(
    name = "laminar-faultfs",
    about = "A FUSE passthrough file system that injects real faults"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve SOURCE at MOUNTPOINT until SIGINT or SIGTERM.
    Mount {
        source: PathBuf,
        mountpoint: PathBuf,
        /// The control socket; default MOUNTPOINT.faultfs.sock beside the mount point.
        #[arg(long)]
        control: Option<PathBuf>,
        /// Keep writes in memory until they are fsynced, so that `powercut` can drop them.
        #[arg(long)]
        lazy: bool,
        /// In lazy mode, fail writes with EIO beyond this many unsynced bytes.
        #[arg(long, default_value_t = 4 << 30)]
        unsynced_max_bytes: u64,
        /// FUSE worker threads.
        #[arg(long, default_value_t = 4)]
        threads: usize,
    },
    /// Send one command to a mounted faultfs and print its answer.
    Ctl {
        socket: PathBuf,
        #[arg(trailing_var_arg = true, required = true)]
        words: Vec<String>,
    },
}

/// Blocks SIGINT and SIGTERM in this thread and every thread started after it, so that
/// `wait_for_signal` receives them.
fn block_signals() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data; the calls only fill and install it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

fn wait_for_signal(set: &libc::sigset_t) -> i32 {
    let mut sig = 0;
    // SAFETY: `set` was filled by block_signals.
    unsafe { libc::sigwait(set, &mut sig) };
    sig
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Ctl { socket, words } => {
            let answer = control::command(&socket, &words.join(" "))?;
            println!("{answer}");
            Ok(())
        }
        Command::Mount {
            source,
            mountpoint,
            control,
            lazy,
            unsynced_max_bytes,
            threads,
        } => {
            let signals = block_signals();
            let source = std::fs::canonicalize(&source).with_context(|| format!("{}", source.display()))?;
            let socket = control.unwrap_or_else(|| {
                let mut s = mountpoint.clone().into_os_string();
                s.push(".faultfs.sock");
                PathBuf::from(s)
            });
            let _ = std::fs::remove_file(&socket);
            let listener = std::os::unix::net::UnixListener::bind(&socket)
                .with_context(|| format!("control socket {}", socket.display()))?;
            let mount = Mount::new(
                &source,
                &mountpoint,
                Options {
                    lazy,
                    unsynced_max_bytes,
                },
                threads,
            )
            .with_context(|| format!("mount at {}", mountpoint.display()))?;
            let shared = mount.shared().clone();
            std::thread::spawn(move || control::serve(listener, shared));
            println!(
                "faultfs: {} at {} (lazy: {lazy}), control {}",
                source.display(),
                mountpoint.display(),
                socket.display()
            );
            let sig = wait_for_signal(&signals);
            eprintln!("faultfs: signal {sig}, unmounting");
            let _ = std::fs::remove_file(&socket);
            mount.unmount()?;
            Ok(())
        }
    }
}
