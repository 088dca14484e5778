#![no_main]

include!("../bodies.rs");

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// The amplification oracle (issue 29): every byte allocated while a frame decodes is counted,
/// and must stay within what the reader charges against (twice the frame plus the slack, which
/// is 64 KiB under fuzzing), plus the header's own fields: an allocation the reader did not
/// charge shows up as a decode past the bound.
struct Counting;

static ARMED: AtomicBool = AtomicBool::new(false);
static ALLOCATED: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if ARMED.load(Ordering::Relaxed) {
            ALLOCATED.fetch_add(layout.size(), Ordering::Relaxed);
        }
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if ARMED.load(Ordering::Relaxed) {
            ALLOCATED.fetch_add(new_size.saturating_sub(layout.size()), Ordering::Relaxed);
        }
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The header's client id and the request's own enum, which are not charged.
const UNCHARGED_BYTES: usize = 4096;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let frame = bytes::Bytes::copy_from_slice(data);
    ALLOCATED.store(0, Ordering::Relaxed);
    ARMED.store(true, Ordering::Relaxed);
    let decoded = laminar_protocol::requests::decode(frame);
    ARMED.store(false, Ordering::Relaxed);
    let allocated = ALLOCATED.load(Ordering::Relaxed);
    let bound = laminar_protocol::reader::DECODED_BYTES_PER_FRAME_BYTE * data.len()
        + laminar_protocol::reader::DECODED_SLACK_BYTES
        + UNCHARGED_BYTES;
    assert!(
        allocated <= bound,
        "a {}-byte frame decoded into {allocated} bytes (bound {bound}, decoded: {})",
        data.len(),
        decoded.is_ok()
    );
    drop(decoded);
    // And what the corpus replay runs (it must not panic either).
    request_decoders(data);
});
