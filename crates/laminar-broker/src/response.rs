//! What a handled request gives back: its response frame, whose record data (a fetch's) is a
//! range of a segment file that the network layer sends with `sendfile` once its pages are
//! resident, or reads on the I/O pool.

use std::io;
use std::os::fd::RawFd;
use std::sync::Arc;

use bytes::Bytes;
use laminar_net::SendFile;
use laminar_protocol::responses::{FileSlice, ResponseFrame};
use laminar_storage::backend::{read_exact_at, StorageFile};

/// Record data of a fetch response: a range of a segment file.
pub struct RecordsFile {
    pub file: Arc<dyn StorageFile>,
    pub position: u64,
    pub len: u64,
}

impl RecordsFile {
    /// A read's range of a segment file, as a fetch response carries it.
    pub fn of(range: laminar_storage::FileRange) -> RecordsFile {
        RecordsFile {
            file: range.file,
            position: range.position.0,
            len: range.len,
        }
    }
}

impl FileSlice for RecordsFile {
    fn len(&self) -> u64 {
        self.len
    }
}

impl SendFile for RecordsFile {
    fn raw_fd(&self) -> Option<RawFd> {
        self.file.raw_fd()
    }
    fn position(&self) -> u64 {
        self.position
    }
    fn is_resident(&self, offset: u64, len: u64) -> Option<bool> {
        debug_assert!(offset + len <= self.len);
        self.file.is_resident(self.position + offset, len)
    }
    fn read_range(&self, offset: u64, len: u64) -> io::Result<Bytes> {
        assert!(offset + len <= self.len, "a read within the range");
        let mut buf = vec![0u8; len as usize];
        read_exact_at(self.file.as_ref(), &mut buf, self.position + offset)?;
        Ok(Bytes::from(buf))
    }
}

pub type Response = Option<ResponseFrame<RecordsFile>>;

/// A handled request: its response, or (an `acks=all` produce whose appends are done) the
/// rest of it, which only waits for fsyncs and may overlap the connection's next requests.
pub enum Dispatched {
    Now(Response),
    Later(laminar_net::LaterFuture<RecordsFile>),
}
