//! DescribeLogDirs v1-4 (`kafka-log-dirs`, the Admin client's `describeLogDirs`): the one data
//! directory, the size of every partition asked for (all of them for a null topic list), and
//! from v4 the file system's total and usable bytes. Partitions that do not exist are left
//! out, as Kafka leaves them out.
//!
//! `statvfs` can block on a stuck disk, so the answer is built on the I/O pool.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::DescribeLogDirsResponse;
use kafka_protocol::ResponseError;
use laminar_protocol::requests::DescribeLogDirsRequest;
use laminar_protocol::{responses, ApiKey};

use super::{sb, topic_name, Encoded};
use crate::context::RequestContext;
use crate::topics::Topics;
use laminar_data::partition::Partitions;
use laminar_net::IoPool;

/// The one data directory's partitions: those `hosted` here, among the `topics` asked for.
pub struct LogDir {
    pub path: std::path::PathBuf,
    pub topics: Arc<Topics>,
    pub hosted: Arc<Partitions>,
}

pub async fn handle(io: &IoPool, dir: LogDir, ctx: &RequestContext, r: DescribeLogDirsRequest) -> Encoded {
    let (version, correlation_id) = (ctx.api_version, ctx.correlation_id);
    let resp = io.run(move || describe(&dir, version, r)).await;
    responses::encode(ApiKey::DescribeLogDirs, version, correlation_id, &resp)
}

fn describe(d: &LogDir, version: i16, r: DescribeLogDirsRequest) -> DescribeLogDirsResponse {
    // Topic -> partitions asked for; a null list asks for every partition of every topic.
    let wanted: BTreeMap<String, Vec<i32>> = match r.topics {
        Some(topics) => {
            let mut m: BTreeMap<String, Vec<i32>> = BTreeMap::new();
            for (name, partitions) in topics {
                m.entry(name).or_default().extend(partitions);
            }
            m
        }
        None => d
            .topics
            .list()
            .into_iter()
            .map(|t| (t.name, (0..t.partitions as i32).collect()))
            .collect(),
    };
    let mut dir = DescribeLogDirsResult::default();
    let path = std::fs::canonicalize(&d.path).unwrap_or_else(|_| d.path.clone());
    dir.log_dir = sb(&path.to_string_lossy());
    for (name, mut partitions) in wanted {
        partitions.sort_unstable();
        partitions.dedup();
        let found: Vec<DescribeLogDirsPartition> = partitions
            .into_iter()
            .filter_map(|p| {
                let log = d.hosted.get(&name, p)?.log()?;
                let mut out = DescribeLogDirsPartition::default();
                out.partition_index = p;
                out.partition_size = log.size_bytes() as i64;
                // One node: there is no future replica and nothing to lag behind.
                out.offset_lag = 0;
                out.is_future_key = false;
                Some(out)
            })
            .collect();
        if !found.is_empty() {
            let mut t = DescribeLogDirsTopic::default();
            t.name = topic_name(&name);
            t.partitions = found;
            dir.topics.push(t);
        }
    }
    if version >= 4 {
        match disk_space(&path) {
            Ok((total, usable)) => {
                dir.total_bytes = total as i64;
                dir.usable_bytes = usable as i64;
            }
            Err(e) => {
                crate::warn!("statvfs {}: {e}", path.display());
                dir.error_code = ResponseError::KafkaStorageError.code();
                dir.total_bytes = -1;
                dir.usable_bytes = -1;
            }
        }
    }
    let mut resp = DescribeLogDirsResponse::default();
    resp.results = vec![dir];
    resp
}

/// The file system's size and the bytes an unprivileged writer may still use, as Kafka's
/// `getTotalSpace` and `getUsableSpace` report them.
fn disk_space(path: &std::path::Path) -> std::io::Result<(u64, u64)> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path and `st` a valid, writable statvfs.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let frsize = st.f_frsize as u64;
    Ok((st.f_blocks as u64 * frsize, st.f_bavail as u64 * frsize))
}
