//! Connections need file descriptors: the broker raises its open-file limit to the hard limit
//! and keeps `max.connections` within it, so that a full house is refused at accept with a
//! logged reason, not by `accept(2)` failing with EMFILE over and over.

/// Descriptors kept for everything that is not a connection: segments, indexes, the
/// listeners, the metrics endpoint.
pub const RESERVED_FILES: usize = 1024;

/// Raises the soft open-file limit to the hard one and returns the connections it allows
/// (`wanted`, or fewer, logged).
pub fn fit_connections(wanted: usize) -> usize {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct passed.
    let soft = unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return wanted;
        }
        if lim.rlim_cur < lim.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                lim = raised;
            }
        }
        lim.rlim_cur as usize
    };
    let allowed = soft.saturating_sub(RESERVED_FILES).max(1);
    if wanted > allowed {
        laminar_metrics::warn!(
            "max.connections {wanted} does not fit the open-file limit {soft} (less {RESERVED_FILES} kept for logs): \
             accepting at most {allowed} connections; raise `ulimit -n` to allow more"
        );
        return allowed;
    }
    wanted
}
