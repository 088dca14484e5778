//! Response encoding.
//!
//! Most responses are encoded with the `kafka-protocol` crate's generated encoders (encoding
//! is safe; only its decoders allocate from untrusted counts, which is why requests are
//! decoded by hand in [`crate::requests`]). Fetch responses are framed here by hand so that
//! record data stays in files: a response is a list of [`Chunk`]s, some of them file ranges
//! that the network layer sends with `sendfile`.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::protocol::Encodable;

use crate::apis::{ApiKey, API_TABLE};
use crate::requests::Uuid;
use crate::ProtocolError;

/// Something the network layer can send that is not in memory: a file range.
pub trait FileSlice: Send + Sync + 'static {
    fn len(&self) -> u64;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

pub enum Chunk<F> {
    Bytes(Bytes),
    File(F),
}

impl<F: FileSlice> Chunk<F> {
    pub fn len(&self) -> u64 {
        match self {
            Chunk::Bytes(b) => b.len() as u64,
            Chunk::File(f) => f.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A whole response, size prefix included, ready to send in order.
pub struct ResponseFrame<F> {
    pub chunks: Vec<Chunk<F>>,
}

impl<F: FileSlice> ResponseFrame<F> {
    pub fn from_bytes(b: Bytes) -> Self {
        ResponseFrame {
            chunks: vec![Chunk::Bytes(b)],
        }
    }

    pub fn len(&self) -> u64 {
        self.chunks.iter().map(Chunk::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn header(out: &mut BytesMut, api: ApiKey, version: i16, correlation_id: i32) {
    out.put_i32(correlation_id);
    if api.response_header_flexible(version) {
        out.put_u8(0); // no tagged fields
    }
}

/// Encodes a response with its size prefix and header.
pub fn encode<T: Encodable>(
    api: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &T,
) -> Result<Bytes, ProtocolError> {
    let mut out = BytesMut::with_capacity(64);
    out.put_i32(0);
    header(&mut out, api, version, correlation_id);
    body.encode(&mut out, version)
        .map_err(|e| ProtocolError::Encode(e.to_string()))?;
    let size = (out.len() - 4) as i32;
    out[..4].copy_from_slice(&size.to_be_bytes());
    Ok(out.freeze())
}

/// ApiVersions' answer to a version it does not support: error 35 (UNSUPPORTED_VERSION) in
/// v0 format, listing what is supported, so the client can retry with a version it shares.
pub fn api_versions_unsupported(correlation_id: i32) -> Bytes {
    let mut out = BytesMut::new();
    out.put_i32(0);
    out.put_i32(correlation_id);
    out.put_i16(35);
    out.put_i32(API_TABLE.len() as i32);
    for s in API_TABLE {
        out.put_i16(s.key as i16);
        out.put_i16(s.min_version);
        out.put_i16(s.max_version);
    }
    let size = (out.len() - 4) as i32;
    out[..4].copy_from_slice(&size.to_be_bytes());
    out.freeze()
}

pub struct FetchResponse<F> {
    pub throttle_time_ms: i32,
    pub error_code: i16,
    pub session_id: i32,
    pub topics: Vec<FetchTopicResponse<F>>,
    /// v16+ (KIP-951): (node id, host, port) of the leaders named in `current_leader`s.
    pub node_endpoints: Vec<(i32, String, i32)>,
}

pub struct FetchTopicResponse<F> {
    pub name: String,
    pub topic_id: Uuid,
    pub partitions: Vec<FetchPartitionResponse<F>>,
}

pub struct FetchPartitionResponse<F> {
    pub partition_index: i32,
    pub error_code: i16,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    /// For a `read_committed` fetch: (producer id, first offset) of each aborted
    /// transaction with records in the range, which the client drops.
    pub aborted_transactions: Vec<(i64, i64)>,
    /// Record batches, sent as they are stored.
    pub records: Vec<Chunk<F>>,
    /// v12+, to a follower (KIP-595's Fetch-based truncation): the largest epoch at or
    /// below the one it last fetched and where it ends here, when its log diverged.
    pub diverging_epoch: Option<(i32, i64)>,
    /// v12+ (KIP-951): (leader id, leader epoch) after NOT_LEADER_OR_FOLLOWER or
    /// FENCED_LEADER_EPOCH, so that the client need not ask Metadata.
    pub current_leader: Option<(i32, i32)>,
}

struct Writer<F> {
    chunks: Vec<Chunk<F>>,
    buf: BytesMut,
    flexible: bool,
}

impl<F: FileSlice> Writer<F> {
    fn len(&mut self, n: usize) {
        if self.flexible {
            put_uvarint(&mut self.buf, n as u32 + 1);
        } else {
            self.buf.put_i32(n as i32);
        }
    }
    fn string(&mut self, s: &str) {
        if self.flexible {
            put_uvarint(&mut self.buf, s.len() as u32 + 1);
        } else {
            self.buf.put_i16(s.len() as i16);
        }
        self.buf.put_slice(s.as_bytes());
    }
    fn tags(&mut self) {
        if self.flexible {
            self.buf.put_u8(0);
        }
    }
    fn records(&mut self, records: Vec<Chunk<F>>) {
        let total: u64 = records.iter().map(Chunk::len).sum();
        if self.flexible {
            put_uvarint(&mut self.buf, total as u32 + 1);
        } else {
            self.buf.put_i32(total as i32);
        }
        for c in records {
            match c {
                Chunk::Bytes(b) => self.buf.put_slice(&b),
                Chunk::File(f) => {
                    let pending = self.buf.split().freeze();
                    self.chunks.push(Chunk::Bytes(pending));
                    self.chunks.push(Chunk::File(f));
                }
            }
        }
    }
}

fn put_uvarint(buf: &mut BytesMut, mut v: u32) {
    while v >= 0x80 {
        buf.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    buf.put_u8(v as u8);
}

/// A flexible Fetch partition's tagged fields: DivergingEpoch (tag 0) and CurrentLeader
/// (tag 1), each written only when set, in tag order.
fn partition_tags(
    buf: &mut BytesMut,
    diverging_epoch: Option<(i32, i64)>,
    current_leader: Option<(i32, i32)>,
) {
    let n = diverging_epoch.is_some() as u32 + current_leader.is_some() as u32;
    put_uvarint(buf, n);
    if let Some((epoch, end_offset)) = diverging_epoch {
        put_uvarint(buf, 0);
        put_uvarint(buf, 4 + 8 + 1);
        buf.put_i32(epoch);
        buf.put_i64(end_offset);
        buf.put_u8(0);
    }
    if let Some((leader_id, leader_epoch)) = current_leader {
        put_uvarint(buf, 1);
        put_uvarint(buf, 4 + 4 + 1);
        buf.put_i32(leader_id);
        buf.put_i32(leader_epoch);
        buf.put_u8(0);
    }
}

/// Frames a Fetch response (v4 to v16) around record data that may live in files.
pub fn encode_fetch<F: FileSlice>(
    version: i16,
    correlation_id: i32,
    resp: FetchResponse<F>,
) -> ResponseFrame<F> {
    let flexible = ApiKey::Fetch.is_flexible(version);
    let mut w = Writer {
        chunks: Vec::new(),
        buf: BytesMut::with_capacity(256),
        flexible,
    };
    w.buf.put_i32(0); // size, patched below
    header(&mut w.buf, ApiKey::Fetch, version, correlation_id);
    w.buf.put_i32(resp.throttle_time_ms);
    if version >= 7 {
        w.buf.put_i16(resp.error_code);
        w.buf.put_i32(resp.session_id);
    }
    w.len(resp.topics.len());
    for t in resp.topics {
        if version >= 13 {
            w.buf.put_slice(&t.topic_id);
        } else {
            w.string(&t.name);
        }
        w.len(t.partitions.len());
        for p in t.partitions {
            w.buf.put_i32(p.partition_index);
            w.buf.put_i16(p.error_code);
            w.buf.put_i64(p.high_watermark);
            w.buf.put_i64(p.last_stable_offset);
            if version >= 5 {
                w.buf.put_i64(p.log_start_offset);
            }
            // An empty array, not null, when there are none.
            w.len(p.aborted_transactions.len());
            for (producer_id, first_offset) in p.aborted_transactions {
                w.buf.put_i64(producer_id);
                w.buf.put_i64(first_offset);
                w.tags();
            }
            if version >= 11 {
                w.buf.put_i32(-1); // preferred_read_replica
            }
            w.records(p.records);
            if flexible {
                partition_tags(&mut w.buf, p.diverging_epoch, p.current_leader);
            }
        }
        w.tags();
    }
    if version >= 16 && !resp.node_endpoints.is_empty() {
        // Tag 0: NodeEndpoints, a compact array of (node id, host, port, rack, tags).
        let mut field = BytesMut::new();
        put_uvarint(&mut field, resp.node_endpoints.len() as u32 + 1);
        for (node_id, host, port) in &resp.node_endpoints {
            field.put_i32(*node_id);
            put_uvarint(&mut field, host.len() as u32 + 1);
            field.put_slice(host.as_bytes());
            field.put_i32(*port);
            field.put_u8(0); // rack: null
            field.put_u8(0); // tags
        }
        put_uvarint(&mut w.buf, 1);
        put_uvarint(&mut w.buf, 0);
        put_uvarint(&mut w.buf, field.len() as u32);
        w.buf.put_slice(&field);
    } else {
        w.tags();
    }
    let tail = w.buf.split().freeze();
    w.chunks.push(Chunk::Bytes(tail));
    // Patch the size into the first chunk.
    let total: u64 = w.chunks.iter().map(Chunk::len).sum::<u64>() - 4;
    if let Some(Chunk::Bytes(first)) = w.chunks.first_mut() {
        let mut b = BytesMut::from(&first[..]);
        b[..4].copy_from_slice(&(total as i32).to_be_bytes());
        *first = b.freeze();
    }
    ResponseFrame { chunks: w.chunks }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::{FetchResponse as KFetchResponse, ResponseHeader};
    use kafka_protocol::protocol::Decodable;

    struct NoFile;
    impl FileSlice for NoFile {
        fn len(&self) -> u64 {
            0
        }
    }

    fn partition(
        index: i32,
        diverging: Option<(i32, i64)>,
        leader: Option<(i32, i32)>,
    ) -> FetchPartitionResponse<NoFile> {
        FetchPartitionResponse {
            partition_index: index,
            error_code: if leader.is_some() { 6 } else { 0 },
            high_watermark: 10,
            last_stable_offset: 10,
            log_start_offset: 0,
            aborted_transactions: Vec::new(),
            records: vec![Chunk::Bytes(Bytes::from_static(&[]))],
            diverging_epoch: diverging,
            current_leader: leader,
        }
    }

    #[test]
    fn fetch_tagged_fields_decode_as_kafkas() {
        for version in [12i16, 15, 16] {
            let resp = FetchResponse {
                throttle_time_ms: 0,
                error_code: 0,
                session_id: 0,
                topics: vec![FetchTopicResponse {
                    name: "t".into(),
                    topic_id: [7; 16],
                    partitions: vec![
                        partition(0, Some((3, 42)), None),
                        partition(1, None, Some((2, 5))),
                        partition(2, Some((1, 7)), Some((3, 9))),
                        partition(3, None, None),
                    ],
                }],
                node_endpoints: vec![(2, "h2".into(), 9092), (3, "h3".into(), 9093)],
            };
            let frame = encode_fetch(version, 77, resp);
            let mut bytes = BytesMut::new();
            for c in frame.chunks {
                match c {
                    Chunk::Bytes(b) => bytes.put_slice(&b),
                    Chunk::File(_) => unreachable!(),
                }
            }
            let mut body = bytes.freeze().slice(4..);
            let h = ResponseHeader::decode(
                &mut body,
                kafka_protocol::messages::ApiKey::Fetch.response_header_version(version),
            )
            .unwrap();
            assert_eq!(h.correlation_id, 77);
            let r = KFetchResponse::decode(&mut body, version).unwrap();
            assert!(body.is_empty(), "v{version}: bytes left over");
            let ps = &r.responses[0].partitions;
            assert_eq!(
                (ps[0].diverging_epoch.epoch, ps[0].diverging_epoch.end_offset),
                (3, 42)
            );
            assert_eq!(ps[0].current_leader.leader_id.0, -1);
            assert_eq!(
                (
                    ps[1].current_leader.leader_id.0,
                    ps[1].current_leader.leader_epoch
                ),
                (2, 5)
            );
            assert_eq!(ps[1].diverging_epoch.epoch, -1);
            assert_eq!(
                (ps[2].diverging_epoch.epoch, ps[2].current_leader.leader_id.0),
                (1, 3)
            );
            assert_eq!(ps[3].diverging_epoch.epoch, -1);
            if version >= 16 {
                let ids: Vec<i32> = r.node_endpoints.iter().map(|e| e.node_id.0).collect();
                assert_eq!(ids, vec![2, 3]);
                assert_eq!(
                    (r.node_endpoints[1].host.as_str(), r.node_endpoints[1].port),
                    ("h3", 9093)
                );
            }
        }
    }
}
