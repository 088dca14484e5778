//! The Kafka wire protocol, sans I/O.
//!
//! - [`frame`] splits a byte stream into size-prefixed frames, checking the size against
//!   `socket.request.max.bytes` before anything is allocated. It never waits on a socket:
//!   it returns `None` and is called again with more bytes.
//! - [`requests`] decodes the requests Laminar serves into plain structs, with every count
//!   and length checked against the bytes that remain.
//! - [`responses`] encodes responses. Fetch responses are framed by hand into a list of
//!   [`Chunk`]s, so that record data can be sent from files without being copied.

pub mod apis;
pub mod error_code;
pub mod frame;
pub mod reader;
pub mod requests;
pub mod responses;

pub use apis::{ApiKey, API_TABLE};
pub use error_code::ErrorCode;
pub use requests::{Request, RequestHeader};
pub use responses::{Chunk, ResponseFrame};

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum ProtocolError {
    #[error("frame of {size} bytes exceeds socket.request.max.bytes {max}")]
    FrameTooLarge { size: i64, max: usize },
    #[error("frame size {0} is negative or too small")]
    BadFrameSize(i32),
    #[error("truncated {what}: need {need} bytes, {have} remain")]
    Truncated {
        what: &'static str,
        need: usize,
        have: usize,
    },
    #[error("array count {count} exceeds the {remaining} bytes that remain")]
    CountTooLarge { count: usize, remaining: usize },
    #[error("request decodes into more than its bound: {bytes} bytes more, {left} left")]
    DecodesTooLarge { bytes: usize, left: usize },
    #[error("malformed request: {0}")]
    Malformed(&'static str),
    #[error("unknown API key {0}")]
    UnknownApiKey(i16),
    #[error("{api:?} v{version} is not supported")]
    UnsupportedVersion { api: ApiKey, version: i16 },
    #[error("encoding failed: {0}")]
    Encode(String),
}
