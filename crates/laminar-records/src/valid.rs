//! Batches validated once: a producer's batches are checked when they arrive, and the log
//! appends them with the headers that check read, without walking them again, from the
//! buffer they arrived in.

use crate::{
    be_i16, validate_batches, BatchHeader, Result, ATTRIBUTES_POS, ATTR_TIMESTAMP_TYPE, BATCH_HEADER_BYTES,
    CRC_POS, MAX_TIMESTAMP_POS,
};

/// One or more consecutive batches that passed [`validate_batches`], with the header and the
/// place of each. Made only by validating, and changed only in ways that keep them valid (the
/// offsets and leader epoch, outside the CRC; the append time, with the CRC recomputed): what
/// the log appends, so that it can trust them without checking their CRCs and records again.
///
/// The buffer is only read: what changes is in a header, so each changed batch's header is
/// kept apart ([`Self::parts`]: the new header, then the batch's records from the buffer).
/// A producer's batches are written from the request's own bytes, never copied, even when
/// several partitions' records share that buffer.
pub struct ValidBatches<'a> {
    buf: &'a [u8],
    headers: Vec<(BatchHeader, usize, usize)>,
    /// Each batch's first [`BATCH_HEADER_BYTES`] as they will be written, once one changed.
    heads: Option<Vec<[u8; BATCH_HEADER_BYTES]>>,
}

