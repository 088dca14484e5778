//! The four codecs Kafka defines. Decompression is always bounded by the caller's limit, so a
//! decompression bomb costs at most that many bytes.

use std::io::{Read, Write};

use crate::{RecordsError, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Compression {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

/// The xerial snappy-java stream header, which Kafka's Java client writes.
const XERIAL_MAGIC: &[u8] = b"\x82SNAPPY\x00";
const XERIAL_HEADER_BYTES: usize = 16;
const XERIAL_BLOCK_BYTES: usize = 32 * 1024;

impl Compression {
    pub fn from_attributes(attributes: i16) -> Result<Compression> {
        Ok(match attributes & crate::ATTR_COMPRESSION_MASK {
            0 => Compression::None,
            1 => Compression::Gzip,
            2 => Compression::Snappy,
            3 => Compression::Lz4,
            4 => Compression::Zstd,
            codec => return Err(RecordsError::UnknownCompression { codec }),
        })
    }

    pub fn attribute_bits(self) -> i16 {
        match self {
            Compression::None => 0,
            Compression::Gzip => 1,
            Compression::Snappy => 2,
            Compression::Lz4 => 3,
            Compression::Zstd => 4,
        }
    }

    pub fn parse(name: &str) -> Option<Compression> {
        Some(match name {
            "none" => Compression::None,
            "gzip" => Compression::Gzip,
            "snappy" => Compression::Snappy,
            "lz4" => Compression::Lz4,
            "zstd" => Compression::Zstd,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }
}

pub(crate) fn corrupt(codec: Compression, e: impl std::fmt::Display) -> RecordsError {
    RecordsError::CorruptCompressed {
        codec,
        reason: e.to_string(),
    }
}

pub fn compress(codec: Compression, data: &[u8]) -> Vec<u8> {
    match codec {
        Compression::None => data.to_vec(),
        Compression::Gzip => {
            let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            enc.write_all(data).expect("writing to a Vec cannot fail");
            enc.finish().expect("writing to a Vec cannot fail")
        }
        Compression::Snappy => {
            // Xerial framing, which both the Java client and librdkafka read.
            let mut out = Vec::with_capacity(data.len() / 2 + 64);
            out.extend_from_slice(XERIAL_MAGIC);
            out.extend_from_slice(&1i32.to_be_bytes());
            out.extend_from_slice(&1i32.to_be_bytes());
            let mut enc = snap::raw::Encoder::new();
            for chunk in data.chunks(XERIAL_BLOCK_BYTES) {
                let block = enc.compress_vec(chunk).expect("snappy block within limits");
                out.extend_from_slice(&(block.len() as i32).to_be_bytes());
                out.extend_from_slice(&block);
            }
            out
        }
        Compression::Lz4 => {
            let mut enc = lz4_flex::frame::FrameEncoder::new(Vec::new());
            enc.write_all(data).expect("writing to a Vec cannot fail");
            enc.finish().expect("writing to a Vec cannot fail")
        }
        Compression::Zstd => zstd::bulk::compress(data, 3).expect("zstd of an in-memory buffer"),
    }
}

/// Reads at most `limit_bytes` of output from `reader`, failing if there is more.
fn read_bounded(codec: Compression, reader: impl Read, limit_bytes: usize) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut limited = reader.take(limit_bytes as u64 + 1);
    limited.read_to_end(&mut out).map_err(|e| corrupt(codec, e))?;
    if out.len() > limit_bytes {
        return Err(RecordsError::DecompressedTooLarge { limit_bytes });
    }
    Ok(out)
}

pub fn decompress(codec: Compression, data: &[u8], limit_bytes: usize) -> Result<Vec<u8>> {
    match codec {
        Compression::None => {
            if data.len() > limit_bytes {
                return Err(RecordsError::DecompressedTooLarge { limit_bytes });
            }
            Ok(data.to_vec())
        }
        Compression::Gzip => read_bounded(codec, flate2::read::MultiGzDecoder::new(data), limit_bytes),
        Compression::Lz4 => read_bounded(codec, lz4_flex::frame::FrameDecoder::new(data), limit_bytes),
        Compression::Zstd => {
            let dec = zstd::stream::read::Decoder::with_buffer(data).map_err(|e| corrupt(codec, e))?;
            read_bounded(codec, dec, limit_bytes)
        }
        Compression::Snappy => {
            let mut out = Vec::new();
            if data.len() >= XERIAL_HEADER_BYTES && &data[..8] == XERIAL_MAGIC {
                let mut pos = XERIAL_HEADER_BYTES;
                while pos < data.len() {
                    if data.len() - pos < 4 {
                        return Err(corrupt(codec, "truncated xerial block length"));
                    }
                    let len = i32::from_be_bytes(data[pos..pos + 4].try_into().unwrap());
                    pos += 4;
                    if len < 0 || len as usize > data.len() - pos {
                        return Err(corrupt(codec, "xerial block length exceeds the data"));
                    }
                    snappy_block(&data[pos..pos + len as usize], &mut out, limit_bytes)?;
                    pos += len as usize;
                }
            } else {
                snappy_block(data, &mut out, limit_bytes)?;
            }
            Ok(out)
        }
    }
}

fn snappy_block(block: &[u8], out: &mut Vec<u8>, limit_bytes: usize) -> Result<()> {
    let codec = Compression::Snappy;
    // The raw format states its output length up front: check it before allocating.
    let len = snap::raw::decompress_len(block).map_err(|e| corrupt(codec, e))?;
    if len > limit_bytes - out.len() {
        return Err(RecordsError::DecompressedTooLarge { limit_bytes });
    }
    let start = out.len();
    out.resize(start + len, 0);
    snap::raw::Decoder::new()
        .decompress(block, &mut out[start..])
        .map_err(|e| corrupt(codec, e))?;
    Ok(())
}
