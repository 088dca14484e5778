//! The streaming validator that Produce uses accepts exactly what decompressing the whole
//! batch and validating it accepts, and holds a decompression bomb to the limit.

use laminar_records::{
    compress, decompress, validate_compressed, BatchBuilder, Compression, RecordIter, RecordSpec,
};
use rand::{Rng, SeedableRng};

const CODECS: [Compression; 3] = [Compression::Gzip, Compression::Lz4, Compression::Zstd];

/// The uncompressed record section of a batch of `n` records.
fn records(n: u32, header_key: &str) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None, 1_700_000_000_000);
    for i in 0..n {
        b.push(RecordSpec {
            timestamp_ms: 1_700_000_000_000 + i as i64,
            key: (i % 3 != 0).then(|| format!("key-{i}").into_bytes()),
            value: (i % 5 != 0).then(|| vec![i as u8; 10 + 7 * i as usize]),
            headers: vec![(header_key.to_string(), (i % 2 == 0).then(|| b"v".to_vec()))],
        });
    }
    b.build().unwrap()[61..].to_vec()
}

fn whole(codec: Compression, data: &[u8], count: i32, limit: usize) -> bool {
    decompress(codec, data, limit)
        .and_then(|plain| RecordIter::new(&plain, count).validate())
        .is_ok()
}

#[test]
fn valid_batches_pass_in_every_codec() {
    for codec in CODECS {
        let plain = records(40, "h");
        assert!(validate_compressed(codec, &compress(codec, &plain), 40, 1 << 20).is_ok());
        // A wrong count is refused either way.
        assert!(validate_compressed(codec, &compress(codec, &plain), 39, 1 << 20).is_err());
        assert!(validate_compressed(codec, &compress(codec, &plain), 41, 1 << 20).is_err());
    }
}

#[test]
fn mutated_records_get_the_same_verdict() {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
    let plain = records(30, "header");
    let (mut accepted, mut refused) = (0, 0);
    for round in 0..3000 {
        let mut m = plain.clone();
        for _ in 0..rng.gen_range(1..4) {
            if m.is_empty() {
                break;
            }
            let at = rng.gen_range(0..m.len());
            match rng.gen_range(0..3) {
                0 => m[at] = rng.gen(),
                1 => m.truncate(at),
                _ => m.insert(at, rng.gen()),
            }
        }
        let count = 30 + rng.gen_range(-1..=1);
        let codec = CODECS[round % CODECS.len()];
        let data = compress(codec, &m);
        let expected = whole(codec, &data, count, 1 << 20);
        let got = validate_compressed(codec, &data, count, 1 << 20);
        assert_eq!(expected, got.is_ok(), "round {round}: {got:?}");
        if expected {
            accepted += 1;
        } else {
            refused += 1;
        }
    }
    assert!(
        accepted > 100 && refused > 100,
        "both verdicts exercised: {accepted} / {refused}"
    );
}

#[test]
fn header_keys_are_checked_as_utf8_across_chunks() {
    // 100 KiB of two-byte characters: the key spans the validator's 64 KiB chunks, and some
    // chunk boundary falls inside a character.
    let key = "é".repeat(50 << 10);
    for codec in CODECS {
        let plain = records(3, &key);
        assert!(validate_compressed(codec, &compress(codec, &plain), 3, 1 << 20).is_ok());
        let mut bad = plain.clone();
        let at = bad.windows(2).position(|w| w == "é".as_bytes()).unwrap() + (40 << 10);
        bad[at] = 0xff;
        assert!(!whole(codec, &compress(codec, &bad), 3, 1 << 20));
        assert!(validate_compressed(codec, &compress(codec, &bad), 3, 1 << 20).is_err());
    }
}

#[test]
fn a_bomb_stops_at_the_limit() {
    let mut b = BatchBuilder::new(Compression::None, 0);
    b.push(RecordSpec {
        value: Some(vec![0u8; 8 << 20]),
        ..Default::default()
    });
    let plain = b.build().unwrap()[61..].to_vec();
    for codec in CODECS {
        let data = compress(codec, &plain);
        assert!(data.len() < 1 << 20);
        assert!(validate_compressed(codec, &data, 1, 16 << 20).is_ok());
        let err = validate_compressed(codec, &data, 1, 1 << 20).unwrap_err();
        assert!(err.to_string().contains("exceeds the limit"), "{err}");
    }
}
