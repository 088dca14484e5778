//! The Prometheus text exposition format (version 0.0.4), written by hand: a few metric
//! families of counters, gauges and histograms, each with its HELP and TYPE once.

use std::fmt::Write;

use hdrhistogram::Histogram;

/// Bucket bounds of exported latency histograms, in microseconds: 50 µs to 10 s.
const BUCKETS_US: &[u64] = &[
    50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000,
    2_500_000, 5_000_000, 10_000_000,
];

#[derive(Default)]
pub struct Exposition {
    out: String,
}

pub type Labels<'a> = &'a [(&'a str, &'a str)];

impl Exposition {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.out, "# HELP {name} {help}");
        let _ = writeln!(self.out, "# TYPE {name} {kind}");
    }

    fn sample(
        &mut self,
        name: &str,
        labels: Labels,
        extra: Option<(&str, &str)>,
        value: impl std::fmt::Display,
    ) {
        self.out.push_str(name);
        let mut all = labels.iter().copied().chain(extra).peekable();
        if all.peek().is_some() {
            self.out.push('{');
            for (i, (k, v)) in all.enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{k}=\"{}\"", escape(v));
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {value}");
    }

    /// A family of counters, one sample per label set.
    pub fn counters<'a>(
        &mut self,
        name: &str,
        help: &str,
        samples: impl IntoIterator<Item = (Labels<'a>, u64)>,
    ) {
        self.family(name, "counter", help);
        for (labels, v) in samples {
            self.sample(name, labels, None, v);
        }
    }

    pub fn gauges<'a>(
        &mut self,
        name: &str,
        help: &str,
        samples: impl IntoIterator<Item = (Labels<'a>, i64)>,
    ) {
        self.family(name, "gauge", help);
        for (labels, v) in samples {
            self.sample(name, labels, None, v);
        }
    }

    /// A family of gauges whose values are fractions (ratios from 0 to 1).
    pub fn fraction_gauges<'a>(
        &mut self,
        name: &str,
        help: &str,
        samples: impl IntoIterator<Item = (Labels<'a>, f64)>,
    ) {
        self.family(name, "gauge", help);
        for (labels, v) in samples {
            self.sample(name, labels, None, v);
        }
    }

    /// A family of histograms of microsecond latencies, exported in seconds as Prometheus
    /// expects. `_sum` is the count times the histogram's mean, exact to its 3 digits.
    pub fn latency_histograms<'a>(
        &mut self,
        name: &str,
        help: &str,
        samples: impl IntoIterator<Item = (Labels<'a>, Histogram<u64>)>,
    ) {
        self.family(name, "histogram", help);
        for (labels, h) in samples {
            let bucket = format!("{name}_bucket");
            for &bound_us in BUCKETS_US {
                let le = format!("{}", bound_us as f64 / 1e6);
                let n = if h.is_empty() {
                    0
                } else {
                    h.count_between(0, bound_us)
                };
                self.sample(&bucket, labels, Some(("le", &le)), n);
            }
            self.sample(&bucket, labels, Some(("le", "+Inf")), h.len());
            self.sample(
                &format!("{name}_sum"),
                labels,
                None,
                h.mean() * h.len() as f64 / 1e6,
            );
            self.sample(&format!("{name}_count"), labels, None, h.len());
        }
    }

    pub fn finish(self) -> String {
        self.out
    }
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::new_histogram;

    #[test]
    fn histogram_buckets_are_cumulative_and_in_seconds() {
        let mut h = new_histogram();
        for us in [40, 90, 900, 20_000] {
            h.record(us).unwrap();
        }
        let mut e = Exposition::default();
        e.latency_histograms("x_seconds", "test", [(&[("api", "Produce")][..], h)]);
        let text = e.finish();
        assert!(text.contains("# TYPE x_seconds histogram"));
        assert!(
            text.contains("x_seconds_bucket{api=\"Produce\",le=\"0.00005\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("x_seconds_bucket{api=\"Produce\",le=\"0.001\"} 3\n"),
            "{text}"
        );
        assert!(
            text.contains("x_seconds_bucket{api=\"Produce\",le=\"0.025\"} 4\n"),
            "{text}"
        );
        assert!(
            text.contains("x_seconds_bucket{api=\"Produce\",le=\"+Inf\"} 4\n"),
            "{text}"
        );
        assert!(text.contains("x_seconds_count{api=\"Produce\"} 4\n"), "{text}");
        let sum: f64 = text
            .lines()
            .find(|l| l.starts_with("x_seconds_sum"))
            .and_then(|l| l.rsplit(' ').next())
            .unwrap()
            .parse()
            .unwrap();
        assert!((sum - 0.02103).abs() < 0.0001, "{sum}");
    }

    #[test]
    fn label_values_are_escaped() {
        let mut e = Exposition::default();
        e.counters("c_total", "test", [(&[("what", "a \"b\"\n")][..], 3)]);
        assert!(e.finish().contains("c_total{what=\"a \\\"b\\\"\\n\"} 3\n"));
    }
}
