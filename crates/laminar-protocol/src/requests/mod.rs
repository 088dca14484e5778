//! Requests: what a frame decodes to ([`types`]) and the decoders ([`decode`](decode::decode)),
//! with every count and length checked against the bytes that remain.

pub mod decode;
pub mod types;

pub use decode::{decode, peek_header};
pub use types::*;