impl<'a> ValidBatches<'a> {
    /// Validates every batch of `buf` fully ([`validate_batches`]).
    pub fn validate(buf: &'a [u8]) -> Result<ValidBatches<'a>> {
        let headers = validate_batches(buf)?;
        Ok(ValidBatches {
            buf,
            headers,
            heads: None,
        })
    }

    /// Each batch's header (as it will be written), and where it starts and ends.
    pub fn headers(&self) -> &[(BatchHeader, usize, usize)] {
        &self.headers
    }

    /// The batches' size in bytes.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// One batch as it arrived: its records are the ones written, its header may not be.
    pub fn received(&self, index: usize) -> &[u8] {
        let (_, start, end) = self.headers[index];
        &self.buf[start..end]
    }

    /// The bytes to write, in order: the whole buffer while no header changed, else each
    /// batch's new header and then its records.
    pub fn parts(&self) -> Vec<&[u8]> {
        match &self.heads {
            None => vec![self.buf],
            Some(heads) => heads
                .iter()
                .zip(&self.headers)
                .flat_map(|(head, (_, start, end))| [&head[..], &self.buf[start + BATCH_HEADER_BYTES..*end]])
                .collect(),
        }
    }

    /// The headers changed, each with where its batch starts: for a caller that appends
    /// from a buffer of its own and reads the offsets back from it.
    pub fn into_changed_headers(self) -> Vec<(usize, [u8; BATCH_HEADER_BYTES])> {
        let starts = self.headers.iter().map(|(_, start, _)| *start);
        self.heads
            .map(|heads| starts.zip(heads).collect())
            .unwrap_or_default()
    }

    /// The headers to write and the batches' headers, the former made from the buffer's
    /// the first time one changes.
    fn changing(
        &mut self,
    ) -> impl Iterator<Item = (&mut [u8; BATCH_HEADER_BYTES], &mut (BatchHeader, usize, usize))> {
        let buf = self.buf;
        let heads = self.heads.get_or_insert_with(|| {
            self.headers
                .iter()
                .map(|(_, start, _)| {
                    buf[*start..*start + BATCH_HEADER_BYTES]
                        .try_into()
                        .expect("a validated batch holds a whole header")
                })
                .collect()
        });
        heads.iter_mut().zip(self.headers.iter_mut())
    }

    /// Stamps every batch with the time of its append (a topic with
    /// `message.timestamp.type=LogAppendTime`): the timestamp-type attribute and the batch's
    /// max timestamp, which consumers then read as every record's timestamp; the CRC is
    /// recomputed (over the new header's part and the records).
    pub fn set_log_append_time(&mut self, now_ms: i64) {
        let buf = self.buf;
        for (head, (h, start, end)) in self.changing() {
            let attributes = be_i16(head, ATTRIBUTES_POS) | ATTR_TIMESTAMP_TYPE;
            head[ATTRIBUTES_POS..ATTRIBUTES_POS + 2].copy_from_slice(&attributes.to_be_bytes());
            head[MAX_TIMESTAMP_POS..MAX_TIMESTAMP_POS + 8].copy_from_slice(&now_ms.to_be_bytes());
            let records = &buf[*start + BATCH_HEADER_BYTES..*end];
            let crc = crc32c::crc32c_append(crc32c::crc32c(&head[ATTRIBUTES_POS..]), records);
            head[CRC_POS..CRC_POS + 4].copy_from_slice(&crc.to_be_bytes());
            *h = BatchHeader::parse(&head[..]).expect("a whole header");
        }
    }

    /// Gives the batches consecutive offsets from `base_offset`, and `leader_epoch`: both
    /// outside the CRC. Returns the offset after the last batch.
    pub fn assign_offsets(&mut self, base_offset: i64, leader_epoch: i32) -> i64 {
        let mut next = base_offset;
        for (head, (h, _, _)) in self.changing() {
            head[0..8].copy_from_slice(&next.to_be_bytes());
            head[12..16].copy_from_slice(&leader_epoch.to_be_bytes());
            h.base_offset = next;
            h.partition_leader_epoch = leader_epoch;
            next += h.last_offset_delta as i64 + 1;
        }
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{validate_batch, BatchBuilder, Compression, RecordSpec};

    fn batch(records: usize, compression: Compression) -> Vec<u8> {
        let mut b = BatchBuilder::new(compression, 1_000);
        for _ in 0..records {
            b.push(RecordSpec {
                timestamp_ms: 1_000,
                value: Some(b"v".to_vec()),
                ..Default::default()
            });
        }
        b.build().unwrap()
    }

    fn written(valid: &ValidBatches) -> Vec<u8> {
        valid.parts().concat()
    }

    #[test]
    fn a_stamped_batch_stays_valid() {
        for compression in [Compression::Lz4, Compression::None] {
            let buf = batch(3, compression);
            let mut valid = ValidBatches::validate(&buf).unwrap();
            valid.set_log_append_time(99_000);
            assert_eq!(valid.headers()[0].0.max_timestamp, 99_000);
            let out = written(&valid);
            let h = validate_batch(&out).unwrap();
            assert!(h.is_log_append_time());
            assert_eq!(h.max_timestamp, 99_000);
            assert_eq!(h.compression().unwrap(), compression);
            assert_eq!(
                &out[BATCH_HEADER_BYTES..],
                &buf[BATCH_HEADER_BYTES..],
                "the records as sent"
            );
        }
    }

    #[test]
    fn offsets_are_assigned_in_the_headers_written_and_the_buffer_is_left_alone() {
        let mut buf = batch(3, Compression::None);
        buf.extend(batch(2, Compression::Lz4));
        let before = buf.clone();
        let mut valid = ValidBatches::validate(&buf).unwrap();
        assert_eq!(valid.parts(), [&buf[..]], "unchanged: written whole");
        assert_eq!(valid.assign_offsets(40, 7), 45);
        let seen: Vec<(i64, i32)> = valid
            .headers()
            .iter()
            .map(|(h, _, _)| (h.base_offset, h.partition_leader_epoch))
            .collect();
        assert_eq!(seen, [(40, 7), (43, 7)]);
        let out = written(&valid);
        let again = validate_batches(&out).unwrap();
        assert_eq!(again[1].0.base_offset, 43);
        assert_eq!(again[1].0.partition_leader_epoch, 7);
        let mut copy = before.clone();
        for (start, head) in valid.into_changed_headers() {
            copy[start..start + BATCH_HEADER_BYTES].copy_from_slice(&head);
        }
        assert_eq!(copy, out);
        assert_eq!(buf, before);
    }

    #[test]
    fn a_corrupt_batch_is_not_valid() {
        let mut buf = batch(2, Compression::None);
        let last = buf.len() - 1;
        buf[last] ^= 0xff;
        assert!(ValidBatches::validate(&buf).is_err());
    }
}
