//! What faults to inject, switchable while mounted: delays and errors for the paths that match
//! a glob (relative to the mount's root, `*` crosses `/`).

use std::time::Duration;

use globset::{Glob, GlobMatcher};
use rand::Rng;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Read,
    Write,
    /// fsync and fdatasync (of files and of directories).
    Fsync,
    /// Creating a file or directory.
    Create,
    /// `fallocate` of a file.
    Allocate,
    /// Renaming a file (matched on its old path and on its new one).
    Rename,
    /// Removing a file.
    Unlink,
    /// Changing a file's size (`ftruncate`, `truncate`).
    Truncate,
}

impl Op {
    /// `all` is None: every operation.
    pub fn parse(s: &str) -> Result<Option<Op>, String> {
        Ok(Some(match s {
            "read" => Op::Read,
            "write" => Op::Write,
            "fsync" => Op::Fsync,
            "create" => Op::Create,
            "fallocate" => Op::Allocate,
            "rename" => Op::Rename,
            "unlink" => Op::Unlink,
            "truncate" => Op::Truncate,
            "all" => return Ok(None),
            other => {
                return Err(format!(
                    "unknown operation {other:?} (read, write, fsync, create, fallocate, rename, \
                     unlink, truncate, all)"
                ))
            }
        }))
    }
}

#[derive(Debug, Clone)]
enum Action {
    Delay { min_ms: u64, max_ms: u64 },
    Fail(i32),
}

#[derive(Debug, Clone)]
struct Rule {
    op: Option<Op>,
    glob: GlobMatcher,
    action: Action,
}

/// What an operation on a path gets.
#[derive(Debug, Default, PartialEq)]
pub struct Verdict {
    pub delay: Option<Duration>,
    /// An errno to fail with (after the delay, if any).
    pub error: Option<i32>,
}

#[derive(Debug, Default, Clone)]
pub struct Rules {
    rules: Vec<Rule>,
}

pub fn parse_errno(s: &str) -> Result<i32, String> {
    match s {
        "ENOSPC" => Ok(libc::ENOSPC),
        "EIO" => Ok(libc::EIO),
        "EDQUOT" => Ok(libc::EDQUOT),
        other => Err(format!("unknown error {other:?} (ENOSPC, EIO, EDQUOT)")),
    }
}

fn glob(pattern: &str) -> Result<GlobMatcher, String> {
    Glob::new(pattern)
        .map(|g| g.compile_matcher())
        .map_err(|e| format!("bad pattern {pattern:?}: {e}"))
}

impl Rules {
    pub fn delay(&mut self, op: Option<Op>, pattern: &str, min_ms: u64, max_ms: u64) -> Result<(), String> {
        if max_ms < min_ms {
            return Err(format!("max {max_ms} ms is below min {min_ms} ms"));
        }
        self.rules.push(Rule {
            op,
            glob: glob(pattern)?,
            action: Action::Delay { min_ms, max_ms },
        });
        Ok(())
    }

    pub fn fail(&mut self, op: Option<Op>, pattern: &str, errno: i32) -> Result<(), String> {
        self.rules.push(Rule {
            op,
            glob: glob(pattern)?,
            action: Action::Fail(errno),
        });
        Ok(())
    }

    pub fn clear(&mut self) {
        self.rules.clear();
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The longest matching delay, and the first matching error.
    pub fn check(&self, op: Op, path: &str) -> Verdict {
        let mut v = Verdict::default();
        for r in &self.rules {
            if r.op.is_some_and(|o| o != op) || !r.glob.is_match(path) {
                continue;
            }
            match r.action {
                Action::Delay { min_ms, max_ms } => {
                    let ms = if max_ms > min_ms {
                        rand::thread_rng().gen_range(min_ms..=max_ms)
                    } else {
                        min_ms
                    };
                    let d = Duration::from_millis(ms);
                    v.delay = Some(v.delay.map_or(d, |old| old.max(d)));
                }
                Action::Fail(errno) => {
                    v.error.get_or_insert(errno);
                }
            }
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matching() {
        let mut r = Rules::default();
        r.delay(Some(Op::Write), "s4-3/*", 2000, 2000).unwrap();
        r.fail(None, "full/**", libc::ENOSPC).unwrap();
        assert_eq!(
            r.check(Op::Write, "s4-3/00000000000000000000.log").delay,
            Some(Duration::from_millis(2000))
        );
        assert_eq!(
            r.check(Op::Fsync, "s4-3/00000000000000000000.log"),
            Verdict::default()
        );
        assert_eq!(
            r.check(Op::Write, "s4-2/00000000000000000000.log"),
            Verdict::default()
        );
        assert_eq!(r.check(Op::Read, "full/a/b").error, Some(libc::ENOSPC));
        r.delay(None, "*", 5, 10).unwrap();
        let d = r.check(Op::Read, "x").delay.unwrap();
        assert!(d >= Duration::from_millis(5) && d <= Duration::from_millis(10));
        r.clear();
        assert_eq!(r.check(Op::Write, "s4-3/x"), Verdict::default());
        assert!(Op::parse("open").is_err());
    }
}
