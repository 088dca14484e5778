//! Size-prefixed frames: `INT32 size` followed by `size` bytes.

use bytes::{Buf, Bytes, BytesMut};

use crate::ProtocolError;

/// The smallest request: api key, version, correlation id, client id length.
pub const REQUEST_BYTES_MIN: i32 = 10;

/// Splits frames off the front of `buf`. Returns `Ok(None)` until a whole frame is there.
/// The size is checked against `max_bytes` before the caller reads (and so buffers) the
/// body, so an oversized frame costs nothing but its 4-byte prefix.
pub fn split_frame(buf: &mut BytesMut, max_bytes: usize) -> Result<Option<Bytes>, ProtocolError> {
    if buf.len() < 4 {
        return Ok(None);
    }
    let size = i32::from_be_bytes(buf[..4].try_into().unwrap());
    if size < REQUEST_BYTES_MIN {
        return Err(ProtocolError::BadFrameSize(size));
    }
    if size as usize > max_bytes {
        return Err(ProtocolError::FrameTooLarge {
            size: size as i64,
            max: max_bytes,
        });
    }
    if buf.len() < 4 + size as usize {
        // Reserve what the frame needs: bounded by max_bytes, checked above.
        buf.reserve(4 + size as usize - buf.len());
        return Ok(None);
    }
    buf.advance(4);
    Ok(Some(buf.split_to(size as usize).freeze()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_split_and_limits_hold() {
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&12i32.to_be_bytes());
        buf.extend_from_slice(&[1; 8]);
        assert_eq!(split_frame(&mut buf, 100).unwrap(), None);
        buf.extend_from_slice(&[2; 4]);
        buf.extend_from_slice(&[9, 9]);
        assert_eq!(split_frame(&mut buf, 100).unwrap().unwrap().len(), 12);
        assert_eq!(buf.len(), 2);

        let mut big = BytesMut::from(&(1000i32).to_be_bytes()[..]);
        assert!(matches!(
            split_frame(&mut big, 100),
            Err(ProtocolError::FrameTooLarge { .. })
        ));
        let mut neg = BytesMut::from(&(-5i32).to_be_bytes()[..]);
        assert!(matches!(
            split_frame(&mut neg, 100),
            Err(ProtocolError::BadFrameSize(-5))
        ));
    }
}
